"""What a search returns, and how a match is scored.

The score is the original's: ``|bm25| × decay + 0.2 × confidence``, where
the decay is 1 for facts younger than 30 days and ``e^(−0.01 (age − 30))``
after, with the age in days from ``createdAt`` to the injected ``now``.
:func:`search_score` states it in Python; the index computes the same float
in SQL.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, Literal

from deermem.model import DEFAULT_CATEGORY, Fact, category_key, parse_timestamp
from deermem.policy import coerce_confidence

__all__ = [
    "CONFIDENCE_WEIGHT",
    "DECAY_GRACE_DAYS",
    "DECAY_RATE",
    "FactFields",
    "FactLike",
    "MatchType",
    "SearchHit",
    "SyncReport",
    "micros",
    "search_score",
]

DECAY_GRACE_DAYS: Final = 30
DECAY_RATE: Final = 0.01
CONFIDENCE_WEIGHT: Final = 0.2
_MICROS: Final = 1_000_000
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)

MatchType = Literal["fts5", "substring"]
FactLike = Fact | Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One search result: which fact, how well, and how it was found.

    Attributes:
        fact_id: the fact's id.
        score: ``|bm25| × decay + 0.2 × confidence`` for ``fts5`` hits, the
            confidence for ``substring`` hits; higher is better.
        match_type: ``fts5`` or ``substring``.
        bm25: FTS5's raw BM25 value (negative; more negative matches better),
            ``None`` for substring hits.
        archived: the hit is an archived fact (only a search ``with_archive``
            returns those).
    """

    fact_id: str
    score: float
    match_type: MatchType
    bm25: float | None = None
    archived: bool = False

    def to_dict(self) -> dict[str, object]:
        return {
            "factId": self.fact_id,
            "score": self.score,
            "matchType": self.match_type,
            "bm25": self.bm25,
        }


@dataclass(frozen=True, slots=True)
class SyncReport:
    """What a :meth:`SearchIndex.sync_scope` changed.

    Attributes:
        indexed: rows written (new or changed facts).
        removed: rows deleted (facts no longer in the scope).
        unchanged: rows left as they were.
        skipped: facts not indexable (no string id, no text content).
    """

    indexed: int = 0
    removed: int = 0
    unchanged: int = 0
    skipped: int = 0


def search_score(bm25: float, created_at: object, confidence: object, now: datetime) -> float:
    """The search score of one match, in Python (the SQL computes the same float).

    ``|bm25| × decay + 0.2 × confidence``; the decay is 1 below 30 days of
    age (and for an unreadable ``createdAt``), ``e^(−0.01 (age − 30))`` from
    there. The confidence is read as the capacity policy reads it.
    """
    decay = 1.0
    created = parse_timestamp(created_at)
    if created is not None:
        age = micros(now) - micros(created)
        days = age / _MICROS / 86400
        if days >= DECAY_GRACE_DAYS:
            decay = math.exp(-DECAY_RATE * (days - DECAY_GRACE_DAYS))
    return abs(bm25) * decay + CONFIDENCE_WEIGHT * coerce_confidence(confidence)


@dataclass(frozen=True, slots=True)
class FactFields:
    """The fields search reads from a fact or a fact mapping.

    ``None`` from :meth:`of` means the fact cannot be searched at all (a
    mapping without a string id or without text content).
    """

    fact_id: str
    content: str
    category: object
    confidence: object
    created_at: object
    category_extension: object = None

    @classmethod
    def of(cls, fact: FactLike) -> FactFields | None:
        if isinstance(fact, Fact):
            return cls(
                fact.id,
                fact.content,
                fact.category,
                fact.confidence,
                fact.createdAt,
                fact.categoryExtension,
            )
        fact_id, content = fact.get("id"), fact.get("content")
        if not isinstance(fact_id, str) or not fact_id or not isinstance(content, str):
            return None
        return cls(
            fact_id,
            content,
            fact.get("category"),
            fact.get("confidence"),
            fact.get("createdAt"),
            fact.get("categoryExtension"),
        )

    def category_keys(self) -> tuple[str, str]:
        """``(category, label)`` as a category filter compares them.

        The category (``context`` when missing) and, for a fact stored as
        ``other``, its own label (``categoryExtension``; ``""`` if none), both
        stripped and lower-cased: ``--category tooling`` finds a fact filed
        as ``other``/``tooling``, as listing facts by category does.
        """
        return category_key(self.category) or DEFAULT_CATEGORY, category_key(
            self.category_extension
        )


def micros(moment: datetime) -> int:
    """A moment as integer microseconds since the epoch; a naive one is taken as UTC."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    delta = moment - _EPOCH
    return (delta.days * 86400 + delta.seconds) * _MICROS + delta.microseconds
