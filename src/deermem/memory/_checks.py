"""Checks on what a caller asks the memory to store: one place, clear errors."""

from __future__ import annotations

import math

from deermem._exceptions import DuplicateFactError, FactValidationError
from deermem.store import ScopeSnapshot

__all__ = ["check_confidence", "check_not_duplicate", "checked_content"]


def checked_content(content: object) -> str:
    """The content trimmed; blank or non-string content is an error."""
    if not isinstance(content, str):
        raise FactValidationError("content", content, "expected a string")
    text = content.strip()
    if not text:
        raise FactValidationError("content", content, "expected text that is not blank")
    return text


def check_confidence(confidence: object) -> None:
    """A real number in [0, 1] (not a boolean, not NaN)."""
    if (
        isinstance(confidence, bool)
        or not isinstance(confidence, int | float)
        or not math.isfinite(confidence)
        or not 0.0 <= confidence <= 1.0
    ):
        raise FactValidationError("confidence", confidence, "expected a number between 0 and 1")


def check_not_duplicate(snapshot: ScopeSnapshot, text: str) -> None:
    """No active fact may say the same, compared stripped and case-folded."""
    key = text.strip().casefold()
    for fact in snapshot.facts:
        if fact.content.strip().casefold() == key:
            raise DuplicateFactError(fact.id)
