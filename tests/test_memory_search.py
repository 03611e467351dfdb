"""Memory.search on the Markdown store: recalls in its files, and the index file it derives.

Ranking, filters, the fallback and CJK run on both stores: tests/store_contract/test_search.py.
"""

from __future__ import annotations

import gc
import json
import logging
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from deermem import Memory
from deermem.errors import FactValidationError, SearchIndexError
from deermem.recall.index import SearchIndex
from deermem.results import SearchResult

from .context_support import NOW, fact_files, files_state, open_memory, usage_file

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


@pytest.fixture
def memory(tmp_path: Path) -> Memory:
    opened = open_memory(tmp_path)
    opened.import_document({"facts": LIBRARY})
    return opened


def ids(results: tuple[SearchResult, ...]) -> list[str]:
    return [result.fact_id for result in results]


# --- ranking and results -------------------------------------------------------------------


@pytest.mark.parametrize("top_k", [2.5, "3", None, True, 3.0])
@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
def test_a_top_k_that_is_not_an_int_is_refused_naming_it(
    tmp_path: Path, top_k: Any, mode: str
) -> None:
    memory = open_memory(tmp_path, search_mode=mode)
    memory.import_document({"facts": LIBRARY})
    before = files_state(tmp_path)
    expected = r"field 'top_k' has .*; expected a whole number"
    with pytest.raises(FactValidationError, match=expected) as raised:
        memory.search("python", top_k=top_k)
    assert raised.value.field == "top_k"
    assert files_state(tmp_path) == before  # nothing searched, nothing recorded


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"query": None}, "query"),
        ({"query": b"python"}, "query"),
        ({"query": "python", "category": 3}, "category"),
        ({"query": "python", "category": ["correction"]}, "category"),
    ],
)
def test_a_query_or_category_that_is_not_text_is_refused_naming_it(
    tmp_path: Path, arguments: dict[str, Any], field: str
) -> None:
    """A category that is not text raised a bare AttributeError (``.strip``)."""
    memory = open_memory(tmp_path)
    memory.import_document({"facts": LIBRARY})
    before = files_state(tmp_path)
    with pytest.raises(FactValidationError, match=f"field '{field}' has .*; expected a text"):
        memory.search(**arguments)
    assert files_state(tmp_path) == before


@pytest.mark.parametrize("method", ["context", "injection"])
@pytest.mark.parametrize("query", [5, ["python"], b"python"])
def test_a_question_for_the_prompt_that_is_not_text_is_refused_naming_it(
    tmp_path: Path, method: str, query: Any
) -> None:
    """``context(query=5)`` raised a bare AttributeError (``.strip``), not search's refusal."""
    memory = open_memory(tmp_path)
    memory.import_document({"facts": LIBRARY})
    before = files_state(tmp_path)
    with pytest.raises(FactValidationError, match=r"field 'query' has .*; expected a text"):
        getattr(memory, method)(query=query)
    assert files_state(tmp_path) == before


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
def test_a_top_k_larger_than_sqlite_binds_cuts_nothing(tmp_path: Path, mode: str) -> None:
    """``top_k=2**63`` raised sqlite3's OverflowError under keyword search."""
    memory = open_memory(tmp_path, search_mode=mode)
    memory.import_document({"facts": LIBRARY})
    found = ids(memory.search("python", top_k=2**63, record=False))
    assert found == ids(memory.search("python", top_k=len(LIBRARY), record=False))
    assert len(found) >= 3


# --- recalls: recorded only when the policy reads them; never a change to a fact ---------------


@pytest.mark.parametrize(
    ("settings", "recorded"),
    [
        ({"fact_eviction_policy": "confidence", "fact_eviction_shadow_enabled": False}, False),
        ({"fact_eviction_policy": "hybrid-v1"}, True),
        ({"fact_eviction_policy": "confidence", "fact_eviction_shadow_enabled": True}, True),
        ({}, True),  # a new store runs hybrid-v1 (issue 24)
    ],
)
def test_hits_are_recorded_as_recalls_only_under_hybrid_or_shadow(
    tmp_path: Path, settings: dict[str, Any], recorded: bool
) -> None:
    memory = open_memory(tmp_path, **settings)
    memory.import_document({"facts": LIBRARY})
    results = memory.search("python", top_k=2)
    assert len(results) == 2
    usage = usage_file(tmp_path)
    assert usage.exists() is recorded
    if recorded:
        entries = json.loads(usage.read_text("utf-8"))
        assert sorted(entries) == sorted(ids(results))
        assert all(entry["accessCount"] == 1 for entry in entries.values())
        assert all(entry["lastAccessedAt"] == "2026-08-13T00:00:00Z" for entry in entries.values())
        memory.search("python", top_k=2)
        assert {e["accessCount"] for e in json.loads(usage.read_text("utf-8")).values()} == {2}


def test_looking_without_recording(tmp_path: Path) -> None:
    memory = open_memory(tmp_path, fact_eviction_policy="hybrid-v1")
    memory.import_document({"facts": LIBRARY})
    assert memory.search("python", record=False)
    assert not usage_file(tmp_path).exists()


def test_a_search_never_rewrites_a_fact_or_confirms_it(tmp_path: Path) -> None:
    memory = open_memory(tmp_path, fact_eviction_policy="hybrid-v1")
    memory.import_document({"facts": LIBRARY})
    facts_before = fact_files(tmp_path)
    state_before = files_state(tmp_path)

    def stamps() -> dict[str, tuple[object, ...]]:
        return {
            f.id: (f.revision, f.updatedAt, f.lastConfirmedAt, f.confirmationCount)
            for f in memory.list_facts()
        }

    before = stamps()
    assert all(stamp[2:] == (None, None) for stamp in before.values())
    for query in ("python", "tea", "TML", "机器学习"):
        assert memory.search(query)
    assert fact_files(tmp_path) == facts_before  # bytes and modification times
    state_after = files_state(tmp_path)
    changed = {name for name, state in state_after.items() if state != state_before.get(name)}
    assert changed == {"users/alice/agents/coder/.metadata/fact-usage.json"}
    memory.reload()
    assert stamps() == before  # no new revision, updatedAt or confirmation


def test_hits_whose_fact_is_gone_are_dropped_and_not_recorded(tmp_path: Path) -> None:
    memory = open_memory(tmp_path, fact_eviction_policy="hybrid-v1")
    memory.import_document({"facts": LIBRARY[:2]})
    snapshot = memory.snapshot()
    ghost = {"id": "fact_ghost", "content": "Python ghost", "category": "context"}
    # An index that (wrongly) holds a fact the store does not: search trusts the store.
    with SearchIndex(memory.store.search_index_location()) as index:
        index.sync_scope("alice", "coder", [*snapshot.facts, ghost], version=snapshot.version)
    assert ids(memory.search("python")) == ["fact_uv"]
    assert set(json.loads(usage_file(tmp_path).read_text("utf-8"))) == {"fact_uv"}


# --- the derived index: owned by the store, rebuilt, never an error ---------------------------


def test_the_index_lives_where_the_store_says(memory: Memory, tmp_path: Path) -> None:
    location = memory.store.search_index_location()
    assert Path(location) == tmp_path / ".retrieval" / "memory-fts5.sqlite3"
    memory.search("python")
    assert Path(location).is_file()


def test_changes_through_any_memory_reach_the_index(memory: Memory, tmp_path: Path) -> None:
    assert memory.search("espresso") == ()
    other = open_memory(tmp_path)  # another Memory (as another process would)
    created = other.create_fact("Drinks espresso after lunch.", confidence=0.8)
    assert ids(memory.search("espresso")) == [created.fact_id]
    other.delete_fact("fact_tea")
    assert memory.search("green tea") == ()
    other.update_fact("fact_py", content="Writes Rust every day.")
    # Its old words are gone from the index (meaning may still find it: Rust is a language too).
    keyword = [r.fact_id for r in memory.search("python", top_k=10) if r.bm25 is not None]
    assert "fact_py" not in keyword
    assert ids(memory.search("rust")) == ["fact_py"]


def test_a_hand_edit_is_found_after_reload(memory: Memory, tmp_path: Path) -> None:
    assert ids(memory.search("tea")) == ["fact_tea"]
    [path] = tmp_path.glob("users/alice/agents/coder/facts/*/fact_tea.md")
    path.write_text(path.read_text("utf-8").replace("green tea", "black coffee"), "utf-8")
    memory.reload()  # this process cached the scope; a hand edit keeps memory.json as it was
    assert ids(memory.search("coffee")) == ["fact_tea"]
    assert memory.search("tea") == ()
    fresh = open_memory(tmp_path)
    assert ids(fresh.search("coffee")) == ["fact_tea"]


def test_a_hand_edit_is_found_by_the_next_process_without_reload(
    memory: Memory, tmp_path: Path
) -> None:
    """The index follows the facts' content, not the store's version token.

    A hand edit changes no revision and no ``memory.json``, so an index kept
    in step with the store's token alone went on answering with the old
    words — and hid the edited fact wherever FTS5 found any other match.
    """
    memory.create_fact("Brews black coffee on weekends.", confidence=0.6)
    assert ids(memory.search("tea")) == ["fact_tea"]
    memory.close()
    [path] = tmp_path.glob("users/alice/agents/coder/facts/*/fact_tea.md")
    path.write_text(path.read_text("utf-8").replace("green tea", "black coffee"), "utf-8")
    fresh = open_memory(tmp_path)  # a new process: it reads the edited file
    assert fresh.search("tea") == ()
    results = fresh.search("black coffee", top_k=5)
    assert "fact_tea" in ids(results)
    assert {result.match_type for result in results} == {"fts5"}


def test_a_search_never_answers_from_rows_a_stale_process_brought_back(
    memory: Memory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Another process still holds the snapshot from before a hand edit (it needs reload())
    # and searches too: it brings the index's rows back to its own between this search's
    # bringing them up and its query — with the archive, as Memory.search does by default.
    stale = open_memory(tmp_path)
    assert ids(stale.search("tea")) == ["fact_tea"]
    [path] = tmp_path.glob("users/alice/agents/coder/facts/*/fact_tea.md")
    path.write_text(path.read_text("utf-8").replace("green tea", "black coffee"), "utf-8")
    fresh = open_memory(tmp_path)
    query = SearchIndex.search_library
    interleaved: list[bool] = []

    def the_stale_process_searches_first(index: SearchIndex, *args: Any, **kwargs: Any) -> Any:
        if not interleaved:
            interleaved.append(True)
            stale.search("tea", record=False)
        return query(index, *args, **kwargs)

    monkeypatch.setattr(SearchIndex, "search_library", the_stale_process_searches_first)
    assert fresh.search("green tea") == ()  # the stale rows still said it
    assert interleaved
    assert ids(fresh.search("black coffee")) == ["fact_tea"]


@pytest.mark.parametrize("damage", ["garbage", "truncated", "deleted", "foreign"])
def test_a_damaged_or_missing_index_is_rebuilt(
    memory: Memory, tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: str
) -> None:
    expected = memory.search("python", top_k=10)
    memory.close()
    index_file = Path(memory.store.search_index_location())
    if damage == "garbage":
        index_file.write_bytes(b"this is not a database" * 100)
    elif damage == "truncated":
        index_file.write_bytes(index_file.read_bytes()[:2048])
    elif damage == "deleted":
        index_file.unlink()
    else:
        index_file.unlink()
        with sqlite3.connect(index_file) as db:
            db.execute("CREATE TABLE something_else (x)")
        db.close()
    with caplog.at_level(logging.WARNING):
        assert memory.search("python", top_k=10) == expected
    with sqlite3.connect(index_file) as db:
        assert db.execute("SELECT count(*) FROM doc").fetchone()[0] == len(LIBRARY)
    db.close()


def test_an_unusable_index_location_falls_back_to_an_index_in_memory_said_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    memory = open_memory(tmp_path)
    memory.import_document({"facts": LIBRARY})
    (tmp_path / ".retrieval").write_text("a file where the index directory should be")
    with caplog.at_level(logging.WARNING, logger="deermem.memory"):
        results = memory.search("green tea")
        assert memory.search("green tea") == results
        view = memory.scoped(user=memory.scope.user_id, agent=memory.scope.agent)
        assert view.search("green tea") == results
    assert caplog.text.count("searching with an index in memory") == 1
    assert ids(results) == ["fact_tea"]
    assert results[0].match_type == "fts5"


def test_views_share_one_index_and_close_reopens(memory: Memory) -> None:
    view = memory.scoped(user="alice", agent="writer")
    assert memory.search("python")
    assert view._search_index is memory._search_index
    memory.close()
    memory.close()  # closing twice is fine
    assert memory.search("python")  # reopened on demand


def test_the_index_is_closed_with_the_last_memory_that_shares_it(tmp_path: Path) -> None:
    memory = open_memory(tmp_path)
    memory.import_document({"facts": LIBRARY})
    assert memory.search("python")
    index = memory._search_index.get(memory.store)
    assert index is not None
    view = memory.scoped(user="alice", agent="writer")
    del memory
    gc.collect()
    assert view.scoped(user="alice", agent="coder").search("python")  # open for the view
    del view
    gc.collect()
    with pytest.raises(SearchIndexError):
        index.version("alice", "coder")


def test_an_empty_scope_finds_nothing(tmp_path: Path) -> None:
    assert open_memory(tmp_path).search("anything") == ()


def test_clock_is_the_memorys(tmp_path: Path) -> None:
    # Decay uses the memory's clock: a year later the same match scores lower.
    memory = open_memory(tmp_path)
    memory.import_document({"facts": LIBRARY})
    later = Memory.open(
        tmp_path, memory.config, user="alice", agent="coder", clock=lambda: NOW.replace(year=2027)
    )
    assert later.search("tea")[0].score < memory.search("tea")[0].score


def test_a_commit_brings_the_index_up_to_date_in_the_committing_process(memory: Memory) -> None:
    memory.search("tea", record=False)  # the index exists and is current
    created = memory.create_fact("Drinks espresso after lunch.", confidence=0.8)
    index = memory._search_index.get(memory.store)
    version = memory._search_index.version_of(memory.store.load(memory.scope))
    user, agent = memory.scope.user_id, memory.scope.agent
    assert index.is_current(user, agent, version)  # before any search
    [hit] = index.search(user, agent, "espresso", now=NOW)
    assert hit.fact_id == created.fact_id
    memory.delete_fact(created.fact_id or "")  # to the archive
    snapshot = memory.store.load(memory.scope)
    assert index.is_current(user, agent, memory._search_index.version_of(snapshot))
    assert index.search(user, agent, "espresso", now=NOW) == []
    # With missed-recall detection on, the archive's rows are in step too.
    assert index.is_archive_current(user, agent, snapshot.version)
    [archived] = index.search(user, agent, "espresso", now=NOW, with_archive=True)
    assert (archived.fact_id, archived.archived) == (created.fact_id, True)
