"""The library as the inspector shows it: the ranking with the cap's cut, and the what-if.

Both are pure functions of the facts, the usage, the clock and the gate's
policy (:mod:`deermem.library.gate`); they decide with the policy's own
selection, so what they say is what the gate would do.
"""

from __future__ import annotations

import tempfile
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from deermem import Fact, Memory, MemoryConfig
from deermem.library import CapacityGate
from deermem.library.gate import other_policy, rank_library, what_if
from deermem.model import format_timestamp
from deermem.policy import CapacityPolicy, select_facts_for_capacity
from deermem.store import ArchiveEntry, UsageEntry

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


def test_at_the_cap_the_reserve_is_the_caps_and_the_next_to_go_is_what_the_gate_evicts() -> None:
    # cap 11 holds ceil(10 % of 11) = 2 slots for corrections; at a cap of 10 it would be 1
    gate = CapacityGate(CapacityPolicy(name="hybrid-v1"), max_facts=11)
    corrections = [fact(f"corr{n}", 0.1, "correction") for n in (1, 2)]
    facts = [*corrections, *(fact(f"p{n}", 0.8, "preference") for n in range(9))]
    ranking = rank_library(gate, facts, {}, NOW)
    assert ranking.reserved_slots == 2
    assert [r.fact.id for r in ranking.facts if r.reserved] == ["corr1", "corr2"]
    assert [r.fact.id for r in ranking.facts if r.next_out] == ["p8"]
    newcomer = fact("new", 0.95, "preference")
    decision = select_facts_for_capacity(
        [*facts, newcomer], max_facts=11, policy=gate.policy, now=NOW
    )
    assert decision.evicted_ids == ("p8",)
    assert decision.reserved_correction_slots == 2


def test_when_the_reserve_holds_every_fact_nothing_goes_next() -> None:
    # a full library of corrections, all reserved: a newcomer would itself be let go
    policy = CapacityPolicy(name="hybrid-v1", correction_reserved_fraction=1.0)
    gate = CapacityGate(policy, max_facts=2)
    facts = [fact("c1", 0.4, "correction"), fact("c2", 0.3, "correction")]
    ranking = rank_library(gate, facts, {}, NOW)
    assert ranking.reserved_slots == 2
    assert not any(r.next_out for r in ranking.facts)
    newcomer = fact("new", 0.95)
    decision = select_facts_for_capacity(
        [*facts, newcomer], max_facts=2, policy=gate.policy, now=NOW
    )
    assert decision.evicted_ids == ("new",)


_CATEGORIES = st.sampled_from(["correction", "preference", "context"])
_CONFIDENCES = st.sampled_from([0.1, 0.3, 0.5, 0.5, 0.8, 0.9])  # repeats: ties
_POLICIES = st.builds(
    CapacityPolicy,
    name=st.sampled_from(["confidence", "hybrid-v1"]),
    correction_reserved_fraction=st.sampled_from([0.0, 0.1, 0.25, 0.3, 0.5, 1.0]),
    correction_reserved_max=st.integers(0, 6),
)


@settings(max_examples=300, deadline=None)
@given(
    policy=_POLICIES,
    library=st.lists(
        st.tuples(
            _CATEGORIES,
            _CONFIDENCES,
            st.one_of(st.none(), st.integers(0, 400)),  # days since confirmed
            st.one_of(st.none(), st.floats(0, 20)),  # access heat
        ),
        max_size=12,
    ),
    free=st.integers(0, 4),
)
def test_the_next_to_go_is_what_the_gate_evicts_when_a_better_fact_arrives(
    policy: CapacityPolicy,
    library: list[tuple[str, float, int | None, float | None]],
    free: int,
) -> None:
    """Fill the library to its cap with facts that outrank it, add one more: the gate's
    eviction is the ranking's next to go (nothing when it lets the newcomer go)."""
    facts, usage = [], {}
    for n, (category, confidence, confirmed, heat) in enumerate(library):
        extra = {}
        if confirmed is not None:
            extra["lastConfirmedAt"] = format_timestamp(NOW - timedelta(days=confirmed))
        facts.append(fact(f"f{n:02d}", confidence, category, **extra))
        if heat is not None:
            usage[f"f{n:02d}"] = UsageEntry(heat, 1, format_timestamp(NOW - timedelta(days=1)))
    gate = CapacityGate(policy, max_facts=len(facts) + free)
    ranking = rank_library(gate, facts, usage, NOW)
    # the newcomers score 1 on every signal, above any fact of confidence 0.9 or less
    newcomers = [
        fact(f"new{n}", 1.0, "preference", lastConfirmedAt=format_timestamp(NOW))
        for n in range(free + 1)
    ]
    usage |= {f.id: UsageEntry(1e6, 100, format_timestamp(NOW)) for f in newcomers}
    entries = {key: entry.to_dict() for key, entry in usage.items()}
    decision = select_facts_for_capacity(
        [*facts, *newcomers], max_facts=gate.max_facts, policy=policy, usage=entries, now=NOW
    )
    evicted = [i for i in decision.evicted_ids if not i.startswith("new")]
    assert [r.fact.id for r in ranking.facts if r.next_out] == evicted
    held = [r.fact.id for r in ranking.facts if r.reserved]
    assert ranking.reserved_slots == len(held) == decision.reserved_correction_slots
    assert all(r.kept for r in ranking.facts)


@settings(max_examples=25, deadline=None)
@given(
    policy=st.sampled_from(["confidence", "hybrid-v1"]),
    fraction=st.sampled_from([0.1, 0.25, 0.3, 0.5]),
    library=st.lists(st.tuples(_CATEGORIES, _CONFIDENCES), min_size=8, max_size=13),
    free=st.integers(0, 2),
)
def test_memory_ranking_names_the_fact_the_next_create_evicts(
    policy: str, fraction: float, library: list[tuple[str, float]], free: int
) -> None:
    """Memory.ranking() at or below the cap, then creates of a top-scoring fact until one
    evicts: the first fact that leaves is the one the ranking said goes next."""
    cap = max(10, len(library) + free)
    config = MemoryConfig(
        max_facts=cap,
        fact_eviction_policy=policy,
        eviction_correction_reserved_fraction=fraction,
    )
    clock = [NOW - timedelta(days=400)]  # the library is old, the newcomers fresh
    with tempfile.TemporaryDirectory() as root:
        memory = Memory.open(root, config, user="u", agent="a", clock=lambda: clock[0])
        for n, (category, confidence) in enumerate(library):
            memory.create_fact(f"fact {n}", category=category, confidence=confidence)
        clock[0] = NOW
        ranking = memory.ranking()
        going = [r.fact.id for r in ranking.facts if r.next_out]
        for n in range(cap - len(library) + 1):
            result = memory.create_fact(f"newcomer {n}", category="preference", confidence=1.0)
            if result.evicted:
                break
        # (at these caps the reserve never holds every fact, so one of them goes)
        assert list(result.evicted) == going
        assert [x.reserved_correction_slots for x in result.receipts] == [ranking.reserved_slots]


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
