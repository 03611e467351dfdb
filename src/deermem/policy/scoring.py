"""The three bounded signals of ``hybrid-v1``, the confidence coercion, and a fact's score.

Each signal maps a fact to [0, 1]:

* **confidence** — the stored value, clamped; 0.5 when it is missing or
  cannot be read, so one bad row never crashes an eviction.
* **confirmation freshness** — ``2^(−Δdays/half_life)`` since the user last
  confirmed the fact; a fact never confirmed decays from its creation time at
  half weight, because being created is weaker evidence than being confirmed.
* **access heat** — the usage sidecar's heat, decayed since the last access,
  squashed by ``log1p(h)/log(9)`` and capped at 1, so a fact recalled eight
  times is as hot as one recalled a hundred times.

The arithmetic is written exactly as the original computes it (timedelta
seconds divided by 86400, ``2 ** (−max(0, Δ) / half_life)``, ``0.5 * decay``,
``min(1.0, log1p(h * decay) / log(9))``, ``wc*c + wf*f + wa*a`` summed left
to right), because near-ties must break the same way for the evaluation's
retained sets to match row by row.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, TypeAlias

from deermem.model import Fact, parse_timestamp
from deermem.policy.capacity import CapacityPolicy
from deermem.policy.names import POLICY_HYBRID_V1

__all__ = [
    "DEFAULT_CONFIDENCE",
    "FactLike",
    "Scores",
    "Signals",
    "access_heat",
    "as_utc",
    "coerce_confidence",
    "confirmation_freshness",
    "decay",
    "elapsed_days",
    "fact_id_of",
    "named_components",
    "read_timestamp",
    "score_facts",
    "usable_heat",
]

FactLike: TypeAlias = Mapping[str, Any] | Fact
"""What a policy scores: a mapping with the canonical camelCase keys, or a :class:`Fact`."""

DEFAULT_CONFIDENCE: Final = 0.5
SECONDS_PER_DAY: Final = 86400
LOG_9: Final = math.log(9)
TIMESTAMP_MEMO_SIZE: Final = 1 << 15
"""Distinct timestamp texts :func:`read_timestamp` remembers (least recently used go first).

A library holds about two timestamps per fact and the usage sidecar one more,
so this covers a library of ten thousand facts, or many of the configurable
maximum of 500, in a few megabytes.
"""


def coerce_confidence(value: object) -> float:
    """Read a stored confidence as a float in [0, 1]; 0.5 if it cannot be read.

    Numbers and numeric strings (``"0.9"``) are accepted; booleans, ``None``,
    other strings and non-finite values give the default 0.5.
    """
    if isinstance(value, float):
        number = value
    elif value is None or isinstance(value, bool):
        return DEFAULT_CONFIDENCE
    else:
        try:
            number = float(value)  # type: ignore[arg-type]  # int, str, Decimal, numpy ...
        except (TypeError, ValueError, OverflowError):
            return DEFAULT_CONFIDENCE
    if not math.isfinite(number):
        return DEFAULT_CONFIDENCE
    return 0.0 if number < 0.0 else 1.0 if number > 1.0 else number


def read_timestamp(value: object) -> datetime | None:
    """:func:`~deermem.model.parse_timestamp`, remembered for text.

    The gate decides over the whole library at every write at the cap, and
    the usage sidecar is re-read after every search, so the same stored texts
    come back decision after decision; each is parsed once while it stays
    among the :data:`TIMESTAMP_MEMO_SIZE` most recently read. Sharing the
    result is safe: an aware ``datetime`` is immutable.
    """
    if value is None:  # an absent field, the usual lastConfirmedAt
        return None
    if isinstance(value, str):
        return _parse_text(value)
    return parse_timestamp(value)


@functools.lru_cache(maxsize=TIMESTAMP_MEMO_SIZE)
def _parse_text(text: str) -> datetime | None:
    return parse_timestamp(text)


def elapsed_days(now: datetime, moment: datetime) -> float:
    """Days from ``moment`` to ``now`` (negative when ``moment`` is in the future)."""
    return (now - moment).total_seconds() / SECONDS_PER_DAY


def decay(days: float, half_life_days: float) -> float:
    """Exponential decay with the given half-life; future times do not decay.

    The exponent is the contract's ``-max(0, days) / half_life_days``; the
    comparison below picks what ``max(0, days)`` picks in every case (0 for
    negative days, 0.0 and NaN), without a call per fact.
    """
    past_days = days if days > 0 else 0
    return 2 ** (-past_days / half_life_days)


def confirmation_freshness(
    last_confirmed_at: object, created_at: object, now: datetime, half_life_days: float
) -> float:
    """Freshness in [0, 1] from the last confirmation, else half-weight from creation.

    A timestamp that cannot be parsed counts as absent; with neither
    timestamp readable the freshness is 0.
    """
    confirmed = read_timestamp(last_confirmed_at)
    if confirmed is not None:
        return decay(elapsed_days(now, confirmed), half_life_days)
    created = read_timestamp(created_at)
    if created is not None:
        return 0.5 * decay(elapsed_days(now, created), half_life_days)
    return 0.0


def access_heat(entry: object, now: datetime, half_life_days: float) -> float:
    """Access heat in [0, 1] from one usage-sidecar entry.

    ``entry`` is ``{"accessHeat": float, "accessCount": int, "lastAccessedAt":
    iso}``; anything malformed — not a mapping, a non-numeric or non-positive
    heat, an unreadable timestamp — gives 0.
    """
    # dict is the stored form; naming it first spares the Mapping ABC's lookup
    if not isinstance(entry, dict | Mapping):
        return 0.0
    heat = usable_heat(entry.get("accessHeat"))
    if heat is None:
        return 0.0
    accessed = read_timestamp(entry.get("lastAccessedAt"))
    if accessed is None:
        return 0.0
    decayed = heat * decay(elapsed_days(now, accessed), half_life_days)
    return min(1.0, math.log1p(decayed) / LOG_9)


def usable_heat(value: object) -> float | None:
    """A stored access heat as a positive finite float, or ``None`` if unusable."""
    if isinstance(value, float):
        number = float(value)
    elif isinstance(value, int) and not isinstance(value, bool):
        try:
            number = float(value)
        except OverflowError:  # an int too large for a float
            return None
    else:
        return None
    return number if number > 0 and math.isfinite(number) else None


def as_utc(now: datetime) -> datetime:
    """Make the injected clock aware; a naive clock is taken to be UTC."""
    return now.replace(tzinfo=UTC) if now.tzinfo is None else now


def fact_id_of(value: object) -> str:
    """A fact's ``id`` field as the string a decision reports ("" when absent)."""
    return value if isinstance(value, str) else "" if value is None else str(value)


Signals: TypeAlias = tuple[float, float, float]
"""A ``hybrid-v1`` score's (confidence, confirmation freshness, access heat)."""


def named_components(score: float, signals: Signals | None) -> dict[str, float]:
    """The signals a score was summed from, by name.

    ``signals`` is ``None`` under ``confidence``, where the score is the
    confidence itself.
    """
    if signals is None:
        return {"confidence": score}
    confidence, freshness, heat = signals
    return {"confidence": confidence, "confirmationFreshness": freshness, "accessHeat": heat}


@dataclass(frozen=True, slots=True)
class Scores:
    """Every fact's score under one policy, by input position, and the signals behind it.

    Attributes:
        values: the scores.
        signals: under ``hybrid-v1``, each fact's (confidence, confirmation
            freshness, access heat); ``None`` under ``confidence``, where the
            score is the confidence itself.
    """

    values: list[float]
    signals: list[Signals] | None

    def components(self, index: int) -> dict[str, float]:
        """The signals the score of the fact at ``index`` was summed from, by name."""
        signals = None if self.signals is None else self.signals[index]
        return named_components(self.values[index], signals)


def score_facts(
    facts: Sequence[FactLike],
    policy: CapacityPolicy,
    usage: Mapping[str, object],
    now: datetime | None,
) -> Scores:
    """Score every fact under ``policy``.

    Under ``confidence`` the score is the coerced confidence. Under
    ``hybrid-v1`` it is ``wc*c + wf*f + wa*a`` of the confidence, the
    confirmation freshness and the access heat; ``usage`` holds the usage
    entries by fact id.

    Raises:
        ValueError: ``hybrid-v1`` without ``now`` (decisions never read the
            wall clock).
    """
    if policy.name != POLICY_HYBRID_V1:
        return Scores([coerce_confidence(fact.get("confidence")) for fact in facts], None)
    if now is None:
        raise ValueError("the hybrid-v1 policy needs the clock: pass now=")
    now = as_utc(now)
    wc, wf, wa = policy.confidence_weight, policy.confirmation_weight, policy.access_weight
    confirmation_half_life = policy.confirmation_half_life_days
    access_half_life = policy.access_half_life_days
    values: list[float] = []
    signals: list[Signals] = []
    for fact in facts:
        confidence = coerce_confidence(fact.get("confidence"))
        freshness = confirmation_freshness(
            fact.get("lastConfirmedAt"), fact.get("createdAt"), now, confirmation_half_life
        )
        entry = usage.get(fact_id_of(fact.get("id")))
        # a fact never recalled has no usage entry, and no heat
        heat = 0.0 if entry is None else access_heat(entry, now, access_half_life)
        values.append(wc * confidence + wf * freshness + wa * heat)
        signals.append((confidence, freshness, heat))
    return Scores(values, signals)
