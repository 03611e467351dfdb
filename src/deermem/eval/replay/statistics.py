"""The paired bootstrap over seeds: how sure is a difference between the policies?

Each seed is one independent workload replayed under both policies, so the
policies' results pair up by seed. :func:`paired_interval` resamples whole
seeds with replacement and reports the mean difference and its percentile
interval. Seeds, not facts, are resampled: the facts of one workload share a
library and are not independent. Pure and seeded (:class:`random.Random`).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Interval", "paired_interval"]


@dataclass(frozen=True, slots=True)
class Interval:
    """A mean difference and its bootstrap interval."""

    mean: float
    low: float
    high: float

    @property
    def excludes_zero(self) -> bool:
        """Whether the interval says which policy is ahead."""
        return self.low > 0.0 or self.high < 0.0

    def to_dict(self) -> dict[str, float]:
        return {"mean": self.mean, "low": self.low, "high": self.high}


def paired_interval(
    first: Sequence[float],
    second: Sequence[float],
    *,
    iterations: int,
    confidence: float,
    seed: int,
) -> Interval:
    """``mean(second − first)`` over the pairs, with its percentile bootstrap interval.

    Raises:
        ValueError: no pairs, or the two sequences differ in length.
    """
    if not first or len(first) != len(second):
        raise ValueError(f"paired values needed, got {len(first)} and {len(second)}")
    differences = [b - a for a, b in zip(first, second, strict=True)]
    count = len(differences)
    rng = random.Random(seed)
    means = sorted(
        math.fsum(differences[rng.randrange(count)] for _ in range(count)) / count
        for _ in range(iterations)
    )
    tail = (1.0 - confidence) / 2
    low = means[max(0, math.floor(tail * iterations))]
    high = means[min(iterations - 1, math.ceil((1.0 - tail) * iterations) - 1)]
    return Interval(math.fsum(differences) / count, low, high)
