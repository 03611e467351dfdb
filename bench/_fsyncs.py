"""A store operation's fsyncs: counted (for the benchmarks' reports), or slowed.

Counted in a separate, untimed run: the wrapper costs time. The store flushes
the files of one commit step together (on several threads), the steps one
after another; their order follows from the commit protocol
(docs/storage.md) and is checked by tests/test_store_durability.py.

Slowed (:func:`slow_fsyncs`): a disk whose flushes are slow, for the lock
fairness bench and its test. The store flushes while it holds the user's
lock, so a slow flush lengthens every hold of the lock as a slow device does.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from _typeshed import FileDescriptorLike

__all__ = ["count_fsyncs", "slow_fsyncs"]


def count_fsyncs(action: Callable[[], object]) -> int:
    """Run ``action`` once and count the fsyncs it makes."""
    real = os.fsync
    count = 0
    lock = threading.Lock()

    def counting(fd: FileDescriptorLike) -> None:  # the store flushes on several threads
        nonlocal count
        with lock:
            count += 1
        real(fd)

    os.fsync = counting
    try:
        action()
    finally:
        os.fsync = real
    return count


def slow_fsyncs(delay: float) -> None:
    """Make every later fsync of this process wait ``delay`` seconds before it flushes.

    For a child process that stands in for a writer on a slow disk: a real
    flush still follows, so durability is unchanged. Not undone: the process
    is the slow disk's for the rest of its life.
    """
    real = os.fsync

    def slow(fd: FileDescriptorLike) -> None:
        time.sleep(delay)
        real(fd)

    os.fsync = slow
