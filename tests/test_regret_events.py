"""Regret on the Markdown store: what its files, journal and search index add.

Every event through every path, on both stores, is in
``tests/store_contract/test_regret.py``. Here: a relearn rolled back with its
fact by the journal, damaged regret files, and the on-disk index's archive
rows following purges, restores and ``reindex``. The scenario is
:mod:`tests.regret_support`'s.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from deermem import CorruptMemoryFile, Memory, MemoryConfig
from deermem.library import regret
from deermem.library.regret import Found, search_regret
from deermem.model import Scope
from deermem.recall.index import SearchIndex
from deermem.store.markdown import journal
from deermem.testing import ScriptedChatServer
from tests.regret_support import events, evict_one, library
from tests.wire_support import (
    NOW,
    Clock,
    close_memories,  # noqa: F401 (autouse fixture)
    open_memory,
    seed,
    tree,
)


@pytest.fixture
def server() -> Iterator[ScriptedChatServer]:
    with ScriptedChatServer() as running:
        yield running


def opened(
    root: Path,
    server: ScriptedChatServer,
    clock: Clock,
    *,
    policy: str = "confidence",
    shadow: bool = False,
    **settings: Any,
) -> Memory:
    memory = open_memory(
        root,
        server,
        clock=clock,
        max_facts=10,
        fact_eviction_policy=policy,
        fact_eviction_shadow_enabled=shadow,
        **settings,
    )
    seed(memory, *library())
    return memory


# --- committed with its cause ----------------------------------------------------


def test_a_relearn_is_committed_with_its_fact_or_not_at_all(
    tmp_path: Path, server: ScriptedChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    memory = opened(tmp_path, server, clock)
    evicted = evict_one(memory, clock)
    content = memory.get_archived(evicted).fact.content
    memory.delete_fact("fact_f08")
    before = tree(tmp_path)

    class Crash(BaseException):
        pass

    def crash(path: Path) -> bool:
        raise Crash

    with monkeypatch.context() as patch:
        patch.setattr(journal, "remove_durably", crash)
        patch.setattr(journal, "_roll_back_now", lambda user: None)  # a crash undoes nothing
        with pytest.raises(Crash):
            memory.create_fact(content)
    assert any(name.endswith("regret-events.json") for name in tree(tmp_path))  # written ...
    reopened = Memory.open(tmp_path, memory.config, user="alice", clock=clock)
    assert reopened.list_facts() == memory.list_facts()  # ... and rolled back with the fact
    assert tree(tmp_path) == before
    assert reopened.store.regret_events(reopened.scope) == ()


def test_a_damaged_regret_log_stops_the_commit_and_is_not_overwritten(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    clock = Clock()
    memory = opened(tmp_path, server, clock)
    evicted = evict_one(memory, clock)
    content = memory.get_archived(evicted).fact.content
    log = tmp_path / "users/alice/agents/__default__/.metadata/regret-events.json"
    log.write_text('{"not": "a list"}', "utf-8")
    before = tree(tmp_path)
    with pytest.raises(CorruptMemoryFile, match=r"regret-events\.json"):
        memory.create_fact(content)
    assert tree(tmp_path) == before
    with pytest.raises(CorruptMemoryFile, match=r"regret-events\.json"):
        memory.regret()


# --- the archive in the search index --------------------------------------------


def indexed_archive(root: Path, server: ScriptedChatServer) -> tuple[Memory, str, str]:
    """A memory with one evicted fact whose archive a search has indexed: the memory,
    the evicted fact's id and the number its content ends with."""
    clock = Clock()
    memory = opened(root, server, clock)
    evicted = evict_one(memory, clock)
    number = memory.get_archived(evicted).fact.content.split()[-1]
    memory.search("anything")  # indexes the archive
    return memory, evicted, number


def archived_hits(memory: Memory, number: str) -> list[str]:
    """The archived facts the index ranks for ``number {number}``, library and archive together."""
    index = memory._search_index.get(memory.store)
    hits = index.search("alice", "__default__", f"number {number}", now=NOW, with_archive=True)
    return [hit.fact_id for hit in hits if hit.archived]


def test_switching_detection_off_drops_the_archive_from_the_index(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    memory, evicted, number = indexed_archive(tmp_path, server)
    assert archived_hits(memory, number) == [evicted]
    off = Memory(memory.store, MemoryConfig(max_facts=10, regret_missed_recall=False), memory.scope)
    off._search_index = memory._search_index
    off.search("anything")
    assert archived_hits(memory, number) == []


def test_a_search_that_only_looks_keeps_the_archive_indexed_while_detection_is_on(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    """A prompt's search (``context(query=…)``) and an operator's (``record=False``) ask
    nothing of the archive; while the memory detects missed recalls they leave its rows,
    so the agent's next recorded search does not index the whole archive again."""
    memory, evicted, number = indexed_archive(tmp_path, server)
    index = memory._search_index.get(memory.store)
    synced = index.versions("alice", "__default__")
    assert synced is not None
    assert synced[1]  # the archive is indexed
    memory.context(query=f"fact number {number}")
    memory.search(f"fact number {number}", record=False)
    assert index.versions("alice", "__default__") == synced
    assert archived_hits(memory, number) == [evicted]


def test_an_archive_entry_removed_by_hand_leaves_the_index_after_a_reload(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    """The archive's rows follow this process's commits by what each did, so a hand edit
    of the archive is not seen by them; a reload, as for a fact file edited by hand, has
    the next search list the archive again."""
    memory, evicted, number = indexed_archive(tmp_path, server)
    entry = tmp_path / f"users/alice/agents/__default__/.metadata/archive/{evicted}.json"
    entry.unlink()
    memory.search("anything")
    assert archived_hits(memory, number) == [evicted]  # the rows are current by version
    memory.reload()
    memory.search("anything")
    assert archived_hits(memory, number) == []


def test_a_purged_fact_leaves_the_index_at_the_next_search(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    clock = Clock()
    memory = opened(tmp_path, server, clock)
    evicted = evict_one(memory, clock)
    number = memory.get_archived(evicted).fact.content.split()[-1]
    memory.search("anything")
    memory.purge(evicted)
    memory.search(f"fact number {number}")
    index = memory._search_index.get(memory.store)
    hits = index.search("alice", "__default__", f"number {number}", now=NOW, with_archive=True)
    assert evicted not in [hit.fact_id for hit in hits]
    assert events(memory) == []


def test_a_restored_fact_leaves_the_archive_rows_and_is_found_in_the_library(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    clock = Clock()
    memory = opened(tmp_path, server, clock)
    evicted = evict_one(memory, clock)
    number = memory.get_archived(evicted).fact.content.split()[-1]
    memory.search("anything")  # indexes the archive
    memory.delete_fact("fact_f08")  # room for it
    memory.restore(evicted)
    clock.advance(hours=1)
    results = memory.search(f"fact number {number}", top_k=1)
    assert [r.fact_id for r in results] == [evicted]
    index = memory._search_index.get(memory.store)
    hits = index.search("alice", "__default__", f"number {number}", now=NOW, with_archive=True)
    assert [hit.archived for hit in hits if hit.fact_id == evicted] == [False]
    assert [e.kind for e in events(memory)] == ["restored"]  # no missed recall of it


@pytest.mark.parametrize("detection", [True, False])
def test_reindex_rebuilds_the_library_and_the_archive(
    tmp_path: Path, server: ScriptedChatServer, detection: bool
) -> None:
    clock = Clock()
    memory = opened(tmp_path, server, clock, regret_missed_recall=detection)
    evicted = evict_one(memory, clock)
    number = memory.get_archived(evicted).fact.content.split()[-1]
    memory.search("anything")  # the index exists; reindex empties it, then rebuilds it
    report = memory.reindex()
    assert (report.scopes, report.facts) == (1, 10)
    with SearchIndex(tmp_path / ".retrieval/memory-fts5.sqlite3") as index:
        hits = index.search("alice", "__default__", f"number {number}", now=NOW, with_archive=True)
        assert [hit.fact_id for hit in hits if hit.archived] == ([evicted] if detection else [])
        version = memory.snapshot().version
        assert index.is_archive_current("alice", "__default__", version) is detection
    # The next search finds the archive current: it is not listed again.
    listed: list[Scope] = []
    listing = memory.store.archive_listing

    def counted(scope: Scope, now: datetime) -> Mapping[str, str]:
        listed.append(scope)
        return listing(scope, now)

    memory.store.archive_listing = counted  # type: ignore[method-assign]
    memory.search(f"fact number {number}")
    assert listed == []
    assert [e.kind for e in events(memory)] == (["missed_recall"] if detection else [])


def test_a_damaged_regret_log_never_fails_a_search(
    tmp_path: Path, server: ScriptedChatServer, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    memory = opened(tmp_path, server, clock)
    evicted = evict_one(memory, clock)
    number = memory.get_archived(evicted).fact.content.split()[-1]
    log = tmp_path / "users/alice/agents/__default__/.metadata/regret-events.json"
    log.write_text("[ not json", "utf-8")
    assert memory.search(f"fact number {number}")  # the library's results, all the same
    assert log.read_text("utf-8") == "[ not json"
    assert "regret-events.json" in caplog.text


def test_a_search_with_nothing_to_record_computes_no_digest_nor_stamp(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 23: most searches record no regret; they pay for neither the query's digest
    nor the formatted stamp, which only an event carries."""

    def refused(*_: object) -> str:
        raise AssertionError("computed for a search that records nothing")

    monkeypatch.setattr(regret, "query_digest", refused)
    monkeypatch.setattr(regret, "format_timestamp", refused)
    found = [Found("fact_00000001", 1), Found("fact_00000002", 2)]
    assert search_regret("tea", now=NOW, missed=(), results=found, marks={}) == ()
