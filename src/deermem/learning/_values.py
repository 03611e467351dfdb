"""Reading loosely typed numbers from model answers and stored facts."""

from __future__ import annotations

import math

from deermem.learning.limits import MAX_CONFIDENCE_TEXT_CHARS

__all__ = ["read_confidence", "read_positive_days"]


def read_positive_days(value: object) -> int | None:
    """A day count of at least 1, or ``None``.

    Whole numbers are taken as they are, however large (an ``int`` is never
    routed through ``float``, so ``10**400`` survives exactly); finite floats
    are truncated (``180.7`` → 180, ``0.9`` → nothing). Booleans, strings,
    ``NaN``, infinities and counts below 1 give ``None``.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 1 else None
    if isinstance(value, float) and math.isfinite(value):
        days = int(value)
        return days if days >= 1 else None
    return None


def read_confidence(value: object) -> float | None:
    """A confidence from a model: a finite number or numeric text in [0, 1], else ``None``.

    ``"0.91"`` is read as 0.91; ``true``, ``"high"``, ``NaN`` and values
    outside [0, 1] are not confidences. (The original accepts any finite
    number here and fails later, at storage; refusing it here keeps one bad
    fact from failing the whole update.)
    """
    if isinstance(value, bool):
        return None
    number: float
    if isinstance(value, int | float):
        try:
            number = float(value)
        except OverflowError:
            return None
    elif isinstance(value, str) and len(value) <= MAX_CONFIDENCE_TEXT_CHARS:
        try:
            number = float(value.strip())
        except ValueError:
            return None
    else:
        return None
    if not math.isfinite(number) or not 0.0 <= number <= 1.0:
        return None
    return number
