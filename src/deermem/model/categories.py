"""The fact categories deermem knows, and how unknown ones are kept.

The nine core categories are the original DeerMem's. A category outside the
core set is not rejected: the fact is stored as ``other`` and the original
label survives in ``categoryExtension``, so nothing a model or a user wrote is
lost and every reader can still rely on the core set.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "CORE_CATEGORIES",
    "DEFAULT_CATEGORY",
    "canonical_category",
    "category_key",
]

CORE_CATEGORIES: Final[tuple[str, ...]] = (
    "preference",
    "correction",
    "context",
    "goal",
    "behavior",
    "identity",
    "constraint",
    "decision",
    "other",
)

DEFAULT_CATEGORY: Final = "context"

_CORE_SET: Final = frozenset(CORE_CATEGORIES)


def category_key(category: object) -> str:
    """Normalise a category for comparisons: stripped and lower-cased.

    Rules such as the correction reserve compare categories this way, so
    ``" Correction "`` counts as a correction. Non-strings give ``""``.
    """
    return category.strip().lower() if isinstance(category, str) else ""


def canonical_category(category: str) -> tuple[str, str | None]:
    """Split a raw category into ``(stored category, categoryExtension)``.

    ``""`` becomes the default ``context``; a core category (in any letter
    case) is returned in lower case; anything else is stored as ``other`` with
    the stripped raw label as extension.
    """
    label = category.strip()
    if not label:
        return DEFAULT_CATEGORY, None
    if label.lower() in _CORE_SET:
        return label.lower(), None
    return "other", label
