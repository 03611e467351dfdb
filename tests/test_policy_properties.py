"""Invariants of the capacity gate, for any input (hypothesis)."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from deermem import POLICY_CONFIDENCE, POLICY_HYBRID_V1, select_facts_for_capacity
from deermem.model import format_timestamp

NOW = datetime(2026, 8, 13, tzinfo=UTC)

timestamps = st.one_of(
    st.none(),
    st.floats(min_value=-30, max_value=3000).map(
        lambda d: format_timestamp(NOW - timedelta(days=d))
    ),
    st.sampled_from(["garbage", "", "2026-13-45"]),
    st.integers(),
)
confidences = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.none(),
    st.booleans(),
    st.sampled_from(["0.9", "x", "1e9"]),
)
categories = st.sampled_from(["preference", "correction", "Correction ", "goal", "", None])


@st.composite
def libraries(draw: st.DrawFn) -> tuple[list[dict[str, object]], dict[str, dict[str, object]]]:
    size = draw(st.integers(min_value=0, max_value=40))
    facts: list[dict[str, object]] = []
    usage: dict[str, dict[str, object]] = {}
    for index in range(size):
        fact_id = f"f{index}"
        facts.append(
            {
                "id": fact_id,
                "category": draw(categories),
                "confidence": draw(confidences),
                "createdAt": draw(timestamps),
                "lastConfirmedAt": draw(timestamps),
            }
        )
        if draw(st.booleans()):
            usage[fact_id] = {
                "accessHeat": draw(st.one_of(st.floats(), st.integers(), st.none())),
                "lastAccessedAt": draw(timestamps),
            }
    return facts, usage


policies = st.sampled_from([POLICY_CONFIDENCE, POLICY_HYBRID_V1])
caps = st.integers(min_value=0, max_value=45)
fractions = st.sampled_from([0.0, 0.1, 0.25, 0.5, 1.0])
maxima = st.integers(min_value=0, max_value=12)


@settings(max_examples=300)
@given(libraries(), caps, policies, fractions, maxima)
def test_partition_size_and_reserve_bounds(library, cap, policy, fraction, maximum) -> None:
    facts, usage = library
    decision = select_facts_for_capacity(
        facts,
        max_facts=cap,
        policy=policy,
        usage=usage,
        now=NOW,
        correction_reserved_fraction=fraction,
        correction_reserved_max=maximum,
    )
    kept = [str(f["id"]) for f in decision.kept]
    evicted = list(decision.evicted_ids)
    # kept ∪ evicted = input, with no duplicates
    assert sorted(kept + evicted) == sorted(str(f["id"]) for f in facts)
    assert len(set(kept + evicted)) == len(facts)
    assert len(decision.kept) == min(len(facts), cap)
    corrections = sum(
        1
        for f in facts
        if isinstance(f["category"], str) and f["category"].strip().lower() == "correction"
    )
    bound = min(maximum, math.ceil(cap * fraction - 1e-9), corrections)
    assert decision.reserved_correction_slots <= bound
    if policy == POLICY_CONFIDENCE:
        assert decision.reserved_correction_slots == 0
    for item in decision.scores.values():
        assert 0.0 <= item.score <= 1.0 + 1e-12
        assert all(0.0 <= value <= 1.0 for value in item.components.values())


@settings(max_examples=200)
@given(libraries(), caps, policies)
def test_identical_input_gives_identical_decision(library, cap, policy) -> None:
    facts, usage = library
    first = select_facts_for_capacity(facts, max_facts=cap, policy=policy, usage=usage, now=NOW)
    second = select_facts_for_capacity(
        [dict(f) for f in facts], max_facts=cap, policy=policy, usage=dict(usage), now=NOW
    )
    assert first.kept == second.kept
    assert first.evicted == second.evicted
    assert dict(first.scores) == dict(second.scores)
    assert first.reserved_correction_slots == second.reserved_correction_slots


@settings(max_examples=300)
@given(libraries(), caps)
def test_confidence_policy_is_a_stable_sort_by_confidence(library, cap) -> None:
    facts, _ = library
    decision = select_facts_for_capacity(facts, max_facts=cap, policy=POLICY_CONFIDENCE)
    if len(facts) <= cap:
        assert decision.kept == tuple(facts)
        return
    ranked = sorted(facts, key=lambda f: -decision.scores[str(f["id"])].score)
    assert list(decision.kept) == ranked[:cap]
    assert list(decision.evicted_ids) == [str(f["id"]) for f in reversed(ranked[cap:])]


@given(libraries(), caps)
def test_kept_is_in_rank_order_under_hybrid_without_reserve(library, cap) -> None:
    facts, usage = library
    decision = select_facts_for_capacity(
        facts,
        max_facts=cap,
        policy=POLICY_HYBRID_V1,
        usage=usage,
        now=NOW,
        correction_reserved_max=0,
    )
    if len(facts) <= cap:
        return
    scores = [decision.scores[str(f["id"])].score for f in decision.kept]
    assert scores == sorted(scores, reverse=True)
    lowest_kept = min(scores, default=None)
    for item in decision.evicted:
        assert lowest_kept is None or item.score <= lowest_kept
