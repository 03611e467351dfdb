"""Timestamps as deermem stores them: ISO 8601 in UTC with a ``Z`` suffix.

Parsing is lenient on purpose: a timestamp that cannot be read must never
crash an eviction or a review, so :func:`parse_timestamp` returns ``None`` and
each caller decides what "unknown time" means for its own rule.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Final

__all__ = ["format_timestamp", "parse_moment", "parse_timestamp"]

_SPAN: Final = re.compile(r"(\d{1,5})([hdw])")
_SPAN_HOURS: Final = {"h": 1, "d": 24, "w": 24 * 7}


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


def parse_moment(text: str, now: datetime, *, option: str, ahead: bool = False) -> datetime:
    """The moment a person names on a command line, as an aware UTC datetime.

    An ISO 8601 date or time (UTC unless it says otherwise; a date is
    midnight at its start), or a span from ``now``: ``N`` hours (``12h``),
    days (``30d``) or weeks (``4w``) — back from now (``--since 30d``), or
    ahead of it with ``ahead`` (``--expires 30d``).

    Args:
        text: what was typed.
        now: the clock's time.
        option: the option's name, for the error (``--since``).
        ahead: a span counts forward from ``now`` instead of back.

    Raises:
        ValueError: naming the option, the value and the accepted forms.
    """
    value = text.strip()
    span = _SPAN.fullmatch(value)
    if span is not None:
        delta = timedelta(hours=int(span.group(1)) * _SPAN_HOURS[span.group(2)])
        return now + delta if ahead else now - delta
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        direction = "ahead of" if ahead else "back from"
        raise ValueError(
            f"{option} {text!r}: expected an ISO 8601 date or time (2026-01-31, "
            f"2026-01-31T12:00:00Z) or a span {direction} now (12h, 30d, 4w)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)
