"""Shadow mode: hybrid-v1 beside confidence, recorded but never applied."""

from __future__ import annotations

from datetime import UTC, datetime

from deermem.policy import CapacityPolicy, ShadowComparison, compare_evictions
from deermem.scenarios import seed_scenarios

NOW = datetime(2026, 8, 13, tzinfo=UTC)


def test_shadow_records_disagreement_without_changing_the_outcome() -> None:
    stale_vs_confirmed, _ = seed_scenarios(NOW)
    facts = list(stale_vs_confirmed.facts)
    plain = CapacityPolicy(max_facts=10).decide(facts, now=NOW)
    shadowed = CapacityPolicy(max_facts=10, shadow_enabled=True).decide(facts, now=NOW)
    assert plain.shadow is None
    assert shadowed.decision.kept == plain.decision.kept
    assert shadowed.decision.evicted == plain.decision.evicted
    assert shadowed.shadow == ShadowComparison("hybrid-v1", ("fact_stale90",), disagrees=True)


def test_shadow_agrees_when_both_evict_the_same() -> None:
    facts = [
        {"id": f"f{i}", "confidence": i / 20, "createdAt": "2026-08-01T00:00:00Z"}
        for i in range(12)
    ]
    outcome = CapacityPolicy(max_facts=10, shadow_enabled=True).decide(facts, now=NOW)
    assert outcome.shadow is not None
    assert outcome.shadow.would_evict == ("f0", "f1")
    assert outcome.shadow.disagrees is False


def test_no_shadow_below_the_cap_or_under_hybrid() -> None:
    facts = [{"id": "a", "confidence": 0.4}]
    assert CapacityPolicy(max_facts=10, shadow_enabled=True).decide(facts, now=NOW).shadow is None
    stale_vs_confirmed, _ = seed_scenarios(NOW)
    hybrid = CapacityPolicy(max_facts=10, policy="hybrid-v1", shadow_enabled=True)
    assert hybrid.decide(list(stale_vs_confirmed.facts), now=NOW).shadow is None


def test_receipt_form_round_trips() -> None:
    comparison = compare_evictions("hybrid-v1", ["b", "a"], ["a"])
    assert comparison.to_dict() == {
        "policyVersion": "hybrid-v1",
        "wouldEvict": ["a", "b"],
        "disagrees": True,
    }
    assert ShadowComparison.from_dict(comparison.to_dict()) == comparison
    assert ShadowComparison.from_dict({"wouldEvict": "junk"}).would_evict == ()
