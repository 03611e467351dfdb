"""Memory.search on both stores: the same ranking, filters, fallback and CJK, over one index code.

Both stores search through a SQLite FTS5 index derived from their facts (a
file beside the Markdown store, an index in memory for each PostgreSQL
replica), so ranking is the same by construction; these tests hold both to it.
"""

from __future__ import annotations

from typing import Any

import pytest

from deermem import Memory, MemoryConfig
from deermem.results import SearchResult, to_json
from tests.context_support import NOW
from tests.store_contract.conftest import Stores

LIBRARY: list[dict[str, Any]] = [
    {
        "id": "fact_uv",
        "content": "Install Python packages with uv, never with pip.",
        "category": "correction",
        "confidence": 0.7,
    },
    {
        "id": "fact_tea",
        "content": "Drinks green tea every morning.",
        "category": "preference",
        "confidence": 0.9,
    },
    {
        "id": "fact_py",
        "content": "Writes Python every day.",
        "category": "context",
        "confidence": 0.9,
    },
    {
        "id": "fact_html",
        "content": "Maintains the HTML templates.",
        "category": "context",
        "confidence": 0.6,
    },
    {
        "id": "fact_tool",
        "content": "Deploys Python services with ansible.",
        "category": "Tooling",
        "confidence": 0.5,
    },
    {"id": "fact_zh", "content": "我喜欢机器学习和深度学习", "category": "preference"},
    {"id": "fact_ja", "content": "東京タワーの近くに住んでいます", "category": "context"},
    {"id": "fact_ko", "content": "한국어 문장을 공부합니다", "category": "goal"},
    {"id": "fact_mixed", "content": "用uv安装Python包", "category": "correction"},
]


def open_memory(stores: Stores, **settings: Any) -> Memory:
    # The keyword ranking (search_mode: keyword); tests/store_contract/test_meaning.py
    # holds both stores to the hybrid one.
    config = MemoryConfig(**{"search_mode": "keyword", **settings})
    return stores.memory(config, user="alice", agent="coder", clock=lambda: NOW)


@pytest.fixture
def memory(stores: Stores) -> Memory:
    opened = open_memory(stores)
    opened.import_document({"facts": LIBRARY})
    return opened


def ids(results: tuple[SearchResult, ...]) -> list[str]:
    return [result.fact_id for result in results]


def test_results_carry_the_fact_and_rank_by_score(memory: Memory) -> None:
    results = memory.search("install python packages with uv")
    assert ids(results)[0] == "fact_uv"
    assert set(ids(results)) >= {"fact_uv", "fact_py", "fact_tool"}
    best = results[0]
    assert (best.content, best.category, best.confidence) == (
        "Install Python packages with uv, never with pip.",
        "correction",
        0.7,
    )
    assert best.fact == memory.get_fact("fact_uv")
    assert best.match_type == "fts5"
    assert best.bm25 is not None
    assert best.bm25 < 0
    assert [r.score for r in results] == sorted((r.score for r in results), reverse=True)
    as_dict = to_json(best)
    assert as_dict["fact"] == best.fact.to_dict()
    assert (as_dict["matchType"], as_dict["score"]) == ("fts5", best.score)


def test_search_is_deterministic(memory: Memory, stores: Stores) -> None:
    first = memory.search("python", top_k=10)
    again = open_memory(stores).search("python", top_k=10)
    assert first == again  # scores bit for bit, ties by id


def test_category_filter_applies_before_the_cut(memory: Memory) -> None:
    assert ids(memory.search("python", top_k=1)) != ["fact_uv"]
    assert ids(memory.search("python", top_k=1, category="Correction")) == ["fact_uv"]
    # A fact filed as other/Tooling is found by its own label, as `facts list` finds it.
    assert ids(memory.search("python", category="tooling")) == ["fact_tool"]
    assert ids(memory.search("python", category="other")) == ["fact_tool"]
    assert memory.search("python", category="goal") == ()


def test_top_k_and_blank_queries(memory: Memory) -> None:
    assert len(memory.search("python", top_k=2)) == 2
    assert memory.search("python", top_k=0) == ()
    assert memory.search("   ") == ()
    assert memory.search('"unbalanced NOT NEAR( col: ^ -x') == ()  # typed operators never raise


def test_substring_fallback(memory: Memory) -> None:
    [hit] = memory.search("TML")  # inside a word: FTS5 finds nothing
    assert (hit.fact_id, hit.match_type, hit.bm25) == ("fact_html", "substring", None)
    assert hit.score == 0.6
    assert memory.search("🦌") == ()


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("机器学习", "fact_zh"),
        ("深度", "fact_zh"),
        ("東京", "fact_ja"),
        ("문장", "fact_ko"),
        ("安装", "fact_mixed"),
    ],
)
def test_cjk_text_is_searchable(memory: Memory, query: str, expected: str) -> None:
    results = memory.search(query)
    assert ids(results)[0] == expected
    assert results[0].match_type == "fts5"


def test_a_scoped_view_searches_only_its_own_scope(memory: Memory) -> None:
    bob = memory.scoped(user="bob", agent="writer")
    bob.create_fact("Bob plays chess.", confidence=0.9)
    assert memory.search("chess") == ()
    assert ids(bob.search("chess"))
    assert bob.search("python") == ()  # alice's coder facts are not bob's


@pytest.mark.parametrize(
    ("settings", "recorded"),
    [
        ({}, False),
        ({"fact_eviction_policy": "hybrid-v1"}, True),
        ({"fact_eviction_shadow_enabled": True}, True),
    ],
)
def test_hits_are_counted_as_recalls_only_under_hybrid_or_shadow(
    stores: Stores, settings: dict[str, Any], recorded: bool
) -> None:
    memory = open_memory(stores, **settings)
    memory.import_document({"facts": LIBRARY})
    before = {f.id: f for f in memory.list_facts()}
    results = memory.search("python", top_k=2)
    usage = memory.store.usage(memory.scope)
    assert sorted(usage) == (sorted(ids(results)) if recorded else [])
    if recorded:
        assert {entry.access_count for entry in usage.values()} == {1}
        assert {entry.last_accessed_at for entry in usage.values()} == {"2026-08-13T00:00:00Z"}
        memory.search("python", top_k=2)
        assert {e.access_count for e in memory.store.usage(memory.scope).values()} == {2}
    assert {f.id: f for f in memory.reload().facts} == before  # a search never changes a fact


def test_another_instances_commits_reach_the_next_search(memory: Memory, stores: Stores) -> None:
    assert memory.search("espresso") == ()
    other = open_memory(stores)  # another process, or another replica
    created = other.create_fact("Drinks espresso after lunch.", confidence=0.8)
    assert ids(memory.search("espresso")) == [created.fact_id]
    other.delete_fact("fact_tea")
    assert memory.search("green tea") == ()
    other.update_fact("fact_py", content="Writes Rust every day.")
    assert "fact_py" not in ids(memory.search("python", top_k=10))
    assert ids(memory.search("rust")) == ["fact_py"]
