"""The library as the inspector shows it: the ranking with the cap's cut, and the what-if.

Both are pure functions of the facts, the usage, the clock and the gate's
policy (:mod:`deermem.library.gate`); they decide with the policy's own
selection, so what they say is what the gate would do.
"""

from __future__ import annotations

from datetime import UTC, datetime

from deermem import Fact
from deermem.library import CapacityGate
from deermem.library.gate import other_policy, rank_library, what_if
from deermem.policy import CapacityPolicy, select_facts_for_capacity
from deermem.store import ArchiveEntry

NOW = datetime(2026, 8, 13, tzinfo=UTC)


def fact(fact_id: str, confidence: float, category: str = "context", **fields: object) -> Fact:
    data: dict[str, object] = {
        "id": fact_id,
        "content": f"Content of {fact_id}",
        "category": category,
        "confidence": confidence,
        "createdAt": "2026-08-01T00:00:00Z",
    }
    data.update(fields)
    return Fact.from_dict(data)


def archived(item: Fact, reason: str = "capacity") -> ArchiveEntry:
    return ArchiveEntry(item, "2026-08-10T00:00:00Z", reason, "manual", "rcpt_1")


def test_the_ranking_is_the_policys_and_marks_the_fact_that_goes_next() -> None:
    gate = CapacityGate(CapacityPolicy(name="confidence"), max_facts=5)
    facts = [fact("fact_a", 0.6), fact("fact_b", 0.9), fact("fact_c", 0.7), fact("fact_d", 0.8)]
    ranking = rank_library(gate, facts, {}, NOW)
    assert [(r.fact.id, r.rank) for r in ranking.facts] == [
        ("fact_b", 1),
        ("fact_d", 2),
        ("fact_c", 3),
        ("fact_a", 4),
    ]
    assert [r.score for r in ranking.facts] == [0.9, 0.8, 0.7, 0.6]
    assert [r.fact.id for r in ranking.facts if r.next_out] == ["fact_a"]
    assert all(r.kept for r in ranking.facts)
    assert ranking.free_slots == 1
    # the next fact to go is the one the gate evicts when one slot must be made
    made_room = select_facts_for_capacity(facts, max_facts=3, policy=gate.policy, now=NOW)
    assert made_room.evicted_ids == ("fact_a",)


def test_a_reserved_correction_keeps_its_place_and_the_next_to_go_is_above_it() -> None:
    gate = CapacityGate(CapacityPolicy(name="hybrid-v1"), max_facts=4)
    facts = [
        fact("fact_low", 0.3, "correction"),
        fact("fact_p1", 0.9, "preference"),
        fact("fact_p2", 0.8, "preference"),
        fact("fact_p3", 0.7, "preference"),
    ]
    ranking = rank_library(gate, facts, {}, NOW)
    assert ranking.facts[-1].fact.id == "fact_low"  # the lowest score ...
    assert ranking.facts[-1].reserved  # ... holds a reserved slot
    assert ranking.reserved_slots == 1
    assert [r.fact.id for r in ranking.facts if r.next_out] == ["fact_p3"]
    assert set(ranking.facts[0].components) == {
        "confidence",
        "confirmationFreshness",
        "accessHeat",
    }


def test_a_library_over_a_lowered_cap_shows_what_falls_below_the_line() -> None:
    gate = CapacityGate(CapacityPolicy(name="confidence"), max_facts=2)
    facts = [fact("fact_a", 0.6), fact("fact_b", 0.9), fact("fact_c", 0.7)]
    ranking = rank_library(gate, facts, {}, NOW)
    assert [(r.fact.id, r.kept) for r in ranking.facts] == [
        ("fact_b", True),
        ("fact_c", True),
        ("fact_a", False),
    ]
    assert not any(r.next_out for r in ranking.facts)
    assert ranking.free_slots == 0


def test_the_what_if_names_what_the_other_policy_keeps_instead() -> None:
    gate = CapacityGate(CapacityPolicy(name="confidence"), max_facts=2)
    confirmed = fact("fact_confirmed", 0.7, lastConfirmedAt="2026-08-12T00:00:00Z")
    stale = fact("fact_stale", 0.75, createdAt="2025-01-01T00:00:00Z")
    active = [fact("fact_top", 0.95), stale]
    deleted = fact("fact_deleted", 0.99)
    result = what_if(gate, active, [archived(confirmed), archived(deleted, "deleted")], {}, NOW)
    assert (result.active, result.other) == ("confidence", "hybrid-v1")
    assert [f.id for f in result.candidates] == ["fact_top", "fact_stale", "fact_confirmed"]
    assert result.active_keeps == ("fact_top", "fact_stale")
    assert result.other_keeps == ("fact_top", "fact_confirmed")
    assert result.only_other == ("fact_confirmed",)
    assert result.only_active == ("fact_stale",)


def test_the_other_policy_is_the_pair_of_the_active_one() -> None:
    assert other_policy(CapacityPolicy(name="confidence")).name == "hybrid-v1"
    hybrid = CapacityPolicy(name="hybrid-v1", confidence_weight=0.5, confirmation_weight=0.4)
    assert other_policy(hybrid).name == "confidence"
    shadowed = other_policy(CapacityPolicy(name="confidence", shadow_enabled=True))
    assert not shadowed.shadow_enabled
