"""The FTS5 index: scoring, filters, scopes, versions, rebuilds, and the fallback."""

from __future__ import annotations

import copy
import logging
import math
import re
import sqlite3
import threading
from array import array
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deermem.errors import SearchIndexError
from deermem.model import Fact, format_timestamp
from deermem.recall import search as search_module
from deermem.recall.index import (
    SearchHit,
    SearchIndex,
    SyncReport,
    content_version,
    fts_groups,
    normalise,
)
from deermem.recall.search import search_facts, search_score, substring_search
from deermem.store.records import VECTOR_BYTES, usable_vector

NOW = datetime(2026, 11, 30, 12, tzinfo=UTC)
USER = "alice"
AGENT = "coder"


def ago(days: float) -> str:
    return format_timestamp(NOW - timedelta(days=days))


def fact(
    fact_id: str,
    content: str,
    category: str = "preference",
    confidence: float = 0.5,
    age_days: float = 1,
) -> dict[str, Any]:
    return {
        "id": fact_id,
        "content": content,
        "category": category,
        "confidence": confidence,
        "createdAt": ago(age_days),
    }


LIBRARY = [
    fact("uv", "Use uv instead of pip to install Python packages", "correction", 0.7),
    fact("tea", "Drinks green tea every morning", "preference", 0.9),
    fact("rust", "Is learning Rust for systems programming", "goal", 0.6),
    fact("zh", "我喜欢机器学习和深度学习", "preference", 0.8),
    fact("mixed", "用uv安装Python包", "correction", 0.75),
    fact("ja", "東京タワーの近くに住んでいます", "context", 0.5),
    fact("ko", "한국어 문장을 공부합니다", "goal", 0.5),
    fact("copilot", "Builds a real-time co-pilot in Node.js", "context", 0.8),
]


@pytest.fixture
def index() -> Iterator[SearchIndex]:
    with SearchIndex() as opened:
        opened.sync_scope(USER, AGENT, LIBRARY, version="v1")
        yield opened


def ids(hits: list[SearchHit]) -> list[str]:
    return [hit.fact_id for hit in hits]


# --- ranking and scoring ------------------------------------------------------------------


def test_more_matching_terms_rank_higher(index: SearchIndex) -> None:
    hits = index.search(USER, AGENT, "install python packages with uv", now=NOW)
    assert ids(hits)[0] == "uv"
    assert all(hit.match_type == "fts5" for hit in hits)
    assert all(hit.bm25 is not None and hit.bm25 < 0 for hit in hits)
    assert [hit.score for hit in hits] == sorted((hit.score for hit in hits), reverse=True)


_WORDS = ("tea", "green", "uv", "pip", "rust", "café", "cafe", "python", "机器学习", "学习")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    texts=st.lists(
        st.lists(st.sampled_from(_WORDS), min_size=1, max_size=8).map(" ".join),
        min_size=1,
        max_size=12,
    ),
    query=st.one_of(
        st.lists(st.sampled_from(_WORDS), min_size=1, max_size=4).map(" ".join),
        st.sampled_from(['"green tea"', "py*", '"uv pip" rust', "caf*", "学"]),
    ),
)
def test_bm25_is_fts5s_own_in_an_index_of_one_scope(texts: list[str], query: str) -> None:
    """The index computes BM25 itself, over the statistics of the rows it ranks; with one
    scope in the table those are FTS5's, so the values are FTS5's ``bm25()``."""
    facts = [fact(f"f{n}", text) for n, text in enumerate(texts)]
    with SearchIndex() as index:
        index.sync_scope(USER, AGENT, facts, version="1")
        hits = index.search(USER, AGENT, query, now=NOW, top_k=50)
        by_row = dict(
            index._connection.execute(
                "SELECT d.fact_id, bm25(doc_fts) FROM doc_fts JOIN doc AS d ON d.id = doc_fts.rowid"
                " WHERE doc_fts MATCH ?",
                (" OR ".join(fts_groups(query)),),
            ).fetchall()
        )
    assert {hit.fact_id for hit in hits} == set(by_row)
    for hit in hits:
        assert hit.bm25 == pytest.approx(by_row[hit.fact_id], rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("with_archive", [False, True])
def test_a_scopes_scores_do_not_move_with_another_users_facts(with_archive: bool) -> None:
    """BM25's statistics are the scope's own: another user's facts holding the query's words
    change nothing of this user's results — else the scores would tell what words others'
    memories hold."""
    mine = [fact("mine", "I read about diabetes once"), fact("tea", "I like green tea")]
    theirs = [fact(f"t{n}", "I have type 1 diabetes and take insulin") for n in range(5)]

    def results(index: SearchIndex) -> list[tuple[str, float, float | None]]:
        hits = index.search(USER, AGENT, "diabetes tea", now=NOW, with_archive=with_archive)
        return [(hit.fact_id, hit.score, hit.bm25) for hit in hits]

    with SearchIndex() as index:
        index.sync_scope(USER, AGENT, mine, version="1")
        alone = results(index)
        mass = index.idf_mass(USER, AGENT, "diabetes tea", with_archive=with_archive)
        index.sync_scope("victim", AGENT, theirs, version="1")
        index.sync_scope(USER, "other-agent", theirs, version="1")
        assert results(index) == alone
        assert index.idf_mass(USER, AGENT, "diabetes tea", with_archive=with_archive) == mass
    assert {fact_id for fact_id, _, _ in alone} == {"mine", "tea"}


def test_score_is_bm25_times_decay_plus_confidence_term() -> None:
    facts = [
        fact("new", "alpha beta", confidence=0.5, age_days=1),
        fact("edge", "alpha beta", confidence=0.5, age_days=30),
        fact("old", "alpha beta", confidence=0.5, age_days=200),
        fact("future", "alpha beta", confidence=0.5, age_days=-5),
        {"id": "undated", "content": "alpha beta", "confidence": None, "createdAt": "garbage"},
        fact("other", "gamma delta epsilon", confidence=0.5),
        fact("third", "zeta eta theta", confidence=0.5),
    ]
    with SearchIndex() as index:
        index.sync_scope(USER, AGENT, facts, version="1")
        hits = {hit.fact_id: hit for hit in index.search(USER, AGENT, "alpha", now=NOW, top_k=10)}
    by_id = {f["id"]: f for f in facts}
    for fact_id, hit in hits.items():
        assert hit.bm25 is not None
        expected = search_score(
            hit.bm25, by_id[fact_id]["createdAt"], by_id[fact_id]["confidence"], NOW
        )
        assert hit.score == expected  # bit for bit: SQL and Python agree
    raw = abs(hits["new"].bm25 or 0)
    assert hits["new"].score == hits["edge"].score == raw + 0.1  # decay starts after 30 days
    assert hits["old"].score == pytest.approx(raw * math.exp(-0.01 * 170) + 0.1, rel=1e-12)
    assert hits["future"].score == hits["new"].score
    assert hits["undated"].score == raw + 0.1  # unreadable date: no decay; null confidence: 0.5
    assert ids(list(hits.values()))[-1] == "old"


def test_confidence_breaks_equal_text(index: SearchIndex) -> None:
    facts = [fact("low", "same words", confidence=0.2), fact("high", "same words", confidence=0.9)]
    index.sync_scope(USER, "other", facts, version="1")
    assert ids(index.search(USER, "other", "same words", now=NOW)) == ["high", "low"]


def test_ties_break_by_fact_id() -> None:
    facts = [fact(name, "identical text", confidence=0.5) for name in ["c", "a", "b"]]
    with SearchIndex() as index:
        index.sync_scope(USER, AGENT, facts, version="1")
        assert ids(index.search(USER, AGENT, "identical", now=NOW)) == ["a", "b", "c"]


def test_quoted_phrase_matches_only_the_phrase() -> None:
    facts = [fact("phrase", "green tea at dawn"), fact("apart", "tea that is green")]
    with SearchIndex() as index:
        index.sync_scope(USER, AGENT, facts, version="1")
        assert ids(index.search(USER, AGENT, '"green tea"', now=NOW)) == ["phrase"]
        assert set(ids(index.search(USER, AGENT, "green tea", now=NOW))) == {"phrase", "apart"}


def test_prefix_query(index: SearchIndex) -> None:
    assert ids(index.search(USER, AGENT, "progr*", now=NOW)) == ["rust"]


def test_natural_language_with_hyphens_and_operators(index: SearchIndex) -> None:
    assert ids(index.search(USER, AGENT, "real-time co-pilot node -js +python", now=NOW))[0] == (
        "copilot"
    )
    for query in ['tea" OR "x', "NOT tea", "tea AND", "NEAR(tea", "body:tea", "tea*)"]:
        assert "tea" in ids(index.search(USER, AGENT, query, now=NOW)), query


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.text(max_size=60))
def test_arbitrary_queries_never_raise(index: SearchIndex, query: str) -> None:
    hits = index.search(USER, AGENT, query, now=NOW, top_k=3, category="goal")
    assert len(hits) <= 3


# --- CJK ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("机器学习", "zh"),  # a sub-phrase of a longer run
        ("深度", "zh"),
        ("习", "zh"),  # one character, at the end of a run
        ("喜", "zh"),  # one character, inside a run
        ("安装", "mixed"),  # CJK next to Latin in the fact
        ("用uv", "mixed"),
        ("タワー", "ja"),
        ("문장", "ko"),
    ],
)
def test_cjk_is_searchable(index: SearchIndex, query: str, expected: str) -> None:
    assert expected in ids(index.search(USER, AGENT, query, now=NOW, top_k=10))


def test_cjk_does_not_match_non_contiguous_characters(index: SearchIndex) -> None:
    assert "zh" not in ids(index.search(USER, AGENT, "机学", now=NOW))
    assert ids(index.search(USER, AGENT, '"机器 学"', now=NOW)) == []


def test_mixed_query_finds_latin_and_cjk_facts(index: SearchIndex) -> None:
    found = set(ids(index.search(USER, AGENT, "python 学习", now=NOW, top_k=10)))
    assert {"uv", "mixed", "zh"} <= found


MARKED = [
    fact("hindi", "मुझे हिंदी पसंद है"),  # "I like Hindi"
    fact("name", "मेरा नाम राम है"),  # "my name is Ram"
    fact("trip", "Trip to İstanbul in May"),
    fact("arabic", "صديقي مُحَمَّد طبيب"),
    fact("thai", "ฉันชอบภาษาไทย มาก"),
]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("नाम", ["name"]),  # not the other fact's single consonants
        ("हिंदी", ["hindi"]),
        ("istanbul", ["trip"]),
        ("İSTANBUL", ["trip"]),
        ("مُحَمَّد", ["arabic"]),
        ("มาก", ["thai"]),
    ],
)
def test_words_with_combining_marks_are_whole_terms(query: str, expected: list[str]) -> None:
    with SearchIndex() as index:
        index.sync_scope(USER, AGENT, MARKED, version="v1")
        assert ids(index.search(USER, AGENT, query, now=NOW, top_k=10)) == expected


def test_an_index_of_the_old_terms_is_rebuilt(tmp_path: Path) -> None:
    """Schema 5 cut words at combining marks; such a file is rebuilt, not searched."""
    location = tmp_path / "search.sqlite"
    with SearchIndex(location) as index:
        index.sync_scope(USER, AGENT, MARKED, version="v1")
    old_terms = re.compile(r"[^\W_]+")
    with sqlite3.connect(location) as db:
        for row_id, fact_id in db.execute("SELECT id, fact_id FROM doc").fetchall():
            [content] = [f["content"] for f in MARKED if f["id"] == fact_id]
            body = " ".join(old_terms.findall(normalise(content)))
            db.execute("UPDATE doc_fts SET body = ? WHERE rowid = ?", (body, row_id))
        db.execute("UPDATE index_meta SET value = '5' WHERE key = 'schema'")
    with SearchIndex(location) as index:
        hits = search_facts(index, USER, AGENT, "नाम", version="v1", load=lambda: MARKED, now=NOW)
    assert [(hit.fact_id, hit.match_type) for hit in hits] == [("name", "fts5")]


@settings(max_examples=300, deadline=None)
@given(
    placed=st.lists(st.tuples(st.integers(0, VECTOR_BYTES // 4 - 1), st.floats(width=32))),
    cut=st.integers(0, 8),
)
def test_a_usable_vector_is_its_length_of_finite_floats(
    placed: list[tuple[int, float]], cut: int
) -> None:
    floats = array("f", [0.03] * (VECTOR_BYTES // 4))
    for position, value in placed:  # any float, NaN and infinities included, anywhere
        floats[position] = value
    vector = floats.tobytes()[: VECTOR_BYTES - cut]
    expected = cut == 0 and all(math.isfinite(value) for value in floats)
    assert usable_vector(vector) == expected


# --- filters and limits -------------------------------------------------------------------


def test_category_filter_applies_before_the_cut() -> None:
    facts = [fact(f"p{n}", "deploy deploy deploy the service", "preference", 0.9) for n in range(8)]
    facts += [fact("c1", "deploy once", "correction", 0.1), fact("c2", "deploy", "correction", 0.2)]
    with SearchIndex() as index:
        index.sync_scope(USER, AGENT, facts, version="1")
        assert ids(index.search(USER, AGENT, "deploy", now=NOW, top_k=2)) == ["p0", "p1"]
        hits = index.search(USER, AGENT, "deploy", now=NOW, top_k=2, category=" Correction ")
        assert sorted(ids(hits)) == ["c1", "c2"]
        assert len(index.search(USER, AGENT, "deploy", now=NOW, top_k=20, category=None)) == 10
        assert index.search(USER, AGENT, "deploy", now=NOW, category="goal") == []


def test_category_filter_also_matches_the_label_of_other() -> None:
    tooling = Fact.from_dict({**fact("tool", "Deploys with ansible"), "category": "Tooling"})
    assert (tooling.category, tooling.categoryExtension) == ("other", "Tooling")
    facts: list[Fact | dict[str, Any]] = [tooling, fact("pref", "Deploys on fridays", "preference")]
    facts.append({"id": "bare", "content": "Deploys by hand"})  # no category: context
    with SearchIndex() as index:
        index.sync_scope(USER, AGENT, facts, version="1")
        for category, expected in [
            ("tooling", ["tool"]),
            ("OTHER", ["tool"]),
            ("context", ["bare"]),
        ]:
            assert ids(index.search(USER, AGENT, "deploys", now=NOW, category=category)) == expected
            hits = substring_search(facts, "deploys", category=category)
            assert ids(hits) == expected


@pytest.mark.parametrize("top_k", [0, -1])
def test_non_positive_top_k_gives_nothing(index: SearchIndex, top_k: int) -> None:
    assert index.search(USER, AGENT, "tea", now=NOW, top_k=top_k) == []


@pytest.mark.parametrize("query", ["", "   ", "\n"])
def test_blank_query_gives_nothing(index: SearchIndex, query: str) -> None:
    assert index.search(USER, AGENT, query, now=NOW) == []


def test_top_k_limits(index: SearchIndex) -> None:
    assert len(index.search(USER, AGENT, "uv python 学习 tea rust", now=NOW, top_k=2)) == 2


# --- scopes -------------------------------------------------------------------------------


def test_scopes_are_isolated_even_when_ids_repeat() -> None:
    with SearchIndex() as index:
        index.sync_scope("alice", AGENT, [fact("same", "alice likes tea")], version="1")
        index.sync_scope("bob", AGENT, [fact("same", "bob likes coffee")], version="1")
        index.sync_scope(None, AGENT, [fact("same", "default user likes water")], version="1")
        index.sync_scope("", AGENT, [fact("same", "empty user likes juice")], version="1")
        index.sync_scope("alice", "other", [fact("same", "other agent: tea")], version="1")
        assert ids(index.search("alice", AGENT, "likes", now=NOW)) == ["same"]
        assert index.search("alice", AGENT, "coffee", now=NOW) == []
        assert index.search("bob", AGENT, "tea", now=NOW) == []
        assert ids(index.search(None, AGENT, "water", now=NOW)) == ["same"]
        assert index.search(None, AGENT, "juice", now=NOW) == []
        assert ids(index.search("", AGENT, "juice", now=NOW)) == ["same"]
        assert index.search("nobody", AGENT, "likes", now=NOW) == []
        assert index.remove_scope("alice", AGENT) == 1
        assert index.search("alice", AGENT, "tea", now=NOW) == []
        assert ids(index.search("alice", "other", "tea", now=NOW)) == ["same"]
        assert index.remove_scope("alice", AGENT) == 0


# --- versions and synchronisation ---------------------------------------------------------


def test_sync_rewrites_only_what_changed(index: SearchIndex) -> None:
    assert index.version(USER, AGENT) == "v1"
    assert index.is_current(USER, AGENT, "v1")
    assert not index.is_current(USER, AGENT, "v2")
    assert index.version(USER, "nobody") is None

    changed = copy.deepcopy(LIBRARY)
    changed[1]["content"] = "Drinks black coffee every morning"  # edited
    del changed[2]  # deleted
    changed.append(fact("new", "Prefers dark mode"))  # created
    changed.append({"id": "bad", "content": 7})  # not indexable
    changed.append({"content": "no id"})
    changed.append({"id": "bad\ud800", "content": "lone surrogate in the id"})
    report = index.sync_scope(USER, AGENT, changed, version="v2")
    assert report == SyncReport(indexed=2, removed=1, unchanged=6, skipped=3)
    assert index.is_current(USER, AGENT, "v2")
    assert index.search(USER, AGENT, "green tea", now=NOW) == []
    assert ids(index.search(USER, AGENT, "coffee", now=NOW)) == ["tea"]
    assert index.search(USER, AGENT, "rust", now=NOW) == []
    assert ids(index.search(USER, AGENT, "dark mode", now=NOW)) == ["new"]
    assert index.sync_scope(USER, AGENT, changed, version="v3").indexed == 0


def test_the_content_version_changes_with_every_indexed_field() -> None:
    base = content_version(LIBRARY)
    assert content_version(copy.deepcopy(LIBRARY)) == base  # the same facts, the same token
    edits: list[dict[str, Any]] = [
        {"content": "Drinks black coffee every morning"},
        {"category": "goal"},
        {"confidence": 0.3},
        {"createdAt": ago(40)},
    ]
    tokens = {base}
    for edit in edits:
        edited = [*LIBRARY[:1], {**LIBRARY[1], **edit}, *LIBRARY[2:]]
        tokens.add(content_version(edited))
    tokens.add(content_version(LIBRARY[:-1]))  # a fact gone
    assert len(tokens) == len(edits) + 2
    # What the index does not hold changes nothing: the rows would be the same.
    assert content_version([{**f, "topics": ["x"]} for f in LIBRARY]) == base


def test_a_content_version_names_exactly_the_rows_a_sync_writes(index: SearchIndex) -> None:
    token = content_version(LIBRARY)
    index.sync_scope(USER, AGENT, LIBRARY, version=token)
    edited = [*LIBRARY[:1], {**LIBRARY[1], "content": "Drinks black coffee"}, *LIBRARY[2:]]
    assert not index.is_current(USER, AGENT, content_version(edited))
    report = index.sync_scope(USER, AGENT, edited, version=content_version(edited))
    assert (report.indexed, report.unchanged) == (1, len(LIBRARY) - 1)
    assert ids(index.search(USER, AGENT, "coffee", now=NOW)) == ["tea"]


def test_clear_forgets_every_scope(index: SearchIndex) -> None:
    index.sync_scope(USER, "other", LIBRARY, version="v1")
    index.clear()
    assert index.version(USER, AGENT) is None
    assert index.version(USER, "other") is None
    assert index.search(USER, AGENT, "tea", now=NOW) == []
    index.sync_scope(USER, AGENT, LIBRARY, version="v2")  # usable again at once
    assert ids(index.search(USER, AGENT, "tea", now=NOW)) == ["tea"]


def test_confidence_change_is_picked_up(index: SearchIndex) -> None:
    before = index.search(USER, AGENT, "tea", now=NOW)[0].score
    changed = [dict(f, confidence=0.1) if f["id"] == "tea" else f for f in LIBRARY]
    assert index.sync_scope(USER, AGENT, changed, version="v2").indexed == 1
    assert index.search(USER, AGENT, "tea", now=NOW)[0].score < before


def test_facts_and_fact_objects_are_never_changed() -> None:
    facts = copy.deepcopy(LIBRARY)
    objects = [Fact.from_dict(f) for f in LIBRARY]
    with SearchIndex() as index:
        index.sync_scope(USER, AGENT, facts, version="1")
        index.sync_scope(USER, "objects", objects, version="1")
        assert ids(index.search(USER, "objects", "tea", now=NOW)) == ["tea"]
    assert facts == LIBRARY
    assert objects == [Fact.from_dict(f) for f in LIBRARY]


# --- the index file -----------------------------------------------------------------------


def test_persists_across_reopening(tmp_path: Path) -> None:
    path = tmp_path / "search.sqlite"
    with SearchIndex(path) as index:
        index.sync_scope(USER, AGENT, LIBRARY, version="v7")
    with SearchIndex(path) as index:
        assert index.path == path
        assert index.is_current(USER, AGENT, "v7")
        assert ids(index.search(USER, AGENT, "tea", now=NOW, category="preference")) == ["tea"]
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(("-wal", "-shm"))) == [
        "search.sqlite"
    ]


def test_missing_file_is_created(tmp_path: Path) -> None:
    path = tmp_path / "new.sqlite"
    with SearchIndex(path) as index:
        assert index.version(USER, AGENT) is None
    assert path.exists()


@pytest.mark.parametrize(
    "damage",
    [
        b"this is not a database at all" * 100,
        b"",
        b"SQLite format 3\x00" + b"\xff" * 5000,
    ],
)
def test_garbage_file_is_replaced(
    damage: bytes, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "search.sqlite"
    path.write_bytes(damage)
    with SearchIndex(path) as index:
        assert index.version(USER, AGENT) is None  # stale: the caller will re-sync
        index.sync_scope(USER, AGENT, LIBRARY, version="v1")
        assert ids(index.search(USER, AGENT, "tea", now=NOW)) == ["tea"]
    if damage:
        assert "rebuilding" in caplog.text


def test_damaged_pages_are_detected_and_rebuilt(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "search.sqlite"
    facts = [fact(f"f{n}", f"fact number {n} " * 20) for n in range(300)]
    with SearchIndex(path) as index:
        index.sync_scope(USER, AGENT, facts, version="v1")
    data = bytearray(path.read_bytes())
    assert len(data) > 8192
    data[4096:] = b"\x5a" * (len(data) - 4096)  # keep the header page, wreck the rest
    path.write_bytes(bytes(data))
    with SearchIndex(path) as index:
        assert not index.is_current(USER, AGENT, "v1")
        index.sync_scope(USER, AGENT, facts, version="v1")
        assert len(index.search(USER, AGENT, "number", now=NOW, top_k=500)) == 300
    assert "rebuilding" in caplog.text


def test_damage_found_while_open_is_rebuilt(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "search.sqlite"
    facts = [fact(f"f{n}", f"fact number {n} " * 20) for n in range(300)]
    with SearchIndex(path) as index:
        index.sync_scope(USER, AGENT, facts, version="v1")
        other = sqlite3.connect(path)
        other.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        other.close()
        data = bytearray(path.read_bytes())
        data[4096:] = b"\x5a" * (len(data) - 4096)
        path.write_bytes(bytes(data))
        assert index.search(USER, AGENT, "number", now=NOW) == []  # rebuilt empty, no error
        assert index.version(USER, AGENT) is None  # so the caller re-syncs
        index.sync_scope(USER, AGENT, facts, version="v1")
        assert len(index.search(USER, AGENT, "number", now=NOW, top_k=500)) == 300
    assert "damaged" in caplog.text


def test_foreign_database_or_old_schema_is_replaced(tmp_path: Path) -> None:
    foreign = tmp_path / "foreign.sqlite"
    with sqlite3.connect(foreign) as db:
        db.execute("CREATE TABLE something (x)")
    with SearchIndex(foreign) as index:
        index.sync_scope(USER, AGENT, LIBRARY, version="1")
        assert ids(index.search(USER, AGENT, "tea", now=NOW)) == ["tea"]

    old = tmp_path / "old.sqlite"
    with SearchIndex(old) as index:
        index.sync_scope(USER, AGENT, LIBRARY, version="1")
    db = sqlite3.connect(old)
    with db:
        db.execute("UPDATE index_meta SET value = '0' WHERE key = 'schema'")
    db.close()
    with SearchIndex(old) as index:
        assert index.version(USER, AGENT) is None


def test_unusable_location_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(SearchIndexError) as raised:
        SearchIndex(tmp_path / "missing-dir" / "search.sqlite")
    assert "missing-dir" in str(raised.value)
    assert raised.value.path.endswith("search.sqlite")


def test_concurrent_syncs_and_searches(tmp_path: Path) -> None:
    errors: list[BaseException] = []
    with SearchIndex(tmp_path / "search.sqlite") as index:

        def work(n: int) -> None:
            try:
                facts = [fact(f"t{n}_{k}", f"thread {n} fact {k} common words") for k in range(20)]
                for round_ in range(5):
                    index.sync_scope(USER, f"agent{n}", facts, version=str(round_))
                    assert len(index.search(USER, f"agent{n}", "common", now=NOW, top_k=50)) == 20
            except BaseException as error:  # collected for the main thread
                errors.append(error)

        threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert errors == []


# --- search_facts: index, staleness, fallback ---------------------------------------------


class Loader:
    """Counts how often the facts had to be loaded."""

    def __init__(self, facts: list[dict[str, Any]]) -> None:
        self.facts = facts
        self.calls = 0

    def __call__(self) -> list[dict[str, Any]]:
        self.calls += 1
        return self.facts


def test_search_facts_syncs_a_stale_scope_once() -> None:
    load = Loader(LIBRARY)
    with SearchIndex() as index:
        hits = search_facts(index, USER, AGENT, "tea", version="r1", load=load, now=NOW)
        assert ids(hits) == ["tea"]
        assert load.calls == 1
        assert index.is_current(USER, AGENT, "r1")
        search_facts(index, USER, AGENT, "rust", version="r1", load=load, now=NOW)
        assert load.calls == 1  # current: the facts are not even loaded
        load.facts = [*LIBRARY, fact("new", "Prefers tabs over spaces")]
        hits = search_facts(index, USER, AGENT, "tabs", version="r2", load=load, now=NOW)
        assert ids(hits) == ["new"]
        assert load.calls == 2


class MovedMeanwhile(SearchIndex):
    """An index whose rows another process brings to its own, older snapshot between a
    search's bringing them up and its first ``times`` queries."""

    def __init__(self, older: list[dict[str, Any]], times: int) -> None:
        super().__init__()
        self.older, self.times = older, times

    def search(self, *args: Any, **kwargs: Any) -> list[SearchHit]:
        if self.times:
            self.times -= 1
            self.sync_scope(USER, AGENT, self.older, version="another process's")
        return super().search(*args, **kwargs)


@pytest.mark.parametrize("times", [1, 2])
def test_a_search_never_answers_from_rows_another_process_moved_meanwhile(times: int) -> None:
    # The fact "tea" now says something else; the rows queried still say green tea.
    now = [fact("tea", "Drinks black coffee every morning", confidence=0.9), *LIBRARY[2:4]]
    with MovedMeanwhile(LIBRARY, times) as index:
        found = search_facts(
            index, USER, AGENT, "green tea", version="r2", load=Loader(now), now=NOW
        )
        assert found == []  # once in step (asked again), or by substring: no fact says it
        hits = search_facts(index, USER, AGENT, "coffee", version="r2", load=Loader(now), now=NOW)
        assert ids(hits) == ["tea"]


def test_search_facts_falls_back_to_substrings() -> None:
    facts = [
        fact("html", "Writes HTML templates", confidence=0.4),
        fact("emoji", "Loves 🎉 parties"),
    ]
    with SearchIndex() as index:
        hits = search_facts(index, USER, AGENT, "TML", version="1", load=Loader(facts), now=NOW)
        assert hits == [SearchHit("html", 0.4, "substring")]
        hits = search_facts(index, USER, AGENT, "🎉", version="1", load=Loader(facts), now=NOW)
        assert ids(hits) == ["emoji"]
    assert ids(
        search_facts(None, USER, AGENT, "html", version="1", load=Loader(facts), now=NOW)
    ) == ["html"]


def test_search_facts_survives_an_unusable_index(caplog: pytest.LogCaptureFixture) -> None:
    index = SearchIndex()
    index.close()  # every later use fails
    with caplog.at_level(logging.WARNING, logger=search_module.__name__):
        hits = search_facts(
            index, USER, AGENT, "green tea", version="1", load=Loader(LIBRARY), now=NOW
        )
    assert ids(hits) == ["tea"]
    assert hits[0].match_type == "substring"


def test_search_facts_blank_or_non_positive() -> None:
    load = Loader(LIBRARY)
    with SearchIndex() as index:
        assert search_facts(index, USER, AGENT, " ", version="1", load=load, now=NOW) == []
        assert (
            search_facts(index, USER, AGENT, "tea", version="1", load=load, now=NOW, top_k=0) == []
        )
    assert load.calls == 0


# --- substring_search ---------------------------------------------------------------------


def test_substring_is_case_insensitive() -> None:
    facts = [fact("a", "Prefers PyTest")]
    for query in ["pytest", "PYTEST", "PyTeSt", "test"]:
        assert ids(substring_search(facts, query)) == ["a"]


def test_substring_normalises_as_the_index_does() -> None:
    """The fallback folds query and text as the words are folded (NFKC, case): a fragment
    typed with a combining accent, or in full-width letters, finds what it spells."""
    facts = [fact("cafe", "Prefers caf\u00e9-style notes"), fact("wide", "Ｗｒｉｔｅｓ ＨＴＭＬ")]
    assert ids(substring_search(facts, "fe\u0301")) == ["cafe"]  # é as e + U+0301
    assert ids(substring_search(facts, "fé")) == ["cafe"]
    assert ids(substring_search(facts, "ＦÉ")) == ["cafe"]
    assert ids(substring_search(facts, "TML")) == ["wide"]
    with SearchIndex() as index:
        hits = search_facts(index, USER, AGENT, "ｔｍ", version="1", load=Loader(facts), now=NOW)
        assert hits == [SearchHit("wide", 0.5, "substring")]


def test_substring_ordering_limits_and_filters() -> None:
    facts = [
        fact("low", "match here", "goal", 0.2),
        fact("high", "match here", "preference", 0.9),
        {"id": "null", "content": "match here", "category": "goal", "confidence": None},
        {"id": "int", "content": 12, "confidence": 1.0},
        {"id": "none", "content": None, "confidence": 1.0},
        fact("miss", "nothing", "goal", 1.0),
    ]
    hits = substring_search(facts, "match", top_k=10)
    assert [(h.fact_id, h.score) for h in hits] == [("high", 0.9), ("null", 0.5), ("low", 0.2)]
    assert ids(substring_search(facts, "match", top_k=1)) == ["high"]
    assert ids(substring_search(facts, "match", top_k=1, category="goal")) == ["null"]
    assert ids(substring_search(facts, "match", category=None)) == ["high", "null", "low"]
    assert substring_search(facts, "absent") == []
    assert substring_search([], "match") == []
    assert substring_search(facts, "  ") == []
    assert substring_search(facts, "match", top_k=0) == []
    assert substring_search(facts, "match", top_k=-1) == []


def test_hit_as_dict() -> None:
    hit = SearchHit("a", 1.5, "fts5", -1.2)
    assert hit.to_dict() == {"factId": "a", "score": 1.5, "matchType": "fts5", "bm25": -1.2}
