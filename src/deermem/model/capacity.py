"""The capacity policy's default parameters and the weight rule, written once.

Two readers need these values: the configuration (the ``eviction_*`` keys of
:class:`~deermem.config.MemoryConfig`) and the policy object
(:class:`~deermem.policy.CapacityPolicy`, which is also what
:func:`~deermem.policy.select_facts_for_capacity` falls back to when a caller
leaves a keyword out). The configuration sits below the policy layer, so the
values live here, beneath both, instead of being repeated in each. They are
the original DeerMem's defaults (reference §3).
"""

from __future__ import annotations

import math
from typing import Final

__all__ = [
    "DEFAULT_ACCESS_HALF_LIFE_DAYS",
    "DEFAULT_ACCESS_WEIGHT",
    "DEFAULT_CONFIDENCE_WEIGHT",
    "DEFAULT_CONFIRMATION_HALF_LIFE_DAYS",
    "DEFAULT_CONFIRMATION_WEIGHT",
    "DEFAULT_CORRECTION_RESERVED_FRACTION",
    "DEFAULT_CORRECTION_RESERVED_MAX",
    "DEFAULT_POLICY",
    "DEFAULT_PROTECTED_CATEGORIES",
    "WEIGHT_TOLERANCE",
    "weights_sum_to_one",
]

DEFAULT_POLICY: Final = "confidence"

DEFAULT_CONFIDENCE_WEIGHT: Final = 0.65
DEFAULT_CONFIRMATION_WEIGHT: Final = 0.25
DEFAULT_ACCESS_WEIGHT: Final = 0.10

DEFAULT_CONFIRMATION_HALF_LIFE_DAYS: Final = 90
DEFAULT_ACCESS_HALF_LIFE_DAYS: Final = 30

DEFAULT_CORRECTION_RESERVED_FRACTION: Final = 0.10
DEFAULT_CORRECTION_RESERVED_MAX: Final = 10

# The one category rule table's default: reserved in capacity selection,
# guaranteed in prompt injection, exempt from staleness review.
DEFAULT_PROTECTED_CATEGORIES: Final[tuple[str, ...]] = ("correction",)

WEIGHT_TOLERANCE: Final = 1e-9


def weights_sum_to_one(confidence: float, confirmation: float, access: float) -> bool:
    """Whether the three ``hybrid-v1`` weights sum to 1, within :data:`WEIGHT_TOLERANCE`.

    Summed left to right, as the score is, so a configuration accepted here
    is exactly the one the policy accepts.
    """
    total = confidence + confirmation + access
    return math.isclose(total, 1.0, rel_tol=0.0, abs_tol=WEIGHT_TOLERANCE)
