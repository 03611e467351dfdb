"""Search by meaning on both stores, with the real embedding models (the ``embed`` extra).

The paraphrases share no word with their facts, so only meaning finds them;
keyword matches keep their place. Vectors are derived data: the Markdown
store keeps them in its index file, PostgreSQL in ``deermem_vectors``
(migration 0003), so a second replica does not embed the scope again.
"""

from __future__ import annotations

import logging
import sqlite3
from typing import Any

import pytest

from deermem import Memory, MemoryConfig
from deermem.recall.search import EMBED_AT_SEARCH
from deermem.store.records import content_key
from tests.context_support import NOW
from tests.regret_support import events
from tests.store_contract.conftest import Stores

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


def test_a_store_without_vectors_is_searched_by_keyword_until_reindexed(
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
    from deermem.recall.embedding import embedder

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
    from deermem.recall.embedding import embedder

    models = embedder()
    assert models is not None

    def held() -> int:
        if stores.kind == "postgres":
            return len(memory.store.stored_vectors(memory.scope, models.tag, [key]))
        with sqlite3.connect(memory.store.search_index_location()) as db:
            (count,) = db.execute("SELECT count(*) FROM vec WHERE key = ?", (key,)).fetchone()
        return int(count)

    assert held() == 1
    memory.purge("fact_hand")
    memory.search("anything at all")
    assert held() == 0


def test_context_for_a_question_prefers_its_facts_when_over_budget(stores: Stores) -> None:
    memory = open_memory(stores, max_injection_tokens=100, guaranteed_token_budget=50)
    notes = [
        {"id": f"fact_n{n}", "content": f"Quarterly planning note {n}.", "confidence": 0.95}
        for n in range(12)
    ]
    correction = {
        "id": "fact_fix",
        "content": "Use uv, not pip.",
        "category": "correction",
        "confidence": 0.5,
    }
    memory.import_document({"facts": [*LIBRARY, *notes, correction]})
    plain = memory.context()
    assert memory.context(query=None) == plain  # byte for byte, without a question
    assert "left-handed" not in plain  # the least confident: over the budget
    asked = memory.injection(query="Am I a southpaw?")
    assert "fact_hand" in asked.manifest.injected_ids
    assert asked.manifest.injected_ids[0] == "fact_fix"  # the guaranteed pool first, as always
    assert len(asked.manifest.injected_ids) == len(memory.injection().manifest.injected_ids)


def test_context_for_a_question_is_unchanged_when_everything_fits(memory: Memory) -> None:
    assert memory.context(query="Am I a southpaw?") == memory.context()
