"""Building the change set of one capacity-gate call: receipts, archive entries, writes.

Kept apart from :mod:`deermem.store.gate`, which decides *what* happens; this
module turns the decision into the :class:`~deermem.store.ChangeSet` that
the store commits.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING

from deermem.model.fact import Fact
from deermem.model.timestamps import format_timestamp
from deermem.policy import ShadowComparison
from deermem.store.protocol import ChangeSet, FactDelete, FactWrite, StoreTransaction
from deermem.store.records import (
    ArchiveEntry,
    EvictionReceipt,
    ReceiptEntry,
    Trigger,
    UsageEntry,
    receipt_id_for,
)

if TYPE_CHECKING:
    from deermem.store.gate import CapacityGate, Proposal, Removal

__all__ = ["ChangeBuilder"]


class ChangeBuilder:
    """Builds the receipts, archive entries and change set of one gate call."""

    def __init__(
        self,
        gate: CapacityGate,
        transaction: StoreTransaction,
        trigger: Trigger,
        now: datetime,
        usage: Mapping[str, UsageEntry] | None,
        policy_version: str,
    ) -> None:
        self.gate = gate
        self.transaction = transaction
        self.trigger = trigger
        self.now = now
        self.stamp = format_timestamp(now)
        self.policy_version = policy_version
        self._usage = usage

    def usage(self) -> Mapping[str, UsageEntry]:
        if self._usage is None:
            self._usage = self.transaction.usage()
        return self._usage

    def receipt(
        self,
        reason: str,
        lines: tuple[ReceiptEntry, ...],
        *,
        occupancy: int,
        reserved: int = 0,
        shadow: ShadowComparison | None = None,
    ) -> EvictionReceipt:
        snapshot = self.transaction.snapshot
        key = f"{snapshot.scope.user_id}\x1f{snapshot.scope.agent}\x1f{self.stamp}"
        return EvictionReceipt(
            receipt_id=receipt_id_for(
                key, snapshot.revision + 1, reason, [line.fact_id for line in lines]
            ),
            occurred_at=self.stamp,
            reason=reason,
            trigger=self.trigger,
            policy_version=self.policy_version,
            max_facts=self.gate.policy.max_facts,
            occupancy=occupancy,
            reserved_correction_slots=reserved,
            evicted=lines,
            shadow=shadow,
        )

    def removal_receipts(
        self, removals: Mapping[str, Removal], facts: Mapping[str, Fact], occupancy: int
    ) -> list[EvictionReceipt]:
        """One receipt per removal reason (only archived removals get receipts)."""
        if not self.gate.archiving:
            return []
        stored = self.transaction.snapshot.by_id
        by_reason: dict[str, list[ReceiptEntry]] = {}
        for fact_id, removal in removals.items():
            fact = facts.get(fact_id) or stored[fact_id]
            by_reason.setdefault(removal.reason, []).append(ReceiptEntry(fact_id, fact.category))
        return [
            self.receipt(reason, tuple(by_reason[reason]), occupancy=occupancy)
            for reason in sorted(by_reason)
        ]

    def change_set(
        self,
        proposal: Proposal,
        receipts: list[EvictionReceipt],
        facts: Mapping[str, Fact],
        gone: set[str],
    ) -> ChangeSet:
        stored = self.transaction.snapshot.by_id
        archive_puts = (
            self._archive_entries(receipts, facts, proposal) if self.gate.archiving else ()
        )
        archived = {entry.fact_id for entry in archive_puts}
        writes = [FactWrite(fact, create=True) for fact in proposal.new_facts]
        writes.extend(FactWrite(entry.fact, create=True) for entry in proposal.restored)
        writes.extend(FactWrite(fact, create=False) for fact in proposal.updates)
        expected = {r.fact_id: r.expected_revision for r in proposal.removals}
        deletes = [
            FactDelete(
                fact_id, expected.get(fact_id) or facts.get(fact_id, stored[fact_id]).revision
            )
            for fact_id in sorted(gone)
            if fact_id in stored
        ]
        return ChangeSet(
            now=self.now,
            writes=tuple(w for w in writes if w.fact.id not in gone),
            deletes=tuple(deletes),
            summaries=dict(proposal.summaries),
            archive_puts=archive_puts,
            archive_deletes=tuple(
                sorted(e.fact_id for e in proposal.restored if e.fact_id not in archived)
            ),
            receipts=tuple(receipts),
            forget_in_audit=not self.gate.archiving,
            usage_restores={
                e.fact_id: e.usage
                for e in proposal.restored
                if e.usage is not None and e.fact_id not in gone
            },
        )

    def _archive_entries(
        self, receipts: list[EvictionReceipt], facts: Mapping[str, Fact], proposal: Proposal
    ) -> tuple[ArchiveEntry, ...]:
        stored = self.transaction.snapshot.by_id
        earlier = {entry.fact_id: entry.usage for entry in proposal.restored}
        entries = []
        for receipt in receipts:
            for line in receipt.evicted:
                entries.append(
                    ArchiveEntry(
                        fact=facts.get(line.fact_id) or stored[line.fact_id],
                        archived_at=self.stamp,
                        reason=receipt.reason,
                        trigger=self.trigger,
                        receipt_id=receipt.receipt_id,
                        eviction=line,
                        policy_version=receipt.policy_version,
                        usage=self.usage().get(line.fact_id) or earlier.get(line.fact_id),
                    )
                )
        return tuple(entries)
