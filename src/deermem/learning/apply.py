"""Applying a normalised answer to a store: the plan, the one capacity gate, one commit.

:func:`apply_response` runs inside a store transaction (the user's lock is
held, so the library cannot change under the decision) and does, in order:

1. :func:`~deermem.learning.plan_update` over the transaction's snapshot —
   **confirmations → summaries → staleness removals and extensions →**
   (the upload clean-up) **→ new facts**;
2. the store's :class:`~deermem.store.CapacityGate` — the only place a
   library is ever trimmed — over that library, with trigger ``extraction``;
3. **contradiction removals with a replacementFactIndex**, which the gate
   applies after its decision, and only if the replacement survived it;
4. one journaled commit: new and changed facts, deletions, summaries, one
   receipt per reason (``capacity``, ``staleness``, ``contradiction``,
   ``upload``) and, with ``eviction_mode: archive``, an archive entry per
   fact that left.

Where the removals sit relative to the gate's decision is a choice, made
here on purpose:

* removals that do not depend on the decision — the staleness review's,
  the upload clean-up's and contradiction removals **without** a
  replacement — are taken out *before* the gate decides. A fact the update
  removes anyway never occupies a slot, so it can never cost another fact
  its place. (The original DeerMem removes a contradicted fact without a
  replacement only after the trim, so at the cap it could evict one good
  fact too many.)
* a contradiction removal **with** a replacement depends on the decision —
  the contradicted fact goes only if the fact holding the replacement's
  text was kept — so it is a conditional removal
  (``Removal(..., needs_kept=<replacement id>)``) that the gate settles
  after deciding. A removal whose replacement is gone, or names no other
  fact at all, is *blocked*: never applied, only counted.

Nothing here reads the wall clock; ``now`` is passed in.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Final

from deermem.learning.metrics import RemovalRejections, UpdateMetrics
from deermem.learning.plan import REASON_CONTRADICTION, UpdatePlan, plan_update
from deermem.learning.report import FactChange
from deermem.learning.responses import NormalizedResponse
from deermem.learning.settings import UpdateSettings
from deermem.learning.state import MemoryState
from deermem.library.gate import CapacityGate, GateOutcome, Proposal, Removal
from deermem.model import Fact, Scope
from deermem.store.protocol import ChangeSet, CommitResult, ScopeSnapshot, Store, StoreTransaction
from deermem.store.records import (
    REASON_CAPACITY,
    ArchiveEntry,
    Section,
    ShadowMark,
    SummaryKey,
    UsageEntry,
)

__all__ = [
    "AppliedUpdate",
    "GateRequest",
    "PreviewTransaction",
    "apply_response",
    "gate_request",
]

TRIGGER: Final = "extraction"
_ID_ATTEMPTS: Final = 20


@dataclass(frozen=True, slots=True)
class GateRequest:
    """A plan, as the capacity gate takes it.

    Attributes:
        proposal: new facts, changed facts, removals and summaries.
        blocked: contradiction removals refused before the gate: their
            replacement's text is held by no fact but the contradicted one.
    """

    proposal: Proposal
    blocked: tuple[str, ...]


def gate_request(plan: UpdatePlan) -> GateRequest:
    """Turn a plan into the gate's proposal (the removal order is the module docstring's)."""
    removals = [Removal(r.fact_id, r.reason) for r in plan.removals]
    blocked: list[str] = []
    for pending in plan.pending_removals:
        if pending.replacement_key is None:
            removals.append(Removal(pending.fact_id, REASON_CONTRADICTION))
        elif pending.replacement_fact_id is None:
            blocked.append(pending.fact_id)
        else:
            removals.append(
                Removal(
                    pending.fact_id,
                    REASON_CONTRADICTION,
                    needs_kept=pending.replacement_fact_id,
                )
            )
    summaries: dict[SummaryKey, str | Section] = {
        key: Section(section.summary, section.updatedAt) for key, section in plan.summaries.items()
    }
    proposal = Proposal(
        new_facts=plan.new_facts,
        updates=plan.updated_facts,
        removals=tuple(removals),
        summaries=summaries,
        confirmed=plan.confirmed,
        repeated=plan.repeated,
        corrected=tuple(p.fact_id for p in plan.pending_removals),
    )
    return GateRequest(proposal, tuple(blocked))


@dataclass(frozen=True, slots=True)
class AppliedUpdate:
    """What :func:`apply_response` did, in the terms of an :class:`~deermem.learning.UpdateReport`.

    Attributes:
        plan: the plan the gate was given.
        gate: the gate's outcome (decision, receipts, commit).
        added: new facts stored (relearned ones under their archived ids).
        relearned: archived facts that came back because a new fact said them again.
        confirmed / extended: stored facts confirmed / extended (and not gone).
        removed / evicted: the facts the update removed / the gate evicted.
        blocked: contradiction removals not applied.
        metrics: the plan's counters completed with the gate's outcome.
    """

    plan: UpdatePlan
    gate: GateOutcome
    added: tuple[str, ...]
    relearned: tuple[str, ...]
    confirmed: tuple[str, ...]
    extended: tuple[str, ...]
    removed: tuple[FactChange, ...]
    evicted: tuple[FactChange, ...]
    blocked: tuple[str, ...]
    metrics: UpdateMetrics

    @property
    def commit(self) -> CommitResult:
        return self.gate.commit

    def facts(self, before: ScopeSnapshot) -> dict[str, Fact]:
        """Every fact this update names, as planned (new, changed) or as it was."""
        named = {*self.added, *self.relearned, *self.confirmed, *self.extended, *self.blocked}
        named.update(change.fact_id for change in (*self.removed, *self.evicted))
        planned = {fact.id: fact for fact in (*self.plan.new_facts, *self.plan.updated_facts)}
        planned.update((fact.id, fact) for fact in self.gate.commit.written)
        out: dict[str, Fact] = {}
        for fact_id in sorted(named):
            fact = planned.get(fact_id) or before.get(fact_id)
            if fact is not None:
                out[fact_id] = fact
        return out


def apply_response(
    transaction: StoreTransaction,
    response: NormalizedResponse,
    *,
    gate: CapacityGate,
    settings: UpdateSettings,
    signals: Collection[str],
    now: datetime,
    thread_id: str | None,
    new_id: Callable[[], str],
    mark: str | None = None,
) -> AppliedUpdate:
    """Plan ``response`` against the transaction's library and commit it through the gate.

    Args:
        transaction: an open store transaction (or a :class:`PreviewTransaction`).
        response: the normalised answer.
        gate: the store's capacity gate.
        settings: the update settings.
        signals: the signals detected in the conversation fed to the model.
        now: the clock of every decision and timestamp.
        thread_id: the conversation, recorded as the new facts' source.
        new_id: makes fact ids; ids in use or in the archive are skipped.
        mark: the conversation's new watermark, committed with the update
            (see :mod:`deermem.learning.watermark`); ``None`` moves none.

    Raises:
        RevisionConflict: the store changed under the commit (the caller
            reloads and applies the same response again).
    """
    snapshot = transaction.snapshot
    memory = MemoryState.from_summaries(snapshot.summaries, snapshot.facts)
    plan = plan_update(
        memory,
        response,
        signals=signals,
        settings=settings,
        now=now,
        thread_id=thread_id,
        new_id=_outside_archive(new_id, transaction),
    )
    request = gate_request(plan)
    proposal = request.proposal
    if mark is not None and thread_id is not None:
        proposal = replace(proposal, watermarks={thread_id: mark})
    outcome = gate.apply(transaction, proposal, trigger=TRIGGER, now=now)
    return _applied(plan, request, outcome, snapshot)


def _applied(
    plan: UpdatePlan, request: GateRequest, outcome: GateOutcome, before: ScopeSnapshot
) -> AppliedUpdate:
    reasons = {removal.fact_id: removal.reason for removal in request.proposal.removals}
    receipts: dict[tuple[str, str], str | None] = {}
    for receipt in outcome.receipts:
        for line in receipt.evicted:
            receipts[(line.fact_id, receipt.reason)] = receipt.receipt_id
    categories = {fact.id: fact.category for fact in (*before.facts, *plan.new_facts)}
    # A relearned fact was in neither; it is written when kept, in the decision when evicted.
    categories.update((fact.id, fact.category) for fact in outcome.commit.written)
    categories.update((item.fact_id, item.category) for item in outcome.decision.evicted)

    def change(fact_id: str, reason: str) -> FactChange:
        return FactChange(fact_id, categories[fact_id], reason, receipts.get((fact_id, reason)))

    removed = tuple(change(i, reasons[i]) for i in outcome.removed)
    evicted = tuple(change(i, REASON_CAPACITY) for i in outcome.evicted)
    blocked = request.blocked + tuple(r.fact_id for r in outcome.skipped_removals)
    gone = set(outcome.removed) | set(outcome.evicted)
    rejections = plan.metrics.removal_rejections
    metrics = replace(
        plan.metrics,
        contradiction_removals=sum(
            1 for i in outcome.removed if reasons[i] == REASON_CONTRADICTION
        ),
        removal_rejections=RemovalRejections(
            missing=rejections.missing,
            scope=rejections.scope,
            replacement=rejections.replacement + len(blocked),
        ),
    )
    return AppliedUpdate(
        plan=plan,
        gate=outcome,
        added=outcome.kept_new,
        relearned=tuple(outcome.relearned.values()),
        confirmed=tuple(i for i in plan.confirmed if i not in gone),
        extended=tuple(i for i in plan.extended if i not in gone),
        removed=removed,
        evicted=evicted,
        blocked=blocked,
        metrics=metrics,
    )


def _outside_archive(new_id: Callable[[], str], transaction: StoreTransaction) -> Callable[[], str]:
    """Ids that name no archived fact either (a restore must not collide)."""

    def make() -> str:
        for _ in range(_ID_ATTEMPTS):
            candidate = new_id()
            if transaction.archived(candidate) is None:
                return candidate
        raise ValueError(f"the fact id factory returned archived ids {_ID_ATTEMPTS} times")

    return make


class PreviewTransaction:
    """A read-only stand-in for a store transaction, for dry runs.

    It reads what a transaction reads (snapshot, usage, archive) without
    taking the user's lock, and :meth:`commit` records the change set
    instead of writing it: the capacity gate decides and builds receipts
    exactly as it would, and nothing on disk changes.
    """

    def __init__(self, store: Store, scope: Scope) -> None:
        self._store = store
        self._scope = scope
        self._snapshot = store.load(scope)
        self.changes: ChangeSet | None = None

    @property
    def snapshot(self) -> ScopeSnapshot:
        return self._snapshot

    def usage(self) -> Mapping[str, UsageEntry]:
        return self._store.usage(self._scope)

    def archived(self, fact_id: str) -> ArchiveEntry | None:
        return self._store.archived(self._scope, fact_id)

    def archived_matches(
        self, contents: Sequence[str], now: datetime
    ) -> Mapping[str, ArchiveEntry]:
        return self._store.archived_matches(self._scope, contents, now)

    def shadow_marks(self) -> Mapping[str, ShadowMark]:
        return self._store.shadow_marks(self._scope)

    def commit(self, changes: ChangeSet) -> CommitResult:
        """Record ``changes``; report what a commit would have done."""
        self.changes = changes
        snapshot = self._snapshot
        return CommitResult(
            revision=snapshot.revision if changes.empty else snapshot.revision + 1,
            written=tuple(write.fact for write in changes.writes),
            deleted=tuple(delete.fact_id for delete in changes.deletes),
            changed=not changes.empty,
            version=snapshot.version,
        )
