"""MarkdownStore: layout, files, cache, journal recovery, locks, corruption.

The Store protocol itself (commits, revisions, versions, isolation) runs on both stores:
tests/store_contract/test_store.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from deermem import CorruptMemoryFile, Fact, Memory, MemoryConfig, StoreLockTimeout
from deermem.errors import FactRevisionConflict, ManifestRevisionConflict
from deermem.model import FactScope, Scope
from deermem.store import ChangeSet, FactDelete, FactWrite, MarkdownStore, Store
from deermem.store.markdown import files as atomic
from deermem.store.markdown import journal, locks
from deermem.store.markdown.files import decode_fact, fact_shard, read_if_exists
from deermem.store.records import SummaryDocument, decode_summaries

NOW = datetime(2026, 8, 13, tzinfo=UTC)
ALICE = Scope.of("alice", "coder")


def fact(fact_id: str, content: str | None = None, **fields: object) -> Fact:
    data: dict[str, object] = {
        "id": fact_id,
        "content": content or f"Fact {fact_id}.",
        "createdAt": "2026-08-01T00:00:00Z",
        "source": "manual",
    }
    data.update(fields)
    return Fact.from_dict(data)


def create(store: Store, scope: Scope, *facts: Fact, now: datetime = NOW) -> None:
    store.commit(scope, ChangeSet(now=now, writes=tuple(FactWrite(f, create=True) for f in facts)))


def files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != ".memory.lock"
    }


@pytest.fixture
def store(tmp_path: Path) -> MarkdownStore:
    return MarkdownStore(tmp_path)


# --- layout and format ------------------------------------------------------------------


def test_markdown_store_implements_the_store_protocol(store: MarkdownStore) -> None:
    implementation: Store = store  # checked by mypy
    assert isinstance(implementation, MarkdownStore)


def test_a_missing_scope_loads_empty_and_creates_nothing(store: MarkdownStore) -> None:
    snapshot = store.load(ALICE)
    assert snapshot.facts == ()
    assert snapshot.summaries.version == "1.0"
    assert snapshot.revision == 0
    assert set(snapshot.summaries.user) == {"workContext", "personalContext", "topOfMind"}
    assert set(snapshot.summaries.history) == {
        "recentMonths",
        "earlierContext",
        "longTermBackground",
    }
    assert not any(store.root.iterdir())


def test_agents_share_one_user_document_and_keep_their_own_fact_files(
    store: MarkdownStore,
) -> None:
    create(store, ALICE, fact("fact_a"))
    create(store, Scope.of("alice", "writer"), fact("fact_b"))
    user = store.root / "users" / "alice"
    document = json.loads((user / "memory.json").read_text("utf-8"))
    assert list(document) == ["version", "revision", "lastUpdated", "user", "history"]
    assert document["version"] == "2.0"
    assert document["revision"] == 2
    assert [p.name for p in (user / "agents/coder/facts").rglob("*.md")] == ["fact_a.md"]
    assert [p.name for p in (user / "agents/writer/facts").rglob("*.md")] == ["fact_b.md"]
    assert not list(user.rglob("agents/*/*.json"))


def test_a_thread_id_is_only_a_source_never_a_path(store: MarkdownStore) -> None:
    create(store, ALICE, fact("fact_t", source="thread-xyz"))
    assert not [p for p in store.root.rglob("*") if "thread-xyz" in p.name]
    assert store.load(ALICE).facts[0].source.threadId == "thread-xyz"


def test_fact_files_are_sharded_by_the_sha256_of_their_id(store: MarkdownStore) -> None:
    ids = [f"fact_{i:08x}" for i in range(20)]
    create(store, ALICE, *(fact(i) for i in ids))
    shards = set()
    for fact_id in ids:
        path = store.root / "users/alice/agents/coder/facts" / fact_shard(fact_id)
        assert (path / f"{fact_id}.md").is_file()
        shards.add(fact_shard(fact_id))
    assert len(shards) > 5
    assert fact_shard("fact_00000000") == hashlib.sha256(b"fact_00000000").hexdigest()[:2]


def test_custom_manifest_filename(tmp_path: Path) -> None:
    store = MarkdownStore(tmp_path, manifest_filename="index.json")
    create(store, ALICE, fact("fact_a"))
    assert (tmp_path / "users/alice/index.json").is_file()
    assert not (tmp_path / "users/alice/memory.json").exists()


# --- commits and revisions --------------------------------------------------------------


def test_a_commit_writes_and_reads_only_the_facts_it_touches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    create(MarkdownStore(tmp_path), ALICE, *(fact(f"fact_{i:04d}") for i in range(50)))
    written: list[Path] = []
    decoded: list[str] = []
    real_replace = os.replace
    original_decode = decode_fact

    def record_write(source: str | Path, target: str | Path) -> None:
        written.append(Path(target))
        real_replace(source, target)

    def record_decode(data: bytes, path: Path, scope: Scope, expected_id: str) -> Fact:
        decoded.append(expected_id)
        return original_decode(data, path, scope, expected_id)

    monkeypatch.setattr(os, "replace", record_write)
    monkeypatch.setattr("deermem.store.markdown.store.decode_fact", record_decode)
    fresh = MarkdownStore(tmp_path)  # cold cache
    result = fresh.commit(
        ALICE,
        ChangeSet(
            now=NOW,
            writes=(FactWrite(fact("fact_new"), create=True),),
            deletes=(FactDelete("fact_0007"),),
        ),
    )
    assert sorted(p.name for p in written) == [".memory.journal.json", "fact_new.md", "memory.json"]
    assert decoded == ["fact_0007"]  # read to check it exists, nothing else
    assert [f.id for f in result.written] == ["fact_new"]
    assert len(fresh.load(ALICE).facts) == 50  # the untouched siblings are all there


def test_a_commit_into_a_cached_scope_builds_decodes_and_reads_nothing_it_holds(
    store: MarkdownStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 23: the new fact is checked once, when it is built; the store sets its scope
    without building it again, and ``memory.json`` is read once per commit and decoded
    only when its bytes are not those this store last read or wrote — another
    writer's are."""
    create(store, ALICE, fact("fact_a"))
    store.load(ALICE)
    new = fact("fact_new", topics=["tools"], note="kept")
    expected = new.replace(scope=FactScope("alice", "coder"))
    built: list[object] = []
    decoded: list[object] = []
    real_build = Fact._build.__func__  # type: ignore[attr-defined]
    real_decode = decode_summaries

    def counting_build(cls: type[Fact], data: object, now: object) -> Fact:
        built.append(data)
        return real_build(cls, data, now)  # type: ignore[no-any-return]

    def counting_decode(data: bytes, path: Path) -> SummaryDocument:
        decoded.append(path)
        return real_decode(data, path)

    journal_read: list[Path] = []
    real_read = read_if_exists

    def recording_read(path: Path) -> bytes | None:
        journal_read.append(path)
        return real_read(path)

    monkeypatch.setattr(journal, "read_if_exists", recording_read)
    monkeypatch.setattr(Fact, "_build", classmethod(counting_build))
    monkeypatch.setattr("deermem.store.markdown.store.decode_summaries", counting_decode)
    result = store.commit(ALICE, ChangeSet(now=NOW, writes=(FactWrite(new, create=True),)))
    assert (built, decoded) == ([], [])
    # The journal takes memory.json's prior content from the read the commit made.
    assert "memory.json" not in [path.name for path in journal_read]
    assert "fact_new.md" in [path.name for path in journal_read]
    assert result.written == (expected,)
    assert list(result.written[0].to_dict().items()) == list(expected.to_dict().items())
    assert store.load(ALICE).by_id["fact_new"] is result.written[0]
    assert (built, decoded) == ([], [])
    # Another writer's memory.json is read afresh, once.
    manifest = store.root / "users/alice/memory.json"
    manifest.write_bytes(manifest.read_bytes().replace(b'"revision": 2', b'"revision": 5'))
    assert store.load(ALICE).revision == 5
    assert store.load(ALICE).revision == 5
    assert decoded == [manifest]


def test_a_deleted_fact_leaves_no_file(store: MarkdownStore) -> None:
    create(store, ALICE, fact("fact_a"))
    store.commit(ALICE, ChangeSet(now=NOW, deletes=(FactDelete("fact_a", 1),)))
    assert not list(store.root.rglob("fact_a.md"))


def test_a_refused_commit_writes_no_file(store: MarkdownStore) -> None:
    create(store, ALICE, fact("fact_a"))
    before = files(store.root)
    with pytest.raises(FactRevisionConflict):
        store.commit(ALICE, ChangeSet(now=NOW, deletes=(FactDelete("fact_a", 7),)))
    with pytest.raises(ManifestRevisionConflict):
        store.commit(
            ALICE, ChangeSet(now=NOW, summaries={("user", "topOfMind"): "x"}, expected_revision=0)
        )
    assert files(store.root) == before


# --- the read cache ---------------------------------------------------------------------


def test_a_cached_load_lists_no_fact_files(
    store: MarkdownStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    create(store, ALICE, fact("fact_a"), fact("fact_b"))
    store.load(ALICE)
    calls: list[object] = []
    real = os.scandir

    def counting(path: object) -> Iterator[os.DirEntry[str]]:
        calls.append(path)
        return real(path)  # type: ignore[call-overload,no-any-return]

    monkeypatch.setattr(os, "scandir", counting)
    for _ in range(3):
        assert len(store.load(ALICE).facts) == 2
    assert calls == []


def test_the_revision_invalidates_the_cache_when_mtime_and_size_collide(
    store: MarkdownStore,
) -> None:
    create(store, ALICE, fact("fact_a"))
    create(store, ALICE, fact("fact_b"))
    assert len(store.load(ALICE).facts) == 2
    manifest = store.root / "users/alice/memory.json"
    status = manifest.stat()
    # Another writer (by hand) removes a fact and rewrites the document in
    # place: same inode, same size, same mtime — only the revision differs.
    next(store.root.rglob("fact_b.md")).unlink()
    text = manifest.read_text("utf-8").replace('"revision": 2', '"revision": 3')
    with manifest.open("r+", encoding="utf-8") as handle:
        handle.write(text)
    os.utime(manifest, ns=(status.st_atime_ns, status.st_mtime_ns))
    assert manifest.stat().st_size == status.st_size
    assert [f.id for f in store.load(ALICE).facts] == ["fact_a"]


def test_reload_sees_files_edited_by_hand(store: MarkdownStore) -> None:
    create(store, ALICE, fact("fact_a", "Old text."))
    store.load(ALICE)
    path = next(store.root.rglob("fact_a.md"))
    path.write_text(path.read_text("utf-8").replace("Old text.", "New text."), "utf-8")
    assert store.load(ALICE).facts[0].content == "Old text."  # cached: edits need reload
    assert store.reload(ALICE).facts[0].content == "New text."


def test_a_cold_load_reuses_facts_decoded_from_the_same_bytes(tmp_path: Path) -> None:
    # Issue 23: a new store (a new command, another replica) does not parse again
    # the files this process has decoded already; the facts are frozen, so shared.
    create(MarkdownStore(tmp_path), ALICE, fact("fact_a"), fact("fact_b"))
    first = MarkdownStore(tmp_path).load(ALICE).facts
    second = MarkdownStore(tmp_path).load(ALICE).facts
    assert first == second
    assert all(a is b for a, b in zip(first, second, strict=True))


def test_a_cold_load_sees_a_same_size_same_stamp_edit(tmp_path: Path) -> None:
    # The decoded facts are keyed by the file's bytes, not its stamp: an edit
    # that keeps the inode, the size and the modification time is still seen.
    create(MarkdownStore(tmp_path), ALICE, fact("fact_a", "Old text."))
    assert MarkdownStore(tmp_path).load(ALICE).facts[0].content == "Old text."
    path = next(tmp_path.rglob("fact_a.md"))
    status = path.stat()
    with path.open("r+b") as handle:
        handle.write(path.read_bytes().replace(b"Old text.", b"New text."))
    os.utime(path, ns=(status.st_atime_ns, status.st_mtime_ns))
    after = path.stat()
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (
        status.st_ino,
        status.st_size,
        status.st_mtime_ns,
    )
    assert MarkdownStore(tmp_path).load(ALICE).facts[0].content == "New text."


def test_a_cold_load_refuses_a_file_broken_after_it_was_decoded(tmp_path: Path) -> None:
    # Errors are not cached, and a decoded fact never stands in for broken bytes.
    create(MarkdownStore(tmp_path), ALICE, fact("fact_a"))
    MarkdownStore(tmp_path).load(ALICE)
    path = next(tmp_path.rglob("fact_a.md"))
    path.write_bytes(path.read_bytes().replace(b"id: fact_a", b"id: [fact_a"))
    for _ in range(2):
        with pytest.raises(CorruptMemoryFile, match="not valid YAML"):
            MarkdownStore(tmp_path).load(ALICE)


# --- corruption is an error, and nothing is overwritten -----------------------------------


def test_a_corrupt_document_is_an_error_and_stays_byte_identical(store: MarkdownStore) -> None:
    create(store, ALICE, fact("fact_a"))
    manifest = store.root / "users/alice/memory.json"
    manifest.write_bytes(b"{broken")
    fresh = MarkdownStore(store.root)
    with pytest.raises(CorruptMemoryFile, match="not valid JSON") as caught:
        fresh.load(ALICE)
    assert caught.value.path == str(manifest)
    with pytest.raises(CorruptMemoryFile):
        create(fresh, ALICE, fact("fact_b"))
    assert manifest.read_bytes() == b"{broken"
    assert not list(store.root.rglob("fact_b.md"))


def test_a_document_s_bad_revision_is_described_not_quoted(store: MarkdownStore) -> None:
    # The error (which a server logs) quoted the text found where a number belongs.
    create(store, ALICE, fact("fact_a"))
    manifest = store.root / "users/alice/memory.json"
    document = json.loads(manifest.read_text("utf-8"))
    document["revision"] = "my password is hunter2hunter2"
    manifest.write_text(json.dumps(document), "utf-8")
    with pytest.raises(CorruptMemoryFile) as caught:
        MarkdownStore(store.root).load(ALICE)
    assert caught.value.problem == (
        "field 'revision' has a text of 29 characters; "
        "expected a whole number from 0 to 9223372036854775807"
    )


def test_a_corrupt_fact_fails_the_whole_scope_and_is_not_overwritten(
    store: MarkdownStore,
) -> None:
    create(store, ALICE, fact("fact_a"), fact("fact_b"))
    path = next(store.root.rglob("fact_a.md"))
    path.write_bytes(b"---\nid: fact_a\nconfidence: [\n---\n\nbroken\n")
    fresh = MarkdownStore(store.root)
    with pytest.raises(CorruptMemoryFile, match=r"fact_a\.md"):
        fresh.load(ALICE)
    from deermem import Memory, MemoryConfig

    memory = Memory(fresh, MemoryConfig(), ALICE, clock=lambda: NOW)
    with pytest.raises(CorruptMemoryFile):
        memory.create_fact("Something new")
    assert path.read_bytes() == b"---\nid: fact_a\nconfidence: [\n---\n\nbroken\n"


@pytest.mark.parametrize("name", ["facts/??/fact_a.md", "memory.json"])
def test_a_file_replaced_by_a_directory_is_corruption_naming_it(
    store: MarkdownStore, name: str
) -> None:
    # os.read answers a directory with "[Errno 21] Is a directory" and no file name.
    create(store, ALICE, fact("fact_a"))
    (path,) = store.root.glob(f"users/alice/{'agents/coder/' if '/' in name else ''}{name}")
    path.unlink()
    path.mkdir()
    with pytest.raises(CorruptMemoryFile) as caught:
        MarkdownStore(store.root).load(ALICE)
    assert caught.value.path == str(path)
    assert "is a directory" in str(caught.value)
    assert path.is_dir()


def test_a_read_error_without_a_file_name_gets_the_files_name(
    store: MarkdownStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    create(store, ALICE, fact("fact_a"))
    (path,) = store.root.rglob("fact_a.md")

    def failing(fd: int, size: int) -> bytes:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "read", failing)
    with pytest.raises(OSError, match="Input/output error") as caught:
        atomic.read_file(path)
    assert caught.value.filename == str(path)


def test_a_fact_file_saved_with_crlf_line_ends_is_read_and_rewritten_with_lf(
    tmp_path: Path,
) -> None:
    # A hand edit on Windows: the original reads it (Python's text mode), so does
    # deermem; the file stays as it is until a commit changes the fact.
    memory = Memory.open(tmp_path, MemoryConfig(), user="alice", agent="coder", clock=lambda: NOW)
    fact_id = memory.create_fact("Alpha likes apples.\nAnd pears.", confidence=0.8).fact_id
    other_id = memory.create_fact("Bravo.", confidence=0.8).fact_id
    assert fact_id is not None
    assert other_id is not None
    (path,) = tmp_path.rglob(f"{fact_id}.md")
    written = path.read_bytes()
    crlf = written.replace(b"\n", b"\r\n")
    path.write_bytes(crlf)
    fresh = Memory.open(tmp_path, MemoryConfig(), user="alice", agent="coder", clock=lambda: NOW)
    assert fresh.snapshot().get(fact_id) == memory.snapshot().get(fact_id)
    fresh.update_fact(other_id, confidence=0.5)
    assert path.read_bytes() == crlf  # a commit of another fact leaves it alone
    fresh.update_fact(fact_id, confidence=0.8)  # no change: nothing written
    assert path.read_bytes() == crlf
    changed = fresh.update_fact(fact_id, confidence=0.9)
    assert path.read_bytes() == atomic.encode_fact(changed, Scope.of("alice", "coder"))
    assert path.read_bytes() == written.replace(b"confidence: 0.8", b"confidence: 0.9").replace(
        b"revision: 1", b"revision: 2"
    )


@pytest.mark.parametrize(
    ("relative", "problem"),
    [
        ("facts/zz/fact_a.md", "belongs in shard directory"),
        ("facts/00/bad.name.md", "not a valid fact id"),
        ("facts/fact_a.md", "outside its shard directory"),
        ("memory.json", "version-1 layout"),
    ],
)
def test_files_in_the_wrong_place_are_refused(
    store: MarkdownStore, relative: str, problem: str
) -> None:
    create(store, ALICE, fact("fact_a"))
    source = next(store.root.rglob("fact_a.md")).read_bytes()
    target = store.root / "users/alice/agents/coder" / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(source if relative.endswith(".md") else b'{"facts": []}')
    with pytest.raises(CorruptMemoryFile, match=problem):
        MarkdownStore(store.root).load(ALICE)


def test_temporary_files_of_an_interrupted_writer_are_not_facts(store: MarkdownStore) -> None:
    create(store, ALICE, fact("fact_a"))
    shard = next(store.root.rglob("fact_a.md")).parent
    (shard / ".fact_b.md.0123abcd.tmp").write_text("half a fi", "utf-8")
    assert [f.id for f in MarkdownStore(store.root).load(ALICE).facts] == ["fact_a"]


def test_a_version_one_document_with_facts_is_refused(store: MarkdownStore) -> None:
    user = store.root / "users/alice"
    user.mkdir(parents=True)
    (user / "memory.json").write_text('{"version": "1.0", "facts": [{"id": "f"}]}', "utf-8")
    with pytest.raises(CorruptMemoryFile, match="version-1 document"):
        store.load(ALICE)


# --- journal and recovery ----------------------------------------------------------------


def crash_before_journal_removal(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the next commit stop where a crash would: files written, journal still there."""

    class Crash(BaseException):
        pass

    def crash(path: Path) -> bool:
        raise Crash

    monkeypatch.setattr(journal, "remove_durably", crash)
    monkeypatch.setattr(journal, "_roll_back_now", lambda user: None)  # a crash undoes nothing


def test_an_interrupted_commit_is_rolled_back_at_the_next_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = MarkdownStore(tmp_path)
    create(store, ALICE, fact("fact_a", "Before."))
    before = files(tmp_path)
    a = store.load(ALICE).get("fact_a")
    assert a is not None
    with monkeypatch.context() as patch:
        crash_before_journal_removal(patch)
        with pytest.raises(BaseException):  # noqa: B017, PT011 - the simulated crash
            store.commit(
                ALICE,
                ChangeSet(
                    now=NOW,
                    writes=(
                        FactWrite(a.replace(content="After."), create=False),
                        FactWrite(fact("fact_new"), create=True),
                    ),
                    summaries={("user", "topOfMind"): "changed"},
                ),
            )
    journal_file = tmp_path / "users/alice/.memory.journal.json"
    prepared = json.loads(journal_file.read_text("utf-8"))
    assert prepared["state"] == "deermem-prepared"
    assert prepared["agentName"] == "coder"
    assert (prepared["expectedRevision"], prepared["nextRevision"]) == (1, 2)
    assert sorted(prepared["factIds"]) == ["fact_a", "fact_new"]
    assert "fact_a" in prepared["oldEntries"]
    assert next(tmp_path.rglob("fact_new.md")).exists()  # the crash left the new file behind
    snapshot = MarkdownStore(tmp_path).load(ALICE)
    assert [(f.id, f.content) for f in snapshot.facts] == [("fact_a", "Before.")]
    assert not journal_file.exists()
    assert files(tmp_path) == before


@pytest.mark.parametrize("failing", ["write", "flush", "directory"])
def test_a_failed_commit_rolls_back_at_once(
    store: MarkdownStore, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    """Writing the second file fails, or flushing a file's content does (before anything is
    in place), or flushing a directory does (after the files are in place)."""
    store.commit(ALICE, ChangeSet(now=NOW, summaries={("user", "workContext"): "Old"}))
    store.load(ALICE)
    real_write, real_fsync = atomic.write_temporary, os.fsync
    failed: list[Path] = []

    def disk_full(path: Path) -> None:
        if not failed:  # once: the rollback's own writes work
            failed.append(path)
            raise OSError(28, "No space left on device")

    def write_temporary(
        path: Path, data: bytes, *, flush: bool = True, mode: int = atomic.FILE_MODE
    ) -> Path:
        if path.name == "memory.json":
            disk_full(path)
        return real_write(path, data, flush=flush, mode=mode)

    def fsync(fd: int) -> None:
        path = Path(os.readlink(f"/proc/self/fd/{fd}"))  # noqa: PTH115 - the descriptor's file
        # Its content is flushed in its temporary, or (a new directory) once in place.
        flushing_fact = path.name == "fact_a.md" or path.name.startswith(".fact_a.md.")
        if failing == "flush" and flushing_fact:
            disk_full(path)
        if failing == "directory" and path.name == fact_shard("fact_a"):
            disk_full(path)
        real_fsync(fd)

    if failing == "write":
        monkeypatch.setattr(atomic, "write_temporary", write_temporary)
    else:
        monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(OSError, match="No space"):
        store.commit(
            ALICE,
            ChangeSet(
                now=NOW,
                writes=(FactWrite(fact("fact_a"), create=True),),
                summaries={("user", "workContext"): "New"},
            ),
        )
    monkeypatch.undo()
    assert failed
    assert not (store.root / "users/alice/.memory.journal.json").exists()
    assert store.load(ALICE).summaries.user["workContext"].summary == "Old"
    assert store.load(ALICE).facts == ()
    assert not list(store.root.rglob("fact_a.md"))


def test_a_committed_journal_is_only_cleaned_up(store: MarkdownStore) -> None:
    create(store, ALICE, fact("fact_a"))
    user = store.root / "users/alice"
    (user / ".recovery/op1").mkdir(parents=True)
    (user / ".recovery/op1/memory.json").write_text("{}", "utf-8")
    (user / ".memory.journal.json").write_text(
        json.dumps({"operationId": "op1", "state": "committed"}), "utf-8"
    )
    assert [f.id for f in MarkdownStore(store.root).load(ALICE).facts] == ["fact_a"]
    assert not (user / ".memory.journal.json").exists()
    assert not (user / ".recovery/op1").exists()


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("{not json", "not valid JSON"),
        ('{"state": "halfway"}', "unknown journal state"),
        ('{"state": "deermem-prepared", "oldEntries": {}}', "does not hold the prior contents"),
        ('{"state": "prepared", "oldEntries": {}}', "invalid operationId"),  # the original's
        ('{"state": "prepared", "operationId": "../x"}', "invalid operationId"),
        (
            '{"state": "prepared", "operationId": "op", "factIds": ["fact_a"]}',
            "without an agentName",
        ),
        (
            '{"state": "prepared", "operationId": "op", "factIds": ["../../x"], '
            '"agentName": "coder"}',
            "invalid fact id",
        ),
        (
            '{"state": "prepared", "files": [{"path": "../../outside.md", "before": null}]}',
            "escapes the user directory",
        ),
        ('{"state": "prepared", "files": [{"path": "/etc/passwd", "before": "x"}]}', "escapes"),
    ],
)
def test_a_journal_that_cannot_be_trusted_is_corruption(
    store: MarkdownStore, content: str, problem: str
) -> None:
    create(store, ALICE, fact("fact_a"))
    journal_file = store.root / "users/alice/.memory.journal.json"
    journal_file.write_text(content, "utf-8")
    with pytest.raises(CorruptMemoryFile, match=problem):
        MarkdownStore(store.root).load(ALICE)
    assert journal_file.read_text("utf-8") == content


# --- atomic writes and locks ---------------------------------------------------------------


def test_atomic_write_syncs_the_file_and_its_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[bool] = []
    real = os.fsync

    def recording(fd: int) -> None:
        synced.append(stat.S_ISDIR(os.fstat(fd).st_mode))
        real(fd)

    monkeypatch.setattr(os, "fsync", recording)
    target = tmp_path / "a" / "b.json"
    atomic.atomic_write(target, b"{}")
    assert target.read_bytes() == b"{}"
    assert False in synced  # the file
    assert synced.count(True) >= 2  # its directory, and the parent of the new directory
    assert [p.name for p in target.parent.iterdir()] == ["b.json"]  # no temporary left


def test_user_locks_are_cached_weakly(tmp_path: Path) -> None:
    lock = locks.user_lock(tmp_path / "u1" / ".memory.lock", 1.0)
    assert locks.user_lock(tmp_path / "u1" / ".memory.lock", 1.0) is lock
    key = str(tmp_path / "u1" / ".memory.lock")
    del lock
    assert key not in locks._registry


def test_a_lock_held_by_another_process_times_out(tmp_path: Path) -> None:
    store = MarkdownStore(tmp_path, lock_timeout=0.3)
    create(store, ALICE, fact("fact_a"))
    lock_file = tmp_path / "users/alice/.memory.lock"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, sys, time\n"
            f"f = open({str(lock_file)!r}, 'a')\n"
            "fcntl.flock(f, fcntl.LOCK_EX)\n"
            "print('held', flush=True)\n"
            "time.sleep(30)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
        started = time.monotonic()
        with pytest.raises(StoreLockTimeout, match="could not take the lock"):
            create(store, ALICE, fact("fact_b"))
        assert 0.25 < time.monotonic() - started < 5
    finally:
        holder.kill()
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
    create(store, ALICE, fact("fact_b"))


def test_readers_of_sidecars_and_the_archive_recover_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from deermem import Memory, MemoryConfig

    memory = Memory(MarkdownStore(tmp_path), MemoryConfig(), ALICE, clock=lambda: NOW)
    fact_id = memory.create_fact("To be deleted").fact_id
    assert fact_id is not None
    with monkeypatch.context() as patch:
        crash_before_journal_removal(patch)
        with pytest.raises(BaseException):  # noqa: B017, PT011 - the simulated crash
            memory.delete_fact(fact_id)
    assert next(tmp_path.rglob(f"archive/{fact_id}.json")).exists()  # half of the commit
    fresh = MarkdownStore(tmp_path)
    assert fresh.archive(ALICE, NOW) == ()  # recovered before reading
    assert fresh.archived(ALICE, fact_id) is None
    assert fresh.audit(ALICE) == ()
    assert [f.id for f in fresh.load(ALICE).facts] == [fact_id]


def test_a_cold_load_reads_fact_files_larger_than_one_read(store: MarkdownStore) -> None:
    """The cold-load reader reads in 64 KiB steps: files of several steps come back whole."""
    big = "Long fact. " + "x" * 200_000 + " The end."
    create(store, ALICE, fact("fact_big", big), fact("fact_small"))
    snapshot = MarkdownStore(store.root).load(ALICE)
    loaded = snapshot.get("fact_big")
    assert loaded is not None
    assert loaded.content == big
    assert [f.id for f in snapshot.facts] == ["fact_big", "fact_small"]


def test_recovery_rewrites_only_what_the_interrupted_commit_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = MarkdownStore(tmp_path)
    create(store, ALICE, fact("fact_a", "Before."))
    a = store.load(ALICE).get("fact_a")
    assert a is not None
    manifest = tmp_path / "users/alice/memory.json"
    untouched = manifest.stat()
    real_replace = os.replace

    class Crash(BaseException):
        pass

    def crash_at_the_second_file(source: str | Path, target: str | Path) -> None:
        if Path(target).name == "fact_new.md":  # fact_a.md is in place, the rest is not
            raise Crash
        real_replace(source, target)

    with monkeypatch.context() as patch:
        patch.setattr(os, "replace", crash_at_the_second_file)
        patch.setattr(journal, "_roll_back_now", lambda user: None)  # a crash undoes nothing
        with pytest.raises(Crash):
            store.commit(
                ALICE,
                ChangeSet(
                    now=NOW,
                    writes=(
                        FactWrite(a.replace(content="After."), create=False),
                        FactWrite(fact("fact_new"), create=True),
                    ),
                ),
            )
    changed = next(tmp_path.rglob("fact_a.md"))
    assert "After." in changed.read_text("utf-8")
    snapshot = MarkdownStore(tmp_path).load(ALICE)  # recovers
    assert [(f.id, f.content) for f in snapshot.facts] == [("fact_a", "Before.")]
    after = manifest.stat()
    assert (after.st_ino, after.st_mtime_ns) == (untouched.st_ino, untouched.st_mtime_ns)
    assert not list(tmp_path.rglob("fact_new.md"))


def test_a_user_export_is_one_view_though_commits_keep_coming(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The export reads the library, then the receipts, then the archive. A commit landing
    # between two reads showed a fact in both the library and the archive, or an archive
    # entry without its receipt; with the user's lock held, the commit waits for the export.
    from deermem.store.markdown import sidecars

    memory = Memory.open(tmp_path, MemoryConfig(max_facts=10), user="ann")
    for n in range(10):
        memory.create_fact(f"Fact number {n} about the user", confidence=0.5 + n / 100)
    writer = Memory.open(tmp_path, MemoryConfig(max_facts=10), user="ann")
    read_events = sidecars.read_events
    started: list[threading.Thread] = []

    def read_events_while_a_commit_runs(path: Path) -> object:
        if not started:  # a create at the cap: a fact goes to the archive, with a receipt
            thread = threading.Thread(
                target=writer.create_fact, args=("A sure new fact",), kwargs={"confidence": 0.99}
            )
            started.append(thread)
            thread.start()
            thread.join(0.5)  # time enough to commit, unless the export holds the lock
        return read_events(path)

    monkeypatch.setattr(sidecars, "read_events", read_events_while_a_commit_runs)
    document: Any = memory.export_user("ann")
    started[0].join()
    [agent] = document["agents"].values()
    library = {fact["id"] for fact in agent["facts"]}
    archived = {entry["fact"]["id"] for entry in agent["archive"]}
    receipted = {fact_id for event in agent["events"] for fact_id in event["factIds"]}
    assert not library & archived
    assert archived <= receipted
    assert "A sure new fact" in {f.content for f in memory.list_facts()}  # it landed, after


def test_a_place_in_line_whose_directory_moves_away_is_no_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An erase (or the first write moving a directory an earlier version named) renames the
    # user's directory between the line's directory being made and the ticket being opened.
    user = tmp_path / "users" / "ann"
    queue = user / ".memory.lock.queue"

    def made_then_moved(path: Path) -> None:
        atomic.make_directories(path)
        user.rename(tmp_path / "users" / "erasing")

    monkeypatch.setattr(locks, "make_directories", made_then_moved)
    assert locks._Ticket.join(queue) is None  # no place: the caller locks and looks again
