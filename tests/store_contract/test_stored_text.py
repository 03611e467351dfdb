"""What one store keeps, the other keeps too: text the library stores as it is
(U+0000 in an imported fact) and the duplicate rule over the archive (case-folded)."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime

import pytest

from deermem import Memory, MemoryConfig
from tests.store_contract.conftest import Stores

NOW = datetime(2026, 8, 13, tzinfo=UTC)
SECRET = "my diagnosis is confidential\x00"


def open_memory(stores: Stores, **settings: object) -> Memory:
    return stores.memory(MemoryConfig(max_facts=10, **settings), clock=lambda: NOW)


def test_a_fact_holding_nul_is_imported_archived_restored_evicted_and_purged(
    stores: Stores,
) -> None:
    """Data that already exists is not held to the limits of text written now: an
    imported fact may hold U+0000, and every path of the store keeps it as it is."""
    memory = open_memory(stores)
    memory.import_document({"facts": [{"id": "fact_abc", "content": SECRET, "confidence": 0.01}]})
    assert memory.get_fact("fact_abc").content == SECRET
    memory.delete_fact("fact_abc")  # into the archive
    assert memory.get_archived("fact_abc").fact.content == SECRET
    memory.restore("fact_abc")
    for n in range(10):  # over the cap: the gate evicts the least confident fact
        memory.create_fact(f"Filler fact number {n}", confidence=0.9)
    assert memory.get_archived("fact_abc").fact.content == SECRET
    assert len(memory.list_facts()) == 10
    memory.import_document(  # said again in another case: relearned (the fillers go)
        {"facts": [{"id": "fact_new", "content": SECRET.upper(), "confidence": 0.95}]}
    )
    assert [fact.id for fact in memory.list_facts() if fact.content == SECRET] == ["fact_abc"]
    memory.delete_fact("fact_abc")
    memory.purge("fact_abc")
    assert "fact_abc" not in {entry.fact_id for entry in memory.list_archived()}


@pytest.mark.parametrize(
    ("first", "again"),
    [
        ("Lives in Straße 5", "LIVES IN STRASSE 5"),  # casefold: ß is ss
        ("Likes ΟΔΟΣ walks", "likes οδος walks"),  # final sigma
        ("Studied at ÉCOLE Normale", " studied at école normale "),
        ("Uses Ǆ digraph", "uses ǆ digraph"),
    ],
)
def test_an_archived_fact_said_again_is_relearned_by_the_duplicate_rule(
    stores: Stores, first: str, again: str
) -> None:
    """The rule is Python's stripped and case-folded text, on every store."""
    memory = open_memory(stores)
    fact_id = memory.create_fact(first).fact_id
    assert fact_id is not None
    memory.delete_fact(fact_id)
    result = memory.create_fact(again)
    assert (result.fact_id, result.relearned) == (fact_id, fact_id)
    assert [fact.content for fact in memory.list_facts()] == [first]


_EXPORT_FACTS = """
import json, sys
from deermem import Memory, MemoryConfig
from deermem.model import Scope

kind, where = sys.argv[1:3]
config = MemoryConfig(search_mode="keyword")
if kind == "markdown":
    from deermem.store import MarkdownStore
    store = MarkdownStore.from_config(config, where)
else:
    from deermem.store.postgres import PostgresStore
    store = PostgresStore.from_config(config, where)
print(json.dumps(Memory(store, config, Scope.of("alice")).export_document()["facts"]))
"""


def test_a_fact_is_the_same_bytes_whichever_path_made_it(stores: Stores) -> None:
    """doc-09, pg-05: a fact this process made kept `content` second, one read back from a
    file or a row had it last (after `scope`): one fact, two byte strings — across
    processes (two workers, a restart) and, on PostgreSQL, before and after a purge."""
    ids = iter(f"fact_{n:08d}" for n in range(1, 100))
    memory = stores.memory(
        MemoryConfig(search_mode="keyword"), clock=lambda: NOW, id_factory=lambda: next(ids)
    )
    memory.import_document(  # another order, a title, an unknown key (replaces the memory)
        {"facts": [{"title": "Berlin", "note": 1, "content": "Lives in Berlin", "id": "fact_b"}]}
    )
    memory.create_fact("Prefers tea.", topics=["drinks"])
    memory.update_fact("fact_00000001", content="Prefers green tea.")
    gone = memory.create_fact("Short-lived.").fact_id
    assert gone is not None
    memory.delete_fact(gone)
    here = json.dumps(memory.export_document()["facts"])
    memory.purge(gone)  # moves PostgreSQL's version token: the facts are read again
    assert json.dumps(memory.export_document()["facts"]) == here
    where = stores.url if stores.kind == "postgres" else str(stores.root)
    done = subprocess.run(
        [sys.executable, "-c", _EXPORT_FACTS, stores.kind, str(where)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert done.stdout.strip() == here
    # The one order: a fact file's (its front matter's keys, then scope, content, title).
    by_id = {fact["id"]: fact for fact in json.loads(here)}
    first, berlin = by_id["fact_00000001"], by_id["fact_b"]
    assert list(first)[-2:] == ["scope", "content"]
    assert list(berlin)[:2] == ["note", "id"]
    assert list(berlin)[-3:] == ["scope", "content", "title"]
