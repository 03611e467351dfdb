"""The capacity gate: which facts stay when a library is over its cap.

:func:`select_facts_for_capacity` is the one function every write path that
adds facts ends in (extraction, manual create, import, restore). It is pure:
the clock and the usage data are arguments, there is no I/O and no random
source, and ties break by input position, so the same input always gives the
same decision.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from fractions import Fraction
from typing import Any, Final

from deermem.model import category_key
from deermem.policy.capacity import CapacityPolicy, check_max_facts
from deermem.policy.decision import CapacityDecision, EvictedFact, F
from deermem.policy.names import POLICY_HYBRID_V1
from deermem.policy.scoring import Scores, fact_id_of, score_facts

__all__ = ["reserved_slot_count", "reserved_slots", "select_facts_for_capacity"]

_DEFAULT_POLICY: Final = CapacityPolicy()


def select_facts_for_capacity(
    facts: Sequence[F],
    *,
    max_facts: int,
    policy: str | CapacityPolicy,
    usage: Mapping[str, Mapping[str, object]] | None = None,
    now: datetime | None = None,
    confidence_weight: float | None = None,
    confirmation_weight: float | None = None,
    access_weight: float | None = None,
    confirmation_half_life_days: float | None = None,
    access_half_life_days: float | None = None,
    correction_reserved_fraction: float | None = None,
    correction_reserved_max: int | None = None,
    reserved_categories: Collection[str] | None = None,
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
        policy: a :class:`CapacityPolicy`, or a policy name
            (``"confidence"``, ``"hybrid-v1"``) whose parameters are the
            keywords below.
        usage: fact id → usage-sidecar entry; read by ``hybrid-v1`` only.
        now: the clock; required by ``hybrid-v1`` (decisions never read the
            wall clock). A naive datetime is taken to be UTC.
        confidence_weight: with a policy name, the parameter of that name
            (see :class:`CapacityPolicy`); left out, its default. The same
            holds for every keyword after it. ``reserved_categories`` are
            compared stripped and lower-cased (the configuration's
            ``protected_categories``).

    Raises:
        ValueError: an unknown policy, a negative cap, weights that do not
            sum to 1, a non-positive half-life, ``reserved_categories`` given as
            one string, or ``hybrid-v1`` without ``now``.
        TypeError: a :class:`CapacityPolicy` together with parameter keywords.
    """
    if isinstance(reserved_categories, str):
        # A string is a Collection[str] of its letters: 'correction' would reserve slots
        # for the categories 'c', 'o', 'r' ... and no correction would hold one.
        raise ValueError(
            "reserved_categories must be a collection of category names, not a single "
            f"string: got {reserved_categories!r}"
        )
    chosen = _policy_of(
        policy,
        confidence_weight=confidence_weight,
        confirmation_weight=confirmation_weight,
        access_weight=access_weight,
        confirmation_half_life_days=confirmation_half_life_days,
        access_half_life_days=access_half_life_days,
        correction_reserved_fraction=correction_reserved_fraction,
        correction_reserved_max=correction_reserved_max,
        reserved_categories=None if reserved_categories is None else tuple(reserved_categories),
    )
    check_max_facts(max_facts)
    offered = tuple(facts)
    if len(offered) <= max_facts:
        return CapacityDecision(
            kept=offered,
            evicted=(),
            reserved_correction_slots=0,
            policy=chosen.name,
            max_facts=max_facts,
            offered=offered,
            scored=None,
        )
    scores = score_facts(offered, chosen, usage or {}, now)
    # sorted() is stable, also with reverse=True: equal scores keep input order,
    # which is the contract's ranking (score descending, input position).
    order = sorted(range(len(offered)), key=scores.values.__getitem__, reverse=True)
    reserved = _reserved_ranks(offered, order, chosen, max_facts)
    kept_ranks, evicted_ranks = _fill(len(offered), max_facts, reserved)
    return CapacityDecision(
        kept=tuple(offered[order[rank]] for rank in kept_ranks),
        evicted=_evicted_records(offered, scores, order, kept_ranks, evicted_ranks),
        reserved_correction_slots=len(reserved),
        policy=chosen.name,
        max_facts=max_facts,
        offered=offered,
        scored=scores,
    )


def reserved_slot_count(max_facts: int, fraction: float, maximum: int) -> int:
    """Slots ``hybrid-v1`` holds for corrections: ``min(maximum, ceil(max_facts × fraction))``.

    The product is taken in exact decimal arithmetic on the fraction as
    written, so 10 % of 30 facts is 3 slots (binary floating point would make
    ``30 * 0.1`` slightly more than 3 and round it up to 4).
    """
    return min(maximum, math.ceil(max_facts * Fraction(repr(float(fraction)))))


def reserved_slots(policy: CapacityPolicy, max_facts: int) -> int:
    """Slots ``policy`` holds for its reserved categories at a cap of ``max_facts``.

    ``hybrid-v1`` holds :func:`reserved_slot_count`, never more than the cap;
    ``confidence`` holds none. A decision fills them with the best-ranked
    facts of those categories, as many as there are.
    """
    if policy.name != POLICY_HYBRID_V1:
        return 0
    count = reserved_slot_count(
        max_facts, policy.correction_reserved_fraction, policy.correction_reserved_max
    )
    return min(count, max_facts)


def _policy_of(policy: str | CapacityPolicy, **parameters: Any) -> CapacityPolicy:
    """The policy to decide with: the one given, or a name with its keyword parameters."""
    given = {key: value for key, value in parameters.items() if value is not None}
    if isinstance(policy, CapacityPolicy):
        if given:
            raise TypeError(
                "pass the parameters inside the CapacityPolicy, not as keywords: "
                f"{', '.join(sorted(given))}"
            )
        return policy
    return dataclasses.replace(_DEFAULT_POLICY, name=policy, **given)


def _reserved_ranks(
    facts: Sequence[F], order: list[int], policy: CapacityPolicy, max_facts: int
) -> list[int]:
    """Ranks of the best-ranked facts of the reserved categories, as many as the reserve holds."""
    slots = reserved_slots(policy, max_facts)
    wanted = {category_key(name) for name in policy.reserved_categories}
    ranks: list[int] = []
    for rank, index in enumerate(order):
        if len(ranks) >= slots:
            break
        if category_key(facts[index].get("category")) in wanted:
            ranks.append(rank)
    return ranks


def _fill(size: int, max_facts: int, reserved: list[int]) -> tuple[list[int], list[int]]:
    """Kept ranks (best first) and evicted ranks (lowest first).

    The reserved ranks are kept; the free slots go to the best of the rest.
    """
    held = set(reserved)
    free = max_facts - len(reserved)
    ordinary = [rank for rank in range(size) if rank not in held]
    return sorted(reserved + ordinary[:free]), ordinary[free:][::-1]


def _evicted_records(
    facts: Sequence[F],
    scores: Scores,
    order: list[int],
    kept_ranks: list[int],
    evicted_ranks: list[int],
) -> tuple[EvictedFact, ...]:
    """One record per evicted fact, lowest-ranked first.

    The margin is measured from the lowest kept score, taken with ``min``:
    its first of equal minima, since 0.0 and -0.0 subtract differently.
    """
    values, signals = scores.values, scores.signals
    lowest_kept = min((values[order[rank]] for rank in kept_ranks), default=None)
    records = []
    for rank in evicted_ranks:
        index = order[rank]
        fact = facts[index]
        category = fact.get("category")
        score = values[index]
        records.append(
            EvictedFact(
                fact_id_of(fact.get("id")),
                category if isinstance(category, str) and category else "context",
                score,
                None if signals is None else signals[index],
                rank + 1,
                None if lowest_kept is None else lowest_kept - score,
            )
        )
    return tuple(records)
