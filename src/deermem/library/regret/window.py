"""Reading the start of a report's window: ``--since 2026-01-01`` or ``--since 30d``."""

from __future__ import annotations

from datetime import datetime

from deermem.model import parse_moment

__all__ = ["parse_since"]


def parse_since(text: str, now: datetime) -> datetime:
    """The moment ``text`` names.

    An ISO 8601 date or time (UTC unless it says otherwise), or ``N`` hours
    (``12h``), days (``30d``) or weeks (``4w``) before ``now``.

    Raises:
        ValueError: naming the value and the accepted forms.
    """
    return parse_moment(text, now, option="--since")
