"""The capacity policy as one value: its name and every parameter, validated once.

:class:`CapacityPolicy` is what the capacity gate, shadow mode, prompt
injection's ranking and the evaluation pass to
:func:`~deermem.policy.select_facts_for_capacity`. It is checked when it is
built — from a :class:`~deermem.config.MemoryConfig` at start-up, or from a
protocol's parameters — so a bad weight stops start-up instead of failing the
first eviction, and no decision re-checks it.

The cap is not part of it: the same policy decides at every cap (the
evaluation runs one policy at capacities 5, 7 and 9; injection ranks a whole
library with a cap of 0), so the cap is an argument of each decision.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from deermem.model import (
    DEFAULT_ACCESS_HALF_LIFE_DAYS,
    DEFAULT_ACCESS_WEIGHT,
    DEFAULT_CONFIDENCE_WEIGHT,
    DEFAULT_CONFIRMATION_HALF_LIFE_DAYS,
    DEFAULT_CONFIRMATION_WEIGHT,
    DEFAULT_CORRECTION_RESERVED_FRACTION,
    DEFAULT_CORRECTION_RESERVED_MAX,
    DEFAULT_POLICY,
    DEFAULT_PROTECTED_CATEGORIES,
    weights_sum_to_one,
)
from deermem.policy.names import POLICIES, POLICY_CONFIDENCE, POLICY_HYBRID_V1

if TYPE_CHECKING:  # the policy layer reads a configuration, it never builds one
    from deermem.config import MemoryConfig

__all__ = ["CapacityPolicy", "check_max_facts"]


_NUMBERS: Final = (
    "confidence_weight",
    "confirmation_weight",
    "access_weight",
    "confirmation_half_life_days",
    "access_half_life_days",
    "correction_reserved_fraction",
)
"""The parameters that are real numbers (``correction_reserved_max`` is a count)."""


def _is_number(value: object) -> bool:
    """An int or float that is finite as a float: not a bool, a numeric string, NaN or 10**400."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an int too large for a float
        return False


@dataclass(frozen=True, slots=True)
class CapacityPolicy:
    """A capacity policy and its parameters, with the original DeerMem's defaults.

    Attributes:
        name: ``"confidence"`` or ``"hybrid-v1"``.
        confidence_weight: ``hybrid-v1``'s weight of the stored confidence.
        confirmation_weight: its weight of the confirmation freshness.
        access_weight: its weight of the access heat. The three weights are
            non-negative and sum to 1 (within 1e-9).
        confirmation_half_life_days: half-life of the confirmation freshness.
        access_half_life_days: half-life of the access heat.
        correction_reserved_fraction: share of the cap ``hybrid-v1`` holds
            for the reserved categories, in [0, 1].
        correction_reserved_max: upper bound on those held slots.
        reserved_categories: the categories that share the reserve (the
            configuration's ``protected_categories``), compared stripped and
            lower-cased.
        shadow_enabled: also compute the other policy (:attr:`shadow_policy`)
            with these parameters and record where it disagrees (see
            :func:`~deermem.policy.shadow_comparison`): ``hybrid-v1`` beside
            ``confidence``, or ``confidence`` beside ``hybrid-v1``.

    Raises:
        ValueError: on construction, for an unknown name, a parameter that is
            not a finite number (a string, ``None``, a bool) or out of range;
            the message names the parameter and its value.
    """

    name: str = DEFAULT_POLICY
    confidence_weight: float = DEFAULT_CONFIDENCE_WEIGHT
    confirmation_weight: float = DEFAULT_CONFIRMATION_WEIGHT
    access_weight: float = DEFAULT_ACCESS_WEIGHT
    confirmation_half_life_days: float = DEFAULT_CONFIRMATION_HALF_LIFE_DAYS
    access_half_life_days: float = DEFAULT_ACCESS_HALF_LIFE_DAYS
    correction_reserved_fraction: float = DEFAULT_CORRECTION_RESERVED_FRACTION
    correction_reserved_max: int = DEFAULT_CORRECTION_RESERVED_MAX
    reserved_categories: tuple[str, ...] = DEFAULT_PROTECTED_CATEGORIES
    shadow_enabled: bool = False

    def __post_init__(self) -> None:
        # Callers outside mypy (a protocol file, a notebook) may pass anything.
        if self.name not in POLICIES:
            raise ValueError(
                f"unknown eviction policy {self.name!r}; expected one of {list(POLICIES)}"
            )
        for parameter in _NUMBERS:
            # Checked first: the range checks below compare, and a string, None or a
            # bool compared with a number is a TypeError naming nothing (or a silent 0/1).
            value = getattr(self, parameter)
            if not _is_number(value):
                raise ValueError(f"{parameter} must be a finite number, got {value!r}")
        weights = (self.confidence_weight, self.confirmation_weight, self.access_weight)
        if any(weight < 0 for weight in weights) or not weights_sum_to_one(*weights):
            raise ValueError(
                "eviction weights must be non-negative and sum to 1.0: "
                f"confidence_weight={weights[0]!r} + confirmation_weight={weights[1]!r} "
                f"+ access_weight={weights[2]!r} = {weights[0] + weights[1] + weights[2]!r}"
            )
        half_lives = (self.confirmation_half_life_days, self.access_half_life_days)
        if not all(half_life > 0 for half_life in half_lives):
            raise ValueError(f"half-lives must be positive, got {list(half_lives)!r}")
        if not 0.0 <= self.correction_reserved_fraction <= 1.0:
            raise ValueError(
                "correction_reserved_fraction must be within [0, 1], "
                f"got {self.correction_reserved_fraction!r}"
            )
        if not _is_count(self.correction_reserved_max):
            raise ValueError(
                "correction_reserved_max must be a whole number of at least 0, "
                f"got {self.correction_reserved_max!r}"
            )
        categories: object = self.reserved_categories
        if not isinstance(categories, tuple) or not all(
            isinstance(name, str) for name in categories
        ):
            raise ValueError(
                f"reserved_categories must be a tuple of category names, got {categories!r}"
            )

    @classmethod
    def from_config(cls, config: MemoryConfig) -> CapacityPolicy:
        """The policy a configuration describes (its ``fact_eviction_*`` and ``eviction_*`` keys).

        A classmethod here rather than a property of the configuration: the
        configuration sits below the policy layer and must not import it.
        """
        return cls(
            name=config.fact_eviction_policy,
            confidence_weight=config.eviction_confidence_weight,
            confirmation_weight=config.eviction_confirmation_weight,
            access_weight=config.eviction_access_weight,
            confirmation_half_life_days=config.eviction_confirmation_half_life_days,
            access_half_life_days=config.eviction_access_half_life_days,
            correction_reserved_fraction=config.eviction_correction_reserved_fraction,
            correction_reserved_max=config.eviction_correction_reserved_max,
            reserved_categories=tuple(config.protected_categories),
            shadow_enabled=config.fact_eviction_shadow_enabled,
        )

    @property
    def uses_usage(self) -> bool:
        """Whether usage data matters: only ``hybrid-v1`` and shadow mode read it.

        The store records access heat (and takes the lock that needs) only
        when this is true, so the default deployment pays nothing per search.
        """
        return self.name == POLICY_HYBRID_V1 or self.shadow_enabled

    @property
    def shadow_policy(self) -> str | None:
        """The policy shadow mode computes beside this one, or ``None`` when it is off.

        The two policies shadow each other, so whichever a deployment runs,
        ``deermem regret`` gathers evidence for both.
        """
        if not self.shadow_enabled:
            return None
        return POLICY_CONFIDENCE if self.name == POLICY_HYBRID_V1 else POLICY_HYBRID_V1


def check_max_facts(max_facts: object) -> None:
    """Refuse a cap that is not a whole number of at least 0.

    Raises:
        ValueError: naming the value.
    """
    if not _is_count(max_facts):
        raise ValueError(f"max_facts must be a whole number of at least 0, got {max_facts!r}")


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
