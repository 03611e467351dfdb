"""The settings the update path reads, taken once from :class:`MemoryConfig`.

:class:`UpdateSettings` plays the part :class:`~deermem.policy.CapacityPolicy`
plays for the capacity gate: the pure functions of this package take one
small frozen value instead of the whole configuration, so they can be called
(and tested, and benchmarked) without building a pydantic model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from deermem.learning.conversation import DEFAULT_MAX_CONVERSATION_CHARS, MIN_CONVERSATION_CHARS

if TYPE_CHECKING:  # pydantic is not needed to use the update functions
    from deermem.config import MemoryConfig

__all__ = ["UpdateSettings"]


@dataclass(frozen=True, slots=True)
class UpdateSettings:
    """What the prompt, the gates and the staleness review need.

    The defaults are :class:`MemoryConfig`'s (the original DeerMem's, where
    it has the setting; it has no cap on the conversation).

    Raises:
        ValueError: ``max_conversation_chars`` is below
            :data:`~deermem.learning.conversation.MIN_CONVERSATION_CHARS`.
    """

    fact_confidence_threshold: float = 0.7
    staleness_review_enabled: bool = True
    staleness_age_days: int = 90
    staleness_min_candidates: int = 3
    staleness_max_removals_per_cycle: int = 10
    staleness_max_lifetime_multiplier: float = 20.0
    staleness_max_extension_days: int = 3650
    protected_categories: tuple[str, ...] = ("correction",)
    max_conversation_chars: int = DEFAULT_MAX_CONVERSATION_CHARS

    def __post_init__(self) -> None:
        # Checked here as well as in MemoryConfig: a value built by hand must not
        # fail only at the first update, in a queue worker where nobody sees it.
        if self.max_conversation_chars < MIN_CONVERSATION_CHARS:
            raise ValueError(
                f"max_conversation_chars must be at least {MIN_CONVERSATION_CHARS:,}, "
                f"got {self.max_conversation_chars!r}"
            )

    @classmethod
    def from_config(cls, config: MemoryConfig) -> UpdateSettings:
        """Take the update keys."""
        return cls(
            fact_confidence_threshold=config.fact_confidence_threshold,
            staleness_review_enabled=config.staleness_review_enabled,
            staleness_age_days=config.staleness_age_days,
            staleness_min_candidates=config.staleness_min_candidates,
            staleness_max_removals_per_cycle=config.staleness_max_removals_per_cycle,
            staleness_max_lifetime_multiplier=config.staleness_max_lifetime_multiplier,
            staleness_max_extension_days=config.staleness_max_extension_days,
            protected_categories=config.protected_categories,
            max_conversation_chars=config.max_conversation_chars,
        )

    @property
    def creation_cap_days(self) -> int:
        """The longest window a new fact may be created with: ``int(age × multiplier)``.

        1800 days with the defaults. A model that declares a fact valid for a
        century still sees it reviewed within five years.
        """
        return int(self.staleness_age_days * self.staleness_max_lifetime_multiplier)
