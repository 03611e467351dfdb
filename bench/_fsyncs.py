"""Counting a store operation's fsyncs and its flush rounds (for the benchmarks' reports).

A *flush round* is a set of fsyncs the caller waits for together; the store
issues exactly one fsync of each round from the calling thread (the others of
the round run on its fsync workers), so the rounds are the fsyncs made by the
calling thread. Counted in a separate, untimed run: the wrapper costs time.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from _typeshed import FileDescriptorLike

__all__ = ["FsyncCount", "count_fsyncs"]


@dataclass(frozen=True)
class FsyncCount:
    fsyncs: int
    rounds: int

    def to_dict(self) -> dict[str, int]:
        return {"fsyncs": self.fsyncs, "rounds": self.rounds}


def count_fsyncs(action: Callable[[], object]) -> FsyncCount:
    """Run ``action`` once and count its fsyncs, and those made by this thread."""
    real = os.fsync
    caller = threading.current_thread()
    lock = threading.Lock()
    counts = {"all": 0, "caller": 0}

    def counting(fd: FileDescriptorLike) -> None:
        with lock:
            counts["all"] += 1
            counts["caller"] += threading.current_thread() is caller
        real(fd)

    os.fsync = counting
    try:
        action()
    finally:
        os.fsync = real
    return FsyncCount(fsyncs=counts["all"], rounds=counts["caller"])
