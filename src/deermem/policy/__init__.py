"""Capacity policies: scoring, selection and shadow comparison. Pure code.

Nothing here does I/O or reads the clock: every decision is a function of the
facts, the usage data, the injected ``now`` and the parameters.

Names are imported on first use, so that reading a policy name (as a protocol
check does) does not import the selector.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from deermem._lazy import lazy_exports as _lazy_exports

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    "POLICIES": "deermem.policy.names",
    "POLICY_CONFIDENCE": "deermem.policy.names",
    "POLICY_HYBRID_V1": "deermem.policy.names",
    "CapacityPolicy": "deermem.policy.capacity",
    "access_heat": "deermem.policy.scoring",
    "coerce_confidence": "deermem.policy.scoring",
    "confirmation_freshness": "deermem.policy.scoring",
    "decay": "deermem.policy.scoring",
    "elapsed_days": "deermem.policy.scoring",
    "CapacityDecision": "deermem.policy.decision",
    "EvictedFact": "deermem.policy.decision",
    "FactScore": "deermem.policy.decision",
    "reserved_slot_count": "deermem.policy.selection",
    "select_facts_for_capacity": "deermem.policy.selection",
    "ShadowComparison": "deermem.policy.shadow",
    "compare_evictions": "deermem.policy.shadow",
    "shadow_comparison": "deermem.policy.shadow",
}

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
    "select_facts_for_capacity",
    "shadow_comparison",
]

if TYPE_CHECKING:
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
    from deermem.policy.selection import reserved_slot_count, select_facts_for_capacity
    from deermem.policy.shadow import ShadowComparison, compare_evictions, shadow_comparison


__getattr__, __dir__ = _lazy_exports(__name__, globals(), _EXPORTS)
