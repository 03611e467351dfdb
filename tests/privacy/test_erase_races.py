"""An erase racing the work of another process, on the Markdown store: nothing of the user stays.

Another process's search or commit reads the user's facts, then writes their
rows into the shared search index; its count of a search's recalls waits for
the user's lock, then writes. An erase may land between the two steps. Each
race is played here deterministically, one step forced between the other's
two, and afterwards no file under the root — the index's pages and log
included — holds the user's words, nor any path the user's id.
"""

from __future__ import annotations

import contextlib
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

from deermem import Memory, MemoryConfig
from deermem.model import Scope
from deermem.recall.index import SearchIndex, library_rows
from deermem.store.markdown.files import UserPaths
from deermem.store.markdown.locks import user_lock
from deermem.store.markdown.store import MarkdownStore
from tests.privacy.stored import files_text

NOW = datetime(2026, 8, 13, tzinfo=UTC)
ERIN = "erin-race-7q2w"


def populate(root: Path) -> Memory:
    memory = Memory.open(
        root, MemoryConfig(max_facts=20), user=ERIN, agent="coder", clock=lambda: NOW
    )
    for number in range(5):
        memory.create_fact(f"erin keeps quokka{number:02d}rq2w in the shed", confidence=0.9)
    memory.search("quokka01rq2w")  # the index holds her rows
    return memory


def assert_no_trace(root: Path) -> None:
    text = files_text(root)
    assert "rq2w" not in text, "a word of the erased user is still stored"
    assert not [path for path in root.rglob("*") if ERIN in str(path)], "a path names her"


def test_rows_another_process_wrote_after_the_erase_go_with_the_text(tmp_path: Path) -> None:
    memory = populate(tmp_path)
    facts = memory.list_facts()
    # The other process read her facts before the erase and writes their rows after it.
    other = SearchIndex(memory.store.search_index_location(), holds_user=memory.store.holds_user)
    assert memory.erase_user(ERIN).erased
    try:
        other.sync_scope(ERIN, "coder", facts, version="read before the erase")
        assert other.version(ERIN, "coder") is None  # swept at once: the store no longer holds her
    finally:
        other.close()
    assert_no_trace(tmp_path)


def test_without_the_store_s_word_an_index_keeps_what_it_is_given(tmp_path: Path) -> None:
    # The guard is the store's: an index told nothing keeps rows (an index in memory, a rebuild).
    with SearchIndex(tmp_path / "index.sqlite3") as index:
        index.sync_scope(ERIN, "coder", [{"id": "fact_1", "content": "quokka rq2w"}], version="v")
        assert index.version(ERIN, "coder") == "v"


def test_rows_another_process_deleted_between_the_erase_s_sweeps_leave_no_text(
    tmp_path: Path,
) -> None:
    memory = populate(tmp_path)
    facts = memory.list_facts()
    store = memory.store
    erase = store.erase_user

    def erase_after_another_process_came_and_went(user_id: str) -> dict[str, int]:
        # After the erase's first sweep: another process writes her rows, then deletes them
        # as a search of a newer snapshot does — a plain delete, which leaves the text in the
        # full-text segments and free pages.
        other = SearchIndex(store.search_index_location())
        try:
            other.write(ERIN, "coder", library=library_rows(facts, "before"))
            other.sync_scope(ERIN, "coder", [], version="after")
        finally:
            other.close()
        return erase(user_id)

    store.erase_user = erase_after_another_process_came_and_went  # type: ignore[method-assign]
    assert memory.erase_user(ERIN).erased
    assert_no_trace(tmp_path)


def test_a_count_that_waited_for_the_lock_through_an_erase_leaves_no_directory(
    tmp_path: Path,
) -> None:
    memory = populate(tmp_path)
    store = memory.store
    assert isinstance(store, MarkdownStore)
    fact_ids = [fact.id for fact in memory.list_facts()]
    lock = user_lock(UserPaths(tmp_path, ERIN, "memory.json").lock, timeout=10)
    failures: list[BaseException] = []

    def count_recalls() -> None:
        try:
            store.record_access(Scope.of(ERIN, "coder"), fact_ids, NOW)
        except BaseException as error:  # reported by the main thread
            failures.append(error)

    with lock:
        counter = threading.Thread(target=count_recalls)
        counter.start()
        while not lock._turn.waiting:  # the count saw her directory and waits for the lock
            time.sleep(0.001)
        assert memory.erase_user(ERIN).erased  # under the same lock: this thread holds it
    counter.join(timeout=30)
    assert not counter.is_alive()
    assert failures == []
    assert_no_trace(tmp_path)


def test_a_write_that_changes_nothing_for_an_unknown_user_leaves_no_directory(
    tmp_path: Path,
) -> None:
    populate(tmp_path)
    stranger = Memory.open(tmp_path, MemoryConfig(), user="nobody-asked-3k", clock=lambda: NOW)
    for attempt in (
        lambda: stranger.delete_fact("fact_00000000"),
        lambda: stranger.update_fact("fact_00000000", confidence=0.5),
        lambda: stranger.restore("fact_00000000"),
        lambda: stranger.purge("fact_00000000"),
    ):
        with contextlib.suppress(LookupError):  # not found: she has nothing
            attempt()
    assert stranger.clear() == ()
    assert not [path for path in tmp_path.rglob("*") if "nobody-asked-3k" in str(path)]
    # Her first fact makes the directory, and it stays.
    stranger.create_fact("a first fact")
    assert (tmp_path / "users" / "nobody-asked-3k" / "memory.json").is_file()
