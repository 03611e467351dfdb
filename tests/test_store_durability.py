"""The order of a commit's writes and flushes, observed on a real file system.

A crash test (tests/test_reliability.py) kills processes, which cannot lose
what the page cache holds; only the order of fsyncs, renames and removals
decides what survives a power cut. These tests record that order and check
the protocol of :mod:`deermem.store.markdown.journal`: the journal is durable before
any file changes — the facts, the archive, the receipts and ``memory.json``
alike — every one of them is durable before the journal goes, and nothing is
written after the journal's removal, which is the commit.
"""

from __future__ import annotations

import os
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from deermem import Fact, Memory, MemoryConfig
from deermem.cli import main
from deermem.model import Scope
from deermem.store import ChangeSet, EvictionReceipt, FactWrite, MarkdownStore, ReceiptEntry
from deermem.store.markdown import files as atomic
from deermem.store.markdown import journal
from deermem.store.markdown.files import JOURNAL_FILENAME, fact_shard

NOW = datetime(2026, 8, 13, tzinfo=UTC)
CAP = 10
Event = tuple[str, str, str]


class Recorder:
    """Every fsync (when it completed), rename and removal, in order, as path names."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def add(self, kind: str, path: object, target: object = "") -> None:
        self.events.append((kind, str(path), str(target)))

    def index(
        self, kind: str, path: Path, target: Path | None = None, *, last: bool = False
    ) -> int:
        """The position of the first (or last) matching event."""
        found = [
            number
            for number, (k, p, t) in enumerate(self.events)
            if k == kind and p == str(path) and (target is None or t == str(target))
        ]
        assert found, f"no {kind} of {path}"
        return found[-1] if last else found[0]

    def renames_into(self, target: Path) -> list[int]:
        return [n for n, (k, _, t) in enumerate(self.events) if k == "replace" and t == str(target)]

    def fsyncs_of(self, path: Path) -> list[int]:
        return [n for n, (k, p, _) in enumerate(self.events) if k == "fsync" and p == str(path)]


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    record = Recorder()
    real_fsync, real_replace, real_unlink = os.fsync, os.replace, os.unlink

    def fsync(fd: int) -> None:
        path = os.readlink(f"/proc/self/fd/{fd}")  # noqa: PTH115 - the descriptor's file
        real_fsync(fd)
        record.add("fsync", path)

    def replace(source: str | Path, target: str | Path) -> None:
        real_replace(source, target)
        record.add("replace", source, target)

    def unlink(path: str | Path, **kwargs: object) -> None:
        real_unlink(path, **kwargs)  # type: ignore[arg-type]
        record.add("unlink", path)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(os, "unlink", unlink)
    return record


def full_memory(root: Path) -> Memory:
    memory = Memory.open(
        root, MemoryConfig(max_facts=CAP), user="alice", agent="coder", clock=lambda: NOW
    )
    for number in range(CAP):
        memory.create_fact(f"Fact number {number}.", confidence=0.5 + number / 100)
    return memory


def test_a_commit_flushes_journal_then_every_file_then_removes_the_journal(
    tmp_path: Path, recorder: Recorder
) -> None:
    memory = full_memory(tmp_path)
    recorder.events.clear()
    result = memory.create_fact("One more fact.", confidence=0.95)  # evicts: archive + receipt
    assert result.evicted
    user_dir = tmp_path / "users" / "alice"
    metadata = user_dir / "agents" / "coder" / ".metadata"
    journal_file = user_dir / JOURNAL_FILENAME
    audit = metadata / "eviction-audit.json"
    index = metadata / "archive-index.json"
    archived = metadata / "archive" / f"{result.evicted[0]}.json"
    manifest = user_dir / "memory.json"

    [journal_in] = recorder.renames_into(journal_file)
    journal_temporary = Path(recorder.events[journal_in][1])
    assert recorder.index("fsync", journal_temporary) < journal_in  # its content first
    journal_durable = recorder.index("fsync", user_dir)  # then its directory entry
    assert journal_in < journal_durable
    evicted = user_dir / "agents" / "coder" / "facts" / fact_shard(result.evicted[0])
    data_changes = [recorder.renames_into(p)[0] for p in (manifest, archived, audit, index)]
    data_changes.append(recorder.index("unlink", evicted / f"{result.evicted[0]}.md"))
    assert all(journal_durable < change for change in data_changes)
    assert max(data_changes) == recorder.renames_into(manifest)[0]  # memory.json last

    removal = recorder.index("unlink", journal_file)
    for path in (manifest, archived, audit, index, archived.parent, metadata, evicted, user_dir):
        assert any(min(data_changes) < n < removal for n in recorder.fsyncs_of(path)), path
    removal_durable = min(n for n in recorder.fsyncs_of(user_dir) if n > removal)
    assert removal_durable == len(recorder.events) - 1  # the commit's last step: nothing after
    assert memory.audit()[-1].fact_ids == result.evicted
    assert memory.audit()[-1] == result.receipts[0]


def test_a_crash_before_the_journal_is_removed_undoes_receipts_and_archive_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = full_memory(tmp_path)
    memory.create_fact("An evicting fact.", confidence=0.9)  # a receipt and an archive entry
    before = memory.list_facts()
    audit_before = memory.audit()
    archive_before = memory.list_archived()
    metadata = tmp_path / "users" / "alice" / "agents" / "coder" / ".metadata"
    bookkeeping = {p: p.read_bytes() for p in metadata.glob("*.json")}
    assert set(bookkeeping) == {metadata / "eviction-audit.json", metadata / "archive-index.json"}

    class Crash(BaseException):
        pass

    def crash(path: Path) -> bool:
        raise Crash

    with monkeypatch.context() as patch:
        patch.setattr(journal, "remove_durably", crash)
        patch.setattr(journal, "_roll_back_now", lambda user: None)  # a crash undoes nothing
        with pytest.raises(Crash):
            memory.create_fact("One more fact.", confidence=0.95)
    assert (tmp_path / "users" / "alice" / JOURNAL_FILENAME).exists()
    assert (metadata / "eviction-audit.json").read_bytes() != bookkeeping[
        metadata / "eviction-audit.json"
    ]
    reopened = Memory.open(tmp_path, MemoryConfig(max_facts=CAP), user="alice", agent="coder")
    assert reopened.list_facts() == before  # rolled back ...
    assert reopened.audit() == audit_before  # ... with its receipt
    assert reopened.list_archived() == archive_before  # ... and its archive entry
    assert {p: p.read_bytes() for p in metadata.glob("*.json")} == bookkeeping
    assert not [p for p in tmp_path.rglob("*") if atomic.is_temporary(p.name)]


def test_a_commit_that_changes_no_file_still_writes_its_receipt_durably(
    tmp_path: Path, recorder: Recorder
) -> None:
    store = MarkdownStore(tmp_path)
    scope = Scope.of("alice", "coder")
    receipt = EvictionReceipt(
        receipt_id="rcpt_0123456789abcdef",
        occurred_at="2026-08-13T00:00:00Z",
        reason="deleted",
        trigger="manual",
        policy_version="confidence",
        max_facts=CAP,
        occupancy=None,
        reserved_correction_slots=0,
        evicted=(ReceiptEntry(fact_id="fact_gone", category="context"),),
    )
    # A directory's first commit also writes its owner record (and so is journaled).
    store.commit(scope, ChangeSet(now=NOW, summaries={("user", "workContext"): "Works."}))
    result = store.commit(scope, ChangeSet(now=NOW, receipts=(receipt,)))
    assert not result.changed
    assert store.audit(scope) == (receipt,)
    audit = tmp_path / "users" / "alice" / "agents" / "coder" / ".metadata" / "eviction-audit.json"
    [audit_in] = recorder.renames_into(audit)
    assert recorder.index("fsync", Path(recorder.events[audit_in][1])) < audit_in
    assert recorder.fsyncs_of(audit.parent)[-1] > audit_in


def test_a_commit_flushes_the_files_of_its_second_step_together(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Issue 23: flushes one after another cost one device flush each; the files
    # and directories of step 2 are independent, so they are flushed at once.
    memory = full_memory(tmp_path)
    real_fsync = os.fsync
    lock = threading.Lock()
    in_flight = most = 0
    # Each flush holds its place until a second one arrives (or a while passes):
    # flushed one after another, no two are ever in flight together.
    arrived = threading.Event()

    def fsync(fd: int) -> None:
        nonlocal in_flight, most
        with lock:
            in_flight += 1
            most = max(most, in_flight)
            if in_flight > 1:
                arrived.set()
        try:
            arrived.wait(0.5)
            real_fsync(fd)
        finally:
            with lock:
                in_flight -= 1

    monkeypatch.setattr(os, "fsync", fsync)
    memory.create_fact("One more fact.", confidence=0.95)
    assert most > 1


def test_flushing_together_raises_the_first_failure_after_all_finished(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = [tmp_path / f"f{number}" for number in range(5)]
    for path in paths:
        path.write_bytes(b"x")
    missing = tmp_path / "missing"
    flushed: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        real_fsync(fd)
        flushed.append(os.readlink(f"/proc/self/fd/{fd}"))  # noqa: PTH115 - the descriptor's file

    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(FileNotFoundError, match="missing"):
        atomic.flush_together([paths[0], missing, *paths[1:]])
    assert sorted(flushed) == sorted(map(str, paths))


def test_a_commit_creates_no_directory_before_its_journal_is_durable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A new directory made before the journal is durable would outlive a crash
    # (an agent directory without its owner record is a problem every listing
    # reports), so none is made then.
    store = MarkdownStore(tmp_path)
    store.commit(
        Scope.of("alice", "coder"),
        ChangeSet(now=NOW, summaries={("user", "workContext"): "Works."}),
    )
    before = sorted(tmp_path.rglob("*"))

    class Crash(BaseException):
        pass

    def journal_fails(path: Path, data: bytes, *, mode: int = atomic.FILE_MODE) -> None:
        raise Crash

    monkeypatch.setattr(journal, "atomic_write", journal_fails)
    long_agent = Scope.of("alice", "a" * 300)  # a directory of its own, with an owner record
    new = Fact.from_dict(
        {
            "id": "fact_0001",
            "content": "A fact.",
            "category": "context",
            "confidence": 0.9,
            "createdAt": NOW,
        }
    )
    changes = ChangeSet(now=NOW, writes=(FactWrite(new, create=True),))
    with pytest.raises(Crash):
        store.commit(long_agent, changes)
    assert sorted(tmp_path.rglob("*")) == before


_DIES_MID_COPY = """
import os, sys
from deermem.store.markdown import journal
replace = journal.replace_files

def dying(changes, *, journaled=False, **options):
    if journaled:  # the user's copy: all but its last file replaced, then the process dies
        changes = list(changes)
        replace(changes[:-1], journaled=True)
        os._exit(9)
    return replace(changes, journaled=journaled, **options)

journal.replace_files = dying
from deermem.cli import main
main(sys.argv[1:])
"""


@pytest.mark.parametrize("how", ["migrate", "import"])
def test_a_copy_of_a_user_killed_part_way_runs_again(tmp_path: Path, how: str) -> None:
    # Rolled back, the copy leaves no file but the directories it made: "the destination
    # already holds this user" would refuse the copy for ever.
    import subprocess
    import sys

    source, destination = tmp_path / "source", tmp_path / "destination"
    memory = Memory.open(source, MemoryConfig(search_mode="keyword"), user="alice")
    for n in range(3):
        memory.create_fact(f"Fact number {n}")
    export = tmp_path / "alice.json"
    if how == "migrate":
        command = ["migrate", "--from", str(source), "--to", str(destination)]
    else:
        assert main(["--root", str(source), "users", "export", "alice", str(export)]) == 0
        Memory.open(destination, MemoryConfig(), user="bob").create_fact("Bob's")
        command = ["--root", str(destination), "import", str(export)]
    killed = subprocess.run([sys.executable, "-c", _DIES_MID_COPY, *command], check=False)
    assert killed.returncode == 9
    assert main(command) == 0  # runs again, and copies the user whole
    copied = Memory.open(destination, MemoryConfig(search_mode="keyword"), user="alice")
    assert sorted(f.content for f in copied.list_facts()) == [f"Fact number {n}" for n in range(3)]


_DIES_WITH_A_TEMPORARY_WRITTEN = """
import os, signal, sys
from pathlib import Path
from deermem.store.markdown import files

write = files.write_temporary

def dying(path, data, **options):
    temporary = write(path, data, **options)
    if sys.argv[1] in (path.name, path.parent.name):  # written, not renamed: die (SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)
    return temporary

files.write_temporary = dying
from deermem.cli import main
main(sys.argv[2:])
"""


def kill_with_a_temporary_of(name: str, *command: str) -> None:
    """Run a command that dies right after writing the temporary file of ``name``
    (a file's name, or its directory's)."""
    import subprocess
    import sys

    args = [sys.executable, "-c", _DIES_WITH_A_TEMPORARY_WRITTEN, name, *command]
    assert subprocess.run(args, check=False, capture_output=True).returncode == -9


def files_holding(root: Path, text: str) -> list[str]:
    return sorted(
        path.relative_to(root).as_posix()
        for path in root.rglob("*")
        if path.is_file() and text.encode() in path.read_bytes()
    )


@pytest.mark.parametrize(
    ("user", "agent"),
    [("carol@example.com", "writer"), ("alice", "long-" + "a" * 300)],
    ids=["a new user", "a new long agent name"],
)
def test_a_listing_before_any_load_rolls_back_a_first_commit_killed_part_way(
    tmp_path: Path, user: str, agent: str
) -> None:
    # The owner records of a new user or agent are written inside its first commit: a
    # listing that trusted them before the commit was rolled back listed a scope that,
    # once loaded, was empty (the commit never happened).
    root = tmp_path / "store"
    alice = Memory.open(root, MemoryConfig(search_mode="keyword"), user="alice")
    alice.create_fact("Alice's fact.")
    add = ["--root", str(root), "--user", user, "--agent", agent, "facts", "add", "Hi."]
    kill_with_a_temporary_of("memory.json", *add)  # the journal is there, the commit is not
    reader = Memory.open(root, MemoryConfig(search_mode="keyword"), user="alice")
    listed = [(s.scope.user_id, s.scope.agent, s.facts) for s in reader.scopes()]
    assert listed == [("alice", "__default__", 1)]
    assert reader.store_problems() == ()


def test_a_purge_killed_while_its_journal_is_written_leaves_no_copy_of_the_text(
    tmp_path: Path,
) -> None:
    # The journal's temporary file holds the prior content of every file of the commit. A
    # kill before its rename left no journal, so no recovery ran, and the retried purge
    # kept the words in `..memory.journal.json.<random>.tmp` for good.
    memory = Memory.open(tmp_path, MemoryConfig(search_mode="keyword"), user="alice")
    gone = memory.create_fact("My diagnosis is xyzzyplugh syndrome.").fact_id
    assert gone is not None
    memory.create_fact("I like tea.")
    memory.delete_fact(gone)
    purge = ["--root", str(tmp_path), "--user", "alice", "archive", "purge", gone, "--yes"]
    kill_with_a_temporary_of(JOURNAL_FILENAME, *purge)
    [left] = [p for p in (tmp_path / "users" / "alice").iterdir() if atomic.is_temporary(p.name)]
    assert b"xyzzyplugh" in left.read_bytes()
    assert main(purge) == 0
    assert files_holding(tmp_path, "xyzzyplugh") == []
    assert memory.list_archived() == ()


def test_a_write_removes_only_the_temporary_files_its_lock_guards(tmp_path: Path) -> None:
    # In the single-user layout the user directory is the root, where another process
    # writes the store's settings without the user's lock: its temporary file stays.
    memory = Memory.open(tmp_path, MemoryConfig(search_mode="keyword"))
    memory.create_fact("A fact.")
    settings = tmp_path / ".deermem.yaml.0123456789abcdef.tmp"
    settings.write_text("fact_eviction_policy: hybrid-v1\n", "utf-8")
    killed = [
        tmp_path / f".{name}.0123456789abcdef.tmp" for name in (JOURNAL_FILENAME, "memory.json")
    ]
    for path in killed:
        path.write_text("what a killed writer left", "utf-8")
    memory.list_facts()  # a read removes nothing
    assert all(path.exists() for path in killed)
    memory.create_fact("Another fact.")
    assert not any(path.exists() for path in killed)
    assert settings.exists()


@pytest.mark.parametrize("then", ["erase again", "open the store"])
def test_an_erase_killed_while_its_intent_is_written_leaves_no_trace_of_the_user(
    tmp_path: Path, then: str
) -> None:
    # The intent's temporary file names the user's directory; `.erasing/` was cleaned of
    # intents (`*.json`) only, so the user's id stayed on disk, erased again or not.
    user = "zelda-unique-id"
    Memory.open(tmp_path, user=user).create_fact("Hello.")
    erase = ["--root", str(tmp_path), "users", "erase", user, "--yes"]
    kill_with_a_temporary_of(".erasing", *erase)  # an intent: .erasing/<token>.json
    assert files_holding(tmp_path / ".erasing", user)
    if then == "erase again":
        assert main(erase) == 0
        assert files_holding(tmp_path, user) == []
    else:
        Memory.open_unscoped(tmp_path)
        assert files_holding(tmp_path / ".erasing", user) == []
        assert Memory.open(tmp_path, user=user).list_facts()[0].content == "Hello."


@pytest.mark.parametrize(
    ("user", "agent"),
    [("carol@example.com", "writer"), ("alice", "long-" + "a" * 300)],
    ids=["a new user", "a new long agent name"],
)
def test_a_first_commit_killed_part_way_leaves_nothing_to_list(
    tmp_path: Path, user: str, agent: str
) -> None:
    # Recovery removes the commit's files (its owner records among them) but not the
    # directories it made: a user directory holding only the lock and empty directories
    # was "memory whose owner cannot be told", and `scopes` and `migrate` stopped on it.
    root = tmp_path / "store"
    alice = Memory.open(root, MemoryConfig(search_mode="keyword"), user="alice")
    alice.create_fact("Alice's fact.")
    add = ["--root", str(root), "--user", user, "--agent", agent, "facts", "add", "Hi."]
    kill_with_a_temporary_of("memory.json", *add)  # memory.json is the commit's last file
    assert main(["--root", str(root), "scopes"]) == 0
    reader = Memory.open(root, MemoryConfig(search_mode="keyword"), user="alice")
    assert [(s.scope.user_id, s.scope.agent) for s in reader.scopes()] == [("alice", "__default__")]
    assert reader.store_problems() == ()
    assert main(["migrate", "--from", str(root), "--to", str(tmp_path / "copy")]) == 0
