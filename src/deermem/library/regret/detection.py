"""The regret a search reveals: missed recalls, and recalls of shadow-evicted facts.

A search asks one counterfactual question of the archive (see
:func:`deermem.recall.search_with_archive`): which archived facts would have
been among its results had they still been in the library. Each such fact is
a *missed recall* — against the policy that evicted it and, when its archive
entry carries the shadow policy's mark, against the shadow policy too. A
result that the shadow policy would have evicted (it holds a shadow mark) is
a *recall* against the shadow policy: under it, that result would have been
missed.

Pure: the caller reads the archive entries and the marks and records the
events (:meth:`deermem.store.Store.record_access`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from deermem.library.regret_ledger import shadow_regret
from deermem.store.records import ArchiveEntry, RegretEvent, ShadowMark, query_digest

__all__ = ["Found", "search_regret"]

TRIGGER_SEARCH: Final = "search"


@dataclass(frozen=True, slots=True)
class Found:
    """A fact a search found, at its rank (1 = first)."""

    fact_id: str
    rank: int


def search_regret(
    query: str,
    *,
    stamp: str,
    missed: Iterable[tuple[ArchiveEntry, int]],
    results: Iterable[Found],
    marks: Mapping[str, ShadowMark],
) -> tuple[RegretEvent, ...]:
    """The regret events of one search.

    Args:
        query: what was searched for (only its digest is kept).
        stamp: the search's clock, formatted.
        missed: the archived facts among the top results, with their ranks.
        results: the library's results, with their ranks.
        marks: the shadow policy's marks on library facts.
    """
    digest = query_digest(query)
    events: list[RegretEvent] = []
    for entry, rank in missed:
        category = entry.eviction.category if entry.eviction else entry.fact.category
        events.append(
            RegretEvent(
                kind="missed_recall",
                occurred_at=stamp,
                fact_id=entry.fact_id,
                category=category,
                policy_version=entry.policy_version or "",
                role="active",
                evicted_at=entry.archived_at,
                receipt_id=entry.receipt_id,
                reason=entry.reason,
                trigger=TRIGGER_SEARCH,
                query_digest=digest,
                rank=rank,
            )
        )
        if entry.shadow is not None:
            events.append(
                shadow_regret(
                    entry.shadow,
                    "missed_recall",
                    entry.fact_id,
                    occurred_at=stamp,
                    trigger=TRIGGER_SEARCH,
                    query_digest=digest,
                    rank=rank,
                )
            )
    for found in results:
        mark = marks.get(found.fact_id)
        if mark is not None:
            events.append(
                shadow_regret(
                    mark,
                    "recalled",
                    found.fact_id,
                    occurred_at=stamp,
                    trigger=TRIGGER_SEARCH,
                    query_digest=digest,
                    rank=found.rank,
                )
            )
    return tuple(events)
