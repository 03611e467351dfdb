"""Shadow mode: hybrid-v1 beside confidence, recorded but never applied."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from deermem.cli.demo import seed_scenarios
from deermem.policy import (
    CapacityDecision,
    CapacityPolicy,
    ShadowComparison,
    compare_evictions,
    select_facts_for_capacity,
    shadow_comparison,
)

NOW = datetime(2026, 8, 13, tzinfo=UTC)


def decide(
    facts: Sequence[Any], policy: CapacityPolicy, usage: Mapping[str, Any] | None = None
) -> tuple[CapacityDecision[Any], ShadowComparison | None]:
    """The decision at a cap of 10 and the shadow comparison beside it, as the gate runs them."""
    decision = select_facts_for_capacity(facts, max_facts=10, policy=policy, usage=usage, now=NOW)
    return decision, shadow_comparison(facts, decision, policy=policy, usage=usage, now=NOW)


def test_shadow_records_disagreement_without_changing_the_outcome() -> None:
    stale_vs_confirmed, _ = seed_scenarios(NOW)
    facts = list(stale_vs_confirmed.facts)
    plain, no_shadow = decide(facts, CapacityPolicy())
    shadowed, shadow = decide(facts, CapacityPolicy(shadow_enabled=True))
    assert no_shadow is None
    assert shadowed.kept == plain.kept
    assert shadowed.evicted == plain.evicted
    assert shadow == ShadowComparison("hybrid-v1", ("fact_stale90",), disagrees=True)


def test_shadow_uses_the_policys_hybrid_parameters() -> None:
    stale_vs_confirmed, _ = seed_scenarios(NOW)
    facts = list(stale_vs_confirmed.facts)
    confidence_only = CapacityPolicy(
        shadow_enabled=True, confidence_weight=1.0, confirmation_weight=0.0, access_weight=0.0
    )
    decision, shadow = decide(facts, confidence_only)
    assert shadow is not None
    assert shadow.would_evict == tuple(sorted(decision.evicted_ids))
    assert shadow.disagrees is False


def test_shadow_agrees_when_both_evict_the_same() -> None:
    facts = [
        {"id": f"f{i}", "confidence": i / 20, "createdAt": "2026-08-01T00:00:00Z"}
        for i in range(12)
    ]
    _, shadow = decide(facts, CapacityPolicy(shadow_enabled=True))
    assert shadow is not None
    assert shadow.would_evict == ("f0", "f1")
    assert shadow.disagrees is False


def test_no_shadow_below_the_cap_or_under_hybrid() -> None:
    facts = [{"id": "a", "confidence": 0.4}]
    assert decide(facts, CapacityPolicy(shadow_enabled=True))[1] is None
    stale_vs_confirmed, _ = seed_scenarios(NOW)
    hybrid = CapacityPolicy(name="hybrid-v1", shadow_enabled=True)
    assert decide(list(stale_vs_confirmed.facts), hybrid)[1] is None


def test_receipt_form_round_trips() -> None:
    comparison = compare_evictions("hybrid-v1", ["b", "a"], ["a"])
    assert comparison.to_dict() == {
        "policyVersion": "hybrid-v1",
        "wouldEvict": ["a", "b"],
        "disagrees": True,
    }
    assert ShadowComparison.from_dict(comparison.to_dict()) == comparison
    assert ShadowComparison.from_dict({"wouldEvict": "junk"}).would_evict == ()
