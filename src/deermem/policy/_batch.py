"""Scoring a whole library at once: the hot path of every eviction.

:mod:`deermem.policy.scoring` states each signal as a small readable
function. Here the same arithmetic runs column by column over a library, with
the per-fact work cut to what a decision needs:

* components stay plain float columns, turned into dicts only for the facts
  someone looks at;
* timestamps are read once into integer microseconds since the epoch and
  memoised by their text, because the same facts are scored at every
  eviction. ``(now − t).total_seconds()`` is, in CPython, the exact integer
  microsecond difference divided by 10**6 — so ``(now_us − t_us) / 10**6`` is
  the same float, bit for bit, without building a datetime per fact.

The expressions are the contract's, operation for operation; a test checks the
floats against the readable versions.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final, NamedTuple, TypeAlias, cast

from deermem.model.timestamps import parse_timestamp
from deermem.policy.scoring import LOG_9, SECONDS_PER_DAY, coerce_confidence, usable_heat

if TYPE_CHECKING:
    from deermem.model.fact import Fact

    _FactLike: TypeAlias = Mapping[str, Any] | Fact

__all__ = [
    "ScoredLibrary",
    "fact_id_of",
    "field_of",
    "score_confidence",
    "score_hybrid",
    "timestamp_micros",
]

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_MICROS_PER_SECOND: Final = 1_000_000
# Bounded memo of parsed timestamps (text -> micros, or None if unreadable).
# Cleared wholesale when full: simpler than LRU and just as good for a cache
# whose working set is "the timestamps of the libraries being scored".
_MICROS_CACHE: dict[str, int | None] = {}
_MICROS_CACHE_LIMIT: Final = 1 << 17
_MISSING: Final = object()


class ScoredLibrary(NamedTuple):
    """Scores of every fact, by input position, with the signal columns."""

    scores: list[float]
    confidence: list[float]
    freshness: list[float] | None  # None under the confidence policy
    heat: list[float] | None
    ids: list[str] | None  # read by hybrid-v1 (usage is keyed by id); else read on demand

    def components(self, index: int) -> dict[str, float]:
        if self.freshness is None or self.heat is None:
            return {"confidence": self.confidence[index]}
        return {
            "confidence": self.confidence[index],
            "confirmationFreshness": self.freshness[index],
            "accessHeat": self.heat[index],
        }


def fact_id_of(fact: _FactLike) -> str:
    """A fact's id as a string ("" when it has none)."""
    if type(fact) is not dict and isinstance(fact, _FACT or _import_fact()):
        return fact.id
    value = cast("Mapping[str, Any]", fact).get("id")
    return value if isinstance(value, str) else "" if value is None else str(value)


def field_of(fact: _FactLike, key: str) -> Any:
    """One field of a mapping or a :class:`Fact`, ``None`` when absent."""
    if type(fact) is not dict and isinstance(fact, _FACT or _import_fact()):
        return getattr(fact, key)
    return cast("Mapping[str, Any]", fact).get(key)


# :class:`Fact`, once something needed it. A caller that hands the selector only
# dicts — the evaluation harness, a benchmark — then never imports the fact
# dataclasses (and with them :mod:`dataclasses` and :mod:`inspect`), a fifth of
# ``deermem eval run-policy``'s start-up; a caller holding a Fact has imported it
# already. A dict is never a Fact, so dicts are told apart before asking; a
# global rather than a cached function keeps the Fact path as fast as before.
_FACT: type[Fact] | None = None


def _import_fact() -> type[Fact]:
    global _FACT
    from deermem.model.fact import Fact

    _FACT = Fact
    return Fact


def timestamp_micros(value: object) -> int | None:
    """A stored timestamp as integer microseconds since the epoch, or ``None``."""
    if type(value) is str:
        cached = _MICROS_CACHE.get(value, _MISSING)
        if cached is not _MISSING:
            return cached  # type: ignore[return-value]
        micros = _micros(parse_timestamp(value))
        if len(_MICROS_CACHE) >= _MICROS_CACHE_LIMIT:
            _MICROS_CACHE.clear()
        _MICROS_CACHE[value] = micros
        return micros
    return _micros(parse_timestamp(value))


def score_confidence(items: Sequence[_FactLike]) -> ScoredLibrary:
    confidence = _confidence_column(items)
    return ScoredLibrary(
        scores=confidence, confidence=confidence, freshness=None, heat=None, ids=None
    )


def score_hybrid(
    items: Sequence[_FactLike],
    usage: Mapping[str, Mapping[str, object]],
    now: datetime,
    weights: tuple[float, float, float],
    confirmation_half_life: float,
    access_half_life: float,
) -> ScoredLibrary:
    wc, wf, wa = weights
    now_us = _micros(now)
    assert now_us is not None
    per_day = _MICROS_PER_SECOND  # divided by this, then by SECONDS_PER_DAY, as the contract
    cached = _MICROS_CACHE.get
    log1p = math.log1p
    get_usage = usage.get
    confidence: list[float] = []
    freshness: list[float] = []
    heat: list[float] = []
    scores: list[float] = []
    ids: list[str] = []
    for fact in items:
        if type(fact) is dict:
            fact_id = fact.get("id")
            if type(fact_id) is not str:
                fact_id = fact_id_of(fact)
            c = fact.get("confidence")
            confirmed = fact.get("lastConfirmedAt")
            created = fact.get("createdAt")
        else:
            fact_id = fact_id_of(fact)
            c = field_of(fact, "confidence")
            confirmed = field_of(fact, "lastConfirmedAt")
            created = field_of(fact, "createdAt")
        if type(c) is not float or not 0.0 <= c <= 1.0:
            c = coerce_confidence(c)
        # freshness: 2^(−Δ/h) since confirmation, else 0.5·2^(−Δ/h) since creation, else 0
        moment = None if confirmed is None else cached(confirmed, _MISSING)
        if moment is _MISSING:
            moment = timestamp_micros(confirmed)
        if moment is not None:
            days = (now_us - moment) / per_day / SECONDS_PER_DAY  # type: ignore[operator]
            f = 2.0 ** (-(days if days > 0 else 0) / confirmation_half_life)
        else:
            moment = None if created is None else cached(created, _MISSING)
            if moment is _MISSING:
                moment = timestamp_micros(created)
            if moment is not None:
                days = (now_us - moment) / per_day / SECONDS_PER_DAY  # type: ignore[operator]
                f = 0.5 * 2.0 ** (-(days if days > 0 else 0) / confirmation_half_life)
            else:
                f = 0.0
        # heat: min(1, log1p(h·2^(−Δ/h)) / log 9); 0 for anything malformed
        a = 0.0
        entry = get_usage(fact_id)
        if entry is not None and (type(entry) is dict or isinstance(entry, Mapping)):
            h = entry.get("accessHeat")
            if type(h) is not float or not 0.0 < h < math.inf:
                h = usable_heat(h)
            if h is not None:
                accessed = timestamp_micros(entry.get("lastAccessedAt"))
                if accessed is not None:
                    days = (now_us - accessed) / per_day / SECONDS_PER_DAY
                    a = log1p(h * 2.0 ** (-(days if days > 0 else 0) / access_half_life)) / LOG_9
                    if a > 1.0:
                        a = 1.0
        ids.append(fact_id)
        confidence.append(c)
        freshness.append(f)
        heat.append(a)
        scores.append(wc * c + wf * f + wa * a)
    return ScoredLibrary(
        scores=scores, confidence=confidence, freshness=freshness, heat=heat, ids=ids
    )


def _confidence_column(items: Sequence[_FactLike]) -> list[float]:
    # The common case — a dict holding a float in range — needs no function call.
    values = [
        fact.get("confidence") if type(fact) is dict else field_of(fact, "confidence")
        for fact in items
    ]
    return [
        value if type(value) is float and 0.0 <= value <= 1.0 else coerce_confidence(value)
        for value in values
    ]


def _micros(moment: datetime | None) -> int | None:
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    delta = moment - _EPOCH
    return (delta.days * SECONDS_PER_DAY + delta.seconds) * _MICROS_PER_SECOND + delta.microseconds
