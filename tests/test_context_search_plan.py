"""The search shortcut past common words returns exactly what the whole query returns."""

from __future__ import annotations

import logging
import random
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deermem.model import format_timestamp
from deermem.recall import SearchHit, SearchIndex
from deermem.recall import _search_plan as plan

NOW = datetime(2026, 11, 30, tzinfo=UTC)
# Word i occurs in a fact with probability SHARES[i]: the first three are
# "light" (in at least 40 % of the facts), the rest carry weight.
WORDS = ("the", "user", "prefers", "python", "tea", "rust", "uv", "tokyo", "jazz", "chess")
SHARES = (0.95, 0.7, 0.5, 0.3, 0.2, 0.1, 0.05, 0.05, 0.02, 0.01)
CATEGORIES = ("preference", "correction", "context")


def library(size: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    facts = []
    for number in range(size):
        words = [w for w, share in zip(WORDS, SHARES, strict=True) if rng.random() < share]
        words += [f"filler{rng.randrange(50)}" for _ in range(rng.randint(1, 6))]
        rng.shuffle(words)
        facts.append(
            {
                "id": f"fact_{number:04d}",
                "content": " ".join(words * rng.randint(1, 2)),
                "category": rng.choice(CATEGORIES),
                "confidence": rng.choice((0.3, 0.5, 0.7, 0.9, 1.0)),
                "createdAt": format_timestamp(NOW - timedelta(days=rng.uniform(0, 300))),
            }
        )
    return facts


@contextmanager
def shortcut(enabled: bool) -> Iterator[list[int]]:
    """Enable the shortcut at any size (or disable it); count how often it answered."""
    taken: list[int] = []
    original = plan._shortcut

    def counting(*args: Any) -> list[plan.Row] | None:
        rows = original(*args)
        if rows is not None:
            taken.append(1)
        return rows

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(plan, "PRUNE_MIN_MATCHES", 0)
        patch.setattr(plan, "MAX_PRUNED_TOP_K", 20 if enabled else 0)
        patch.setattr(plan, "_shortcut", counting)
        yield taken


def both_ways(
    index: SearchIndex,
    query: str,
    top_k: int,
    category: str | None = None,
    *,
    with_archive: bool = False,
) -> tuple[list[SearchHit], list[SearchHit], bool]:
    def search() -> list[SearchHit]:
        return index.search(
            "u", "a", query, now=NOW, top_k=top_k, category=category, with_archive=with_archive
        )

    with shortcut(True) as taken:
        fast = search()
    with shortcut(False):
        whole = search()
    return fast, whole, bool(taken)


@pytest.fixture(scope="module")
def index() -> Iterator[SearchIndex]:
    with SearchIndex() as opened:
        opened.sync_scope("u", "a", library(400, seed=1), version="1")
        opened.sync_scope("u", "other", library(100, seed=2), version="1")
        archived = [{**fact, "id": f"arch_{n:04d}"} for n, fact in enumerate(library(150, seed=3))]
        tokens = {fact["id"]: "t1" for fact in archived}
        opened.sync_archive("u", "a", tokens, lambda ids: archived, version="1")
        yield opened


def test_common_words_are_skipped_and_the_answer_is_identical(
    index: SearchIndex, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG, logger="deermem.recall.search"):
        fast, whole, taken = both_ways(index, "the user prefers rust", top_k=5)
    assert taken
    assert "light group(s) of 4 skipped" in caplog.text
    assert len(fast) == 5
    assert fast == whole  # ids, order, bm25 and scores, bit for bit


@given(
    words=st.lists(st.sampled_from(WORDS), min_size=2, max_size=6, unique=True),
    top_k=st.integers(1, 12),
    category=st.sampled_from((None, *CATEGORIES)),
    with_archive=st.booleans(),
)
@settings(max_examples=150, deadline=None)
def test_shortcut_equals_the_whole_query(
    index: SearchIndex, words: list[str], top_k: int, category: str | None, with_archive: bool
) -> None:
    fast, whole, _ = both_ways(index, " ".join(words), top_k, category, with_archive=with_archive)
    assert fast == whole


def test_the_shortcut_ranks_library_and_archive_together(index: SearchIndex) -> None:
    fast, whole, taken = both_ways(index, "the user prefers rust", top_k=8, with_archive=True)
    assert taken
    assert fast == whole
    assert {hit.archived for hit in fast} == {True, False}  # both halves compete


def test_shortcut_is_taken_for_most_common_word_queries(index: SearchIndex) -> None:
    rng = random.Random(7)
    taken = 0
    for _ in range(40):
        words = [*rng.sample(WORDS[:3], 2), rng.choice(WORDS[5:])]
        fast, whole, used = both_ways(index, " ".join(words), top_k=5)
        assert fast == whole
        taken += used
    assert taken >= 30


def test_a_fact_with_only_common_words_can_still_win() -> None:
    # The rare word's facts are old (decayed) and unsure; a confident fact
    # holding only the common word may beat them, so the shortcut must not
    # answer on its own.
    facts = [
        {
            "id": f"common_{n:03d}",
            "content": "the",
            "confidence": 1.0 if n == 0 else 0.1,
            "createdAt": format_timestamp(NOW),
        }
        for n in range(60)
    ]
    facts += [
        {
            "id": f"rare_{n}",
            "content": "the chess",
            "confidence": 0.0,
            "createdAt": format_timestamp(NOW - timedelta(days=1500)),
        }
        for n in range(3)
    ]
    with SearchIndex() as index:
        index.sync_scope("u", "a", facts, version="1")
        fast, whole, taken = both_ways(index, "the chess", top_k=2)
    assert not taken
    assert fast == whole
    assert fast[0].fact_id == "common_000"


def test_near_ties_at_the_cut_fall_back_to_the_whole_query() -> None:
    # Identical rare-word facts tie exactly at the k-th place; only the whole
    # query (with the common word's tiny weight and the id order) decides.
    facts = [
        {"id": f"f{n:03d}", "content": "the" if n >= 10 else "the jazz", "confidence": 0.5}
        for n in range(40)
    ]
    with SearchIndex() as index:
        index.sync_scope("u", "a", facts, version="1")
        fast, whole, taken = both_ways(index, "jazz the", top_k=3)
    assert fast == whole
    assert [hit.fact_id for hit in fast] == ["f000", "f001", "f002"]
    assert not taken


def test_a_common_word_can_reorder_facts_whose_partial_scores_nearly_tie() -> None:
    # Without "the", "jazz x x x" (a hair more confident) leads; with it,
    # "jazz the the the" does. The shortcut must look past the first place.
    facts = [
        {"id": "repeats_the", "content": "jazz the the the", "confidence": 0.5},
        {"id": "no_the", "content": "jazz x x x", "confidence": 0.500001},
    ]
    facts += [{"id": f"filler_{n:02d}", "content": "the y", "confidence": 0.5} for n in range(40)]
    with SearchIndex() as index:
        index.sync_scope("u", "a", facts, version="1")
        fast, whole, taken = both_ways(index, "jazz the", top_k=1)
        partial = index.search("u", "a", "jazz", now=NOW, top_k=1)
    assert partial[0].fact_id == "no_the"
    assert taken
    assert [hit.fact_id for hit in fast] == [hit.fact_id for hit in whole] == ["repeats_the"]
    assert fast == whole
