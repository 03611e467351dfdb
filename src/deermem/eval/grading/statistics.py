"""Paired statistics for two policies answering the same cases.

Each case gives one *pair*: was the first policy (``confidence``) right, was the
second (``hybrid-v1``) right. Two questions are asked of the pairs:

* **Is the difference more than luck?** The exact two-sided McNemar test looks
  only at the discordant cases — ``b`` where only the first policy was right,
  ``c`` where only the second was — and asks how likely a split at least as
  lopsided as ``b`` vs ``c`` would be if each discordant case were a fair coin
  toss. ``p = min(1, 2 · Σ_{k=0}^{min(b,c)} C(n, k) / 2^n)`` with ``n = b + c``;
  ``p = 1`` when there are no discordant cases.
* **How large is it?** The paired bootstrap resamples whole cases with
  replacement and records ``accuracy(second) − accuracy(first)`` each time; the
  percentile interval of those differences brackets the improvement.

Everything is reproducible to the last bit, because published figures are
compared byte for byte: the binomial sum is exact integer arithmetic, and the
bootstrap draws each index with ``random.Random(seed).randrange(n)`` (CPython's
Mersenne Twister, rejection sampling over ``getrandbits(n.bit_length())``, as the
protocol prescribes), with the sums, the division and the subtraction done in a
fixed order. NumPy, or ``Random.choices`` (which scales ``random()`` instead of
rejecting), would give other numbers; the tests re-derive the published intervals,
so a Python release that drew differently would fail them, not go unnoticed.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from deermem.eval.errors import StatisticsError

__all__ = [
    "DEFAULT_PARAMETERS",
    "BootstrapInterval",
    "McNemarTest",
    "PairedComparison",
    "StatisticsParameters",
    "compare_pairs",
    "mcnemar_exact",
    "mcnemar_p_value",
    "paired_bootstrap",
    "percentile_indices",
]

Pair = tuple[bool, bool]
"""(first policy correct, second policy correct) for one case."""


@dataclass(frozen=True, slots=True)
class StatisticsParameters:
    """The bootstrap's fixed inputs, pinned by the evaluation protocol.

    Attributes:
        seed: seed of ``random.Random``.
        iterations: number of bootstrap resamples.
        alpha: two-sided error level; the interval covers ``1 − alpha``.

    Raises:
        StatisticsError: ``iterations`` is below 1 or ``alpha`` is not strictly
            between 0 and 1.
    """

    seed: int = 4789
    iterations: int = 10_000
    alpha: float = 0.05

    def __post_init__(self) -> None:
        if type(self.seed) is not int:
            raise StatisticsError("seed", self.seed, "must be an integer")
        if type(self.iterations) is not int or self.iterations < 1:
            raise StatisticsError("iterations", self.iterations, "must be an integer of at least 1")
        if not 0.0 < self.alpha < 1.0:
            raise StatisticsError("alpha", self.alpha, "must lie strictly between 0 and 1")


DEFAULT_PARAMETERS = StatisticsParameters()
"""Seed 4789, 10,000 resamples, alpha 0.05: the values of the reproduction protocol."""


@dataclass(frozen=True, slots=True)
class McNemarTest:
    """The 2×2 table of a paired comparison and its exact two-sided p value."""

    both_correct: int
    both_wrong: int
    only_first_correct: int
    only_second_correct: int
    p_value: float

    def to_dict(self) -> dict[str, object]:
        """The ``mcnemar`` object of ``qa.stats.json``."""
        return {
            "both_correct": self.both_correct,
            "both_wrong": self.both_wrong,
            "only_first_correct": self.only_first_correct,
            "only_second_correct": self.only_second_correct,
            "p_value": self.p_value,
        }


@dataclass(frozen=True, slots=True)
class BootstrapInterval:
    """The observed accuracy difference (second − first) and its percentile interval."""

    mean_difference: float
    lower: float
    upper: float
    seed: int
    iterations: int
    alpha: float

    def to_dict(self) -> dict[str, object]:
        """The ``bootstrap`` object of ``qa.stats.json``."""
        return {
            "alpha": self.alpha,
            "iterations": self.iterations,
            "lower": self.lower,
            "mean_difference": self.mean_difference,
            "seed": self.seed,
            "upper": self.upper,
        }


@dataclass(frozen=True, slots=True)
class PairedComparison:
    """Both statistics for one suite of cases."""

    cases: int
    mcnemar: McNemarTest
    bootstrap: BootstrapInterval

    @property
    def first_correct(self) -> int:
        """Cases the first policy answered correctly."""
        return self.mcnemar.both_correct + self.mcnemar.only_first_correct

    @property
    def second_correct(self) -> int:
        """Cases the second policy answered correctly."""
        return self.mcnemar.both_correct + self.mcnemar.only_second_correct

    def to_dict(self) -> dict[str, object]:
        """One suite of ``qa.stats.json``."""
        return {
            "bootstrap": self.bootstrap.to_dict(),
            "cases": self.cases,
            "mcnemar": self.mcnemar.to_dict(),
        }


def mcnemar_p_value(only_first: int, only_second: int) -> float:
    """Exact two-sided McNemar p value for ``b`` and ``c`` discordant cases.

    The binomial tail is summed exactly as integers and divided by ``2^n`` with
    Python's correctly rounded integer division. For ``n ≤ 1023`` that is the
    same float as ``2 · Σ · 0.5**n`` (scaling by powers of two is exact); beyond,
    it stays right where ``0.5**n`` would underflow.
    """
    if only_first < 0 or only_second < 0:
        raise StatisticsError(
            "discordant counts", (only_first, only_second), "must not be negative"
        )
    total = only_first + only_second
    if total == 0:
        return 1.0
    tail = sum(math.comb(total, k) for k in range(min(only_first, only_second) + 1))
    return min(1.0, (2 * tail) / (1 << total))


def mcnemar_exact(pairs: Sequence[Pair]) -> McNemarTest:
    """Tabulate the pairs and test them with the exact two-sided McNemar test.

    Raises:
        StatisticsError: there are no pairs.
    """
    if not pairs:
        raise StatisticsError("pairs", 0, "McNemar's test needs at least one pair")
    counts = {(True, True): 0, (False, False): 0, (True, False): 0, (False, True): 0}
    for first, second in pairs:
        counts[bool(first), bool(second)] += 1
    only_first, only_second = counts[True, False], counts[False, True]
    return McNemarTest(
        both_correct=counts[True, True],
        both_wrong=counts[False, False],
        only_first_correct=only_first,
        only_second_correct=only_second,
        p_value=mcnemar_p_value(only_first, only_second),
    )


def percentile_indices(iterations: int, alpha: float) -> tuple[int, int]:
    """Positions of the interval bounds in the sorted resampled differences.

    ``floor(alpha/2 · iterations)`` and ``floor((1 − alpha/2) · iterations) − 1``,
    each clamped to ``[0, iterations − 1]``: 250 and 9,749 for 10,000 at 0.05.
    """
    last = iterations - 1
    lower = math.floor(alpha / 2 * iterations)
    upper = math.floor((1 - alpha / 2) * iterations) - 1
    return min(max(lower, 0), last), min(max(upper, 0), last)


def paired_bootstrap(
    pairs: Sequence[Pair], parameters: StatisticsParameters = DEFAULT_PARAMETERS
) -> BootstrapInterval:
    """Percentile bootstrap of ``accuracy(second) − accuracy(first)`` over whole cases.

    Raises:
        StatisticsError: there are no pairs.
    """
    size = len(pairs)
    if size == 0:
        raise StatisticsError("pairs", 0, "the paired bootstrap needs at least one pair")
    first = [int(bool(pair[0])) for pair in pairs]
    second = [int(bool(pair[1])) for pair in pairs]
    differences = _resampled_differences(first, second, parameters)
    differences.sort()
    low, high = percentile_indices(parameters.iterations, parameters.alpha)
    return BootstrapInterval(
        mean_difference=sum(second) / size - sum(first) / size,
        lower=differences[low],
        upper=differences[high],
        seed=parameters.seed,
        iterations=parameters.iterations,
        alpha=parameters.alpha,
    )


def _resampled_differences(
    first: list[int], second: list[int], parameters: StatisticsParameters
) -> list[float]:
    """One difference per resample, in the order the generator produces them.

    Each resample draws ``size`` indices one at a time with ``randrange(size)``;
    the draw order is part of the published intervals.
    """
    size = len(first)
    randrange = random.Random(parameters.seed).randrange
    differences: list[float] = []
    for _ in range(parameters.iterations):
        first_total = second_total = 0
        for _ in range(size):
            index = randrange(size)
            first_total += first[index]
            second_total += second[index]
        differences.append(second_total / size - first_total / size)
    return differences


def compare_pairs(
    pairs: Sequence[Pair], parameters: StatisticsParameters = DEFAULT_PARAMETERS
) -> PairedComparison:
    """McNemar and the bootstrap for one suite of pairs (in case-id order).

    Raises:
        StatisticsError: there are no pairs.
    """
    return PairedComparison(
        cases=len(pairs),
        mcnemar=mcnemar_exact(pairs),
        bootstrap=paired_bootstrap(pairs, parameters),
    )
