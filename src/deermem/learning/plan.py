"""Planning an update: everything up to the capacity gate, as one pure function.

:func:`plan_update` takes the bucket as it is, a normalised response, the
detected signals, the settings, the clock, the thread and an id factory,
and computes, in the original DeerMem's order:

1. the label gate and the threshold over the response (:mod:`deermem.learning.gate`);
2. **confirmations** (:mod:`deermem.learning.confirm`);
3. **summaries** that pass the gate;
4. **staleness** removals and extensions (:mod:`deermem.learning.staleness`);
5. the **upload clean-up** (:mod:`deermem.learning.uploads`): new facts,
   stored facts and summary sentences that mention an upload event go —
   before the capacity gate, so they never compete for a slot;
6. **new facts** — deduplicated against the library as step 5 left it and
   against each other, with fresh ids, the thread as source, ``sourceError``
   when given and ``expected_valid_days`` capped at the creation cap (the
   stored facts a new fact repeated are noted: evidence for regret);
7. the **contradiction removals** that passed the gate, still pending.

The result, :class:`UpdatePlan`, is a proposal; nothing is trimmed here.
:mod:`deermem.learning.apply` hands it to the store's one capacity gate, which
decides and commits everything in one change set (a contradicted fact goes
only when its replacement survived). Without a store,
:func:`resolve_contradiction_removals` settles the pending removals against a
:class:`~deermem.policy.CapacityDecision` over ``plan.facts``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Final

from deermem.learning._text import content_key
from deermem.learning.confirm import confirm_facts
from deermem.learning.gate import GatedResponse, dedupe_new_facts, gate_response
from deermem.learning.metrics import RemovalRejections, UpdateMetrics
from deermem.learning.responses import NewFactProposal, NormalizedResponse, RemovalEntry
from deermem.learning.settings import UpdateSettings
from deermem.learning.staleness import review_staleness
from deermem.learning.state import MemoryState, SummaryKey, SummarySection
from deermem.learning.uploads import REASON_UPLOAD, strip_upload_mentions
from deermem.model import Fact, format_timestamp
from deermem.policy import CapacityDecision
from deermem.policy.scoring import as_utc

__all__ = [
    "REASON_CONTRADICTION",
    "REASON_STALENESS",
    "REASON_UPLOAD",
    "ContradictionOutcome",
    "IdFactory",
    "PendingRemoval",
    "PlannedRemoval",
    "UpdatePlan",
    "new_fact_id",
    "plan_update",
    "resolve_contradiction_removals",
]

REASON_STALENESS: Final = "staleness"
REASON_CONTRADICTION: Final = "contradiction"
_ID_ATTEMPTS: Final = 16

IdFactory = Callable[[], str]
"""Returns a new fact id; :func:`new_fact_id` by default, a seeded one in tests."""


def new_fact_id() -> str:
    """``fact_`` and 8 random lowercase hex digits, as the original's extraction ids."""
    return "fact_" + uuid.uuid4().hex[:8]


@dataclass(frozen=True, slots=True)
class PlannedRemoval:
    """A fact an update removes, and why (:data:`REASON_STALENESS`,
    :data:`REASON_UPLOAD` or :data:`REASON_CONTRADICTION`): the receipt's
    reason. The model's own explanation is not kept — receipts hold no text
    from the conversation."""

    fact_id: str
    reason: str


@dataclass(frozen=True, slots=True)
class PendingRemoval:
    """A contradiction removal waiting for the capacity gate's decision.

    Attributes:
        fact_id: the contradicted stored fact.
        replacement_index: the ``newFacts`` index of its replacement, or
            ``None`` for a removal without one (applied unconditionally).
        replacement_key: the replacement's text, stripped and case-folded:
            after the gate some *other* fact must hold it.
        replacement_fact_id: the fact expected to hold it — the new fact, or
            the fact the replacement duplicated — usable as the store's
            ``needs_kept``. ``None`` with a ``replacement_key`` means only the
            contradicted fact itself holds the text: the removal must be
            skipped, never passed on as an unconditional one.
    """

    fact_id: str
    replacement_index: int | None = None
    replacement_key: str | None = None
    replacement_fact_id: str | None = None


@dataclass(frozen=True, slots=True)
class UpdatePlan:
    """What an update proposes, before the capacity gate.

    Attributes:
        facts: the library to offer the capacity gate: stored facts in their
            order (confirmed and extended ones replaced, stale ones gone),
            then the new facts.
        new_facts: the new facts, in response order.
        updated_facts: stored facts that changed (confirmed, extended), as
            they are now, in library order.
        confirmed: ids confirmed.
        extended: id → new ``expected_valid_days``.
        summaries: sections to set, with ``updatedAt = now``.
        removals: facts removed before the capacity gate: the staleness
            review's (lowest confidence first), then the upload clean-up's.
        pending_removals: contradiction removals, to resolve after the gate.
        metrics: the counters so far.
        repeated: ids of stored facts that a new fact said again (it was
            dropped as a duplicate), in response order.
    """

    facts: tuple[Fact, ...]
    new_facts: tuple[Fact, ...]
    updated_facts: tuple[Fact, ...]
    confirmed: tuple[str, ...]
    extended: Mapping[str, int]
    summaries: Mapping[SummaryKey, SummarySection]
    removals: tuple[PlannedRemoval, ...]
    pending_removals: tuple[PendingRemoval, ...]
    metrics: UpdateMetrics
    repeated: tuple[str, ...] = ()

    @property
    def stale_removals(self) -> tuple[str, ...]:
        """Ids removed by the staleness review."""
        return tuple(r.fact_id for r in self.removals if r.reason == REASON_STALENESS)

    @property
    def changes_anything(self) -> bool:
        """Whether committing the plan could change the bucket."""
        return bool(
            self.new_facts
            or self.updated_facts
            or self.summaries
            or self.removals
            or self.pending_removals
        )


@dataclass(frozen=True, slots=True)
class ContradictionOutcome:
    """The contradiction removals after the capacity gate.

    Attributes:
        removed: ids to remove (reason :data:`REASON_CONTRADICTION`).
        skipped: ids kept because no other fact holds the replacement's text
            after the gate (counted under ``removal_rejections.replacement``).
        metrics: the plan's metrics with these outcomes added.
    """

    removed: tuple[str, ...]
    skipped: tuple[str, ...]
    metrics: UpdateMetrics

    @property
    def removals(self) -> tuple[PlannedRemoval, ...]:
        """The removed ids with their reason, as :class:`UpdatePlan` lists its own."""
        return tuple(PlannedRemoval(i, REASON_CONTRADICTION) for i in self.removed)


def plan_update(
    memory: MemoryState,
    response: NormalizedResponse,
    *,
    signals: Collection[str],
    settings: UpdateSettings,
    now: datetime,
    thread_id: str | None,
    new_id: IdFactory = new_fact_id,
) -> UpdatePlan:
    """Compute everything an update does before the capacity gate (see the module docstring).

    Raises:
        ValueError: ``new_id`` kept returning ids already in use.
        FactValidationError: ``new_id`` returned something that is not a fact id.
    """
    now = as_utc(now)
    stamp = format_timestamp(now)
    gated = gate_response(response, threshold=settings.fact_confidence_threshold)
    confirmed = confirm_facts(memory.facts, response.reinforce, signals=signals, now=now)
    summaries = _summary_changes(memory, gated, stamp)
    stale = review_staleness(
        confirmed.facts, response.stale_remove, response.stale_extend, now=now, settings=settings
    )
    uploads = strip_upload_mentions(memory, stale.facts, gated.new_facts, summaries, stamp)
    library = uploads.facts
    fresh, duplicates = dedupe_new_facts(uploads.new_facts, (fact.content for fact in library))
    new_facts = _build_new_facts(fresh, library, stamp, thread_id, settings, new_id)
    pending, unknown = _pending_removals(gated, response, library, fresh, new_facts)
    originals = {fact.id: fact for fact in memory.facts}
    gone = set(uploads.removed)
    metrics = replace(
        gated.metrics,
        duplicate_facts=len(duplicates),
        new_facts_planned=len(new_facts),
        summaries_updated=len(uploads.summaries),
        upload_facts_dropped=uploads.dropped,
        upload_removals=len(uploads.removed),
        upload_sentences_removed=uploads.sentences,
        confirmations=len(confirmed.confirmed),
        confirmations_refused=confirmed.refused,
        stale_removals=len(stale.removed),
        stale_refused=stale.refused_removals,
        stale_capped=stale.capped_removals,
        extensions=len(stale.extended),
        extensions_refused=stale.refused_extensions,
        unknown_removals=unknown,
    )
    return UpdatePlan(
        facts=library + new_facts,
        new_facts=new_facts,
        # Unchanged facts are passed through as the same objects.
        updated_facts=tuple(fact for fact in library if originals.get(fact.id) is not fact),
        confirmed=tuple(i for i in confirmed.confirmed if i not in gone),
        extended={i: days for i, days in stale.extended.items() if i not in gone},
        summaries=uploads.summaries,
        removals=tuple(PlannedRemoval(i, REASON_STALENESS) for i in stale.removed)
        + tuple(PlannedRemoval(i, REASON_UPLOAD) for i in uploads.removed),
        pending_removals=pending,
        metrics=metrics,
        repeated=_repeated(duplicates, library),
    )


def _repeated(duplicates: Sequence[NewFactProposal], library: Sequence[Fact]) -> tuple[str, ...]:
    """The stored facts that duplicates said again (a duplicate of the batch names none)."""
    if not duplicates:
        return ()
    holders = {content_key(fact.content): fact.id for fact in library}
    found = (holders.get(content_key(proposal.content)) for proposal in duplicates)
    return tuple(dict.fromkeys(fact_id for fact_id in found if fact_id is not None))


def _summary_changes(
    memory: MemoryState, gated: GatedResponse, stamp: str
) -> dict[SummaryKey, SummarySection]:
    changes: dict[SummaryKey, SummarySection] = {}
    for proposal in gated.summaries:
        text = proposal.summary.strip()
        if text != memory.section(proposal.key).summary:
            changes[proposal.key] = SummarySection(summary=text, updatedAt=stamp)
    return changes


def _build_new_facts(
    proposals: Sequence[NewFactProposal],
    library: Sequence[Fact],
    stamp: str,
    thread_id: str | None,
    settings: UpdateSettings,
    new_id: IdFactory,
) -> tuple[Fact, ...]:
    taken = {fact.id for fact in library}
    source: dict[str, object] = {
        "type": "conversation" if thread_id else "unknown",
        "threadId": thread_id or None,
    }
    facts: list[Fact] = []
    for proposal in proposals:
        fact_id = _unused_id(new_id, taken)
        taken.add(fact_id)
        # The original's order of a new fact's keys (its file is the original's).
        data: dict[str, object] = {
            "id": fact_id,
            "content": proposal.content,
            "category": proposal.category,
            "confidence": proposal.confidence,
            "createdAt": stamp,
            "source": source,
        }
        if proposal.source_error:
            data["sourceError"] = proposal.source_error
        if proposal.expected_valid_days is not None:
            data["expected_valid_days"] = min(
                proposal.expected_valid_days, settings.creation_cap_days
            )
        facts.append(Fact.from_dict(data))
    return tuple(facts)


def _unused_id(new_id: IdFactory, taken: set[str]) -> str:
    for _ in range(_ID_ATTEMPTS):
        candidate = new_id()
        if candidate not in taken:
            return candidate
    raise ValueError(f"the fact id factory returned ids already in use {_ID_ATTEMPTS} times")


def _pending_removals(
    gated: GatedResponse,
    response: NormalizedResponse,
    library: Sequence[Fact],
    fresh: Sequence[NewFactProposal],
    new_facts: Sequence[Fact],
) -> tuple[tuple[PendingRemoval, ...], int]:
    """The gated removals that still name a stored fact, and how many named none."""
    present = {fact.id for fact in library}
    new_by_index = {
        proposal.index: fact.id for proposal, fact in zip(fresh, new_facts, strict=True)
    }
    holders: dict[str, list[str]] = {}
    if any(entry.replacement_index is not None for entry in gated.removals):
        for fact in (*library, *new_facts):
            holders.setdefault(content_key(fact.content), []).append(fact.id)
    pending: list[PendingRemoval] = []
    seen: set[str] = set()
    unknown = 0
    for entry in gated.removals:
        if entry.fact_id in seen:
            continue
        seen.add(entry.fact_id)
        if entry.fact_id not in present:
            unknown += 1  # never stored, or already removed as stale this cycle
            continue
        pending.append(_pending(entry, response, new_by_index, holders))
    return tuple(pending), unknown


def _pending(
    entry: RemovalEntry,
    response: NormalizedResponse,
    new_by_index: Mapping[int, str],
    holders: Mapping[str, list[str]],
) -> PendingRemoval:
    index = entry.replacement_index
    if index is None:
        return PendingRemoval(entry.fact_id)
    key = content_key(response.new_facts[index].content)
    holder = new_by_index.get(index)
    if holder is None:  # the replacement repeated another fact: that one must stay
        holder = next((i for i in holders.get(key, ()) if i != entry.fact_id), None)
    return PendingRemoval(entry.fact_id, index, key, holder)


def resolve_contradiction_removals(
    plan: UpdatePlan, decision: CapacityDecision[Fact]
) -> ContradictionOutcome:
    """Decide the pending contradiction removals once the capacity gate has run.

    A removal without a replacement applies. A removal with one applies only
    if, among the facts the gate kept, a fact with a *different* id holds
    the replacement's text — so a contradicted fact is never removed in
    favour of a replacement that was itself trimmed. A fact the gate evicted
    is neither removed nor skipped here: it is already gone, with its own
    receipt.
    """
    kept_ids = {fact.id for fact in decision.kept}
    holders: dict[str, set[str]] = {}
    if any(pending.replacement_key is not None for pending in plan.pending_removals):
        for fact in decision.kept:
            holders.setdefault(content_key(fact.content), set()).add(fact.id)
    removed: list[str] = []
    skipped: list[str] = []
    for pending in plan.pending_removals:
        if pending.fact_id not in kept_ids:
            continue
        if pending.replacement_key is None or holders.get(pending.replacement_key, set()) - {
            pending.fact_id
        }:
            removed.append(pending.fact_id)
        else:
            skipped.append(pending.fact_id)
    rejections = plan.metrics.removal_rejections
    metrics = replace(
        plan.metrics,
        contradiction_removals=len(removed),
        removal_rejections=RemovalRejections(
            missing=rejections.missing,
            scope=rejections.scope,
            replacement=rejections.replacement + len(skipped),
        ),
    )
    return ContradictionOutcome(tuple(removed), tuple(skipped), metrics)
