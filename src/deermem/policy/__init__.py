"""Capacity policies: scoring, selection and shadow comparison. Pure code.

Nothing here does I/O or reads the clock: every decision is a function of the
facts, the usage data, the injected ``now`` and the parameters.
"""

from deermem.policy.capacity import CapacityOutcome, CapacityPolicy
from deermem.policy.scoring import (
    access_heat,
    coerce_confidence,
    confirmation_freshness,
    decay,
    elapsed_days,
)
from deermem.policy.selection import (
    POLICIES,
    POLICY_CONFIDENCE,
    POLICY_HYBRID_V1,
    CapacityDecision,
    EvictedFact,
    FactScore,
    reserved_slot_count,
    select_facts_for_capacity,
)
from deermem.policy.shadow import ShadowComparison, compare_evictions

__all__ = [
    "POLICIES",
    "POLICY_CONFIDENCE",
    "POLICY_HYBRID_V1",
    "CapacityDecision",
    "CapacityOutcome",
    "CapacityPolicy",
    "EvictedFact",
    "FactScore",
    "ShadowComparison",
    "access_heat",
    "coerce_confidence",
    "compare_evictions",
    "confirmation_freshness",
    "decay",
    "elapsed_days",
    "reserved_slot_count",
    "select_facts_for_capacity",
]
