"""The timing loops the pure-code benchmarks share.

The host is shared and its speed drifts within seconds, so a comparison of two
implementations must not time one and then the other: :func:`interleaved_ms`
alternates them sample by sample and reports each one's median. Medians resist
the odd collector pause and a neighbour's burst better than means.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["LineWorker", "interleaved_ms", "median_ms"]


def median_ms(
    run: Callable[[], object], budget_s: float = 1.5, *, max_repeats: int = 2000
) -> float:
    """Median wall time of ``run()`` in milliseconds.

    One warm-up call, one call to size the loop, then as many repetitions as
    fit in ``budget_s`` (at least 5, at most ``max_repeats``).
    """
    run()  # warm-up
    start = time.perf_counter()
    run()
    once = max(time.perf_counter() - start, 1e-6)
    repeats = max(5, min(max_repeats, int(budget_s / once)))
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000


def interleaved_ms(
    runs: Mapping[str, Callable[[], object]], budget_s: float = 3.0, *, min_rounds: int = 15
) -> dict[str, float]:
    """Median wall time in milliseconds of each of ``runs``, timed in alternation.

    Each round times every run once, in the given order (A B A B …); a sample
    is the mean of enough back-to-back calls to last about a millisecond, so
    the clock's resolution does not matter for the smallest cases. Rounds
    continue until ``budget_s`` is spent (at least ``min_rounds``).
    """
    calls: dict[str, int] = {}
    for name, run in runs.items():
        run()  # warm-up
        start = time.perf_counter()
        run()
        once = max(time.perf_counter() - start, 1e-7)
        calls[name] = max(1, int(0.001 / once))
    samples: dict[str, list[float]] = {name: [] for name in runs}
    deadline = time.perf_counter() + budget_s
    while min(len(s) for s in samples.values()) < min_rounds or time.perf_counter() < deadline:
        for name, run in runs.items():
            count = calls[name]
            start = time.perf_counter()
            for _ in range(count):
                run()
            samples[name].append((time.perf_counter() - start) / count)
    return {name: statistics.median(values) * 1000 for name, values in samples.items()}


class LineWorker:
    """A worker process a comparison drives one line at a time.

    The benchmarks that compare source trees (or deermem with the original)
    run each side in a process of its own and alternate them request by
    request: a request is one line on the worker's standard input, its answer
    one JSON line on its standard output. The worker's first line (``first``)
    says what it imported, or that it is ready. ``source``, when given, is the
    tree put first on ``PYTHONPATH``; the worker runs in this checkout, so it
    finds its ``bench`` package.
    """

    def __init__(self, command: Sequence[str], *, source: Path | None = None) -> None:
        environment = dict(os.environ)
        if source is not None:
            environment["PYTHONPATH"] = str(source)
        self._process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=environment,
            cwd=Path(__file__).parent.parent,
        )
        self.first = self._line()

    def _line(self) -> str:
        assert self._process.stdout is not None
        line = self._process.stdout.readline()
        if not line:
            raise RuntimeError(f"a benchmark worker ended early: {self._process.args!r}")
        return line.strip()

    def ask(self, request: str) -> Any:
        """Send one request line; its answer, decoded."""
        assert self._process.stdin is not None
        self._process.stdin.write(request + "\n")
        self._process.stdin.flush()
        return json.loads(self._line())

    def close(self) -> None:
        assert self._process.stdin is not None
        self._process.stdin.close()
        self._process.wait(timeout=60)
