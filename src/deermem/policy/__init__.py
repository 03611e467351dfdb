"""Capacity policies: scoring, selection and shadow comparison. Pure code.

Nothing here does I/O or reads the clock: every decision is a function of the
facts, the usage data, the injected ``now`` and the parameters.
"""

from deermem.policy.capacity import CapacityPolicy
from deermem.policy.decision import CapacityDecision, EvictedFact, FactScore
from deermem.policy.names import POLICIES, POLICY_CONFIDENCE, POLICY_HYBRID_V1
from deermem.policy.scoring import (
    access_heat,
    coerce_confidence,
    confirmation_freshness,
    decay,
    elapsed_days,
)
from deermem.policy.selection import (
    reserved_slot_count,
    reserved_slots,
    select_facts_for_capacity,
)
from deermem.policy.shadow import ShadowComparison, compare_evictions, shadow_comparison

__all__ = [
    "POLICIES",
    "POLICY_CONFIDENCE",
    "POLICY_HYBRID_V1",
    "CapacityDecision",
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
    "reserved_slots",
    "select_facts_for_capacity",
    "shadow_comparison",
]
