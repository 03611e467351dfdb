"""Durable file replacement: write a temporary file, fsync, rename, fsync the directory.

A reader sees either the old file or the new one, never a mix, and after
:func:`atomic_write` returns the new content survives a power cut. Temporary
files are named ``.<name>.<random>.tmp`` in the target's own directory
(a rename is only atomic within one file system) and are hidden from every
listing the store makes.

fsync is the expensive part of a commit (milliseconds on a virtual disk), so
:class:`DurableBatch` lets a commit write many files and then wait for all of
their fsyncs at once: the operating system can serve concurrent fsyncs with
one device flush instead of one each.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Final

__all__ = [
    "DurableBatch",
    "atomic_write",
    "fsync_directory",
    "is_temporary",
    "make_directories",
    "remove_durably",
]

_TMP_SUFFIX: Final = ".tmp"
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _reset_pool_after_fork() -> None:
    # A forked child inherits the pool object but not its threads: start afresh.
    global _pool
    _pool = None


os.register_at_fork(after_in_child=_reset_pool_after_fork)


def _fsync_pool() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="deermem-fsync")
        return _pool


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
        """Release open descriptors without syncing (after a failure)."""
        for fd in self._fds:
            os.close(fd)
        self._fds = []


def _fsync_all(fds: Iterable[int]) -> None:
    """fsync every descriptor; the first in this thread, the others concurrently."""
    pending = list(fds)
    if not pending:
        return
    first, *others = pending
    futures = [_fsync_pool().submit(os.fsync, fd) for fd in others]
    try:
        os.fsync(first)
    finally:
        for future in futures:
            future.result()  # waits, and re-raises a failure


def _unlink_quietly(path: Path) -> None:
    path.unlink(missing_ok=True)
