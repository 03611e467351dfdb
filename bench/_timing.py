"""The timing loop the pure-code benchmarks share.

One warm-up call, one call to size the loop, then as many repetitions as fit
in ``budget_s`` (at least 5, at most ``max_repeats``); the median resists the
host's speed changes and the odd collector pause better than the mean.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

__all__ = ["median_ms"]


def median_ms(
    run: Callable[[], object], budget_s: float = 1.5, *, max_repeats: int = 2000
) -> float:
    """Median wall time of ``run()`` in milliseconds."""
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
