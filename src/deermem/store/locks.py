"""One writer per user at a time: a thread lock inside the process, ``flock`` across processes.

Every change to a user's files happens under that user's lock: the in-process
:class:`threading.RLock` orders threads, and an advisory ``flock`` on the
user's ``.memory.lock`` orders processes. The lock is re-entrant within a
thread (a commit may call helpers that lock again); the file lock is taken
on the outermost entry only.

Each outermost acquisition opens the lock file afresh: ``flock`` belongs to
an open file description, and a descriptor inherited through ``fork`` would
let a child believe it holds a lock its parent holds.

Reading needs no write access (a read-only mount, another user's files):
:meth:`UserLock.reading` opens an existing lock file read-only — ``flock``
does not care how a file was opened — and, when there is none and none can
be created, reads without the file lock: every writer creates the file
before it writes, so a store without one has had no writer yet.

Lock objects are cached weakly per lock file, so a long-running server does
not keep one per user it ever saw. The file lock is polled without blocking
(1 ms, doubling up to 50 ms) until ``file_lock_timeout_seconds``, then
:class:`~deermem.StoreLockTimeout` is raised.
"""

from __future__ import annotations

import errno
import fcntl
import os
import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Final

from deermem._exceptions import StoreLockTimeout
from deermem.store.atomic import make_directories

__all__ = ["UserLock", "user_lock"]

_FIRST_POLL: Final = 0.001
_MAX_POLL: Final = 0.05
# A reader that meets these where it would create the lock file reads without it.
_NOT_WRITABLE: Final = (errno.EACCES, errno.EPERM, errno.EROFS)

_registry: weakref.WeakValueDictionary[str, UserLock] = weakref.WeakValueDictionary()
_registry_lock = threading.Lock()


def _reset_after_fork() -> None:
    # Locks held by the parent's threads mean nothing in the child.
    global _registry, _registry_lock
    _registry = weakref.WeakValueDictionary()
    _registry_lock = threading.Lock()


os.register_at_fork(after_in_child=_reset_after_fork)


def user_lock(path: Path, timeout: float) -> UserLock:
    """The process-wide lock object for a lock file (one per path while in use)."""
    key = str(path)
    with _registry_lock:
        lock = _registry.get(key)
        if lock is None:
            lock = UserLock(path)
            _registry[key] = lock
    lock.timeout = timeout
    return lock


class UserLock:
    """Exclusive across threads and processes, re-entrant within a thread.

    Use as a context manager to write, :meth:`reading` to read. Obtain
    instances through :func:`user_lock` so that all threads of a process
    share one per lock file.
    """

    def __init__(self, path: Path, timeout: float = 10.0) -> None:
        self.path = path
        self.timeout = timeout
        self._thread_lock = threading.RLock()
        self._depth = 0
        self._fd: int | None = None

    def __enter__(self) -> UserLock:
        self.acquire()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.release()

    @contextmanager
    def reading(self) -> Iterator[None]:
        """Hold the lock to read: the lock file is never created where writing is refused."""
        self.acquire(reading=True)
        try:
            yield
        finally:
            self.release()

    def acquire(self, *, reading: bool = False) -> None:
        deadline = time.monotonic() + self.timeout
        if not self._thread_lock.acquire(timeout=self.timeout):
            raise StoreLockTimeout(self.path, self.timeout)
        try:
            if self._depth == 0:
                fd = self._open(reading)
                self._fd = None if fd is None else self._lock_file(fd, deadline)
            self._depth += 1
        except BaseException:
            self._thread_lock.release()
            raise

    def release(self) -> None:
        self._depth -= 1
        try:
            if self._depth == 0 and self._fd is not None:
                fd, self._fd = self._fd, None
                try:
                    fcntl.flock(fd, fcntl.LOCK_UN)
                finally:
                    os.close(fd)
        finally:
            self._thread_lock.release()

    def _open(self, reading: bool) -> int | None:
        """The lock file, opened afresh; ``None`` for a reader that may not create it."""
        if reading:
            try:
                return os.open(self.path, os.O_RDONLY)
            except FileNotFoundError:
                pass
            except PermissionError:
                return None
        try:
            make_directories(self.path.parent)
            return os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as error:
            if reading and error.errno in _NOT_WRITABLE:
                return None
            raise

    def _lock_file(self, fd: int, deadline: float) -> int:
        pause = _FIRST_POLL
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    return fd
                except BlockingIOError:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise StoreLockTimeout(self.path, self.timeout) from None
                    time.sleep(min(pause, remaining))
                    pause = min(pause * 2, _MAX_POLL)
        except BaseException:
            os.close(fd)
            raise
