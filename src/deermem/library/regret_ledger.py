"""The capacity gate's regret bookkeeping: which events one gate call records.

One :class:`RegretLedger` per call of :class:`~deermem.store.CapacityGate`,
fed what the gate learnt, in the gate's order:

1. :meth:`returned` — an archived fact comes back (``restored`` by a user or
   tool, ``relearned`` because a proposal said it again): an event against the
   policy that evicted it and, when its archive entry carries the shadow
   policy's mark, one against the shadow policy;
2. :meth:`settled` — library facts the update confirmed, said again
   (``relearned``) or corrected: for those the shadow policy would have
   evicted, an event against the shadow policy; their mark is cleared (the
   shadow policy would have had them back, or they are gone);
3. :meth:`decided` — the decision's shadow comparison: facts the shadow
   policy would have evicted get a mark (the earliest one is kept), and the
   marks of facts that leave the library move into their archive entries
   (:meth:`archive_mark`), so evidence found later — a relearn, a restore, a
   missed recall — still counts against the shadow policy.

The ledger reads the shadow marks once, when first needed, and builds the
change set's ``regret_events`` and ``shadow_marks``. It never reads content
and writes none: events carry ids, categories, times and policy versions.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import TYPE_CHECKING

from deermem.model import Fact
from deermem.store.records import REASON_CAPACITY, ArchiveEntry, RegretEvent, RegretKind, ShadowMark

if TYPE_CHECKING:
    from deermem.policy import ShadowComparison
    from deermem.store.protocol import StoreTransaction

__all__ = ["RegretLedger", "shadow_regret"]


class RegretLedger:
    """Regret events and shadow marks of one gate call (see the module docstring).

    Args:
        transaction: the gate's transaction (the marks are read from it).
        trigger: what led to the call; the events' trigger.
        stamp: the call's clock, formatted.
    """

    def __init__(self, transaction: StoreTransaction, trigger: str, stamp: str) -> None:
        self._transaction = transaction
        self._trigger = trigger
        self._stamp = stamp
        self._marks: Mapping[str, ShadowMark] | None = None
        self._changes: dict[str, ShadowMark | None] = {}
        self._leaving: dict[str, ShadowMark] = {}
        self.events: list[RegretEvent] = []

    @property
    def marks(self) -> Mapping[str, ShadowMark]:
        """The marks as stored before this call."""
        if self._marks is None:
            self._marks = self._transaction.shadow_marks()
        return self._marks

    @property
    def mark_changes(self) -> Mapping[str, ShadowMark | None]:
        """The change set's ``shadow_marks``."""
        return dict(self._changes)

    def returned(self, entry: ArchiveEntry, kind: RegretKind) -> None:
        """An archived fact comes back into the library: ``restored`` or ``relearned``."""
        fact = entry.fact
        self.events.append(
            RegretEvent(
                kind=kind,
                occurred_at=self._stamp,
                fact_id=fact.id,
                category=entry.eviction.category if entry.eviction else fact.category,
                policy_version=entry.policy_version or "",
                role="active",
                evicted_at=entry.archived_at,
                receipt_id=entry.receipt_id,
                reason=entry.reason,
                trigger=self._trigger,
            )
        )
        if entry.shadow is not None:
            self.events.append(self._against_shadow(kind, fact.id, entry.shadow))

    def settled(
        self,
        *,
        confirmed: Iterable[str] = (),
        repeated: Iterable[str] = (),
        corrected: Iterable[str] = (),
    ) -> None:
        """Library facts confirmed, said again or corrected: shadow regret where marked."""
        kinds: list[tuple[RegretKind, Iterable[str]]] = [
            ("confirmed", confirmed),
            ("relearned", repeated),
            ("corrected", corrected),
        ]
        for kind, fact_ids in kinds:
            for fact_id in dict.fromkeys(fact_ids):
                mark = self._current(fact_id)  # one event per fact: the first kind wins
                if mark is None:
                    continue
                self.events.append(self._against_shadow(kind, fact_id, mark))
                self._clear(fact_id)

    def decided(
        self,
        shadow: ShadowComparison | None,
        *,
        receipt_id: str | None,
        library: Mapping[str, Fact],
        leaving: Collection[str],
        settled: Collection[str] = (),
    ) -> None:
        """Mark what the shadow policy would have evicted; move the marks of facts that leave.

        Args:
            shadow: the decision's shadow comparison, if shadow mode ran.
            receipt_id: the capacity receipt that records it.
            library: the facts the gate decided over, by id.
            leaving: ids that leave the library in this call (evicted or removed).
            settled: ids whose regret is settled in this call (a correction
                removed them): they take no mark into the archive.
        """
        fresh: dict[str, ShadowMark] = {}
        if shadow is not None:
            for fact_id in shadow.would_evict:
                fact = library.get(fact_id)
                if fact is not None:
                    fresh[fact_id] = ShadowMark(
                        shadow.policy, self._stamp, receipt_id, fact.category
                    )
        for fact_id, mark in fresh.items():
            if self._current(fact_id) is None:
                self._changes[fact_id] = mark
        for fact_id in leaving:
            current = self._current(fact_id)
            self._clear(fact_id)
            if current is not None and fact_id not in settled:
                self._leaving[fact_id] = current
        for fact_id in self.marks:
            # A mark whose fact is neither here nor leaving is stale (the fact
            # left by a path that kept no mark): drop it, the file stays bounded.
            if fact_id not in library and fact_id not in leaving:
                self._clear(fact_id)

    def archive_mark(self, fact_id: str) -> ShadowMark | None:
        """The mark the archive entry of a fact leaving the library carries, if any."""
        return self._leaving.get(fact_id)

    def _clear(self, fact_id: str) -> None:
        if fact_id in self.marks:
            self._changes[fact_id] = None
        else:
            self._changes.pop(fact_id, None)

    def _current(self, fact_id: str) -> ShadowMark | None:
        """The fact's mark as this call leaves it so far."""
        if fact_id in self._changes:
            return self._changes[fact_id]
        return self.marks.get(fact_id)

    def _against_shadow(self, kind: RegretKind, fact_id: str, mark: ShadowMark) -> RegretEvent:
        return shadow_regret(mark, kind, fact_id, occurred_at=self._stamp, trigger=self._trigger)


def shadow_regret(
    mark: ShadowMark,
    kind: RegretKind,
    fact_id: str,
    *,
    occurred_at: str,
    trigger: str,
    query_digest: str | None = None,
    rank: int | None = None,
) -> RegretEvent:
    """The event that counts ``kind`` against the shadow policy that marked the fact."""
    return RegretEvent(
        kind=kind,
        occurred_at=occurred_at,
        fact_id=fact_id,
        category=mark.category,
        policy_version=mark.policy_version,
        role="shadow",
        evicted_at=mark.since,
        receipt_id=mark.receipt_id,
        reason=REASON_CAPACITY,
        trigger=trigger,
        query_digest=query_digest,
        rank=rank,
    )
