"""The capacity gate: which facts stay when a library is over its cap.

:func:`select_facts_for_capacity` is the one function every write path that
adds facts ends in (extraction, manual create, import, restore). It is pure:
the clock and the usage data are arguments, there is no I/O and no random
source, and ties break by input position, so the same input always gives the
same decision.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import Any, Final

from deermem.model.categories import category_key
from deermem.policy._batch import pick, score_confidence, score_hybrid
from deermem.policy.decision import CapacityDecision, EvictedFact, F, FactScore, Ranking
from deermem.policy.names import POLICIES, POLICY_CONFIDENCE, POLICY_HYBRID_V1
from deermem.policy.scoring import as_utc

__all__ = [
    "POLICIES",
    "POLICY_CONFIDENCE",
    "POLICY_HYBRID_V1",
    "CapacityDecision",
    "EvictedFact",
    "FactScore",
    "reserved_slot_count",
    "select_facts_for_capacity",
]

WEIGHT_TOLERANCE: Final = 1e-9


def select_facts_for_capacity(
    facts: Sequence[F],
    *,
    max_facts: int,
    policy: str,
    usage: Mapping[str, Mapping[str, object]] | None = None,
    now: datetime | None = None,
    confidence_weight: float = 0.65,
    confirmation_weight: float = 0.25,
    access_weight: float = 0.10,
    confirmation_half_life_days: float = 90,
    access_half_life_days: float = 30,
    correction_reserved_fraction: float = 0.10,
    correction_reserved_max: int = 10,
    reserved_categories: Collection[str] = ("correction",),
) -> CapacityDecision[F]:
    """Decide which facts survive a cap of ``max_facts``.

    At or below the cap every fact is kept in input order. Over the cap each
    fact is scored and the facts are ranked by (score descending, input
    position). ``hybrid-v1`` first holds ``min(correction_reserved_max,
    ceil(max_facts × correction_reserved_fraction))`` slots for the best-ranked
    facts of the reserved categories (unused slots return to ordinary
    competition), then fills the rest in rank order. ``confidence`` ranks by
    confidence alone and reserves nothing.

    Args:
        facts: mappings with canonical keys (``id``, ``category``,
            ``confidence``, ``createdAt``, ``lastConfirmedAt``) or ``Fact``s.
        max_facts: the cap, at least 0.
        policy: ``"confidence"`` or ``"hybrid-v1"``.
        usage: fact id → usage-sidecar entry; read by ``hybrid-v1`` only.
        now: the clock; required by ``hybrid-v1`` (decisions never read the
            wall clock). A naive datetime is taken to be UTC.
        reserved_categories: categories that share the correction reserve,
            compared stripped and lower-cased (the configuration's
            ``protected_categories``).

    Raises:
        ValueError: an unknown policy, a negative cap, weights that do not
            sum to 1, a non-positive half-life, or ``hybrid-v1`` without ``now``.
    """
    _check_arguments(
        policy,
        max_facts,
        (confidence_weight, confirmation_weight, access_weight),
        (confirmation_half_life_days, access_half_life_days),
        correction_reserved_fraction,
        correction_reserved_max,
    )
    items = tuple(facts)
    if len(items) <= max_facts:
        return CapacityDecision(
            kept=items,
            reserved_correction_slots=0,
            policy=policy,
            max_facts=max_facts,
            ranking=None,
        )

    if policy == POLICY_HYBRID_V1:
        if now is None:
            raise ValueError("the hybrid-v1 policy needs the clock: pass now=")
        library = score_hybrid(
            items,
            usage or {},
            as_utc(now),
            (confidence_weight, confirmation_weight, access_weight),
            confirmation_half_life_days,
            access_half_life_days,
        )
    else:
        library = score_confidence(items)
    scores = library.scores
    # sorted() is stable, also with reverse=True: equal scores keep input order,
    # which gives the contract's ranking (score descending, input position).
    order = sorted(range(len(items)), key=scores.__getitem__, reverse=True)

    reserved_ranks: list[int] = []
    if policy == POLICY_HYBRID_V1:
        slots = min(
            reserved_slot_count(max_facts, correction_reserved_fraction, correction_reserved_max),
            max_facts,
        )
        assert library.categories is not None  # read by the hybrid-v1 scoring pass
        reserved_ranks = _reserved_ranks(library.categories, order, slots, reserved_categories)
    kept_ranks, evicted_ranks = _fill(len(items), max_facts, reserved_ranks)
    kept_order = pick(order, kept_ranks)
    ranking = Ranking(items, library, order, evicted_ranks, _lowest_score(scores, kept_order))
    return CapacityDecision(
        kept=pick(items, kept_order),
        reserved_correction_slots=len(reserved_ranks),
        policy=policy,
        max_facts=max_facts,
        ranking=ranking,
    )


@functools.lru_cache(maxsize=256)
def reserved_slot_count(max_facts: int, fraction: float, maximum: int) -> int:
    """Slots ``hybrid-v1`` holds for corrections: ``min(maximum, ceil(max_facts × fraction))``.

    The product is taken in exact decimal arithmetic on the fraction as
    written, so 10 % of 30 facts is 3 slots (binary floating point would make
    ``30 * 0.1`` slightly more than 3 and round it up to 4).
    """
    numerator, denominator = _decimal_ratio(float(fraction))
    return min(maximum, -(-max_facts * numerator // denominator))


def _decimal_ratio(value: float) -> tuple[int, int]:
    """The exact value of ``repr(value)`` — the decimal as written — as two integers.

    ``Fraction(repr(value))`` without :mod:`fractions`, whose import (with
    :mod:`decimal` beneath it) costs more than a whole evaluation policy run
    spends in this function. ``repr`` of a finite float is ``[-]digits.digits``
    with an optional ``e±NN`` exponent.

    Raises:
        ValueError: ``value`` is infinite or NaN.
    """
    mantissa, _, exponent = repr(value).partition("e")
    whole, _, decimals = mantissa.partition(".")
    numerator = int(whole + decimals)  # int() refuses "inf" and "nan"
    power = int(exponent or "0") - len(decimals)
    return (numerator * 10**power, 1) if power >= 0 else (numerator, 10**-power)


# --- internals -------------------------------------------------------------


def _reserved_ranks(
    categories: list[Any],
    order: list[int],
    slots: int,
    reserved_categories: Collection[str],
) -> list[int]:
    """Ranks of the best-ranked facts of the reserved categories, at most ``slots``.

    ``categories`` holds each fact's raw category, by input position.
    """
    if slots <= 0:
        return []
    wanted = {category_key(name) for name in reserved_categories}
    verdicts: dict[object, bool] = {}  # raw category -> reserved? (few distinct values)
    ranks: list[int] = []
    for rank, index in enumerate(order):
        category = categories[index]
        verdict = verdicts.get(category) if isinstance(category, str) else False
        if verdict is None:
            verdict = verdicts[category] = category_key(category) in wanted
        if verdict:
            ranks.append(rank)
            if len(ranks) >= slots:
                break
    return ranks


def _fill(
    size: int, max_facts: int, reserved_ranks: list[int]
) -> tuple[Sequence[int], Sequence[int]]:
    """Kept ranks (ascending) and evicted ranks (descending: lowest-ranked first).

    The kept facts are every rank below a boundary plus the reserved ranks at
    or past it. Without a reserve the boundary is ``max_facts``; each reserved
    rank below it takes one of the free slots, which pushes the boundary one
    further. Computed from the few reserved ranks and ``range`` objects, so
    nothing loops over the whole library in Python.
    """
    boundary = max_facts - len(reserved_ranks)  # the slots left for ordinary competition
    beyond: list[int] = []  # reserved ranks at or past the boundary, ascending
    for position, rank in enumerate(reserved_ranks):  # ascending
        if rank >= boundary:
            beyond = reserved_ranks[position:]
            break
        boundary += 1
    if not beyond:  # the common case: ranges, not lists of thousands of ints
        return range(boundary), range(size - 1, boundary - 1, -1)
    evicted: list[int] = []
    upper = size
    for rank in reversed(beyond):
        evicted.extend(range(upper - 1, rank, -1))
        upper = rank
    evicted.extend(range(upper - 1, boundary - 1, -1))
    return [*range(boundary), *beyond], evicted


def _lowest_score(scores: list[float], kept_order: Sequence[int]) -> float | None:
    """The lowest kept score, exactly as ``min`` over the kept scores gives it.

    The kept facts are in rank order, so their scores never increase and the
    last one is the minimum (scores are finite by construction). ``min``
    returns the *first* of equal minima; equal non-zero floats are the same
    bits, but 0.0 and -0.0 compare equal and subtract differently (the margin
    is ``lowest - score``), so a zero minimum is looked up with ``min``.
    """
    if not kept_order:
        return None
    lowest = scores[kept_order[-1]]
    return min(pick(scores, kept_order)) if lowest == 0.0 else lowest


def _check_arguments(
    policy: str,
    max_facts: object,  # typed loosely: callers outside mypy pass anything
    weights: tuple[float, float, float],
    half_lives: tuple[float, float],
    fraction: float,
    reserved_max: object,
) -> None:
    if policy not in POLICIES:
        raise ValueError(f"unknown eviction policy {policy!r}; expected one of {list(POLICIES)}")
    if isinstance(max_facts, bool) or not isinstance(max_facts, int) or max_facts < 0:
        raise ValueError(f"max_facts must be a whole number of at least 0, got {max_facts!r}")
    total = weights[0] + weights[1] + weights[2]
    # plain comparisons, not any(<generator>): this runs on every decision
    if (
        weights[0] < 0
        or weights[1] < 0
        or weights[2] < 0
        or not math.isclose(total, 1.0, rel_tol=0.0, abs_tol=WEIGHT_TOLERANCE)
    ):
        raise ValueError(
            "eviction weights must be non-negative and sum to 1.0: "
            f"confidence_weight={weights[0]!r} + confirmation_weight={weights[1]!r} "
            f"+ access_weight={weights[2]!r} = {total!r}"
        )
    if not (half_lives[0] > 0 and half_lives[1] > 0):
        raise ValueError(f"half-lives must be positive, got {list(half_lives)!r}")
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"correction_reserved_fraction must be within [0, 1], got {fraction!r}")
    if isinstance(reserved_max, bool) or not isinstance(reserved_max, int) or reserved_max < 0:
        raise ValueError(
            f"correction_reserved_max must be a whole number of at least 0, got {reserved_max!r}"
        )
