"""Exact McNemar and the paired bootstrap: hand-computed values and a plain re-implementation."""

from __future__ import annotations

import math
import random
from dataclasses import asdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deermem.eval.errors import StatisticsError
from deermem.eval.grading import (
    DEFAULT_PARAMETERS,
    StatisticsParameters,
    compare_pairs,
    mcnemar_exact,
    mcnemar_p_value,
    paired_bootstrap,
    percentile_indices,
)

T, F = True, False

# --- McNemar ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("only_first", "only_second", "p_value"),
    [
        # n = b + c; p = 2 · Σ_{k ≤ min(b,c)} C(n, k) / 2^n, capped at 1.
        (0, 0, 1.0),  # no discordant case: no evidence either way
        (1, 13, 30 / 16384),  # 2·(1 + 14)/2^14 = 0.0018310546875 (published "official")
        (1, 17, 38 / 262144),  # 2·(1 + 18)/2^18 = 0.00014495849609375 (published "overall")
        (0, 4, 0.125),  # 2·1/2^4 (published "synthetic")
        (8, 1, 20 / 512),  # 2·(1 + 9)/2^9 = 0.0390625
        (2, 5, 58 / 128),  # 2·(1 + 7 + 21)/2^7 = 0.453125
        (0, 10, 2 / 1024),  # 2·1/2^10
        (0, 1, 1.0),  # 2·1/2 = 1
        (3, 3, 1.0),  # 2·(1 + 6 + 15 + 20)/2^6 = 84/64, capped at 1
    ],
)
def test_mcnemar_p_value_by_hand(only_first: int, only_second: int, p_value: float) -> None:
    assert mcnemar_p_value(only_first, only_second) == p_value
    assert mcnemar_p_value(only_second, only_first) == p_value  # two-sided: symmetric
    assert type(mcnemar_p_value(only_first, only_second)) is float


def test_mcnemar_tabulates_pairs() -> None:
    pairs = [(T, T), (T, T), (F, F), (T, F), (F, T), (F, T), (F, T)]
    result = mcnemar_exact(pairs)
    assert (
        result.both_correct,
        result.both_wrong,
        result.only_first_correct,
        result.only_second_correct,
    ) == (2, 1, 1, 3)
    assert result.p_value == 2 * (1 + 4) / 16  # n = 4, k ≤ 1: C(4,0) + C(4,1) = 5
    assert asdict(result) == {
        "both_correct": 2,
        "both_wrong": 1,
        "only_first_correct": 1,
        "only_second_correct": 3,
        "p_value": 0.625,
    }


@given(st.integers(0, 300), st.integers(0, 300))
def test_mcnemar_equals_the_plain_float_formula(only_first: int, only_second: int) -> None:
    # The formula as the reference states it, evaluated the obvious way.
    n = only_first + only_second
    tail = sum(math.comb(n, k) for k in range(min(only_first, only_second) + 1))
    plain = 1.0 if n == 0 else min(1.0, 2 * tail * 0.5**n)
    assert mcnemar_p_value(only_first, only_second) == plain


def test_mcnemar_stays_finite_where_the_float_formula_breaks() -> None:
    # 0.5**2000 underflows and C(2000, k) overflows a float; integer division does neither.
    assert mcnemar_p_value(1000, 1000) == 1.0
    assert 0.0 < mcnemar_p_value(900, 1100) < 1e-5
    assert mcnemar_p_value(0, 2000) == 0.0  # 2/2^2000, correctly rounded


def test_mcnemar_refuses_no_pairs_and_negative_counts() -> None:
    with pytest.raises(StatisticsError, match="at least one pair"):
        mcnemar_exact([])
    with pytest.raises(StatisticsError, match="negative"):
        mcnemar_p_value(-1, 3)


# --- bootstrap ----------------------------------------------------------------------------


def plain_bootstrap(
    pairs: list[tuple[bool, bool]], seed: int, iterations: int, alpha: float
) -> tuple[float, float, float]:
    """The bootstrap written the straightforward way, with ``randrange``."""
    rng = random.Random(seed)
    n = len(pairs)
    differences = []
    for _ in range(iterations):
        sample = [pairs[rng.randrange(n)] for _ in range(n)]
        second = sum(1 for _, hybrid in sample if hybrid)
        first = sum(1 for conf, _ in sample if conf)
        differences.append(second / n - first / n)
    differences.sort()
    low = min(max(int(alpha / 2 * iterations), 0), iterations - 1)
    high = min(max(int((1 - alpha / 2) * iterations) - 1, 0), iterations - 1)
    mean = sum(1 for _, h in pairs if h) / n - sum(1 for c, _ in pairs if c) / n
    return mean, differences[low], differences[high]


def test_bootstrap_on_a_tiny_sample_matches_the_plain_implementation() -> None:
    pairs = [(T, T), (F, T), (T, F), (F, F), (F, T)]
    result = paired_bootstrap(pairs, StatisticsParameters(seed=7, iterations=200, alpha=0.1))
    assert (result.mean_difference, result.lower, result.upper) == plain_bootstrap(
        pairs, 7, 200, 0.1
    )
    # 3/5 − 2/5 in that order, float noise included (0.19999999999999996), as published.
    assert result.mean_difference == 3 / 5 - 2 / 5 != 0.2
    assert (result.seed, result.iterations, result.alpha) == (7, 200, 0.1)


@settings(max_examples=60, deadline=None)
@given(
    pairs=st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=17),
    seed=st.integers(0, 2**40),
    iterations=st.integers(1, 60),
    alpha=st.floats(0.001, 0.999),
)
def test_bootstrap_matches_the_plain_implementation(
    pairs: list[tuple[bool, bool]], seed: int, iterations: int, alpha: float
) -> None:
    result = paired_bootstrap(pairs, StatisticsParameters(seed, iterations, alpha))
    assert (result.mean_difference, result.lower, result.upper) == plain_bootstrap(
        pairs, seed, iterations, alpha
    )


def test_bootstrap_at_the_protocol_size_matches_the_plain_implementation() -> None:
    rng = random.Random(11)
    pairs = [(rng.random() < 0.5, rng.random() < 0.8) for _ in range(45)]
    result = paired_bootstrap(pairs)
    assert (result.mean_difference, result.lower, result.upper) == plain_bootstrap(
        pairs, 4789, 10_000, 0.05
    )


@pytest.mark.parametrize(
    ("pair", "expected"),
    [((F, T), 1.0), ((T, F), -1.0), ((T, T), 0.0), ((F, F), 0.0)],
)
def test_bootstrap_of_one_pair_is_degenerate(pair: tuple[bool, bool], expected: float) -> None:
    result = paired_bootstrap([pair] * 3)
    assert (result.mean_difference, result.lower, result.upper) == (expected,) * 3


def test_bootstrap_is_signed_second_minus_first_and_deterministic() -> None:
    pairs = [(F, T)] * 6 + [(T, T)] * 3 + [(T, F)]
    once = paired_bootstrap(pairs)
    assert once == paired_bootstrap(pairs)
    assert once.mean_difference == 0.5 > 0
    assert once.lower <= once.mean_difference <= once.upper
    flipped = paired_bootstrap([(second, first) for first, second in pairs])
    assert flipped.mean_difference == -0.5


def test_bootstrap_refuses_no_pairs() -> None:
    with pytest.raises(StatisticsError, match="at least one pair"):
        paired_bootstrap([])


@pytest.mark.parametrize(
    ("iterations", "alpha", "indices"),
    [
        (10_000, 0.05, (250, 9749)),  # the protocol's d[250] and d[9749]
        (1, 0.05, (0, 0)),  # clamped
        (10, 0.5, (2, 6)),  # floor(2.5), floor(7.5) − 1
        (100, 0.999, (49, 49)),  # floor(49.95), floor(50.05) − 1
        (3, 0.01, (0, 1)),  # floor(0.015), floor(2.985) − 1
    ],
)
def test_percentile_indices(iterations: int, alpha: float, indices: tuple[int, int]) -> None:
    assert percentile_indices(iterations, alpha) == indices


@pytest.mark.parametrize(
    ("arguments", "parameter"),
    [
        ({"alpha": 0.0}, "alpha"),
        ({"alpha": 1.0}, "alpha"),
        ({"alpha": 1.5}, "alpha"),
        ({"alpha": float("nan")}, "alpha"),
        ({"iterations": 0}, "iterations"),
        ({"iterations": 10.5}, "iterations"),
        ({"seed": "4789"}, "seed"),
    ],
)
def test_parameters_are_validated(arguments: dict[str, object], parameter: str) -> None:
    with pytest.raises(StatisticsError, match=parameter) as caught:
        StatisticsParameters(**arguments)  # type: ignore[arg-type]
    assert caught.value.parameter == parameter


def test_default_parameters_are_the_protocol_values() -> None:
    assert StatisticsParameters(seed=4789, iterations=10_000, alpha=0.05) == DEFAULT_PARAMETERS


def test_compare_pairs_counts_each_policy() -> None:
    comparison = compare_pairs([(T, T), (F, T), (F, F)], StatisticsParameters(iterations=20))
    assert (comparison.cases, comparison.first_correct, comparison.second_correct) == (3, 1, 2)
    assert set(asdict(comparison)) == {"bootstrap", "cases", "mcnemar"}
    assert set(asdict(comparison.bootstrap)) == {
        "alpha",
        "iterations",
        "lower",
        "mean_difference",
        "seed",
        "upper",
    }
