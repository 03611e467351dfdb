"""A fact deleted for good leaves no word in the store, the search index included, on both stores.

``archive purge`` and a delete under ``eviction_mode: delete`` are how a person takes back
what they said (a secret the redaction rules miss): the whole store is read past deermem —
every byte of every file under the Markdown root, the search index's pages and log
included; every row of the database — and the fact's words must not be in it.
"""

from __future__ import annotations

from datetime import UTC, datetime

from deermem import MemoryConfig
from tests.privacy.stored import store_text
from tests.store_contract.conftest import Stores

NOW = datetime(2026, 8, 13, tzinfo=UTC)
GONE = "my bank pin is zqxjvorpal and the vault word plumbusgrix"
KEPT = "Ann likes oolongtea"


def test_a_purged_fact_leaves_no_word_in_the_index(stores: Stores) -> None:
    memory = stores.memory(MemoryConfig(search_mode="keyword"), user="ann", clock=lambda: NOW)
    memory.create_fact(KEPT)
    fact_id = memory.create_fact(GONE).fact_id
    assert fact_id is not None
    assert memory.search("zqxjvorpal")  # the index holds its row
    memory.delete_fact(fact_id)  # into the archive
    memory.search("plumbusgrix")  # the archive's rows too (missed-recall detection)
    # Purged by another process, which never searched: the file is found all the same.
    other = stores.memory(MemoryConfig(search_mode="keyword"), user="ann", clock=lambda: NOW)
    other.purge(fact_id)
    memory.search("oolongtea")
    held = store_text(stores.kind, stores.root, stores.url)
    assert "zqxjvorpal" not in held
    assert "plumbusgrix" not in held
    assert [hit.fact.content for hit in memory.search("oolongtea")] == [KEPT]


def test_a_fact_deleted_or_evicted_under_eviction_mode_delete_leaves_no_word(
    stores: Stores,
) -> None:
    config = MemoryConfig(search_mode="keyword", eviction_mode="delete", max_facts=10)
    memory = stores.memory(config, user="ann", clock=lambda: NOW)
    fact_id = memory.create_fact(GONE, confidence=0.9).fact_id
    assert fact_id is not None
    evicted = memory.create_fact("a weak note of quaggamire", confidence=0.1).fact_id
    assert memory.search("zqxjvorpal")
    assert memory.search("quaggamire")  # the index holds both rows
    memory.delete_fact(fact_id)
    memory.create_fact(KEPT, confidence=0.9)
    for number in range(9):  # one over the cap: the weak note is evicted
        memory.create_fact(f"Ann walks to work on day {number}", confidence=0.9)
    assert evicted not in {fact.id for fact in memory.list_facts()}
    held = store_text(stores.kind, stores.root, stores.url)
    for word in ("zqxjvorpal", "plumbusgrix", "quaggamire"):
        assert word not in held, word
    assert [hit.fact.content for hit in memory.search("oolongtea")] == [KEPT]
