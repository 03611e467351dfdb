"""Where an active fact stands in its library under the configured policy."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from deermem.library import CapacityGate
from deermem.model.categories import category_key
from deermem.model.fact import Fact
from deermem.policy import POLICY_HYBRID_V1, select_facts_for_capacity
from deermem.results import Standing
from deermem.store import UsageEntry

__all__ = ["standing_of"]


def standing_of(
    gate: CapacityGate,
    facts: Sequence[Fact],
    fact_id: str,
    usage: Mapping[str, UsageEntry],
    now: datetime,
) -> Standing:
    """Rank every fact with the gate's policy and report one of them.

    A cap of 0 makes the policy rank the whole library (everything counts as
    evicted, lowest first), so the scores and ranks are the gate's own — no
    second implementation of scoring exists.
    """
    policy = gate.policy
    decision = select_facts_for_capacity(
        facts,
        max_facts=0,
        policy=policy,
        usage={key: value.to_dict() for key, value in usage.items()},
        now=now,
    )
    item = next(e for e in decision.evicted if e.fact_id == fact_id)
    reserved = {category_key(name) for name in policy.reserved_categories}
    return Standing(
        policy=policy.name,
        rank=item.rank,
        occupancy=len(facts),
        max_facts=gate.max_facts,
        score=item.score,
        components=item.components,
        protected=policy.name == POLICY_HYBRID_V1 and category_key(item.category) in reserved,
    )
