"""A re-entrant lock that a process's threads take in the order they asked.

Both stores hand a user's writes to one thread at a time before the lock that
orders processes (the Markdown store's lock file, the PostgreSQL store's lock
on the user's row). Python's locks are not fair: a thread that lets go and
asks again at once would have the lock back before a waiter wakes, so a busy
writer could keep a user to itself for as long as it kept writing. A
:class:`FairTurn` serves its threads first come, first served, as the locks
between processes (the ticket queue beside a lock file, PostgreSQL's lock
queue) serve processes.
"""

from __future__ import annotations

import threading
import time
from collections import deque


class FairTurn:
    """Exclusive among a process's threads, re-entrant, first come first served.

    Invariant: the first place in the line belongs to the next thread to have
    the turn; a thread that gives up (timed out, interrupted) leaves the line
    and wakes the others, one of which may be first now.
    """

    __slots__ = ("_condition", "_depth", "_line", "_owner")

    def __init__(self) -> None:
        self._condition = threading.Condition(threading.Lock())
        self._owner: int | None = None
        self._depth = 0
        self._line: deque[object] = deque()

    @property
    def held_here(self) -> bool:
        """Whether the current thread holds the turn."""
        return self._owner == threading.get_ident()

    @property
    def depth(self) -> int:
        """How many times the holder has taken the turn (read it while holding it)."""
        return self._depth

    @property
    def waiting(self) -> int:
        """How many threads wait for the turn."""
        with self._condition:
            return len(self._line)

    def take(self, deadline: float) -> bool:
        """Take the turn by ``deadline`` (``time.monotonic()``); ``False`` if it did not come.

        A thread that holds the turn takes it again at once.
        """
        me = threading.get_ident()
        with self._condition:
            if self._owner == me:
                self._depth += 1
                return True
            place = object()
            self._line.append(place)
            try:
                while self._owner is not None or self._line[0] is not place:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return False
                    self._condition.wait(remaining)
                self._owner, self._depth = me, 1
                return True
            finally:
                self._line.remove(place)
                if self._owner != me:
                    self._condition.notify_all()  # the next in line may be first now

    def give_back(self) -> None:
        """Undo one :meth:`take`; the last one hands the turn to the next in line.

        Raises:
            RuntimeError: the current thread does not hold the turn.
        """
        with self._condition:
            if self._owner != threading.get_ident():
                raise RuntimeError("cannot give back a turn this thread does not hold")
            self._depth -= 1
            if self._depth:
                return
            self._owner = None
            self._condition.notify_all()
