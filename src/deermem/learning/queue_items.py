"""The values the update queue works with: keys, items, timers, reports."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, Protocol

from deermem.learning.watermark import M, WatermarkKey

__all__ = [
    "FlushReport",
    "Processor",
    "QueueItem",
    "QueueKey",
    "QueueStats",
    "TimerFactory",
    "TimerHandle",
    "thread_timer",
]


@dataclass(frozen=True, slots=True)
class QueueKey:
    """What makes two queued conversations the same item."""

    thread_id: str
    user_id: str | None
    agent: str
    emergency: bool = False

    @property
    def watermark_key(self) -> WatermarkKey:
        return (self.thread_id, self.user_id, self.agent)


@dataclass(frozen=True, slots=True)
class QueueItem(Generic[M]):
    """A queued conversation. When processed, ``messages`` holds only what is new."""

    key: QueueKey
    messages: tuple[M, ...]
    signals: frozenset[str] = frozenset()
    trace_id: str | None = None


Processor = Callable[[QueueItem[M]], bool]
"""Runs one extraction; returns whether it succeeded."""


class TimerHandle(Protocol):
    """A one-shot timer (``threading.Timer`` is one)."""

    def start(self) -> None: ...

    def cancel(self) -> None: ...


TimerFactory = Callable[[float, Callable[[], None]], TimerHandle]


def thread_timer(delay: float, callback: Callable[[], None]) -> TimerHandle:
    """A daemon ``threading.Timer``: a pending debounce never keeps a process alive."""
    timer = threading.Timer(delay, callback)
    timer.daemon = True
    return timer


@dataclass(frozen=True, slots=True)
class QueueStats:
    """Counters since the queue was created."""

    admitted: int = 0
    merged: int = 0
    refused: int = 0
    processed: int = 0
    failed: int = 0
    nothing_new: int = 0


@dataclass(frozen=True, slots=True)
class FlushReport:
    """What a flush achieved.

    Attributes:
        completed: every item was attempted within the time budget.
        processed: items processed successfully (or with nothing new) by the flush.
        failed: items attempted whose processing failed or raised.
        unflushed: items not attempted in time (still queued or still running).
    """

    completed: bool
    processed: int = 0
    failed: tuple[QueueKey, ...] = ()
    unflushed: tuple[QueueKey, ...] = ()

    @property
    def ok(self) -> bool:
        """Completed in time with no failure: nothing admitted was lost."""
        return self.completed and not self.failed and not self.unflushed
