"""When to try a model call again, and how long to wait first.

Pure arithmetic, kept apart from the HTTP client so the schedule can be read
and tested on its own: exponential backoff, a server's ``Retry-After`` when it
sends one, and one cap on the total time a call may spend waiting.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

__all__ = ["RetryPolicy", "parse_retry_after"]


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How many times a failed call is retried, and the waits in between.

    Only failures that may pass are retried: transport errors (refused, reset,
    dropped connections), timeouts, HTTP 429 and 5xx. Anything else (a 400,
    a 401, an answer that is not a completion) fails at once.

    Attributes:
        max_retries: retries after the first attempt; 0 never retries.
        backoff_seconds: the wait before the first retry.
        backoff_multiplier: each further wait is the previous one times this
            (1.0 gives a constant wait).
        max_total_wait_seconds: the most one call may spend waiting between
            attempts, summed. A wait that would pass it is shortened to fit; a
            ``Retry-After`` that would pass it ends the call instead (retrying
            early would only earn another 429).
        honour_retry_after: wait what the server asks for, when it asks.
    """

    max_retries: int = 2
    backoff_seconds: float = 1.0
    backoff_multiplier: float = 2.0
    max_total_wait_seconds: float = 60.0
    honour_retry_after: bool = True

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0; got {self.max_retries}")
        for name in ("backoff_seconds", "max_total_wait_seconds"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be a finite number >= 0; got {value!r}")
        if not (math.isfinite(self.backoff_multiplier) and self.backoff_multiplier >= 1.0):
            raise ValueError(f"backoff_multiplier must be >= 1; got {self.backoff_multiplier!r}")

    @property
    def max_attempts(self) -> int:
        return self.max_retries + 1

    def next_wait(
        self, attempt: int, waited: float, retry_after: float | None = None
    ) -> float | None:
        """Seconds to wait before attempt ``attempt + 1``, or ``None`` to give up.

        Args:
            attempt: the attempt that just failed (1 for the first).
            waited: seconds already spent waiting during this call.
            retry_after: what the server asked for, if anything.
        """
        if attempt >= self.max_attempts:
            return None
        remaining = self.max_total_wait_seconds - waited
        if self.honour_retry_after and retry_after is not None:
            return retry_after if retry_after <= remaining else None
        wait = self.backoff_seconds * self.backoff_multiplier ** (attempt - 1)
        if wait > 0 and remaining <= 0:
            return None
        return min(wait, max(remaining, 0.0))


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """Read a ``Retry-After`` (or ``retry-after-ms``-style seconds) header value.

    Accepts delta-seconds (``"2"``, ``"1.5"``) and an HTTP date; a date in the
    past means "now" (0). Anything unreadable is ``None``, as if absent: a
    malformed header must not stop a retry that would otherwise happen.

    Args:
        value: the header value.
        now: the clock for HTTP dates; the current time by default.
    """
    if value is None:
        return None
    text = value.strip()
    seconds: float | None
    try:
        seconds = float(text)
    except ValueError:
        seconds = _seconds_until(text, now)
    if seconds is None or not math.isfinite(seconds):
        return None
    return max(seconds, 0.0)


def _seconds_until(text: str, now: datetime | None) -> float | None:
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return (when - (now or datetime.now(UTC))).total_seconds()
