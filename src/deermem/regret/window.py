"""Reading the start of a report's window: ``--since 2026-01-01`` or ``--since 30d``."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Final

__all__ = ["parse_since"]

_RELATIVE: Final = re.compile(r"(\d{1,5})([dw])")


def parse_since(text: str, now: datetime) -> datetime:
    """The moment ``text`` names.

    An ISO 8601 date or time (UTC unless it says otherwise), or ``N`` days
    (``30d``) or weeks (``4w``) before ``now``.

    Raises:
        ValueError: naming the value and the accepted forms.
    """
    value = text.strip()
    relative = _RELATIVE.fullmatch(value)
    if relative is not None:
        count, unit = int(relative.group(1)), relative.group(2)
        return now - timedelta(days=count * (7 if unit == "w" else 1))
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(
            f"--since {text!r}: expected an ISO 8601 date or time (2026-01-31, "
            "2026-01-31T12:00:00Z) or a span back from now (30d, 4w)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)
