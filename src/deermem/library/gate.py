"""The capacity gate: the one way facts enter a library.

Every path that adds facts ends here — a manual or tool ``create``, an
``import``, a ``restore`` from the archive and, with the updater, the
``extraction`` from a conversation. No other code trims a library. A fact is
in the library or in the archive, never both, so this is also where a new
fact meets the archive: a new fact that says what an archived fact says (the
duplicate rule, :func:`~deermem.model.duplicate_key`) is *relearned* — the
archived fact comes back in its place, with its history (confirmations,
recalls) and the restatement's evidence (the higher confidence, a
confirmation now, a protected category it was said with), and a regret
event records it; a new fact with an archived fact's id but another text
is refused (:class:`~deermem.ArchivedFactError`).

Usage, inside a store transaction (the user's lock is held, so the decision
is made on the current library and needs no retry)::

    gate = CapacityGate.from_config(config)
    with store.transaction(scope) as transaction:
        outcome = gate.apply(
            transaction,
            Proposal(
                new_facts=(fact,),                         # must not exist yet
                updates=(confirmed,),                      # existing facts, changed
                removals=(Removal("fact_ab12", "staleness"),
                          Removal("fact_cd34", "contradiction", needs_kept="fact_ef56")),
                summaries={("user", "topOfMind"): "..."},
            ),
            trigger="extraction",
            now=now,
        )

What :meth:`CapacityGate.apply` does, in order:

1. removes the unconditional removals from the library, applies the updates
   and appends the new, relearned and restored facts;
2. decides over that library, once, with
   :func:`~deermem.policy.select_facts_for_capacity` under the configured
   :class:`~deermem.policy.CapacityPolicy` and cap — reading the usage
   sidecar only when the policy uses it — and, in shadow mode, records what
   ``hybrid-v1`` would have evicted (:func:`~deermem.policy.shadow_comparison`);
3. applies each conditional removal (``needs_kept``) only if the fact it
   names survived the gate (a contradiction is removed only when its
   replacement is kept);
4. builds one :class:`~deermem.store.ChangeSet`: new and updated facts that
   survived, deletions of evicted and removed facts, the summaries, one
   receipt for the capacity eviction (reason ``capacity``) and one per
   removal reason, and — with ``eviction_mode: archive`` — an archive entry
   per fact that left (new facts evicted at once included), pointing at its
   receipt; restored and relearned facts leave the archive; the regret
   events of the call and the shadow policy's marks
   (:class:`RegretLedger`);
5. commits it in one journaled commit, receipts, archive entries and regret
   events included.

:meth:`CapacityGate.remove` is the same without step 2, for paths that only
take facts away (a deletion never trims a library, as in the original), so
removed facts get the same receipts and archive entries.

With ``eviction_mode: delete`` facts are deleted physically, as in the
original, and their ids are stripped from earlier receipts; each fact that
leaves still gets its receipt in the change that deletes it (receipts hold
no content), so :meth:`~deermem.Memory.why` can say what became of it.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Final, Literal, NamedTuple

from pydantic import BaseModel, Field, PlainSerializer

from deermem.errors import ArchivedFactError, FactNotFoundError, FactRevisionConflict
from deermem.library.regret import shadow_regret
from deermem.model import (
    NO_ENTRIES,
    RESULT_CONFIG,
    Fact,
    category_key,
    duplicate_key,
    format_timestamp,
    next_confirmation_count,
    parse_timestamp,
)
from deermem.policy import (
    POLICY_CONFIDENCE,
    POLICY_HYBRID_V1,
    CapacityDecision,
    CapacityPolicy,
    EvictedFact,
    ShadowComparison,
    reserved_slots,
    select_facts_for_capacity,
    shadow_comparison,
)
from deermem.policy.capacity import check_max_facts
from deermem.store.plan import stored_scope
from deermem.store.protocol import ChangeSet, CommitResult, FactDelete, FactWrite, StoreTransaction
from deermem.store.records import (
    REASON_CAPACITY,
    TRIGGERS,
    ArchiveEntry,
    EvictionReceipt,
    ReceiptEntry,
    RegretEvent,
    RegretKind,
    Section,
    ShadowMark,
    SummaryKey,
    Trigger,
    UsageEntry,
    receipt_id_for,
)

if TYPE_CHECKING:
    from deermem.config import MemoryConfig

__all__ = [
    "CapacityGate",
    "EvictionMode",
    "GateOutcome",
    "Proposal",
    "RankedFact",
    "Ranking",
    "RegretLedger",
    "Removal",
    "Standing",
    "WhatIf",
    "other_policy",
    "rank_library",
    "standing_of",
    "what_if",
]

EvictionMode = Literal["archive", "delete"]
_MODES: Final = ("archive", "delete")


class Removal(NamedTuple):
    """A fact the caller wants gone, and why.

    Attributes:
        fact_id: the stored fact.
        reason: the receipt's reason, e.g. ``deleted``, ``replaced``,
            ``staleness``, ``contradiction``.
        expected_revision: if set, the stored revision must match.
        needs_kept: if set, the removal applies only when the fact with this
            id (normally one of the proposal's new facts) survives the gate.
    """

    fact_id: str
    reason: str
    expected_revision: int | None = None
    needs_kept: str | None = None


class Proposal(NamedTuple):
    """What a caller would like to change; the gate decides what happens.

    Attributes:
        new_facts: facts to add (their ids must not exist yet).
        updates: changed versions of stored facts; each carries the stored
            revision it was based on.
        removals: facts to remove.
        summaries: summary sections to set.
        restored: archive entries whose facts come back (as new facts), at
            a user's or tool's request.
        watermarks: conversations this change extracted (thread id → mark),
            committed with it.
        confirmed: ids of stored facts the user confirmed in this change.
        repeated: ids of stored facts that a proposal said again (duplicates
            dropped before the gate).
        corrected: ids among the removals that the user corrected.
        order: ids in the order the policy sees the library, which breaks
            its ties (an import's document order); facts it does not name
            follow, in their own order. Empty: the stored facts in the
            store's order, then the new, relearned and restored ones.

    ``confirmed``, ``repeated`` and ``corrected`` are evidence for regret in
    shadow mode (see :mod:`deermem.store.records`); they change no fact.
    """

    new_facts: tuple[Fact, ...] = ()
    updates: tuple[Fact, ...] = ()
    removals: tuple[Removal, ...] = ()
    summaries: Mapping[SummaryKey, str | Section] = NO_ENTRIES
    restored: tuple[ArchiveEntry, ...] = ()
    watermarks: Mapping[str, str] = NO_ENTRIES
    confirmed: tuple[str, ...] = ()
    repeated: tuple[str, ...] = ()
    corrected: tuple[str, ...] = ()
    order: tuple[str, ...] = ()


class GateOutcome(NamedTuple):
    """What the gate decided and committed.

    Attributes:
        commit: the store's commit result.
        decision: the capacity decision over the proposed library.
        shadow: the shadow comparison, when shadow mode is on and something went.
        kept_new: ids of proposed new, relearned and restored facts that
            were stored (a relearned fact under its archived id).
        evicted: ids the capacity gate evicted, lowest-ranked first.
        removed: ids removed by the proposal's removals.
        skipped_removals: conditional removals not applied (their fact was evicted).
        receipts: the receipts written (or that would be, with the audit off).
        archived: ids that went to the archive.
        relearned: proposed new fact id → the archived fact that came back
            in its place.
        regret: the regret events recorded.
    """

    commit: CommitResult
    decision: CapacityDecision[Fact]
    shadow: ShadowComparison | None
    kept_new: tuple[str, ...]
    evicted: tuple[str, ...]
    removed: tuple[str, ...]
    skipped_removals: tuple[Removal, ...]
    receipts: tuple[EvictionReceipt, ...]
    archived: tuple[str, ...]
    relearned: Mapping[str, str] = NO_ENTRIES
    regret: tuple[RegretEvent, ...] = ()


class CapacityGate:
    """The configured capacity policy and cap, plus what happens to the facts they let go.

    Args:
        policy: the capacity policy (and whether shadow mode runs).
        max_facts: the cap on one library, at least 0.
        eviction_mode: ``archive`` keeps what leaves restorable; ``delete``
            deletes it physically, as the original does.
    """

    def __init__(
        self, policy: CapacityPolicy, *, max_facts: int, eviction_mode: EvictionMode = "archive"
    ) -> None:
        check_max_facts(max_facts)
        if eviction_mode not in _MODES:
            raise ValueError(f"eviction_mode must be one of {_MODES}, got {eviction_mode!r}")
        self.policy = policy
        self.max_facts = max_facts
        self.eviction_mode = eviction_mode

    @classmethod
    def from_config(cls, config: MemoryConfig) -> CapacityGate:
        return cls(
            CapacityPolicy.from_config(config),
            max_facts=config.max_facts,
            eviction_mode=config.eviction_mode,
        )

    @property
    def archiving(self) -> bool:
        return self.eviction_mode == "archive"

    def apply(
        self,
        transaction: StoreTransaction,
        proposal: Proposal,
        *,
        trigger: Trigger,
        now: datetime,
    ) -> GateOutcome:
        """Decide over the proposed library and commit the result (see the module docstring).

        Raises:
            ValueError: an unknown trigger.
            FactNotFoundError: an update or removal names a fact that is not stored.
            FactRevisionConflict: a new fact's id is already stored, or a
                revision precondition fails.
            ArchivedFactError: a new fact's id is in the archive with another
                text (an archived fact comes back by a restore, or by being
                said again).
        """
        ledger = RegretLedger(transaction, trigger, format_timestamp(now))
        protected = frozenset(category_key(name) for name in self.policy.reserved_categories)
        proposal, relearned = _relearn(transaction, proposal, now, ledger, protected)
        library, incoming = _proposed_library(transaction, proposal, trigger)
        usage = None
        if self.policy.uses_usage:
            # A fact coming back from the archive is ranked with the recall counts it took
            # there (the change set writes them back), not as a fact never recalled.
            back = {e.fact_id: e.usage for e in proposal.restored if e.usage is not None}
            usage = {**transaction.usage(), **back}
        entries = None if usage is None else {k: v.to_dict() for k, v in usage.items()}
        decision = select_facts_for_capacity(
            library, max_facts=self.max_facts, policy=self.policy, usage=entries, now=now
        )
        shadow = shadow_comparison(library, decision, policy=self.policy, usage=entries, now=now)
        evicted = set(decision.evicted_ids)
        removals, skipped = _resolve_removals(proposal.removals, library, evicted)
        changes = _Changes(self, transaction, trigger, now, usage, decision.policy)
        receipts = []
        if decision.evicted:
            lines = tuple(ReceiptEntry.from_eviction(item) for item in decision.evicted)
            receipts.append(
                changes.receipt(
                    REASON_CAPACITY,
                    lines,
                    occupancy=decision.occupancy,
                    reserved=decision.reserved_correction_slots,
                    shadow=shadow,
                )
            )
        library_by_id = {fact.id: fact for fact in library}
        receipts.extend(changes.removal_receipts(removals, library_by_id, len(library)))
        corrected = [i for i in proposal.corrected if i in removals]
        ledger.settled(
            confirmed=[i for i in proposal.confirmed if i not in evicted],
            repeated=[i for i in proposal.repeated if i not in evicted],
            corrected=corrected,
        )
        gone = evicted | set(removals)
        ledger.decided(
            shadow,
            receipt_id=receipts[0].receipt_id if decision.evicted else None,
            library=library_by_id,
            leaving=gone,
            settled=corrected,
        )
        change_set = changes.change_set(proposal, receipts, library_by_id, gone, ledger)
        result = transaction.commit(change_set)
        incoming_ids = [fact.id for fact in incoming]
        return GateOutcome(
            commit=result,
            decision=decision,
            shadow=shadow,
            kept_new=tuple(i for i in incoming_ids if i not in evicted),
            evicted=decision.evicted_ids,
            removed=tuple(removals),
            skipped_removals=tuple(skipped),
            receipts=change_set.receipts,
            archived=tuple(entry.fact_id for entry in change_set.archive_puts),
            relearned=relearned,
            regret=change_set.regret_events,
        )

    def remove(
        self,
        transaction: StoreTransaction,
        removals: tuple[Removal, ...],
        *,
        trigger: Trigger,
        now: datetime,
    ) -> tuple[CommitResult, tuple[EvictionReceipt, ...]]:
        """Remove facts with receipts and archive entries, without running the policy.

        Returns:
            The commit, and the receipts it wrote (one per removal reason).

        Raises:
            ValueError: an unknown trigger, or a conditional removal.
            FactNotFoundError: a removal names a fact that is not stored.
            FactRevisionConflict: a revision precondition fails.
        """
        if any(removal.needs_kept is not None for removal in removals):
            raise ValueError("conditional removals need a decision: use apply()")
        proposal = Proposal(removals=removals)
        _proposed_library(transaction, proposal, trigger)  # validates
        by_id = {removal.fact_id: removal for removal in removals}
        changes = _Changes(self, transaction, trigger, now, None, self.policy.name)
        stored = transaction.snapshot.by_id
        receipts = changes.removal_receipts(by_id, stored, len(transaction.snapshot.facts))
        ledger = RegretLedger(transaction, trigger, changes.stamp)
        ledger.decided(None, receipt_id=None, library=stored, leaving=set(by_id))
        commit = transaction.commit(
            changes.change_set(proposal, receipts, stored, set(by_id), ledger)
        )
        return commit, tuple(receipts)


def _relearn(
    transaction: StoreTransaction,
    proposal: Proposal,
    now: datetime,
    ledger: RegretLedger,
    protected: Collection[str],
) -> tuple[Proposal, dict[str, str]]:
    """The proposal with each new fact that an archived fact says already replaced by it.

    The archived fact comes back with its id, creation time, confirmations
    and recall counts in the new fact's place, taking the new statement's
    evidence (:func:`_restated`), and a conditional removal that needed the
    new fact now needs it. A new fact whose id is archived comes back the
    same way when the texts agree, and is refused when they do not.

    Raises:
        ArchivedFactError: a new fact has an archived fact's id and another text.
    """
    if not proposal.new_facts:
        for entry in proposal.restored:
            ledger.returned(entry, "restored")
        return proposal, {}
    matches = transaction.archived_matches([fact.content for fact in proposal.new_facts], now)
    taken = {entry.fact_id for entry in proposal.restored} | set(transaction.snapshot.by_id)
    by_id = {fact.id: transaction.archived(fact.id) for fact in proposal.new_facts}
    # An archived fact that a new fact names by its id comes back as that fact, never
    # as another new fact that only says the same (a document may say it twice).
    claimed = {fact_id for fact_id, entry in by_id.items() if entry is not None}
    new_facts: list[Fact] = []
    returned: list[ArchiveEntry] = []
    relearned: dict[str, str] = {}
    for fact in proposal.new_facts:
        key = duplicate_key(fact.content)
        match = matches.get(key)
        same_id = by_id[fact.id]
        if same_id is not None:
            if duplicate_key(same_id.fact.content) != key:
                raise ArchivedFactError(fact.id)
            match = same_id
        elif match is not None and match.fact_id in claimed:
            match = None
        if match is None or match.fact_id in taken:
            new_facts.append(fact)
            continue
        taken.add(match.fact_id)
        returned.append(_restated(match, fact, now, protected))
        relearned[fact.id] = match.fact_id
    for entry in returned:
        ledger.returned(entry, "relearned")
    for entry in proposal.restored:
        ledger.returned(entry, "restored")
    if not relearned:
        return proposal, relearned
    removals = tuple(
        r._replace(needs_kept=relearned[r.needs_kept]) if r.needs_kept in relearned else r
        for r in proposal.removals
    )
    restored = (*returned, *proposal.restored)
    order = tuple(relearned.get(fact_id, fact_id) for fact_id in proposal.order)
    return proposal._replace(
        new_facts=tuple(new_facts), restored=restored, removals=removals, order=order
    ), relearned


def _restated(
    entry: ArchiveEntry, statement: Fact, now: datetime, protected: Collection[str]
) -> ArchiveEntry:
    """The archive entry whose fact ``statement`` says again, with the statement's evidence.

    Saying a fact again is evidence that it matters, so the fact that comes
    back competes at least as the statement would as a new fact; otherwise a
    full library would evict it again in the same decision, and the user
    could never bring it back by saying it. It takes the higher of the two
    confidences and the later confirmation, and a statement with another id
    (the user or a model said it now) counts as a confirmation now, so
    ``hybrid-v1`` ranks it as fresh. A statement of a protected category
    (``protected``: category keys, the correction reserve's) gives the fact
    that category — a user correcting with words once stored as context gets
    the reserved slot the correction would get — while a protected category
    the fact already has is never given up; any other statement leaves the
    category as it was. A statement with the fact's own id (an import of the
    fact's export) is the same fact, not a new confirmation. The id, creation
    time and recall counts stay the archived fact's.
    """
    fact = entry.fact
    changes: dict[str, object] = {}
    if statement.confidence > fact.confidence:
        changes["confidence"] = statement.confidence
    stated = category_key(statement.category)
    if stated in protected and stated != category_key(fact.category):
        changes["category"] = statement.category
        changes["categoryExtension"] = statement.categoryExtension
    if statement.id != fact.id:
        changes["lastConfirmedAt"] = format_timestamp(now)
        changes["confirmationCount"] = next_confirmation_count(fact.confirmationCount)
    elif _later(statement.lastConfirmedAt, fact.lastConfirmedAt):
        changes["lastConfirmedAt"] = statement.lastConfirmedAt
        changes["confirmationCount"] = statement.confirmationCount
    if not changes:
        return entry
    changes["updatedAt"] = format_timestamp(now)
    return replace(entry, fact=fact.replace(**changes))


def _later(moment: str | None, than: str | None) -> bool:
    """Whether ``moment`` can be read and is later than ``than`` (or ``than`` cannot be read)."""
    mine = parse_timestamp(moment)
    if mine is None:
        return False
    theirs = parse_timestamp(than)
    return theirs is None or mine > theirs


def _proposed_library(
    transaction: StoreTransaction, proposal: Proposal, trigger: str
) -> tuple[list[Fact], tuple[Fact, ...]]:
    """The library the gate decides over, and the incoming facts at its end."""
    if trigger not in TRIGGERS:
        raise ValueError(f"trigger must be one of {TRIGGERS}, got {trigger!r}")
    stored = transaction.snapshot.by_id
    incoming = proposal.new_facts + tuple(entry.fact for entry in proposal.restored)
    for fact in incoming:
        if fact.id in stored:
            raise FactRevisionConflict(fact.id, expected=None, actual=stored[fact.id].revision)
    for fact in proposal.new_facts:
        # No fact lives twice: in the library and in the archive, where the
        # next eviction would overwrite the archived version. (_relearn has
        # brought back the archived facts that the new ones say again.)
        if transaction.archived(fact.id) is not None:
            raise ArchivedFactError(fact.id)
    for fact in proposal.updates:
        if fact.id not in stored:
            raise FactNotFoundError(fact.id)
    for removal in proposal.removals:
        if removal.fact_id not in stored:
            raise FactNotFoundError(removal.fact_id)
    dropped = {r.fact_id for r in proposal.removals if r.needs_kept is None}
    updated = {fact.id: fact for fact in proposal.updates}
    library = [
        updated.get(fact.id, fact) for fact in transaction.snapshot.facts if fact.id not in dropped
    ]
    library.extend(incoming)
    if proposal.order:
        # sort() is stable: facts the order does not name keep their places after it.
        position = {fact_id: index for index, fact_id in enumerate(proposal.order)}
        library.sort(key=lambda fact: position.get(fact.id, len(position)))
    return library, incoming


def _resolve_removals(
    removals: tuple[Removal, ...], library: list[Fact], evicted: set[str]
) -> tuple[dict[str, Removal], list[Removal]]:
    """The removals that apply after the decision, and the conditional ones skipped.

    Unconditional removals always apply (they were taken out before the
    decision). A conditional one applies if the fact it needs survived; its
    own fact may meanwhile have been evicted, which settles it either way.
    """
    applied = {r.fact_id: r for r in removals if r.needs_kept is None}
    present = {fact.id for fact in library}
    skipped = []
    for removal in removals:
        if removal.needs_kept is None or removal.fact_id in evicted:
            continue
        if removal.needs_kept in evicted or removal.needs_kept not in present:
            skipped.append(removal)
        else:
            applied[removal.fact_id] = removal
    return applied, skipped


class _Changes:
    """The receipts, archive entries and change set of one gate call (steps 4 and 5)."""

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
            max_facts=self.gate.max_facts,
            occupancy=occupancy,
            reserved_correction_slots=reserved,
            evicted=lines,
            shadow=shadow,
        )

    def removal_receipts(
        self, removals: Mapping[str, Removal], facts: Mapping[str, Fact], occupancy: int
    ) -> list[EvictionReceipt]:
        """One receipt per removal reason, whether the facts are archived or deleted."""
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
        ledger: RegretLedger,
    ) -> ChangeSet:
        stored = self.transaction.snapshot.by_id
        archive_puts = (
            self._archive_entries(receipts, facts, proposal, ledger) if self.gate.archiving else ()
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
            watermarks=dict(proposal.watermarks),
            regret_events=tuple(ledger.events),
            shadow_marks=ledger.mark_changes,
        )

    def _archive_entries(
        self,
        receipts: list[EvictionReceipt],
        facts: Mapping[str, Fact],
        proposal: Proposal,
        ledger: RegretLedger,
    ) -> tuple[ArchiveEntry, ...]:
        snapshot = self.transaction.snapshot
        stored = snapshot.by_id
        earlier = {entry.fact_id: entry.usage for entry in proposal.restored}
        entries = []
        for receipt in receipts:
            for line in receipt.evicted:
                fact = facts.get(line.fact_id) or stored[line.fact_id]
                entries.append(
                    ArchiveEntry(
                        # An entry carries its owner, as the fact's file did (or would have).
                        fact=stored_scope(fact, snapshot.scope),
                        archived_at=self.stamp,
                        reason=receipt.reason,
                        trigger=self.trigger,
                        receipt_id=receipt.receipt_id,
                        eviction=line,
                        policy_version=receipt.policy_version,
                        usage=self.usage().get(line.fact_id) or earlier.get(line.fact_id),
                        shadow=ledger.archive_mark(line.fact_id),
                    )
                )
        return tuple(entries)


# --- the regret ledger of one gate call -------------------------------------------------
#
# The capacity gate's regret bookkeeping: which events one gate call records.
#
# One :class:`RegretLedger` per call of :class:`CapacityGate`,
# fed what the gate learnt, in the gate's order:
#
# 1. :meth:`returned` — an archived fact comes back (``restored`` by a user or
#    tool, ``relearned`` because a proposal said it again): an event against the
#    policy that evicted it and, when its archive entry carries the shadow
#    policy's mark, one against the shadow policy;
# 2. :meth:`settled` — library facts the update confirmed, said again
#    (``relearned``) or corrected: for those the shadow policy would have
#    evicted, an event against the shadow policy; their mark is cleared (the
#    shadow policy would have had them back, or they are gone);
# 3. :meth:`decided` — the decision's shadow comparison: facts the shadow
#    policy would have evicted get a mark (the earliest one is kept), and the
#    marks of facts that leave the library move into their archive entries
#    (:meth:`archive_mark`), so evidence found later — a relearn, a restore, a
#    missed recall — still counts against the shadow policy.
#
# The ledger reads the shadow marks once, when first needed, and builds the
# change set's ``regret_events`` and ``shadow_marks``. It never reads content
# and writes none: events carry ids, categories, times and policy versions.


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


# --- where a fact stands ---------------------------------------------------------------


def _scores(components: Mapping[str, float]) -> dict[str, float]:
    return dict(components)


class Standing(BaseModel):
    """Where an active fact ranks in its library under the current policy.

    Attributes:
        policy: the policy version.
        rank: 1 = the fact the gate would keep longest.
        occupancy: facts in the library.
        max_facts: the cap.
        score: the fact's score; ``components`` the signals it sums.
        protected: its category is reserved in capacity selection (only
            ``hybrid-v1`` holds reserved slots).
    """

    model_config = RESULT_CONFIG

    policy: Annotated[str, Field(alias="policyVersion")]
    rank: Annotated[int, Field(description="1 = kept longest when the library is full")]
    occupancy: int
    max_facts: int
    score: float
    components: Annotated[Mapping[str, float], PlainSerializer(_scores)]
    protected: Annotated[bool, Field(description="its category holds reserved slots (hybrid-v1)")]


def standing_of(
    gate: CapacityGate,
    facts: Sequence[Fact],
    fact_id: str,
    usage: Mapping[str, UsageEntry],
    now: datetime,
) -> Standing:
    """Rank every fact with the gate's policy (:func:`_ranked`) and report one of them."""
    policy = gate.policy
    item = next(e for e in _ranked(policy, facts, _usage_data(usage), now) if e.fact_id == fact_id)
    reserved = {category_key(name) for name in policy.reserved_categories}
    return Standing(
        policy=policy.name,
        rank=item.rank,
        occupancy=len(facts),
        max_facts=gate.max_facts,
        score=item.score,
        components=item.components,
        protected=policy.name == POLICY_HYBRID_V1 and category_key(item.category) in reserved,
    )


def _usage_data(usage: Mapping[str, UsageEntry]) -> dict[str, Mapping[str, object]]:
    return {key: value.to_dict() for key, value in usage.items()}


def _ranked(
    policy: CapacityPolicy,
    facts: Sequence[Fact],
    usage: Mapping[str, Mapping[str, object]],
    now: datetime,
) -> tuple[EvictedFact, ...]:
    """Every fact as the policy ranks it, best first: its own ranking, at a cap of 0.

    A cap of 0 makes the policy rank the whole library (everything counts as
    evicted, lowest first), so the scores and ranks are the gate's own — no
    second implementation of scoring exists.
    """
    decision = select_facts_for_capacity(facts, max_facts=0, policy=policy, usage=usage, now=now)
    return tuple(reversed(decision.evicted))


# --- the library as the policy ranks it, and what the other policy would keep ------------


class RankedFact(NamedTuple):
    """One active fact in its library's ranking (:func:`rank_library`).

    Attributes:
        fact: the fact.
        rank: 1 = the fact the gate would keep longest (as :class:`Standing` ranks).
        score: its score under the policy; ``components`` the signals it sums.
        reserved: it holds one of the slots ``hybrid-v1`` reserves for corrections.
        kept: the policy keeps it at the cap; ``False`` below the cap's line
            (a library over a lowered cap, until the next decision trims it).
        next_out: the fact the gate lets go next when a fact needs room: the
            one it evicts when the library is full and a fact that outranks
            it arrives.
    """

    fact: Fact
    rank: int
    score: float
    components: Mapping[str, float]
    reserved: bool
    kept: bool
    next_out: bool


class Ranking(NamedTuple):
    """A library ranked as its policy ranks it now, with the line where the cap cuts.

    Attributes:
        policy: the policy version.
        max_facts: the cap.
        facts: every active fact, best first.
        reserved_slots: reserved slots the corrections hold at the cap, as the
            gate's decision counts them (0 under ``confidence``).
    """

    policy: str
    max_facts: int
    facts: tuple[RankedFact, ...]
    reserved_slots: int

    @property
    def free_slots(self) -> int:
        """Facts the library takes before the gate must let one go."""
        return max(0, self.max_facts - len(self.facts))


def rank_library(
    gate: CapacityGate,
    facts: Sequence[Fact],
    usage: Mapping[str, UsageEntry],
    now: datetime,
) -> Ranking:
    """Rank every active fact with the gate's policy and mark the cap's cut.

    The ranks and scores are the policy's own (a cap of 0 ranks the whole
    library, as :func:`standing_of` does). Over the cap, what the cap keeps
    is the policy's decision at the cap, and the next decision carries it
    out. At or below it, the fact that goes next is the one the gate lets go
    when the library is full and a fact that outranks it arrives: the
    reserved slots are the cap's (the gate decides at the cap, over the
    library and the newcomer), so reserved corrections keep their place
    above facts that outscore them, and the lowest-ranked fact outside the
    reserve goes — exactly as the gate would decide. When the reserve holds
    every fact, nothing goes: the newcomer itself would not be kept.
    """
    policy = gate.policy
    usage_data = _usage_data(usage)
    ranked = _ranked(policy, facts, usage_data, now)
    by_id = {fact.id: fact for fact in facts}
    reserved_categories = {category_key(name) for name in policy.reserved_categories}
    corrections = [
        item.fact_id for item in ranked if category_key(item.category) in reserved_categories
    ]
    below: set[str] = set()
    going: str | None = None
    if len(facts) > gate.max_facts:
        cut = select_facts_for_capacity(
            facts, max_facts=gate.max_facts, policy=policy, usage=usage_data, now=now
        )
        below = set(cut.evicted_ids)
        holding = set(corrections[: cut.reserved_correction_slots])
    else:
        holding = set(corrections[: reserved_slots(policy, gate.max_facts)])
        outside = [item.fact_id for item in ranked if item.fact_id not in holding]
        going = outside[-1] if outside else None
    return Ranking(
        policy=policy.name,
        max_facts=gate.max_facts,
        facts=tuple(
            RankedFact(
                fact=by_id[item.fact_id],
                rank=item.rank,
                score=item.score,
                components=item.components,
                reserved=item.fact_id in holding,
                kept=item.fact_id not in below,
                next_out=item.fact_id == going,
            )
            for item in ranked
        ),
        reserved_slots=len(holding),
    )


class WhatIf(NamedTuple):
    """Each policy's choice over the same facts at the same cap (:func:`what_if`).

    Attributes:
        active: the policy in force; ``other`` the one compared with it.
        max_facts: the cap.
        candidates: the facts both chose from: the library and the facts the
            cap sent to the archive.
        active_keeps: what the active policy keeps, best first; ``other_keeps``
            the other's.
    """

    active: str
    other: str
    max_facts: int
    candidates: tuple[Fact, ...]
    active_keeps: tuple[str, ...]
    other_keeps: tuple[str, ...]

    @property
    def only_active(self) -> tuple[str, ...]:
        """Facts the active policy keeps and the other would not."""
        other = set(self.other_keeps)
        return tuple(i for i in self.active_keeps if i not in other)

    @property
    def only_other(self) -> tuple[str, ...]:
        """Facts the other policy would keep instead."""
        active = set(self.active_keeps)
        return tuple(i for i in self.other_keeps if i not in active)


def other_policy(policy: CapacityPolicy) -> CapacityPolicy:
    """The policy a what-if compares with: ``hybrid-v1`` beside ``confidence``, and back."""
    name = POLICY_CONFIDENCE if policy.name == POLICY_HYBRID_V1 else POLICY_HYBRID_V1
    return replace(policy, name=name, shadow_enabled=False)


def what_if(
    gate: CapacityGate,
    facts: Sequence[Fact],
    archived: Iterable[ArchiveEntry],
    usage: Mapping[str, UsageEntry],
    now: datetime,
) -> WhatIf:
    """What the other policy would keep, beside what the active one keeps, now.

    Both decide over the same candidates — the active facts and the archived
    facts the cap evicted (a fact deleted by hand is no policy's choice) — at
    the same cap, with the same clock and usage (an archived fact's usage is
    the entry it left with). The shadow comparison of a whole library: which
    facts the other policy would keep instead, and which it would let go.
    """
    pool = list(facts)
    seen = {fact.id for fact in pool}
    usage_data = _usage_data(usage)
    for entry in archived:
        if entry.reason != REASON_CAPACITY or entry.fact_id in seen:
            continue
        seen.add(entry.fact_id)
        pool.append(entry.fact)
        if entry.usage is not None and entry.fact_id not in usage_data:
            usage_data[entry.fact_id] = entry.usage.to_dict()
    active = gate.policy
    other = other_policy(active)

    def keeps(policy: CapacityPolicy) -> tuple[str, ...]:
        # Over the cap the decision keeps in rank order; at or below it, everything.
        decision = select_facts_for_capacity(
            pool, max_facts=gate.max_facts, policy=policy, usage=usage_data, now=now
        )
        return decision.kept_ids

    return WhatIf(
        active=active.name,
        other=other.name,
        max_facts=gate.max_facts,
        candidates=tuple(pool),
        active_keeps=keeps(replace(active, shadow_enabled=False)),
        other_keeps=keeps(other),
    )
