"""Durable file replacement: write a temporary file, fsync, rename, fsync the directory.

A reader sees either the old file or the new one, never a mix, and after
:func:`atomic_write` returns the new content survives a power cut. Temporary
files are named ``.<name>.<random>.tmp`` in the target's own directory
(a rename is only atomic within one file system) and are hidden from every
listing the store makes.

fsync is the expensive part of a commit (milliseconds on a virtual disk), so
:class:`DurableBatch` lets a commit write many files and then wait for all of
their fsyncs at once: the operating system can serve concurrent fsyncs with
one device flush instead of one each. That only works if every fsync of the
batch is really issued at once, so they run on worker threads that are
started as the largest batch in flight needs them (up to
``_MAX_FSYNC_WORKERS``). A :class:`~concurrent.futures.ThreadPoolExecutor`
does not guarantee that: it counts finished tasks as idle threads, so after
a few batches it stops starting threads and queues fsyncs behind each other,
turning one flush round into several.
"""

from __future__ import annotations

import os
import queue
import threading
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from pathlib import Path
from typing import Final

__all__ = [
    "DurableBatch",
    "StagedFiles",
    "atomic_write",
    "fsync_directory",
    "in_background",
    "is_temporary",
    "make_directories",
    "remove_durably",
    "replace_files",
]

_TMP_SUFFIX: Final = ".tmp"
# Enough for every fsync of a large commit (an update touches ~30 files and
# directories) to be in flight together; beyond it, fsyncs wait their turn.
_MAX_FSYNC_WORKERS: Final = 32


class _Workers:
    """Daemon threads running blocking file work (fsyncs, the journal's write).

    As many threads as jobs in flight, up to the cap. Idle workers block on
    the queue and cost no CPU. Daemon threads never delay interpreter exit:
    every caller waits for its own jobs before it returns, so no fsync a
    caller depends on can be cut short.
    """

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[Callable[[], object], Future[object]]] = (
            queue.SimpleQueue()
        )
        self._lock = threading.Lock()
        self._started = 0
        self._in_flight = 0

    def submit(self, job: Callable[[], object]) -> Future[object]:
        future: Future[object] = Future()
        with self._lock:
            self._in_flight += 1
            while self._started < min(self._in_flight, _MAX_FSYNC_WORKERS):
                name = f"deermem-fsync-{self._started}"
                threading.Thread(target=self._work, name=name, daemon=True).start()
                self._started += 1
        self._jobs.put((job, future))
        return future

    def _work(self) -> None:
        while True:
            job, future = self._jobs.get()
            try:
                result = job()
            except BaseException as error:  # handed to the waiting caller
                future.set_exception(error)
            else:
                future.set_result(result)
            finally:
                with self._lock:
                    self._in_flight -= 1


def _fsync_job(fd: int) -> Callable[[], object]:
    return lambda: os.fsync(fd)  # looked up when it runs, like every other fsync here


def in_background(job: Callable[[], object]) -> Future[object]:
    """Run ``job`` on a worker thread; the caller must wait for the result."""
    return _workers.submit(job)


_workers = _Workers()


def _reset_workers_after_fork() -> None:
    # A forked child inherits the workers' bookkeeping but not their threads.
    global _workers
    _workers = _Workers()


os.register_at_fork(after_in_child=_reset_workers_after_fork)


def is_temporary(name: str) -> bool:
    """Whether a directory entry is one of our temporary files."""
    return name.startswith(".") and name.endswith(_TMP_SUFFIX)


def _temporary_path(path: Path) -> Path:
    return path.with_name(f".{path.name}.{uuid.uuid4().hex}{_TMP_SUFFIX}")


def fsync_directory(directory: Path) -> None:
    """Make the entries of ``directory`` (creations, renames, removals) durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_directories(directory: Path) -> list[Path]:
    """Create ``directory`` and missing parents; return the parents whose entries changed.

    The returned directories need an fsync for the new entries to be durable.
    """
    missing: list[Path] = []
    current = directory
    while not current.is_dir():
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    for item in reversed(missing):
        try:
            item.mkdir()
        except FileExistsError:
            if not item.is_dir():
                raise
    return [item.parent for item in missing]


def _write_temporary(path: Path, data: bytes) -> tuple[Path, int]:
    """Write ``data`` to a fresh temporary beside ``path``; return it with an open fd."""
    temporary = _temporary_path(path)
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
    except BaseException:
        os.close(fd)
        _unlink_quietly(temporary)
        raise
    return temporary, fd


def atomic_write(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically and durably.

    The temporary file is fsynced before the rename, and the directory after
    it. On any failure the temporary file is removed and ``path`` is untouched.
    """
    for parent in make_directories(path.parent):
        fsync_directory(parent)
    temporary, fd = _write_temporary(path, data)
    try:
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        temporary.replace(path)
    except BaseException:
        _unlink_quietly(temporary)
        raise
    fsync_directory(path.parent)


def remove_durably(path: Path) -> bool:
    """Remove ``path`` if it exists and make the removal durable; return whether it existed."""
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    fsync_directory(path.parent)
    return True


class DurableBatch:
    """Many replacements and removals that become durable together at :meth:`sync`.

    Each :meth:`write` is atomic on its own (temporary file + rename); the
    fsyncs of the files and of every directory touched are issued together in
    :meth:`sync`. Use it only where a crash before :meth:`sync` is already
    covered, as the store's journal covers a commit: until ``sync`` returns,
    a power cut may lose any of the batch's changes.
    """

    def __init__(self) -> None:
        self._fds: list[int] = []
        self._directories: set[Path] = set()
        self._prepared: list[tuple[Path, Path]] = []

    def prepare(self, path: Path, data: bytes) -> None:
        """Write ``data`` to a temporary file beside ``path``; :meth:`write_prepared` renames it.

        Nothing a reader sees changes (at most a new, empty directory appears),
        so this may run before the journal that covers the batch is durable.
        """
        self._directories.update(make_directories(path.parent))
        temporary, fd = _write_temporary(path, data)
        self._fds.append(fd)
        self._prepared.append((path, temporary))

    def write_prepared(self) -> None:
        """Rename every prepared temporary file into place (each atomically)."""
        prepared, self._prepared = self._prepared, []
        for index, (path, temporary) in enumerate(prepared):
            try:
                temporary.replace(path)
            except BaseException:
                for _, left in prepared[index:]:
                    _unlink_quietly(left)
                raise
            self._directories.add(path.parent)

    def write(self, path: Path, data: bytes) -> None:
        self._directories.update(make_directories(path.parent))
        temporary, fd = _write_temporary(path, data)
        self._fds.append(fd)
        try:
            temporary.replace(path)
        except BaseException:
            _unlink_quietly(temporary)
            raise
        self._directories.add(path.parent)

    def remove(self, path: Path) -> None:
        try:
            path.unlink()
        except FileNotFoundError:
            return
        self._directories.add(path.parent)

    def sync(self) -> None:
        """fsync every file written and every directory changed, concurrently."""
        fds = self._fds
        self._fds = []
        try:
            for directory in sorted(self._directories):
                fds.append(os.open(directory, os.O_RDONLY))
            self._directories = set()
            _fsync_all(fds)
        finally:
            for fd in fds:
                os.close(fd)

    def close(self) -> None:
        """Release open descriptors and unrenamed temporaries without syncing (after a failure)."""
        for fd in self._fds:
            os.close(fd)
        self._fds = []
        for _, temporary in self._prepared:
            _unlink_quietly(temporary)
        self._prepared = []


class StagedFiles:
    """Independent replacements and removals, prepared first and published later.

    For files that must not change before some other change is durable —
    the sidecars, which may only change once a commit has happened — but
    whose preparation can overlap with it. Each file changes atomically and
    durably on its own (temporary file, fsync, rename, directory fsync,
    exactly as :func:`atomic_write`); together they cost two flush rounds
    instead of two per file:

    1. :meth:`stage` writes each new content to a temporary file (invisible);
    2. :meth:`sync_contents` fsyncs the temporaries concurrently — or
       :meth:`sync_contents_while` does so during the caller's own flush,
       which then costs no round of its own;
    3. :meth:`publish` renames the temporaries into place, performs the
       removals, and fsyncs every changed directory concurrently.

    Until :meth:`publish` returns, a crash leaves each file old or new (never
    torn) and at worst a hidden temporary file. :meth:`discard` drops
    whatever was staged.
    """

    def __init__(self) -> None:
        self._writes: list[tuple[Path, Path, int]] = []
        self._removals: list[Path] = []
        self._created: set[Path] = set()

    def stage(self, path: Path, data: bytes | None) -> None:
        """Prepare replacing ``path`` with ``data`` (``None``: removing it)."""
        if data is None:
            self._removals.append(path)
            return
        self._created.update(make_directories(path.parent))
        temporary, fd = _write_temporary(path, data)
        self._writes.append((path, temporary, fd))

    def _content_fds(self) -> list[int]:
        return [fd for _, _, fd in self._writes]

    def sync_contents(self) -> None:
        """fsync the staged contents (and any directories created for them)."""
        _fsync_directories_with(self._created, self._content_fds())
        self._created = set()

    def sync_contents_while(self, flush: Callable[[], object]) -> OSError | None:
        """fsync the staged contents while ``flush`` runs in this thread: one flush round.

        ``flush``'s failure is raised. A failure to sync the contents is
        returned instead (an ``OSError``), and everything staged is discarded:
        contents that may not be durable must not be published.
        """
        futures = [_workers.submit(_fsync_job(fd)) for fd in self._content_fds()]
        problem: BaseException | None = None
        try:
            flush()
        finally:
            for future in futures:
                error = future.exception()  # waits
                problem = problem or error
        if problem is None:
            return None
        self.discard()
        if not isinstance(problem, OSError):
            raise problem
        return problem

    def publish(self) -> None:
        """Rename the temporaries into place, remove, and make it durable.

        The contents must be durable already (:meth:`sync_contents` or
        :meth:`sync_contents_while`).
        """
        directories = set(self._created)
        writes, self._writes = self._writes, []
        for _, _, fd in writes:
            os.close(fd)
        try:
            for path, temporary, _ in writes:
                temporary.replace(path)
                directories.add(path.parent)
        except BaseException:
            for _, temporary, _ in writes:
                _unlink_quietly(temporary)
            raise
        for path in self._removals:
            try:
                path.unlink()
            except FileNotFoundError:
                continue
            directories.add(path.parent)
        self._removals = []
        _fsync_directories_with(directories, [])

    def discard(self) -> None:
        """Drop everything staged; the files stay as they were."""
        for _, temporary, fd in self._writes:
            os.close(fd)
            _unlink_quietly(temporary)
        self._writes = []
        self._removals = []


def replace_files(changes: Iterable[tuple[Path, bytes | None]]) -> None:
    """Replace (or, for ``None``, remove) each file atomically and durably; two flush rounds."""
    staged = StagedFiles()
    try:
        for path, data in changes:
            staged.stage(path, data)
        staged.sync_contents()
        staged.publish()
    finally:
        staged.discard()


def _fsync_directories_with(directories: Iterable[Path], fds: list[int]) -> None:
    """fsync ``fds`` and every directory in ``directories`` concurrently."""
    opened: list[int] = []
    try:
        for directory in sorted(directories):
            opened.append(os.open(directory, os.O_RDONLY))
        _fsync_all([*fds, *opened])
    finally:
        for fd in opened:
            os.close(fd)


def _fsync_all(fds: Iterable[int]) -> None:
    """fsync every descriptor; the first in this thread, the others concurrently."""
    pending = list(fds)
    if not pending:
        return
    first, *others = pending
    futures = [_workers.submit(_fsync_job(fd)) for fd in others]
    try:
        os.fsync(first)
    finally:
        for future in futures:
            future.result()  # waits, and re-raises a failure


def _unlink_quietly(path: Path) -> None:
    path.unlink(missing_ok=True)
