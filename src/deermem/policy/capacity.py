"""A configured capacity policy: the parameters, the decision and the shadow.

:class:`CapacityPolicy` bundles what :func:`select_facts_for_capacity` needs
so the store and the updater pass one value around instead of eleven
keywords, and so shadow mode is computed in exactly one place.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Generic

from deermem.policy.decision import CapacityDecision, F
from deermem.policy.selection import POLICY_CONFIDENCE, POLICY_HYBRID_V1, select_facts_for_capacity
from deermem.policy.shadow import ShadowComparison, compare_evictions

if TYPE_CHECKING:  # the policy layer never imports pydantic at run time
    from deermem.config import MemoryConfig

__all__ = ["CapacityOutcome", "CapacityPolicy"]


@dataclass(frozen=True, slots=True)
class CapacityOutcome(Generic[F]):
    """The decision that was applied, and the shadow comparison if one was asked for."""

    decision: CapacityDecision[F]
    shadow: ShadowComparison | None


@dataclass(frozen=True, slots=True)
class CapacityPolicy:
    """Every parameter of the capacity gate, with the original's defaults."""

    max_facts: int = 100
    policy: str = POLICY_CONFIDENCE
    shadow_enabled: bool = False
    confidence_weight: float = 0.65
    confirmation_weight: float = 0.25
    access_weight: float = 0.10
    confirmation_half_life_days: float = 90
    access_half_life_days: float = 30
    correction_reserved_fraction: float = 0.10
    correction_reserved_max: int = 10
    reserved_categories: tuple[str, ...] = ("correction",)

    @classmethod
    def from_config(cls, config: MemoryConfig) -> CapacityPolicy:
        """Take the capacity keys of a :class:`~deermem.config.MemoryConfig`."""
        return cls(
            max_facts=config.max_facts,
            policy=config.fact_eviction_policy,
            shadow_enabled=config.fact_eviction_shadow_enabled,
            confidence_weight=config.eviction_confidence_weight,
            confirmation_weight=config.eviction_confirmation_weight,
            access_weight=config.eviction_access_weight,
            confirmation_half_life_days=config.eviction_confirmation_half_life_days,
            access_half_life_days=config.eviction_access_half_life_days,
            correction_reserved_fraction=config.eviction_correction_reserved_fraction,
            correction_reserved_max=config.eviction_correction_reserved_max,
            reserved_categories=tuple(config.protected_categories),
        )

    @property
    def uses_usage(self) -> bool:
        """Whether usage data matters: only ``hybrid-v1`` and shadow mode read it.

        The store records access heat (and takes the lock that needs) only
        when this is true, so the default deployment pays nothing per search.
        """
        return self.policy == POLICY_HYBRID_V1 or self.shadow_enabled

    def decide(
        self,
        facts: Sequence[F],
        *,
        usage: Mapping[str, Mapping[str, object]] | None = None,
        now: datetime | None = None,
    ) -> CapacityOutcome[F]:
        """Run the gate, and the ``hybrid-v1`` shadow when it is enabled.

        The shadow runs only under ``confidence`` with ``shadow_enabled`` and
        only when something had to go: with nothing evicted there is nothing
        to compare.
        """
        decision = select_facts_for_capacity(
            facts, policy=self.policy, usage=usage, now=now, **self._parameters()
        )
        shadow = None
        if self.shadow_enabled and self.policy == POLICY_CONFIDENCE and decision.evicted:
            would = select_facts_for_capacity(
                facts, policy=POLICY_HYBRID_V1, usage=usage, now=now, **self._parameters()
            )
            shadow = compare_evictions(
                POLICY_HYBRID_V1, list(would.evicted_ids), list(decision.evicted_ids)
            )
        return CapacityOutcome(decision=decision, shadow=shadow)

    def _parameters(self) -> dict[str, Any]:
        return {
            "max_facts": self.max_facts,
            "confidence_weight": self.confidence_weight,
            "confirmation_weight": self.confirmation_weight,
            "access_weight": self.access_weight,
            "confirmation_half_life_days": self.confirmation_half_life_days,
            "access_half_life_days": self.access_half_life_days,
            "correction_reserved_fraction": self.correction_reserved_fraction,
            "correction_reserved_max": self.correction_reserved_max,
            "reserved_categories": self.reserved_categories,
        }
