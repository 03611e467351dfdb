"""The capacity gate against the contract written out plainly, bit for bit.

``select_facts_for_capacity`` ranks with a stable reverse sort and fills the
cap from the ranks left after the reserve, and builds the records from the
scores by input position. None of that may change a decision or a float:
here every field of every decision —
kept objects, each record's id, category, score, components, rank and margin,
the score table — is compared with a per-fact implementation of the contract
written the obvious way, floats by ``repr`` (so 0.0 and -0.0 differ).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deermem import POLICY_CONFIDENCE, POLICY_HYBRID_V1, Fact, select_facts_for_capacity
from deermem.model import category_key, format_timestamp
from deermem.policy import (
    CapacityDecision,
    access_heat,
    coerce_confidence,
    confirmation_freshness,
    reserved_slot_count,
)
from deermem.policy.selection import _fill

NOW = datetime(2026, 8, 13, tzinfo=UTC)

# --- the contract, one fact at a time ---------------------------------------------


def _field(fact: Mapping[str, Any] | Fact, key: str) -> Any:
    return getattr(fact, key) if isinstance(fact, Fact) else fact.get(key)


def _fact_id(fact: Mapping[str, Any] | Fact) -> str:
    value = _field(fact, "id")
    return value if isinstance(value, str) else "" if value is None else str(value)


def reference(
    facts: Sequence[Mapping[str, Any] | Fact],
    *,
    max_facts: int,
    policy: str,
    usage: Mapping[str, Any],
    now: datetime,
    weights: tuple[float, float, float] = (0.65, 0.25, 0.10),
    half_lives: tuple[float, float] = (90, 30),
    fraction: float = 0.10,
    maximum: int = 10,
    reserved: Sequence[str] = ("correction",),
) -> dict[str, Any]:
    """What a decision must contain, computed the obvious way."""
    if len(facts) <= max_facts:
        return {"kept": list(facts), "evicted": [], "scores": {}, "reserved": 0}
    scored: list[tuple[float, dict[str, float]]] = []
    for fact in facts:
        c = coerce_confidence(_field(fact, "confidence"))
        if policy == POLICY_HYBRID_V1:
            f = confirmation_freshness(
                _field(fact, "lastConfirmedAt"), _field(fact, "createdAt"), now, half_lives[0]
            )
            a = access_heat(usage.get(_fact_id(fact)), now, half_lives[1])
            wc, wf, wa = weights
            scored.append(
                (
                    wc * c + wf * f + wa * a,
                    {"confidence": c, "confirmationFreshness": f, "accessHeat": a},
                )
            )
        else:
            scored.append((c, {"confidence": c}))
    ranked = sorted(range(len(facts)), key=lambda index: (-scored[index][0], index))
    slots = (
        min(reserved_slot_count(max_facts, fraction, maximum), max_facts)
        if policy == POLICY_HYBRID_V1
        else 0
    )
    wanted = {category_key(name) for name in reserved}
    reserved_ranks = [
        rank
        for rank, index in enumerate(ranked)
        if isinstance(category := _field(facts[index], "category"), str)
        and category_key(category) in wanted
    ][:slots]
    free = max_facts - len(reserved_ranks)
    kept_ranks = []
    for rank in range(len(facts)):
        if rank in reserved_ranks:
            kept_ranks.append(rank)
        elif free > 0:
            kept_ranks.append(rank)
            free -= 1
    lowest = min((scored[ranked[rank]][0] for rank in kept_ranks), default=None)
    evicted = []
    for rank in reversed(range(len(facts))):
        if rank in kept_ranks:
            continue
        index = ranked[rank]
        category = _field(facts[index], "category")
        score, components = scored[index]
        evicted.append(
            (
                _fact_id(facts[index]),
                category if isinstance(category, str) and category else "context",
                repr(score),
                {key: repr(value) for key, value in components.items()},
                rank + 1,
                None if lowest is None else repr(lowest - score),
            )
        )
    scores = {
        _fact_id(fact): (repr(score), {key: repr(value) for key, value in components.items()})
        for fact, (score, components) in zip(facts, scored, strict=True)
    }
    return {
        "kept": [facts[ranked[rank]] for rank in kept_ranks],
        "evicted": evicted,
        "scores": scores,
        "reserved": len(reserved_ranks),
    }


def observed(decision: CapacityDecision[Any]) -> dict[str, Any]:
    evicted = [
        (
            item.fact_id,
            item.category,
            repr(item.score),
            {key: repr(value) for key, value in item.components.items()},
            item.rank,
            None if item.margin is None else repr(item.margin),
        )
        for item in decision.evicted
    ]
    scores = {
        fact_id: (repr(item.score), {key: repr(value) for key, value in item.components.items()})
        for fact_id, item in decision.scores.items()
    }
    return {
        "kept": list(decision.kept),
        "evicted": evicted,
        "scores": scores,
        "reserved": decision.reserved_correction_slots,
    }


def assert_same(decision: CapacityDecision[Any], expected: dict[str, Any]) -> None:
    got = observed(decision)
    assert len(got["kept"]) == len(expected["kept"])
    assert all(a is b for a, b in zip(got["kept"], expected["kept"], strict=True))
    assert got["evicted"] == expected["evicted"]
    assert got["scores"] == expected["scores"]
    assert got["reserved"] == expected["reserved"]
    assert decision.evicted_ids == tuple(item[0] for item in expected["evicted"])
    assert decision.kept_ids == tuple(_fact_id(fact) for fact in expected["kept"])


# --- libraries with every kind of value a store or a caller may hand over -----------


class _Plain(dict[str, Any]):
    """A dict subclass: read through its own ``get``, like any mapping."""


timestamps = st.one_of(
    st.none(),
    st.floats(min_value=-40, max_value=4000).map(
        lambda d: format_timestamp(NOW - timedelta(days=d))
    ),
    st.floats(min_value=-40, max_value=400).map(
        lambda d: (NOW - timedelta(days=d)).astimezone().isoformat()  # an explicit offset
    ),
    st.floats(min_value=-40, max_value=400).map(
        lambda d: (NOW - timedelta(days=d)).replace(tzinfo=None).isoformat()  # naive: UTC
    ),
    st.sampled_from(
        ["1700-01-01T00:00:00Z", "2400-12-31T23:59:59.999999Z", " 2026-01-02T03:04:05Z ", "x", ""]
    ),
    st.floats(min_value=-40, max_value=400).map(lambda d: NOW - timedelta(days=d)),
    st.integers(),
    st.just(["2026-01-01T00:00:00Z"]),  # unhashable
    st.just({"at": "2026-01-01"}),
)
confidences = st.one_of(
    st.floats(min_value=0.0, max_value=1.0),
    st.sampled_from([0.0, -0.0, 1.0, 0.5]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.none(),
    st.booleans(),
    st.integers(min_value=-3, max_value=3),
    st.just(10**400),
    st.sampled_from(["0.9", "x", "1e9", "-0.0"]),
)
categories = st.sampled_from(
    ["preference", "correction", " Correction ", "goal", "", None, 7, ["correction"]]
)
heats = st.one_of(
    st.floats(min_value=0.0, max_value=50.0),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-2, max_value=20),
    st.none(),
    st.booleans(),
    st.just("3"),
)


@st.composite
def libraries(draw: st.DrawFn) -> tuple[list[Mapping[str, Any]], dict[str, Any]]:
    size = draw(st.integers(min_value=0, max_value=60))
    facts: list[Mapping[str, Any]] = []
    usage: dict[str, Any] = {}
    for index in range(size):
        fact_id = draw(st.sampled_from([f"f{index}", f"f{index}", f"f{index}", "dup", None, index]))
        data = {
            "id": fact_id,
            "category": draw(categories),
            "confidence": draw(confidences),
            "createdAt": draw(timestamps),
            "lastConfirmedAt": draw(timestamps),
        }
        for key in ("category", "createdAt", "lastConfirmedAt"):
            if draw(st.integers(min_value=0, max_value=5)) == 0:
                del data[key]
        kind = draw(st.sampled_from(["dict", "dict", "dict", "proxy", "subclass"]))
        facts.append(
            data if kind == "dict" else MappingProxyType(data) if kind == "proxy" else _Plain(data)
        )
        if draw(st.booleans()):
            entry = {"accessHeat": draw(heats), "lastAccessedAt": draw(timestamps)}
            usage[_fact_id(data)] = draw(
                st.sampled_from([entry, entry, MappingProxyType(entry), None, [1, 2]])
            )
    return facts, usage


weight_sets = st.sampled_from(
    [(0.65, 0.25, 0.10), (1.0, 0.0, 0.0), (0.2, 0.3, 0.5), (0.1, 0.7, 0.2), (0.0, 0.0, 1.0)]
)
half_life_sets = st.sampled_from([(90, 30), (1.5, 7.25), (365.0, 0.5)])


@settings(max_examples=200, deadline=None)
@given(
    libraries(),
    st.integers(min_value=0, max_value=65),
    st.sampled_from([POLICY_CONFIDENCE, POLICY_HYBRID_V1]),
    weight_sets,
    half_life_sets,
    st.sampled_from([0.0, 0.1, 0.25, 0.5, 1.0]),
    st.integers(min_value=0, max_value=12),
    st.sampled_from([("correction",), ("Correction", "goal"), ()]),
)
def test_decisions_match_the_plain_contract(
    library, cap, policy, weights, half_lives, fraction, maximum, reserved
) -> None:
    facts, usage = library
    decision = select_facts_for_capacity(
        facts,
        max_facts=cap,
        policy=policy,
        usage=usage,
        now=NOW,
        confidence_weight=weights[0],
        confirmation_weight=weights[1],
        access_weight=weights[2],
        confirmation_half_life_days=half_lives[0],
        access_half_life_days=half_lives[1],
        correction_reserved_fraction=fraction,
        correction_reserved_max=maximum,
        reserved_categories=reserved,
    )
    expected = reference(
        facts,
        max_facts=cap,
        policy=policy,
        usage=usage,
        now=NOW,
        weights=weights,
        half_lives=half_lives,
        fraction=fraction,
        maximum=maximum,
        reserved=reserved,
    )
    assert_same(decision, expected)
    assert decision.occupancy == len(facts)


@pytest.mark.parametrize("policy", [POLICY_CONFIDENCE, POLICY_HYBRID_V1])
def test_fact_objects_match_the_plain_contract(policy: str) -> None:
    stamp = format_timestamp(NOW - timedelta(days=3))
    facts = [
        Fact.from_dict(
            {
                "id": f"f{i}",
                "content": f"fact {i}",
                "category": "correction" if i % 4 == 0 else "goal",
                "confidence": (i * 37 % 11) / 10,
                "createdAt": format_timestamp(NOW - timedelta(days=i * 13.7)),
                **({"lastConfirmedAt": stamp} if i % 3 == 0 else {}),
            }
        )
        for i in range(30)
    ]
    usage = {"f2": {"accessHeat": 4.0, "lastAccessedAt": stamp}}
    for cap in (0, 1, 7, 29):
        decision = select_facts_for_capacity(
            facts, max_facts=cap, policy=policy, usage=usage, now=NOW
        )
        assert_same(decision, reference(facts, max_facts=cap, policy=policy, usage=usage, now=NOW))


def test_margin_keeps_the_sign_of_a_zero_lowest_score() -> None:
    # min() returns the first of equal minima: -0.0 here, so the margins are -0.0 - x
    facts = [
        {"id": "a", "confidence": 0.9},
        {"id": "b", "confidence": -0.0},
        {"id": "c", "confidence": 0.0},
        {"id": "d", "confidence": 0.0},
    ]
    decision = select_facts_for_capacity(facts, max_facts=3, policy=POLICY_CONFIDENCE)
    assert repr(decision.evicted[0].margin) == repr(-0.0 - 0.0) == "-0.0"
    assert_same(
        decision,
        reference(facts, max_facts=3, policy=POLICY_CONFIDENCE, usage={}, now=NOW),
    )


def test_unhashable_timestamps_score_as_absent() -> None:
    # a list where a timestamp belongs once crashed hybrid-v1 scoring (TypeError)
    facts = [
        {"id": "a", "confidence": 0.5, "lastConfirmedAt": ["x"], "createdAt": {"y": 1}},
        {"id": "b", "confidence": 0.6, "createdAt": ["x"]},
    ]
    usage = {"a": {"accessHeat": 2.0, "lastAccessedAt": ["z"]}}
    decision = select_facts_for_capacity(
        facts, max_facts=1, policy=POLICY_HYBRID_V1, usage=usage, now=NOW
    )
    assert decision.scores["a"].components == {
        "confidence": 0.5,
        "confirmationFreshness": 0.0,
        "accessHeat": 0.0,
    }
    assert decision.kept_ids == ("b",)


# --- the fill the selection takes ----------------------------------------------


def _plain_fill(size: int, max_facts: int, reserved: list[int]) -> tuple[list[int], list[int]]:
    free = max_facts - len(reserved)
    kept: list[int] = []
    evicted: list[int] = []
    for rank in range(size):
        if rank in reserved:
            kept.append(rank)
        elif free > 0:
            kept.append(rank)
            free -= 1
        else:
            evicted.append(rank)
    return kept, evicted[::-1]


@settings(max_examples=500)
@given(st.data())
def test_fill_matches_a_plain_walk_over_the_ranking(data: st.DataObject) -> None:
    size = data.draw(st.integers(min_value=1, max_value=80))
    max_facts = data.draw(st.integers(min_value=0, max_value=size - 1))
    reserved = sorted(
        data.draw(st.sets(st.integers(min_value=0, max_value=size - 1), max_size=max_facts))
    )
    kept, evicted = _fill(size, max_facts, reserved)
    assert (list(kept), list(evicted)) == _plain_fill(size, max_facts, reserved)


def test_reference_is_not_vacuous() -> None:
    # the comparison above must be able to fail: a decision with one margin off
    facts = [{"id": "a", "confidence": 0.9}, {"id": "b", "confidence": 0.3}]
    expected = reference(facts, max_facts=1, policy=POLICY_CONFIDENCE, usage={}, now=NOW)
    margin = float(expected["evicted"][0][5])
    expected["evicted"][0] = (*expected["evicted"][0][:5], repr(math.nextafter(margin, 1)))
    decision = select_facts_for_capacity(facts, max_facts=1, policy=POLICY_CONFIDENCE)
    with pytest.raises(AssertionError):
        assert_same(decision, expected)
