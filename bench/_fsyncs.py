"""Counting a store operation's fsyncs (for the benchmarks' reports).

Counted in a separate, untimed run: the wrapper costs time. The store flushes
in the calling thread, one fsync after another, so the count is also the
number of device flushes a caller waits for; their order follows from the
commit protocol (docs/storage.md) and is checked by
tests/test_store_durability.py.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from _typeshed import FileDescriptorLike

__all__ = ["count_fsyncs"]


def count_fsyncs(action: Callable[[], object]) -> int:
    """Run ``action`` once and count the fsyncs it makes."""
    real = os.fsync
    count = 0

    def counting(fd: FileDescriptorLike) -> None:
        nonlocal count
        count += 1
        real(fd)

    os.fsync = counting
    try:
        action()
    finally:
        os.fsync = real
    return count
