"""How one search runs: the whole query, or an exact shortcut past common words.

FTS5 computes ``bm25()`` for every fact that matches *any* alternative of an
``OR`` query, so the time of a query grows with the facts it matches: a query
containing a word that occurs in most facts ("the", "user", "prefers" in a
large memory) pays BM25 for most of the scope. Yet such a word carries little weight: its IDF,
``log((N − n + 0.5) / (n + 0.5))`` with ``n`` of ``N`` indexed facts
matching, is small (FTS5 floors it at ``1e-6`` from ``n ≥ N/2``), and one
group can add at most ``IDF × (k1 + 1) = 2.2 × IDF`` to a fact's ``|bm25|``
(BM25's term-frequency part stays below ``k1 + 1``).

The shortcut is MaxScore with the *light* groups — those matching at least
:data:`LIGHT_SHARE` of the index — as the non-essential terms. It returns
exactly what the whole query returns — the same facts, order and scores, bit
for bit — or it is not taken:

1. Count, over the whole index as BM25 does, the facts each group matches;
   the light groups' bounds sum to ``B``.
2. Search for the other groups alone, top ``k + MAX_BAND + 1``. A fact's
   partial score (``|bm25| × decay + 0.2 × confidence`` without the light
   groups) is at most its full score, which exceeds it by less than ``B``
   (the decay is at most 1).
3. The whole query's top ``k`` lies among the partial top ``m`` when (a) at
   least ``k`` facts matched, (b) the ``k``-th partial score beats
   ``0.2 + B`` — the most a fact matching only light groups can score
   (confidence is at most 1) — and (c) it beats the ``(m + 1)``-th partial
   score by more than ``B``, so no fact further down can overtake; ``m`` is
   the smallest such band from ``k`` to ``k +`` :data:`MAX_BAND`. Every
   comparison carries a slack far above floating-point rounding.
4. Those ``m`` facts are scored by FTS5 with the whole query, one row each,
   and sorted as the whole query sorts. BM25 of a row does not depend on
   which other rows a statement reads (the IDFs come from whole-index
   counts), so these are the whole query's own numbers.

When any condition fails, the whole query runs. Which groups count as light
only decides how fast the answer comes, never what it is. The shortcut is
tried only where it can pay: several groups, ``top_k`` at most
:data:`MAX_PRUNED_TOP_K` (each rescored row recounts every group) and at
least :data:`PRUNE_MIN_MATCHES` matches in the scope.
"""

from __future__ import annotations

import logging
import math
import sqlite3
from dataclasses import dataclass
from typing import Final, NamedTuple

from deermem.recall._index_sql import COUNTERFACTUAL_FTS, LIBRARY_FTS, SEARCH_SQL
from deermem.recall.search_hits import CONFIDENCE_WEIGHT, DECAY_GRACE_DAYS, DECAY_RATE

__all__ = [
    "LIGHT_SHARE",
    "MAX_BAND",
    "MAX_PRUNED_TOP_K",
    "PRUNE_MIN_MATCHES",
    "Row",
    "SearchRequest",
    "run_search",
]

_log = logging.getLogger("deermem.recall.search")

# FTS5's bm25(): k1 = 1.2, and the IDF of a phrase in half the rows or more is 1e-6.
_FLOOR_IDF: Final = 1e-6
_K1_PLUS_1: Final = 2.2
# Groups matching at least this share of the index are skipped (IDF ≤ 0.41).
LIGHT_SHARE: Final = 0.4
# At most this many facts beyond the k-th are rescored.
MAX_BAND: Final = 5
# Relative slack on every comparison: rounding is ~1e-16, this is 1e-9.
_SLACK: Final = 1e-9
MAX_PRUNED_TOP_K: Final = 20
PRUNE_MIN_MATCHES: Final = 2_000

_COUNT_ALL: Final = "SELECT count(*) FROM {fts} WHERE {fts} MATCH ?"
_COUNT_SCOPE: Final = "SELECT count(*) FROM {fts} WHERE {fts} MATCH ? AND rowid BETWEEN ? AND ?"
_TABLES: Final = (LIBRARY_FTS, COUNTERFACTUAL_FTS)
_SQL: Final = {
    (fts, filtered): SEARCH_SQL.format(
        fts=fts, category="WHERE :category IN (d.category, d.label)" if filtered else ""
    )
    for fts in _TABLES
    for filtered in (False, True)
}
# BM25's N: the rows of the table searched. doc rows are written and deleted
# with their full-text rows (counting doc is cheap, counting a full-text table
# is not); the counterfactual table also holds the archived rows.
_TOTAL: Final = {
    LIBRARY_FTS: (
        "SELECT (SELECT count(*) FROM doc) - (SELECT count(*) FROM doc WHERE archived = 1)"
    ),
    COUNTERFACTUAL_FTS: "SELECT count(*) FROM doc",
}


class Row(NamedTuple):
    """One match as the search statement returns it."""

    fact_id: str
    raw: float
    score: float
    row_id: int


@dataclass(frozen=True, slots=True)
class SearchRequest:
    """One search in one scope.

    Attributes:
        groups: the query's alternatives (``fts_groups``), each a valid FTS5
            expression on its own; the whole query joins them with ``OR``.
        low: first row id of the scope.
        high: last row id of the scope.
        category: the category key to keep, ``""`` for all.
        now_us: the clock, in microseconds since the epoch.
        top_k: how many results.
        fts: the full-text table: the libraries (``doc_fts``), or the
            libraries and their archives (``cf_fts``).
    """

    groups: tuple[str, ...]
    low: int
    high: int
    category: str
    now_us: int
    top_k: int
    fts: str = LIBRARY_FTS

    def rows(
        self, db: sqlite3.Connection, expression: str, *, limit: int, row: int | None = None
    ) -> list[Row]:
        """Run the search statement for ``expression`` (one row id, or the scope)."""
        parameters = {
            "query": expression,
            "category": self.category,
            "now": self.now_us,
            "grace": DECAY_GRACE_DAYS,
            "rate": DECAY_RATE,
            "weight": CONFIDENCE_WEIGHT,
            "limit": limit,
            "low": self.low if row is None else row,
            "high": self.high if row is None else row,
        }
        cursor = db.execute(_SQL[(self.fts, bool(self.category))], parameters)
        return [Row(str(f), float(raw), float(score), int(r)) for f, raw, score, r in cursor]


def run_search(db: sqlite3.Connection, request: SearchRequest) -> list[Row]:
    """The top ``k`` matches of the whole query, best first (ties by fact id)."""
    whole = " OR ".join(request.groups)
    shortcut = _shortcut(db, request, whole)
    if shortcut is not None:
        return shortcut
    return request.rows(db, whole, limit=request.top_k)


def _shortcut(db: sqlite3.Connection, request: SearchRequest, whole: str) -> list[Row] | None:
    """The whole query's top ``k`` by the shortcut, or ``None`` when it does not apply."""
    k = request.top_k
    if len(request.groups) < 2 or k > MAX_PRUNED_TOP_K:
        return None
    count_scope = _COUNT_SCOPE.format(fts=request.fts)
    in_scope = sum(
        db.execute(count_scope, (group, request.low, request.high)).fetchone()[0]
        for group in request.groups
    )
    if in_scope < PRUNE_MIN_MATCHES:
        return None
    total = db.execute(_TOTAL[request.fts]).fetchone()[0]
    count_all = _COUNT_ALL.format(fts=request.fts)
    counts = {group: db.execute(count_all, (group,)).fetchone()[0] for group in request.groups}
    light = [g for g in request.groups if counts[g] >= LIGHT_SHARE * total]
    essential = [g for g in request.groups if g not in light]
    if not light or not essential:
        return None
    partial = request.rows(db, " OR ".join(essential), limit=k + MAX_BAND + 1)
    if len(partial) < k:
        return None
    bound = sum(_upper_bound(counts[g], total) for g in light)
    slack = bound + _SLACK * (1.0 + partial[0].score)
    kth = partial[k - 1].score
    if kth <= CONFIDENCE_WEIGHT + slack:
        return None  # a fact matching only light groups might reach the top k
    band = next(
        (
            m
            for m in range(k, k + MAX_BAND + 1)
            if m >= len(partial) or kth - partial[m].score > slack
        ),
        None,
    )
    if band is None:
        return None  # too many facts below the k-th might overtake it
    exact = [
        row
        for candidate in partial[:band]
        for row in request.rows(db, whole, limit=1, row=candidate.row_id)
    ]
    if len(exact) != band:  # every candidate matches the whole query; guard anyway
        return None
    exact.sort(key=lambda row: (-row.score, row.fact_id))
    _log.debug(
        "search: %d light group(s) of %d skipped, %d rescored",
        len(light),
        len(request.groups),
        band,
    )
    return exact[:k]


def _upper_bound(matches: int, total: int) -> float:
    """The most one group can add to a fact's ``|bm25|``: FTS5's IDF × (k1 + 1)."""
    idf = math.log((total - matches + 0.5) / (matches + 0.5))
    return (idf if idf > 0.0 else _FLOOR_IDF) * _K1_PLUS_1 * (1.0 + _SLACK)
