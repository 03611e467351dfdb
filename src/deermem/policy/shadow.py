"""Shadow mode: compute the other capacity policy beside the active one without acting on it.

A deployment can learn what the policy it does not run would have done:
which facts it would have evicted, and whether that differs from what was
actually evicted — ``hybrid-v1`` beside ``confidence``, or (a new store's
default) ``confidence`` beside ``hybrid-v1``. The comparison changes nothing
that is kept; it only feeds the eviction receipt and the regret ledger.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from deermem.model import Record, json_key
from deermem.policy.capacity import CapacityPolicy
from deermem.policy.decision import CapacityDecision, F
from deermem.policy.selection import select_facts_for_capacity

__all__ = ["ShadowComparison", "compare_evictions", "shadow_comparison"]


@dataclass(frozen=True, slots=True)
class ShadowComparison(Record):
    """What the shadow policy would have evicted, and whether it disagrees.

    Attributes:
        policy: the shadow policy's version, e.g. ``"hybrid-v1"``.
        would_evict: ids the shadow policy would have evicted, sorted.
        disagrees: whether that set differs from the ids actually evicted.
    """

    # The receipt form: {policyVersion, wouldEvict, disagrees}.
    policy: str = field(metadata=json_key("policyVersion"))
    would_evict: tuple[str, ...]
    disagrees: bool

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> ShadowComparison:
        would = data.get("wouldEvict")
        ids = (
            tuple(sorted(i for i in would if isinstance(i, str))) if isinstance(would, list) else ()
        )
        return cls(
            policy=str(data.get("policyVersion", "")),
            would_evict=ids,
            disagrees=bool(data.get("disagrees", False)),
        )


def compare_evictions(
    shadow_policy: str, would_evict: tuple[str, ...] | list[str], actually_evicted: object
) -> ShadowComparison:
    """Build a comparison from the shadow's evictions and the actual ones."""
    would = tuple(sorted(would_evict))
    actual = set(actually_evicted) if isinstance(actually_evicted, list | tuple | set) else set()
    return ShadowComparison(policy=shadow_policy, would_evict=would, disagrees=set(would) != actual)


def shadow_comparison(
    facts: Sequence[F],
    decision: CapacityDecision[F],
    *,
    policy: CapacityPolicy,
    usage: Mapping[str, Mapping[str, object]] | None,
    now: datetime | None,
) -> ShadowComparison | None:
    """What the shadow policy would have evicted where ``decision`` was made, if shadow mode runs.

    Shadow mode runs with ``shadow_enabled`` (:attr:`CapacityPolicy.shadow_policy
    <deermem.policy.CapacityPolicy.shadow_policy>` names the other policy), and
    only when something had to go: with nothing evicted there is nothing to
    compare. The shadow uses the policy's own parameters and the decision's cap.
    """
    shadow = policy.shadow_policy
    if shadow is None or not decision.evicted:
        return None
    other = dataclasses.replace(policy, name=shadow, shadow_enabled=False)
    would = select_facts_for_capacity(
        facts, max_facts=decision.max_facts, policy=other, usage=usage, now=now
    )
    return compare_evictions(shadow, would.evicted_ids, decision.evicted_ids)
