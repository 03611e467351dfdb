"""Reading a store this process may not write: a read-only mount, another user's files.

The reads run in a child process (tests/readonly_reader.py) that really
cannot write the store, by one of two mechanisms:

* ``permissions`` — the files belong to someone else: as root, the store is
  handed to ``nobody``, made world-readable, and the child runs as root with
  every capability dropped (``setpriv``), so permission bits bind it as they
  bind anyone — while the checkout and its interpreter, which may sit in a
  directory only root can enter (a clone in ``mktemp -d``), stay readable; as
  any other user, the store is made read-only with ``chmod`` and the child runs
  as that user.
* ``read-only-mount`` — as root only: the child runs in its own mount
  namespace (``unshare -m``) with the store bind-mounted read-only, so every
  write fails with EROFS.

A mechanism this machine cannot provide is skipped with the reason.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from deermem import Memory, MemoryConfig
from deermem.store.markdown import journal

READER = Path(__file__).with_name("readonly_reader.py")
NOW = datetime(2026, 8, 13, tzinfo=UTC)
NOBODY = 65534
ENV = {"DEERMEM_MAX_FACTS": "10", "DEERMEM_FACT_EVICTION_POLICY": "hybrid-v1"}
MECHANISMS = ["permissions", "read-only-mount"]


def open_memory(root: Path) -> Memory:
    config = MemoryConfig(max_facts=10, fact_eviction_policy="hybrid-v1")
    return Memory.open(root, config, user="alice", clock=lambda: NOW)


def files_of(root: Path) -> dict[str, tuple[bytes, int]]:
    return {
        str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in root.rglob("*")
        if p.is_file()
    }


def _works(command: list[str]) -> bool:
    try:
        return subprocess.run(command, capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def reader_command(mechanism: str, root: Path) -> list[str]:
    """The command that runs the reader where it cannot write ``root`` (or skips)."""
    reader = [sys.executable, str(READER), str(root)]
    if mechanism == "permissions":
        if os.geteuid() != 0:
            return reader
        setpriv = ["setpriv", "--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-all"]
        if not shutil.which("setpriv") or not _works([*setpriv, sys.executable, "-c", "0"]):
            pytest.skip("running as root, and setpriv cannot drop root's capabilities")
        return [*setpriv, *reader]
    if os.geteuid() != 0:
        pytest.skip("a read-only bind mount needs root")
    mount = 'mount --bind -o ro "$1" "$1" && shift && exec "$@"'
    command = ["unshare", "-m", "--", "sh", "-c", mount, "sh", str(root)]
    if not shutil.which("unshare") or not _works([*command, "true"]):
        pytest.skip("this machine does not allow a private read-only bind mount")
    return [*command, *reader]


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory another user can reach (pytest's own temporary root is private)."""
    base = Path(tempfile.mkdtemp(prefix="deermem-readonly-"))
    base.chmod(0o755)
    try:
        yield base
    finally:
        for path in [base, *base.rglob("*")]:
            if not path.is_symlink():
                path.chmod(stat.S_IMODE(path.stat().st_mode) | stat.S_IWUSR | stat.S_IXUSR)
        shutil.rmtree(base)


def make_read_only(mechanism: str, root: Path) -> None:
    """Readable by anyone; writable by no one without privileges (as root: ``nobody``'s)."""
    if mechanism == "read-only-mount":
        return
    for path in [root, *root.rglob("*")]:
        mode = 0o555 if path.is_dir() else 0o444
        path.chmod(mode)
        if os.geteuid() == 0:
            os.chown(path, NOBODY, NOBODY)


def run_reader(mechanism: str, root: Path) -> dict[str, object]:
    command = reader_command(mechanism, root)
    make_read_only(mechanism, root)
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **ENV},
        cwd=root.parent,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    report: dict[str, object] = json.loads(done.stdout)
    return report


def seeded_store(base: Path) -> tuple[Path, Memory]:
    root = base / "store"
    memory = open_memory(root)
    for number in range(12):  # two evictions: archive entries and receipts
        memory.create_fact(f"Remembered fact number {number}.", confidence=0.3 + number / 20)
    memory.search("fact")  # a recall count, and the search index on disk
    return root, memory


@pytest.mark.parametrize("lock_file", ["kept", "never made"])
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_every_read_works_without_write_access(
    shared_dir: Path, mechanism: str, lock_file: str
) -> None:
    root, memory = seeded_store(shared_dir)
    if lock_file == "never made":  # a copy of the files alone: no writer has locked it here
        (root / "users/alice/.memory.lock").unlink()
    archived = memory.list_archived()
    expected = {
        "facts": [fact.id for fact in memory.list_facts()],
        "context": memory.context(),
        "why": "archived",
        "audit": [receipt.receipt_id for receipt in memory.audit()],
        "archive": [entry.fact_id for entry in archived],
        "export": memory.export_document(),
    }
    hits = [hit.fact_id for hit in memory.search("fact", record=False)]
    before = files_of(root)
    report = run_reader(mechanism, root)
    api = report["api"]
    assert isinstance(api, dict)
    for key, value in expected.items():
        assert api[key] == value, key
    assert api["search"] == [hits, hits, hits]  # the same ranking as with the file index
    for name, result in report["cli"].items():  # type: ignore[attr-defined]
        assert result["code"] == 0, (name, result["err"])
        assert result["err"] == "", name
    assert archived[0].fact_id in report["cli"]["why"]["out"]  # type: ignore[index]
    warnings = report["warnings"]
    assert isinstance(warnings, list)
    # Said once per process that searches, not once per search: the API's and the CLI's.
    assert sum("index in memory" in w for w in warnings) == 2
    assert sum("not counted as recalls" in w for w in warnings) == 2
    assert files_of(root) == before  # nothing was written, not even a lock file


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_a_leftover_journal_on_a_read_only_store_is_a_clear_error(
    shared_dir: Path, mechanism: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, memory = seeded_store(shared_dir)
    facts = memory.list_facts()

    class Crash(BaseException):
        pass

    def crash(path: Path) -> bool:
        raise Crash

    with monkeypatch.context() as patch:
        patch.setattr(journal, "remove_durably", crash)
        patch.setattr(journal, "_roll_back_now", lambda user: None)  # a crash undoes nothing
        with pytest.raises(Crash):
            memory.update_fact(facts[0].id, content="Changed by a commit that never finished.")
    changed = next(root.rglob(f"{facts[0].id}.md"))
    before = files_of(root)
    report = run_reader(mechanism, root)
    error = report["api_error"]
    assert isinstance(error, dict)
    assert error["type"] == "StoreNeedsRecovery"
    assert "needs recovery" in error["message"]
    assert "open the store once with write access" in error["message"]
    assert f"and {changed} cannot be restored" in error["message"]  # the file that blocks it
    for name, result in report["cli"].items():  # type: ignore[attr-defined]
        assert result["code"] == 1, name
        assert "needs recovery" in result["err"], name
        assert "Traceback" not in result["err"]
    assert files_of(root) == before  # never half-applied: nothing was rewritten
    for path in [root, *root.rglob("*")]:  # write access again: the next opening recovers
        path.chmod(stat.S_IMODE(path.stat().st_mode) | stat.S_IWUSR)
    assert open_memory(root).list_facts() == facts


# --- a full disk: written to nowhere, read as a read-only store is -----------------------------

_SEARCHES_ON_A_FULL_DISK = """
import contextlib, io, json, logging, os, sys
from pathlib import Path
from deermem import Memory, MemoryConfig
from deermem.cli.app import main

disk = Path(sys.argv[1])
root = disk / "store"
config = MemoryConfig(fact_eviction_policy="hybrid-v1", search_mode="keyword")
memory = Memory.open(root, config, user="alice")
for number in range(3):
    memory.create_fact(f"kiwi{number} fruit fact {number}")
memory.search("kiwi1")
fd = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT)
try:
    while True:
        os.write(fd, bytes(65536))
except OSError:  # no space left
    pass

class Warnings(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages = []
    def emit(self, record):
        self.messages.append(record.getMessage())

said = Warnings()
logging.getLogger("deermem").addHandler(said)
fresh = Memory.open(root, config, user="alice")
hits = [[hit.fact.content for hit in fresh.search("kiwi1")] for _ in range(3)]
err = io.StringIO()
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
    code = main(["--root", str(root), "--user", "alice", "search", "kiwi1"])
print(json.dumps({"hits": hits, "warnings": said.messages, "cli": [code, err.getvalue()]}))
"""


def test_a_full_disk_is_searched_without_counting_recalls(tmp_path: Path) -> None:
    # Every search of a hybrid-v1 store failed with a bare "[Errno 28] No space left on
    # device": counting the recalls could not be written, though the search had succeeded.
    if os.geteuid() != 0:
        pytest.skip("a tmpfs of its own (a small, full disk) needs root")
    disk = tmp_path / "disk"
    disk.mkdir()
    mount = 'mount -t tmpfs -o size=2m tmpfs "$1" && shift && exec "$@"'
    command = ["unshare", "-m", "--", "sh", "-c", mount, "sh", str(disk)]
    if not shutil.which("unshare") or not _works([*command, "true"]):
        pytest.skip("this machine does not allow a private tmpfs")
    child = [*command, sys.executable, "-c", _SEARCHES_ON_A_FULL_DISK, str(disk)]
    done = subprocess.run(child, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["hits"] == [["kiwi1 fruit fact 1"]] * 3
    assert report["cli"][0] == 0, report["cli"][1]
    counted = [w for w in report["warnings"] if "not counted as recalls" in w]
    assert len(counted) == 2  # once per memory that searches (the API's, the CLI's) ...
    assert all("No space left on device" in w for w in counted)
    assert all("fact-usage.json" in w for w in counted)  # ... naming the file
