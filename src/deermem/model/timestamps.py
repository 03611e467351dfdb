"""Timestamps as deermem stores them: ISO 8601 in UTC with a ``Z`` suffix.

Parsing is lenient on purpose: a timestamp that cannot be read must never
crash an eviction or a review, so :func:`parse_timestamp` returns ``None`` and
each caller decides what "unknown time" means for its own rule.
"""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["format_timestamp", "parse_timestamp"]


def format_timestamp(moment: datetime) -> str:
    """Render an aware datetime as ISO 8601 UTC with a ``Z`` suffix.

    Microseconds are kept, as the original DeerMem does, so two writes in the
    same second still order correctly. A naive datetime is taken to be UTC.
    """
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def parse_timestamp(value: object) -> datetime | None:
    """Read a stored timestamp into an aware UTC datetime, or ``None``.

    Accepts ``datetime`` objects and ISO 8601 strings (``Z`` or an explicit
    offset); a value without a time zone is taken to be UTC. Anything else —
    ``None``, numbers, booleans, garbage strings — yields ``None``.
    """
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.strip())
        except ValueError:
            return None
    else:
        return None
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)
