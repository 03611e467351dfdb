"""A store operation's fsyncs: counted (for the benchmarks' reports), timed, or slowed.

Counted in a separate, untimed run: the wrapper costs time. The store flushes
the files of one commit step together (on several threads), the steps one
after another; their order follows from the commit protocol
(docs/storage.md) and is checked by tests/test_store_durability.py.

Timed (:func:`time_fsyncs`, :func:`flush_phases`): an operation's wall time
split at its flush rounds — the time before the first, each round, the time
between rounds — so two versions' commits can be compared round by round
(``bench.compare_store --clock phases``). A round is a set of fsyncs that overlap
in time, as the files of one commit step do on a disk; on tmpfs, where a
flush waits for no device, a step's fsyncs run one after another and each
counts as a round of its own, so the split is meant for a disk.

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

__all__ = ["count_fsyncs", "flush_phases", "slow_fsyncs", "time_fsyncs"]


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


def time_fsyncs(spans: list[tuple[float, float]]) -> None:
    """Append the start and end (``time.perf_counter``) of every later fsync of this
    process, on any thread, to ``spans``. Not undone: for a benchmark's worker process."""
    real = os.fsync

    def timed(fd: FileDescriptorLike) -> None:
        started = time.perf_counter()
        try:
            real(fd)
        finally:
            spans.append((started, time.perf_counter()))  # one append: safe across threads

    os.fsync = timed


def flush_phases(start: float, end: float, spans: list[tuple[float, float]]) -> dict[str, float]:
    """The wall time from ``start`` to ``end`` split at the flush rounds of ``spans``, in ms.

    Keys, in order: ``before flush 1``, ``flush 1``, ``before flush 2``, …,
    ``after the last flush`` and ``total``. A round runs from the first start
    to the last end of fsyncs that overlap; the time outside the rounds is the
    operation's own work (and its waits for threads) between them. Only the
    fsyncs that start between ``start`` and ``end`` count.
    """
    rounds: list[list[float]] = []
    for started, ended in sorted(span for span in spans if start <= span[0] <= end):
        if rounds and started <= rounds[-1][1]:
            rounds[-1][1] = max(rounds[-1][1], ended)
        else:
            rounds.append([started, ended])
    phases: dict[str, float] = {}
    last = start
    for number, (started, ended) in enumerate(rounds, start=1):
        phases[f"before flush {number}"] = (started - last) * 1000
        phases[f"flush {number}"] = (ended - started) * 1000
        last = ended
    phases["after the last flush"] = (end - last) * 1000
    phases["total"] = (end - start) * 1000
    return phases


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
