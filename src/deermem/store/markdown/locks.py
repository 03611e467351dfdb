"""One writer per user at a time, in turn: a thread lock inside the process, ``flock`` across.

Every change to a user's files happens under that user's lock: an
in-process lock orders threads, and an advisory ``flock`` on the user's
``.memory.lock`` orders processes. The lock is re-entrant within a thread (a
commit may call helpers that lock again); the file lock is taken on the
outermost entry only.

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
until ``file_lock_timeout_seconds``, then :class:`~deermem.StoreLockTimeout`
is raised.

**Waiting threads and processes get their turn** (issue 20). Neither
``flock`` nor Python's locks are fair: whoever releases the lock and asks for
it again at once has it back before a waiter wakes, so a few busy writers
starved the others until they timed out. Threads wait in a line in the
process (a condition and a queue). A process that finds the lock taken, or
others already waiting, joins a line: a *ticket* in the directory
``<lock file>.queue`` beside the lock file, an empty file named by its place
(the last place plus one, then the process id and random digits) that its
owner holds an ``flock`` on while it waits. Only the first live ticket tries
the lock (every millisecond); the others look at the line, backing off to
5 ms. The owner removes its ticket once it holds the lock, so a process that
comes back for the lock finds the others in line and queues behind them.

* A ticket is live while its owner holds its ``flock``: a process killed
  while it waits (SIGKILL too) loses its place when the kernel closes its
  files, and whoever looks at the line next removes the dead ticket. A new
  ticket is locked right after it is created; one that a look at the line
  removed in that instant is taken again.
* The ``flock`` on the lock file still decides who holds the lock; the line
  only orders who tries it. A process outside the line — the original
  DeerMem, a reader that may not write the queue directory — is excluded as
  before, only not in turn.
* A waiter keeps its place for half its timeout, then tries the lock out of
  turn as well: a process stopped (SIGSTOP) while first in line must not
  make everyone behind it time out.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import secrets
import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Final

from deermem.errors import StoreLockTimeout
from deermem.store.markdown.files import make_directories
from deermem.store.turns import FairTurn

__all__ = ["UserLock", "user_lock"]

# How often the first in line tries the lock, and how long the others may go
# between two looks at the line.
_FIRST_POLL: Final = 0.001
_MAX_POLL: Final = 0.005
_QUEUE_SUFFIX: Final = ".queue"
# A ticket's name: its place in line, then its owner's process id and random digits.
_PLACE_DIGITS: Final = 12
_TICKET: Final = re.compile(rf"[0-9]{{{_PLACE_DIGITS}}}\.", re.ASCII)
# Where these refuse the lock file (to a reader) or a ticket, go on without it.
_NOT_WRITABLE: Final = (errno.EACCES, errno.EPERM, errno.EROFS)
# Tries at creating the lock file whose directory another holder keeps taking back.
_OPEN_ATTEMPTS: Final = 100

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
        self.queue = path.with_name(path.name + _QUEUE_SUFFIX)
        self.timeout = timeout
        # The threads of this process take the lock in turn; the holder alone
        # touches the fields below.
        self._turn = FairTurn()
        self._fd: int | None = None
        # Whether this holding made the lock file's directory (see _take_back_directory).
        self._made_directory = False

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
        """Take the lock (re-entrant within a thread), waiting up to ``timeout``.

        Threads take it in the order they asked, then the file lock in turn
        with other processes.

        Raises:
            StoreLockTimeout: the lock was not free in turn within ``timeout``.
        """
        deadline = time.monotonic() + self.timeout
        if not self._turn.take(deadline):
            raise StoreLockTimeout(self.path, self.timeout)
        if self._turn.depth > 1:
            return  # re-entered: the file lock is held already
        try:
            while True:
                fd = self._open(reading)
                self._fd = None if fd is None else self._lock_file(fd, deadline)
                if self._fd is None or _still_here(self.path, self._fd):
                    break
                # The user was erased while this waited: the directory, and the file
                # locked, moved away (deermem.store.markdown.journal). Lock it afresh.
                fcntl.flock(self._fd, fcntl.LOCK_UN)
                os.close(self._fd)
                self._fd = None
        except BaseException:
            self._turn.give_back()
            raise

    def release(self) -> None:
        if not self._turn.held_here:
            raise RuntimeError("cannot release a user lock this thread does not hold")
        if self._turn.depth > 1:
            self._turn.give_back()
            return
        fd, self._fd = self._fd, None
        made, self._made_directory = self._made_directory, False
        try:
            if fd is not None:
                try:
                    if made:
                        self._take_back_directory()
                    fcntl.flock(fd, fcntl.LOCK_UN)
                finally:
                    os.close(fd)
        finally:
            self._turn.give_back()  # the file lock is let go first

    def _take_back_directory(self) -> None:
        """Remove the directory this holding made, if nothing but the lock is in it.

        Invariant: a user's directory exists only while it holds something
        besides its lock. A write that changed nothing — a fact not found for
        a user who has none, a search's count that found its user erased while
        it waited — must not leave a directory named after the user: an
        erased user would be back in name, and the root a list of who was
        asked about. Done under the lock, as an erase moves a directory away:
        a process holding the old file finds it gone and locks afresh
        (``_still_here``), one creating the file meanwhile makes the directory
        again (``_open``), one waiting in line keeps the line's directory, and
        so the whole directory, in place.
        """
        directory = self.path.parent
        try:
            names = {entry.name for entry in directory.iterdir()}
            if names - {self.path.name, self.queue.name}:
                return  # memory was written: the directory stays
            if self.queue.name in names:
                self.queue.rmdir()  # refused while a ticket waits in it
            self.path.unlink()
            directory.rmdir()
        except OSError:
            pass  # in use by another process: it stays, as it would have

    def _open(self, reading: bool) -> int | None:
        """The lock file, opened afresh; ``None`` for a reader that may not create it.

        The directory is made when missing, and made again when it goes
        between the two steps (its last holder took it back, or an erase
        moved it): then this holding made it (see :meth:`_take_back_directory`).
        """
        if reading:
            try:
                return os.open(self.path, os.O_RDONLY)
            except FileNotFoundError:
                pass
            except PermissionError:
                return None
        for attempt in range(_OPEN_ATTEMPTS):
            try:
                return os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            except FileNotFoundError:
                if attempt == _OPEN_ATTEMPTS - 1:
                    raise
            except OSError as error:
                if reading and error.errno in _NOT_WRITABLE:
                    return None
                raise
            try:
                if make_directories(self.path.parent):
                    self._made_directory = True
            except OSError as error:
                if reading and error.errno in _NOT_WRITABLE:
                    return None
                raise
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _lock_file(self, fd: int, deadline: float) -> int:
        """``fd`` holding the file lock, taken in turn (see the module docstring)."""
        try:
            if not _waiting(self.queue) and _try_lock(fd):
                return fd
            ticket = _Ticket.join(self.queue)
            try:
                # After half its time a waiter tries out of turn too (a stopped process ahead).
                patient_until = deadline - self.timeout / 2
                pause = _FIRST_POLL
                while True:
                    first = (
                        ticket is None
                        or ticket.first_in_line()
                        or time.monotonic() >= patient_until
                    )
                    if first and _try_lock(fd):
                        return fd
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise StoreLockTimeout(self.path, self.timeout)
                    pause = _FIRST_POLL if first else min(pause * 2, _MAX_POLL)
                    time.sleep(min(pause, remaining))
            finally:
                if ticket is not None:
                    ticket.leave()
        except BaseException:
            os.close(fd)
            raise


def _still_here(path: Path, fd: int) -> bool:
    """Whether ``path`` still names the file open as ``fd`` (an erase renames it away)."""
    try:
        named = path.stat()
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _waiting(queue: Path) -> bool:
    """Whether the line holds a ticket (a dead one too: the next look at the line clears it)."""
    return bool(_tickets(queue))


def _alive(ticket: Path) -> bool:
    """Whether the ticket's owner still holds it; a dead ticket is removed."""
    try:
        fd = os.open(ticket, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        # Nobody holds it: its owner died, or is leaving (then it is gone already).
        ticket.unlink(missing_ok=True)
        return False
    finally:
        os.close(fd)


class _Ticket:
    """A place in the line for a lock: an empty file whose ``flock`` its owner holds."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd = fd

    @classmethod
    def join(cls, queue: Path) -> _Ticket | None:
        """A ticket behind every ticket now in the line; ``None`` where the line may
        not be written (the caller then tries the lock without a place)."""
        unique = f"{os.getpid()}.{secrets.token_hex(4)}"
        while True:
            try:
                make_directories(queue)
                place = 1 + max((int(name[:_PLACE_DIGITS]) for name in _tickets(queue)), default=-1)
                path = queue / f"{place:0{_PLACE_DIGITS}d}.{unique}"
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
            except FileNotFoundError:
                # The user's directory moved away meanwhile (an erase; the first write
                # moving a directory an earlier version named): the caller takes the lock
                # without a place, finds the file it holds gone, and locks it afresh.
                return None
            except OSError as error:
                if error.errno in _NOT_WRITABLE:
                    return None
                raise
            try:
                # Blocking, but only for another process's look at the line (microseconds).
                fcntl.flock(fd, fcntl.LOCK_EX)
                if os.fstat(fd).st_nlink:
                    return cls(path, fd)
            except BaseException:
                os.close(fd)
                raise
            os.close(fd)  # taken for a dead ticket before it was locked: queue again

    def first_in_line(self) -> bool:
        """Whether no live ticket is ahead of this one (dead ones ahead are removed)."""
        own = self.path.name
        return not any(
            _alive(self.path.parent / name) for name in _tickets(self.path.parent) if name < own
        )

    def leave(self) -> None:
        # Removed before it is unlocked, so nobody takes it for a dead one.
        self.path.unlink(missing_ok=True)
        os.close(self._fd)


def _tickets(queue: Path) -> list[str]:
    """The names of the tickets in the line, first first."""
    try:
        with os.scandir(queue) as entries:
            return sorted(entry.name for entry in entries if _TICKET.match(entry.name))
    except FileNotFoundError:
        return []
