"""The archive on the Markdown store: its files, their times, the index, damaged entries.

The archive's behaviour on both stores: tests/store_contract/test_archive.py.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from deermem import (
    ArchivedFactError,
    CorruptMemoryFile,
    DuplicateFactError,
    FactNotFoundError,
    Memory,
    MemoryConfig,
)
from deermem.cli.demo import seed_scenarios
from deermem.errors import FactRevisionConflict

NOW = datetime(2026, 8, 13, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> datetime:
        return self.now


def open_memory(root: Path, clock: Clock | None = None, **settings: object) -> Memory:
    settings.setdefault("fact_eviction_policy", "confidence")  # the original's, named
    settings.setdefault("fact_eviction_shadow_enabled", False)
    config = MemoryConfig(max_facts=10, **settings)
    return Memory.open(root, config, user="alice", clock=clock or (lambda: NOW))


def stale_vs_confirmed() -> dict[str, object]:
    return {"facts": [dict(f) for f in seed_scenarios(NOW)[0].facts]}


def archive_dir(root: Path) -> Path:
    return root / "users/alice/agents/__default__/.metadata/archive"


def test_an_evicted_fact_is_archived_with_a_reference_to_its_receipt(tmp_path: Path) -> None:
    memory = open_memory(tmp_path)
    memory.import_document(stale_vs_confirmed())
    [receipt] = memory.audit()
    [entry] = memory.list_archived()
    assert entry.fact_id == "fact_confirm"
    assert (entry.reason, entry.trigger, entry.receipt_id) == (
        "capacity",
        "import",
        receipt.receipt_id,
    )
    assert entry.eviction == receipt.evicted[0]
    assert entry.fact.lastConfirmedAt is not None  # the fact as it was, every field
    data = json.loads((archive_dir(tmp_path) / "fact_confirm.json").read_text("utf-8"))
    assert data["fact"]["content"].startswith("The user wants short commit messages")
    assert data["receiptId"] == receipt.receipt_id


def test_restore_under_hybrid_brings_the_fact_back_and_evicts_another(tmp_path: Path) -> None:
    open_memory(tmp_path).import_document(stale_vs_confirmed())
    hybrid = open_memory(tmp_path, fact_eviction_policy="hybrid-v1")
    result = hybrid.restore("fact_confirm")
    assert result.restored
    assert result.evicted == ("fact_stale90",)
    restored = hybrid.get_fact("fact_confirm")
    original = next(f for f in seed_scenarios(NOW)[0].facts if f["id"] == "fact_confirm")
    assert restored.lastConfirmedAt == original["lastConfirmedAt"]
    assert restored.createdAt == original["createdAt"]
    assert [e.fact_id for e in hybrid.list_archived()] == ["fact_stale90"]
    assert not (archive_dir(tmp_path) / "fact_confirm.json").exists()


@pytest.mark.parametrize("back", ["restore", "relearn"])
def test_a_fact_back_from_the_archive_is_ranked_with_its_recall_counts(
    tmp_path: Path, back: str
) -> None:
    """Its heat went to the archive with it and comes back with it: the gate ranks it so."""
    memory = open_memory(tmp_path, fact_eviction_policy="hybrid-v1", search_mode="keyword")
    memory.create_fact("zebra crossing rule", fact_id="hot")
    for number in range(9):
        memory.create_fact(f"filler {number}", fact_id=f"c{number}")
    for _ in range(8):
        memory.search("zebra")  # eight recalls: the heat saturates
    memory.delete_fact("hot")
    assert memory.get_archived("hot").usage is not None
    memory.create_fact("filler 9", fact_id="c9")  # the library is full again
    receipts = (
        memory.restore("hot").receipts
        if back == "restore"
        else memory.create_fact("zebra crossing rule").receipts
    )
    [receipt] = [r for r in receipts if r.reason == "capacity"]
    # Equal but for the heat: the fillers go (0.45 each), the recalled fact stays (0.55).
    assert receipt.evicted[0].fact_id != "hot"
    assert memory.get_fact("hot").content == "zebra crossing rule"


def test_restore_refuses_unknown_active_and_duplicate_facts(tmp_path: Path) -> None:
    memory = open_memory(tmp_path)
    fact_id = memory.create_fact("Lives in Lisbon").fact_id
    assert fact_id is not None
    with pytest.raises(FactNotFoundError, match="in the archive"):
        memory.restore("fact_nothere")
    memory.delete_fact(fact_id)
    # Created with this text the archived fact would come back (relearned);
    # an edit makes an equal fact active without the gate.
    other = memory.create_fact("Lives in Porto").fact_id
    assert other is not None
    memory.update_fact(other, content="lives in lisbon")
    with pytest.raises(DuplicateFactError):
        memory.restore(fact_id)
    twin = open_memory(tmp_path)
    entry_file = archive_dir(tmp_path) / f"{fact_id}.json"
    data = json.loads(entry_file.read_text("utf-8"))
    data["fact"]["content"] = "Something else"
    entry_file.write_text(json.dumps(data), "utf-8")
    assert twin.restore(fact_id).restored
    twin.update_fact(fact_id, confidence=0.9)
    entry_file.write_text(json.dumps(data), "utf-8")  # an entry for an id that is active again
    with pytest.raises(FactRevisionConflict):
        twin.restore(fact_id)


def test_purge_deletes_the_content_and_keeps_the_receipt(tmp_path: Path) -> None:
    memory = open_memory(tmp_path)
    memory.import_document(stale_vs_confirmed())
    memory.purge("fact_confirm")
    assert memory.list_archived() == ()
    assert not (archive_dir(tmp_path) / "fact_confirm.json").exists()
    assert memory.audit()[0].fact_ids == ("fact_confirm",)
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert b"short commit messages" not in path.read_bytes()
    with pytest.raises(FactNotFoundError):
        memory.purge("fact_confirm")


_PURGES_WITH_A_SMALL_FILE_LIMIT = """
import resource, signal, sys
from deermem import Memory, MemoryConfig

memory = Memory.open(sys.argv[1], MemoryConfig(search_mode="keyword"), user="ann")
# A file may grow to 64 KB no more, as on a full disk: the store's files of the purge fit,
# the index's scrub (which rewrites the whole file) does not.
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (65536, resource.RLIM_INFINITY))
memory.purge(sys.argv[2])
"""


def test_a_purge_whose_index_scrub_fails_deletes_the_index_instead(tmp_path: Path) -> None:
    # On a nearly full disk the purge returned normally, logged "not scrubbed", and the
    # words stayed in the index's log for good: no later write scrubs the file.
    import subprocess
    import sys

    memory = Memory.open(tmp_path, MemoryConfig(search_mode="keyword"), user="ann")
    for number in range(30):  # an index far over 64 KB
        words = " ".join(f"word{number}x{k}" for k in range(150))
        memory.create_fact(f"Note {number}: {words}")
    gone = memory.create_fact("my vault word is plumbusgrix").fact_id
    assert gone is not None
    memory.delete_fact(gone)
    memory.search("plumbusgrix")  # the archive's rows hold it (missed-recall detection)
    index = [path.read_bytes() for path in (tmp_path / ".retrieval").iterdir()]
    assert any(b"plumbusgrix" in data for data in index)
    assert sum(map(len, index)) > 65536
    child = [sys.executable, "-c", _PURGES_WITH_A_SMALL_FILE_LIMIT, str(tmp_path), gone]
    done = subprocess.run(child, check=False, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert b"plumbusgrix" not in path.read_bytes(), path
    assert "its files are deleted instead" in done.stderr  # the log says what happened
    fresh = Memory.open(tmp_path, MemoryConfig(search_mode="keyword"), user="ann")
    assert [hit.fact.content for hit in fresh.search("word7x3")] == [memory.list_facts()[7].content]


_PURGE_KILLED_AFTER_ITS_COMMIT = """
import os, signal, sys
from deermem import Memory, MemoryConfig

config = MemoryConfig(search_mode="keyword")
memory = Memory.open(sys.argv[1], config, user="ann")
commit = type(memory.store).purge

def purge_then_die(store, scope, fact_id):
    if sys.argv[3] == "search-between":  # another process's search, before the commit
        Memory.open(sys.argv[1], config, user="ann").search("plumbusgrix")
    commit(store, scope, fact_id)
    os.kill(os.getpid(), signal.SIGKILL)  # the store's purge has committed: nothing after it runs

type(memory.store).purge = purge_then_die
memory.purge(sys.argv[2])
"""


def archived_in_the_index(root: Path) -> str:
    memory = Memory.open(root, MemoryConfig(search_mode="keyword"), user="ann")
    gone = memory.create_fact("my vault word is plumbusgrix").fact_id
    assert gone is not None
    memory.delete_fact(gone)
    memory.search("plumbusgrix")  # the archive's rows hold it (missed-recall detection)
    memory.close()
    assert any(b"plumbusgrix" in path.read_bytes() for path in (root / ".retrieval").iterdir())
    return gone


@pytest.mark.parametrize("between", ["nothing", "search-between"])
def test_a_purge_killed_after_its_commit_leaves_no_word_in_the_index(
    tmp_path: Path, between: str
) -> None:
    # The purge committed, then the process died before the index scrub: the word stayed in
    # the index file for good (no later search or write scrubbed it, `deermem reindex` did
    # not either) and the purge could not be run again.
    import signal
    import subprocess
    import sys

    gone = archived_in_the_index(tmp_path)
    child = [sys.executable, "-c", _PURGE_KILLED_AFTER_ITS_COMMIT, str(tmp_path), gone, between]
    done = subprocess.run(child, check=False, capture_output=True, text=True)
    assert done.returncode == -signal.SIGKILL, done.stderr
    memory = Memory.open(tmp_path, MemoryConfig(search_mode="keyword"), user="ann")
    assert memory.list_archived() == ()  # purged
    memory.search("plumbusgrix")  # a later process opens the index and searches
    memory.create_fact("a later fact")
    memory.search("later")
    memory.close()
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert b"plumbusgrix" not in path.read_bytes(), path
    assert not list((tmp_path / ".retrieval").glob("*.scrub-owed"))  # the scrub is paid


def test_reindex_leaves_no_word_of_rows_deleted_before(tmp_path: Path) -> None:
    # `deermem reindex` cleared the rows and wrote them again: the words of a fact purged
    # by a process killed before its scrub (as it could be until then) stayed in free pages.
    gone = archived_in_the_index(tmp_path)
    memory = Memory.open(tmp_path, MemoryConfig(search_mode="keyword"), user="ann")
    memory.store.purge(memory.scope, gone)  # the store's purge alone: the index untouched
    assert any(b"plumbusgrix" in path.read_bytes() for path in (tmp_path / ".retrieval").iterdir())
    memory.reindex()
    for path in (tmp_path / ".retrieval").iterdir():
        assert b"plumbusgrix" not in path.read_bytes(), path


def test_the_archive_is_bounded_by_count(tmp_path: Path) -> None:
    clock = Clock()
    memory = open_memory(tmp_path, clock, archive_max_entries=2)
    ids = []
    for number in range(5):
        clock.now = NOW + timedelta(minutes=number)
        fact_id = memory.create_fact(f"Fact {number}").fact_id
        assert fact_id is not None
        ids.append(fact_id)
        memory.delete_fact(fact_id)
    assert [e.fact_id for e in memory.list_archived()] == [ids[4], ids[3]]  # newest first
    assert len(list(archive_dir(tmp_path).iterdir())) == 2
    assert len(memory.audit()) == 5  # receipts outlive their archive entries


def test_an_index_this_process_wrote_is_neither_parsed_nor_encoded_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 23: a commit that archives a fact rewrites the index of up to
    ``archive_max_entries``; the entries of an index that still holds the bytes this
    process wrote are not parsed again, nor their lines encoded — the new one's is. The
    file is what encoding every entry gives, and one another writer changed is read
    afresh."""
    clock = Clock()
    memory = open_memory(tmp_path, clock)
    for number in range(15):
        clock.now = NOW + timedelta(minutes=number)
        memory.create_fact(f"Fact {number}", confidence=0.5 + number / 100)
    index = archive_dir(tmp_path).parent / "archive-index.json"

    def canonical(data: bytes) -> bytes:
        lines = [json.dumps(entry) for entry in json.loads(data)]
        return ("[\n" + ",\n".join(lines) + "\n]\n").encode("utf-8")

    assert len(json.loads(index.read_bytes())) == 5
    parsed: list[object] = []
    encoded: list[object] = []
    real_loads, real_dumps = json.loads, json.dumps

    def counting_loads(data: str | bytes, **options: object) -> object:
        if data == index.read_bytes():
            parsed.append(data)
        return real_loads(data, **options)  # type: ignore[arg-type]

    def counting_dumps(value: object, **options: object) -> str:
        if isinstance(value, list):  # an index entry (receipts and entries are objects)
            encoded.append(value)
        return real_dumps(value, **options)  # type: ignore[arg-type]

    monkeypatch.setattr(json, "loads", counting_loads)
    monkeypatch.setattr(json, "dumps", counting_dumps)
    clock.now = NOW + timedelta(hours=1)
    memory.create_fact("Fact 15", confidence=0.99)
    assert (parsed, len(encoded)) == ([], 1)
    data = index.read_bytes()
    assert len(real_loads(data)) == 6
    assert data == canonical(data)
    # Another writer's index (the same entries, written otherwise) is read and rewritten.
    index.write_text(real_dumps(real_loads(data), indent=4), "utf-8")
    encoded.clear()
    clock.now = NOW + timedelta(hours=2)
    memory.create_fact("Fact 16", confidence=0.99)
    assert len(encoded) == 7
    data = index.read_bytes()
    assert data == canonical(data)
    assert {entry[0] for entry in real_loads(data)} == {
        entry.fact_id for entry in memory.list_archived()
    }


def test_the_archive_is_bounded_by_age(tmp_path: Path) -> None:
    clock = Clock()
    memory = open_memory(tmp_path, clock, archive_max_age_days=30)
    old = memory.create_fact("Old").fact_id
    assert old is not None
    memory.delete_fact(old)
    clock.now = NOW + timedelta(days=31)
    assert memory.list_archived() == ()  # expired: not listed
    with pytest.raises(FactNotFoundError):
        memory.restore(old)
    assert (archive_dir(tmp_path) / f"{old}.json").exists()
    newer = memory.create_fact("Newer").fact_id
    assert newer is not None
    memory.delete_fact(newer)  # the next archiving commit prunes
    assert not (archive_dir(tmp_path) / f"{old}.json").exists()
    assert [e.fact_id for e in memory.list_archived()] == [newer]


def test_the_age_bound_holds_for_a_clock_in_the_first_year(tmp_path: Path) -> None:
    """A clock within ``archive_max_age_days`` of year 1: the bound's limit would fall before
    it, so nothing is old enough to go (it overflowed before)."""
    clock = Clock()
    clock.now = datetime(1, 3, 1, tzinfo=UTC)
    memory = open_memory(tmp_path, clock, archive_max_age_days=365)
    first = memory.create_fact("First").fact_id
    second = memory.create_fact("Second").fact_id
    assert first is not None
    assert second is not None
    memory.delete_fact(first)
    memory.delete_fact(second)  # an archiving commit: the bounds are applied
    assert {e.fact_id for e in memory.list_archived()} == {first, second}


def test_a_corrupt_archive_entry_is_an_error(tmp_path: Path) -> None:
    memory = open_memory(tmp_path)
    fact_id = memory.create_fact("To archive").fact_id
    assert fact_id is not None
    memory.delete_fact(fact_id)
    entry_file = archive_dir(tmp_path) / f"{fact_id}.json"
    entry_file.write_text(
        json.dumps(
            {"fact": {"id": "fact_other", "content": "x", "createdAt": "2026-08-13T00:00:00Z"}}
        ),
        "utf-8",
    )
    with pytest.raises(CorruptMemoryFile, match="does not match the file name"):
        memory.list_archived()
    data = {
        "archivedAt": "2026-08-13T00:00:00Z",
        "reason": "deleted",
        "fact": {
            "id": fact_id,
            "content": "x",
            "createdAt": "2026-08-13T00:00:00Z",
            "scope": {"userId": "mallory", "agentName": "__default__"},
        },
    }
    entry_file.write_text(json.dumps(data), "utf-8")
    with pytest.raises(CorruptMemoryFile, match="scope mismatch"):
        memory.restore(fact_id)
    entry_file.write_text("[]", "utf-8")
    with pytest.raises(CorruptMemoryFile):
        memory.why(fact_id)


# --- the archive's bounds are part of the commit, ordered by stored time ---------------


def archive_three(memory: Memory, clock: Clock) -> list[str]:
    """Delete three facts at three times: three archive entries, oldest first."""
    ids = []
    for number in range(3):
        clock.now = NOW + timedelta(hours=number)
        fact_id = memory.create_fact(f"Archived fact {number}").fact_id
        assert fact_id is not None
        memory.delete_fact(fact_id)
        ids.append(fact_id)
    return ids


@pytest.mark.parametrize("index", ["kept", "lost"])
def test_the_oldest_by_stored_time_goes_first_whatever_the_file_times(
    tmp_path: Path, index: str
) -> None:
    clock = Clock()
    memory = open_memory(tmp_path, clock, archive_max_entries=3)
    oldest, middle, newest = archive_three(memory, clock)
    # A copy or a checkout gives the files new times: here the oldest entry looks newest.
    for age, fact_id in enumerate((newest, middle, oldest)):
        stamp = 1_700_000_000 + age * 3600
        os.utime(archive_dir(tmp_path) / f"{fact_id}.json", (stamp, stamp))
    if index == "lost":  # as in a store an earlier deermem wrote: rebuilt from the entries
        (archive_dir(tmp_path).parent / "archive-index.json").unlink()
    clock.now = NOW + timedelta(hours=5)
    fourth = memory.create_fact("Archived fact 3").fact_id
    assert fourth is not None
    memory.delete_fact(fourth)
    assert {e.fact_id for e in memory.list_archived()} == {middle, newest, fourth}


def test_an_unreadable_entry_stops_the_commit_before_it_starts(tmp_path: Path) -> None:
    """A corrupt entry the bounds must read: the create raises, and did not commit."""
    clock = Clock()
    memory = open_memory(tmp_path, clock, archive_max_entries=3)
    oldest, _, _ = archive_three(memory, clock)
    (archive_dir(tmp_path).parent / "archive-index.json").unlink()  # its time must be read
    entry = archive_dir(tmp_path) / f"{oldest}.json"
    entry.write_text("{ not json", "utf-8")
    for number in range(10):
        memory.create_fact(f"Fact {number}", confidence=0.9)
    files = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    audit = memory.audit()
    with pytest.raises(CorruptMemoryFile, match=rf"{oldest}\.json"):
        memory.create_fact("One more", confidence=0.95)  # evicts, archives, prunes
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == files
    assert memory.audit() == audit
    memory.purge(oldest)  # an entry too damaged to read can still be purged
    result = memory.create_fact("One more", confidence=0.95)  # and the retry is not a duplicate
    assert result.kept
    assert memory.audit()[-1] == result.receipts[0]


def test_a_corrupt_entry_the_index_knows_does_not_stop_a_commit(tmp_path: Path) -> None:
    clock = Clock()
    memory = open_memory(tmp_path, clock, archive_max_entries=3)
    oldest, middle, newest = archive_three(memory, clock)
    (archive_dir(tmp_path) / f"{newest}.json").write_text("{ not json", "utf-8")
    clock.now = NOW + timedelta(hours=5)
    fourth = memory.create_fact("Archived fact 3").fact_id
    assert fourth is not None
    memory.delete_fact(fourth)  # prunes the oldest, by the index, without reading entries
    assert not (archive_dir(tmp_path) / f"{oldest}.json").exists()
    assert memory.audit()[-1].fact_ids == (fourth,)
    with pytest.raises(CorruptMemoryFile, match=rf"{newest}\.json"):
        memory.list_archived()  # reading it is still an error
    assert {p.stem for p in archive_dir(tmp_path).iterdir()} == {middle, newest, fourth}


# --- no fact lives twice ------------------------------------------------------------


def test_importing_an_export_whose_fact_was_evicted_relearns_it(tmp_path: Path) -> None:
    memory = open_memory(tmp_path, fact_eviction_policy="hybrid-v1")
    memory.import_document(stale_vs_confirmed())
    export = memory.export_document()
    exported = {fact.id for fact in memory.list_facts()}
    before = {e.fact_id for e in memory.list_archived()}
    for number in range(3):  # evict more of the exported facts
        memory.create_fact(f"A confident fact {number}", confidence=0.99)
    evicted = {e.fact_id for e in memory.list_archived()} - before
    assert evicted
    assert evicted <= exported
    deleted = memory.list_facts()[0].id
    memory.delete_fact(deleted)  # room for one of them; deleted facts are archived too
    result = memory.import_document(export)
    # The evicted facts came back from the archive (not as second copies),
    # through the gate: the export is the library again, nothing lives twice.
    assert set(result.kept) == exported
    library = {f.id for f in memory.list_facts()} | set(result.evicted)
    assert exported <= library
    assert not {f.id for f in memory.list_facts()} & {e.fact_id for e in memory.list_archived()}
    relearned = {
        e.fact_id: (e.trigger, e.role, e.reason)
        for e in memory.store.regret_events(memory.scope)
        if e.kind == "relearned"
    }
    assert relearned == {
        **dict.fromkeys(evicted, ("import", "active", "capacity")),
        deleted: ("import", "active", "deleted"),
    }


def test_importing_an_archived_id_with_another_text_is_refused(tmp_path: Path) -> None:
    memory = open_memory(tmp_path)
    memory.import_document(stale_vs_confirmed())  # at the cap: fact_confirm is archived
    export = memory.export_document()
    facts = export["facts"]
    assert isinstance(facts, list)
    archived = memory.get_archived("fact_confirm").fact.to_dict()
    facts.append({**archived, "content": "Something else entirely"})
    files = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    with pytest.raises(ArchivedFactError, match="is in the archive") as refused:
        memory.import_document(export)
    assert refused.value.fact_id == "fact_confirm"
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == files
