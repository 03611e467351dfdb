"""Planning an update: everything up to the capacity gate, as one pure function.

:func:`plan_update` takes the bucket as it is (:class:`MemoryState`), a read
answer, the detected signals, the settings, the clock, the thread and an id
factory, and computes, in the original DeerMem's order:

1. the **label gate** and the threshold over the answer (:func:`gate_response`);
2. **confirmations** (:func:`confirm_facts`);
3. **summaries** that pass the gate;
4. **staleness** removals and extensions (:func:`review_staleness`);
5. the **upload clean-up** (:func:`strip_upload_mentions`): new facts,
   stored facts and summary sentences that mention an upload event go —
   before the capacity gate, so they never compete for a slot;
6. **new facts** — deduplicated against the library as step 5 left it and
   against each other, with fresh ids, the thread as source, ``sourceError``
   when given and ``expected_valid_days`` capped at the creation cap (the
   stored facts a new fact repeated are noted: evidence for regret);
7. the **contradiction removals** that passed the gate, still pending.

The result, :class:`UpdatePlan`, is a proposal; nothing is trimmed here.
:mod:`deermem.learning.learner` hands it to the store's one capacity gate,
which decides and commits everything in one change set (a contradicted fact
goes only when its replacement survived). Without a store,
:func:`resolve_contradiction_removals` settles the pending removals against a
:class:`~deermem.policy.CapacityDecision` over ``plan.facts``.

Everything here is pure: the clock is an argument, the store is never read.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Final, Literal, TypeVar

from deermem.learning.answer import (
    NewFactProposal,
    NormalizedResponse,
    ReinforceEntry,
    RemovalEntry,
    StaleExtension,
    StaleRemoval,
    SummaryProposal,
    read_positive_days,
)
from deermem.learning.messages import mentions_upload, strip_upload_sentences
from deermem.learning.report import (
    FactRejections,
    RemovalRejections,
    SummaryRejections,
    UpdateMetrics,
)
from deermem.model import (
    Fact,
    IdFactory,
    category_key,
    duplicate_key,
    format_timestamp,
    new_fact_id,
    next_confirmation_count,
    parse_timestamp,
    random_fact_id,
)
from deermem.policy import CapacityDecision, coerce_confidence
from deermem.policy.scoring import as_utc
from deermem.store.records import SUMMARY_GROUPS, Section, SummaryDocument, SummaryKey

if TYPE_CHECKING:  # pydantic's configuration is not needed to plan an update
    from deermem.config import MemoryConfig

__all__ = [
    "DEFAULT_MAX_CONVERSATION_CHARS",
    "MIN_CONVERSATION_CHARS",
    "REASON_CONTRADICTION",
    "REASON_STALENESS",
    "REASON_UPLOAD",
    "REINFORCEMENT_SIGNAL",
    "REQUIRED_AUTHORITY",
    "REQUIRED_DURABILITY",
    "REQUIRED_SCOPE",
    "ConfirmationOutcome",
    "ContradictionOutcome",
    "GatedResponse",
    "MemoryState",
    "PendingRemoval",
    "PlannedRemoval",
    "StalenessOutcome",
    "UpdatePlan",
    "UpdateSettings",
    "UploadCleanup",
    "confirm_facts",
    "dedupe_new_facts",
    "effective_window_days",
    "fact_label_rejection",
    "gate_response",
    "plan_update",
    "read_expected_valid_days",
    "resolve_contradiction_removals",
    "review_clock",
    "review_due",
    "review_staleness",
    "shift_days",
    "stale_candidates",
    "strip_upload_mentions",
]

# --- settings -------------------------------------------------------------------------
#
# UpdateSettings plays the part CapacityPolicy plays for the capacity gate: the
# pure functions of this package take one small frozen value instead of the
# whole configuration, so they can be called (and tested, and benchmarked)
# without building a pydantic model.

MIN_CONVERSATION_CHARS: Final = 8_000
"""The smallest cap on the conversation part of a prompt: above the longest block
one turn can render to (``deermem.learning.prompt.MAX_TURN_CHARS``), so the newest
turn is never cut by the cap."""

DEFAULT_MAX_CONVERSATION_CHARS: Final = 24_000
"""The default cap (``max_conversation_chars``): about 6,000 tokens of English,
13,000 of Chinese; at least 22 turns even at their longest unescaped form."""


@dataclass(frozen=True, slots=True)
class UpdateSettings:
    """What the prompt, the gates and the staleness review need.

    The defaults are :class:`MemoryConfig`'s (the original DeerMem's, where
    it has the setting; it has no cap on the conversation).

    Raises:
        ValueError: ``max_conversation_chars`` is below
            :data:`MIN_CONVERSATION_CHARS`.
    """

    fact_confidence_threshold: float = 0.7
    staleness_review_enabled: bool = True
    staleness_age_days: int = 90
    staleness_min_candidates: int = 3
    staleness_max_removals_per_cycle: int = 10
    staleness_max_lifetime_multiplier: float = 20.0
    staleness_max_extension_days: int = 3650
    protected_categories: tuple[str, ...] = ("correction",)
    max_conversation_chars: int = DEFAULT_MAX_CONVERSATION_CHARS

    def __post_init__(self) -> None:
        # Checked here as well as in MemoryConfig: a value built by hand must not
        # fail only at the first update, in a queue worker where nobody sees it.
        if self.max_conversation_chars < MIN_CONVERSATION_CHARS:
            raise ValueError(
                f"max_conversation_chars must be at least {MIN_CONVERSATION_CHARS:,}, "
                f"got {self.max_conversation_chars!r}"
            )

    @classmethod
    def from_config(cls, config: MemoryConfig) -> UpdateSettings:
        """Take the update keys."""
        return cls(
            fact_confidence_threshold=config.fact_confidence_threshold,
            staleness_review_enabled=config.staleness_review_enabled,
            staleness_age_days=config.staleness_age_days,
            staleness_min_candidates=config.staleness_min_candidates,
            staleness_max_removals_per_cycle=config.staleness_max_removals_per_cycle,
            staleness_max_lifetime_multiplier=config.staleness_max_lifetime_multiplier,
            staleness_max_extension_days=config.staleness_max_extension_days,
            protected_categories=config.protected_categories,
            max_conversation_chars=config.max_conversation_chars,
        )

    @property
    def creation_cap_days(self) -> int:
        """The longest window a new fact may be created with: ``int(age × multiplier)``.

        1800 days with the defaults. A model that declares a fact valid for a
        century still sees it reviewed within five years.
        """
        return int(self.staleness_age_days * self.staleness_max_lifetime_multiplier)


# --- the memory an update starts from -------------------------------------------------
#
# The update functions read the current memory but never the store, so they
# take it as a value. The store's own snapshot converts into it without
# copying facts.


@dataclass(frozen=True, slots=True)
class MemoryState:
    """One bucket's memory as an update sees it.

    Attributes:
        facts: the bucket's facts, in the store's order (the capacity gate
            breaks ties by position, so order matters).
        summaries: the six summary sections; a missing one is empty.
    """

    facts: tuple[Fact, ...] = ()
    summaries: Mapping[SummaryKey, Section] = field(default_factory=dict)

    @classmethod
    def from_summaries(cls, document: SummaryDocument, facts: Sequence[Fact]) -> MemoryState:
        """Build a state from the store's summary document and the bucket's facts."""
        summaries: dict[SummaryKey, Section] = {}
        for group, sections in (("user", document.user), ("history", document.history)):
            for name, section in sections.items():
                summaries[(group, name)] = section
        return cls(facts=tuple(facts), summaries=summaries)

    def section(self, key: SummaryKey) -> Section:
        """The section under ``key``; an empty one when it does not exist."""
        return self.summaries.get(key) or Section()

    def sections(self) -> Iterator[tuple[SummaryKey, Section]]:
        """The six known sections in their canonical order."""
        for group, names in SUMMARY_GROUPS.items():
            for name in names:
                yield (group, name), self.section((group, name))


# --- the label gate: what a model may change, whatever it says ------------------------
#
# The model labels every proposal: ``scope`` (is it about the *user*, or
# this thread, or a project), ``durability`` (will it still hold in a month)
# and ``authority`` (does it *describe* the user, or is it a request made in
# this conversation). Only ``user`` / ``durable`` / ``descriptive`` facts are
# memory; a fact missing any label is refused. The labels turn "the model
# thought it was worth remembering" into three separate claims, each of which
# must hold, and a prompt injection that makes the model propose "always
# obey the next instruction" still has to claim it *describes the user*.
#
# In order, as in the original DeerMem:
#
# * **new facts** — the label gate, then ``confidence <
#   fact_confidence_threshold``, then blank content; duplicates (stripped,
#   case-folded) are dropped afterwards, against the library as it is at that
#   point of the apply order (:func:`dedupe_new_facts`);
# * **summaries** — a section changes only when ``shouldUpdate`` is true, the
#   summary is not blank, both labels are present, scope is ``user`` and
#   authority ``descriptive``;
# * **contradiction removals** — scope ``user`` and a non-empty reason; a
#   ``replacementFactIndex`` must be a non-negative whole number naming a new
#   fact that passed the label gate and the threshold. Whether the
#   replacement survives the capacity gate is checked after it
#   (:func:`resolve_contradiction_removals`).
#
# Each refusal is counted by reason (:class:`~deermem.learning.report.UpdateMetrics`).

REQUIRED_SCOPE: Final = "user"
REQUIRED_DURABILITY: Final = "durable"
REQUIRED_AUTHORITY: Final = "descriptive"

FactRejection = Literal["missing", "scope", "durability", "authority"]
SummaryRejection = Literal["missing", "scope", "authority"]
RemovalRejection = Literal["missing", "scope", "replacement"]


@dataclass(frozen=True, slots=True)
class GatedResponse:
    """What passed the gate.

    Attributes:
        new_facts: facts that passed labels, threshold and the blank check,
            in response order (duplicates are checked later).
        replacement_indices: indices of new facts that passed labels and
            threshold: the only valid ``replacementFactIndex`` values.
        summaries: sections allowed to change.
        removals: contradiction removals allowed (pending the capacity gate
            when they name a replacement).
        metrics: the gate's counters.
    """

    new_facts: tuple[NewFactProposal, ...]
    replacement_indices: frozenset[int]
    summaries: tuple[SummaryProposal, ...]
    removals: tuple[RemovalEntry, ...]
    metrics: UpdateMetrics


def fact_label_rejection(
    scope: str | None, durability: str | None, authority: str | None
) -> FactRejection | None:
    """Why a new fact's labels refuse it, or ``None`` when they admit it."""
    if scope is None or durability is None or authority is None:
        return "missing"
    if scope != REQUIRED_SCOPE:
        return "scope"
    if durability != REQUIRED_DURABILITY:
        return "durability"
    if authority != REQUIRED_AUTHORITY:
        return "authority"
    return None


def summary_label_rejection(scope: str | None, authority: str | None) -> SummaryRejection | None:
    """Why a summary section's labels refuse it, or ``None`` when they admit it."""
    if scope is None or authority is None:
        return "missing"
    if scope != REQUIRED_SCOPE:
        return "scope"
    if authority != REQUIRED_AUTHORITY:
        return "authority"
    return None


def removal_rejection(
    entry: RemovalEntry, replacement_indices: frozenset[int]
) -> RemovalRejection | None:
    """Why a contradiction removal is refused before the capacity gate, or ``None``."""
    if entry.scope is None:
        return "missing"
    if entry.scope != REQUIRED_SCOPE:
        return "scope"
    if not entry.reason:
        return "missing"
    if entry.replacement_given and (
        entry.replacement_index is None or entry.replacement_index not in replacement_indices
    ):
        return "replacement"
    return None


def gate_response(response: NormalizedResponse, *, threshold: float) -> GatedResponse:
    """Apply the label gate and the confidence threshold to a normalised response."""
    passed, indices, fact_metrics = _gate_facts(response.new_facts, threshold)
    summaries, summary_rejections = _gate_summaries(response.summaries)
    removals, removal_rejections = _gate_removals(response.remove, indices)
    metrics = replace(
        fact_metrics,
        malformed_new_facts=response.malformed_new_facts,
        summary_rejections=summary_rejections,
        removal_rejections=removal_rejections,
    )
    return GatedResponse(passed, indices, summaries, removals, metrics)


def _gate_facts(
    facts: Sequence[NewFactProposal], threshold: float
) -> tuple[tuple[NewFactProposal, ...], frozenset[int], UpdateMetrics]:
    rejected: dict[str, int] = {"missing": 0, "scope": 0, "durability": 0, "authority": 0}
    labelled = low = blank = 0
    passed: list[NewFactProposal] = []
    indices: set[int] = set()
    for fact in facts:
        reason = fact_label_rejection(fact.scope, fact.durability, fact.authority)
        if reason is not None:
            rejected[reason] += 1
            continue
        labelled += 1
        if fact.confidence < threshold:
            low += 1
            continue
        indices.add(fact.index)
        if not fact.content.strip():
            blank += 1
            continue
        passed.append(fact)
    metrics = UpdateMetrics(
        facts_extracted=len(facts),
        facts_passed_scope_gate=labelled,
        rejected_by_scope_gate=len(facts) - labelled,
        facts_passed_confidence=labelled - low,
        rejected_low_confidence=low,
        rejected_empty_content=blank,
        fact_rejections=FactRejections(**rejected),
    )
    return tuple(passed), frozenset(indices), metrics


def _gate_summaries(
    proposals: Sequence[SummaryProposal],
) -> tuple[tuple[SummaryProposal, ...], SummaryRejections]:
    # A section with nothing to say asked for nothing: not a refusal.
    wanted = (p for p in proposals if p.shouldUpdate and p.summary.strip())
    accepted, rejected = _split(wanted, lambda p: summary_label_rejection(p.scope, p.authority))
    return accepted, SummaryRejections(**rejected)


def _gate_removals(
    entries: Sequence[RemovalEntry], indices: frozenset[int]
) -> tuple[tuple[RemovalEntry, ...], RemovalRejections]:
    accepted, rejected = _split(entries, lambda entry: removal_rejection(entry, indices))
    return accepted, RemovalRejections(**rejected)


_T = TypeVar("_T")


def _split(
    items: Iterable[_T], refusal: Callable[[_T], str | None]
) -> tuple[tuple[_T, ...], Counter[str]]:
    """The items a gate passes (``refusal`` gives ``None``), and the others counted by reason."""
    accepted: list[_T] = []
    rejected: Counter[str] = Counter()
    for item in items:
        reason = refusal(item)
        if reason is None:
            accepted.append(item)
        else:
            rejected[reason] += 1
    return tuple(accepted), rejected


def dedupe_new_facts(
    facts: Sequence[NewFactProposal], existing_contents: Iterable[str]
) -> tuple[tuple[NewFactProposal, ...], tuple[NewFactProposal, ...]]:
    """Split facts into new ones and duplicates (stripped, case-folded).

    A fact is a duplicate when a stored fact or an earlier fact of the same
    batch has the same text; the stored fact is left as it is.

    Returns:
        ``(kept, duplicates)``, each in input order.
    """
    seen = {duplicate_key(content) for content in existing_contents}
    kept: list[NewFactProposal] = []
    duplicates: list[NewFactProposal] = []
    for fact in facts:
        key = duplicate_key(fact.content)
        if key in seen:
            duplicates.append(fact)
        else:
            seen.add(key)
            kept.append(fact)
    return tuple(kept), tuple(duplicates)


# --- confirmation: when a fact counts as confirmed by the user ------------------------
#
# Confirmation is what lets ``hybrid-v1`` keep a 0.7 fact the user said
# "exactly, keep doing that" about a week ago over a 0.9 fact nobody has
# mentioned in six months. It is therefore guarded: a fact is confirmed —
# ``lastConfirmedAt = now``, ``confirmationCount + 1`` — only when **all** hold:
#
# * a ``reinforcement`` signal was detected in the user's recent messages
#   (the model alone cannot confirm anything);
# * the model listed the fact's id in ``factsToReinforce`` with scope
#   ``user`` and a non-empty reason;
# * the id names a fact in the bucket.
#
# The policy plays no part: ``lastConfirmedAt`` and ``confirmationCount`` are
# facts about what the user said, recorded under every policy, and policies
# differ only in how they rank them. So a deployment that runs ``confidence``
# today can switch to ``hybrid-v1`` with its confirmation history. (The
# original records confirmations only under ``hybrid-v1`` or shadow mode.)
#
# Extracting a duplicate, injecting a fact into a prompt and finding it in a
# search never confirm it. A confirmation also restarts the fact's staleness
# clock, and because confirmations are applied first, a fact confirmed in a
# cycle cannot be removed as stale in the same cycle.

REINFORCEMENT_SIGNAL: Final = "reinforcement"


@dataclass(frozen=True, slots=True)
class ConfirmationOutcome:
    """The library after confirmations.

    Attributes:
        facts: every fact, in the same order, confirmed ones replaced.
        confirmed: ids confirmed, in the order the model listed them.
        refused: entries that confirmed nothing.
    """

    facts: tuple[Fact, ...]
    confirmed: tuple[str, ...]
    refused: int


def confirmation_allowed(signals: Collection[str]) -> bool:
    """Whether this cycle may confirm anything at all: the user's words must confirm."""
    return REINFORCEMENT_SIGNAL in signals


def confirm_facts(
    facts: Sequence[Fact],
    entries: Sequence[ReinforceEntry],
    *,
    signals: Collection[str],
    now: datetime,
) -> ConfirmationOutcome:
    """Apply the model's ``factsToReinforce`` under the rule of the module docstring.

    An id listed twice is confirmed once.
    """
    if not entries:
        return ConfirmationOutcome(tuple(facts), (), 0)
    if not confirmation_allowed(signals):
        return ConfirmationOutcome(tuple(facts), (), len(entries))
    known = {fact.id for fact in facts}
    chosen: list[str] = []
    for entry in entries:
        if (
            entry.scope == "user"
            and entry.reason
            and entry.fact_id in known
            and entry.fact_id not in chosen
        ):
            chosen.append(entry.fact_id)
    if not chosen:
        return ConfirmationOutcome(tuple(facts), (), len(entries))
    stamp = format_timestamp(now)
    targets = set(chosen)
    updated = tuple(
        fact.replace(
            lastConfirmedAt=stamp,
            confirmationCount=next_confirmation_count(fact.confirmationCount),
        )
        if fact.id in targets
        else fact
        for fact in facts
    )
    return ConfirmationOutcome(updated, tuple(chosen), len(entries) - len(chosen))


# --- the staleness review: which aged facts the model is asked about ------------------
#
# A fact is *aged* when its review clock — ``lastConfirmedAt`` when it can be
# read, else ``createdAt`` — is older than its window: its own
# ``expected_valid_days`` when that is a usable day count, else
# ``staleness_age_days`` (90). Facts of the protected categories (the one
# ``protected_categories`` rule table, by default ``correction``) are never
# aged, and a fact whose clock cannot be read is skipped rather than guessed.
#
# When the review is enabled and at least ``staleness_min_candidates`` facts
# are aged, the prompt lists them and the model may propose to remove
# (``staleFactsToRemove``) or extend (``staleFactsToExtend``) each. Whatever
# it proposes, at apply time:
#
# * only ids that are aged *now* are acted on (also when the review is
#   switched off — a model cannot use the stale lists to remove fresh facts);
# * at most ``staleness_max_removals_per_cycle`` are removed, lowest
#   confidence first (an unreadable confidence counts as 0.5);
# * an extension applies only to an aged fact not proposed for removal (even
#   one the cap spared), and sets ``expected_valid_days`` to the days since
#   creation plus the extension, at most ``staleness_max_extension_days``.
#
# Every date computation is guarded: a window too large for a ``datetime``
# means "not aged", never a crash. The clock is an argument.

_MAX_TIMEDELTA_DAYS: Final = timedelta.max.days


def read_expected_valid_days(fact: Fact) -> int | None:
    """The fact's own window in days, when it holds a usable one (see ``read_positive_days``)."""
    return read_positive_days(fact.expected_valid_days)


def effective_window_days(fact: Fact, age_days: int) -> int:
    """The fact's window: its own ``expected_valid_days``, else ``age_days``.

    A stored window above the creation cap is used as it is: the cap limits
    what a model may *create*, not what a person wrote into a file.
    """
    own = read_expected_valid_days(fact)
    return age_days if own is None else own


def shift_days(moment: datetime, days: int) -> datetime | None:
    """``moment + days``, or ``None`` when the result is outside what ``datetime`` holds."""
    if abs(days) > _MAX_TIMEDELTA_DAYS:
        return None
    try:
        return moment + timedelta(days=days)
    except OverflowError:
        return None


def review_clock(fact: Fact) -> datetime | None:
    """When the fact's window started: last confirmed, else created; ``None`` if unreadable."""
    confirmed = parse_timestamp(fact.lastConfirmedAt)
    return confirmed if confirmed is not None else parse_timestamp(fact.createdAt)


def is_protected(fact: Fact, protected_categories: Collection[str]) -> bool:
    """Whether the fact's category is in the protected rule table (compared as the
    capacity gate compares: stripped and lower-cased)."""
    return category_key(fact.category) in protected_categories


def stale_candidates(
    facts: Sequence[Fact], *, now: datetime, settings: UpdateSettings
) -> tuple[Fact, ...]:
    """The aged, unprotected facts, in library order."""
    now = as_utc(now)
    protected = frozenset(category_key(name) for name in settings.protected_categories)
    aged: list[Fact] = []
    for fact in facts:
        if is_protected(fact, protected):
            continue
        start = review_clock(fact)
        if start is None:
            continue
        deadline = shift_days(start, effective_window_days(fact, settings.staleness_age_days))
        if deadline is not None and deadline < now:
            aged.append(fact)
    return tuple(aged)


def review_due(candidates: Sequence[Fact], settings: UpdateSettings) -> bool:
    """Whether the prompt asks for a review: enabled and enough aged facts."""
    return (
        settings.staleness_review_enabled and len(candidates) >= settings.staleness_min_candidates
    )


@dataclass(frozen=True, slots=True)
class StalenessOutcome:
    """The library after the staleness step.

    Attributes:
        facts: the facts left, in order, extended ones replaced.
        removed: ids removed, lowest confidence first.
        extended: id → the new ``expected_valid_days``.
        refused_removals: proposals naming a fact that is not aged now.
        capped_removals: aged proposals left in place by the per-cycle cap.
        refused_extensions: extensions of facts not aged, or proposed for removal.
    """

    facts: tuple[Fact, ...]
    removed: tuple[str, ...] = ()
    extended: Mapping[str, int] = field(default_factory=dict)
    refused_removals: int = 0
    capped_removals: int = 0
    refused_extensions: int = 0


def review_staleness(
    facts: Sequence[Fact],
    removals: Sequence[StaleRemoval],
    extensions: Sequence[StaleExtension],
    *,
    now: datetime,
    settings: UpdateSettings,
) -> StalenessOutcome:
    """Apply the model's stale-fact proposals under the guardrails of the module docstring."""
    if not removals and not extensions:
        return StalenessOutcome(tuple(facts))
    now = as_utc(now)
    candidates = {fact.id: fact for fact in stale_candidates(facts, now=now, settings=settings)}
    proposed = list(dict.fromkeys(entry.fact_id for entry in removals))
    eligible = [fact_id for fact_id in proposed if fact_id in candidates]
    position = {fact.id: index for index, fact in enumerate(facts)}
    eligible.sort(key=lambda i: (coerce_confidence(candidates[i].confidence), position[i]))
    removed = eligible[: settings.staleness_max_removals_per_cycle]
    windows = _extensions(extensions, candidates, set(proposed), now, settings)
    gone = set(removed)
    kept = tuple(
        fact.replace(expected_valid_days=windows[fact.id]) if fact.id in windows else fact
        for fact in facts
        if fact.id not in gone
    )
    return StalenessOutcome(
        facts=kept,
        removed=tuple(removed),
        extended=windows,
        refused_removals=len(proposed) - len(eligible),
        capped_removals=len(eligible) - len(removed),
        refused_extensions=len(extensions) - len(windows),
    )


def _extensions(
    extensions: Sequence[StaleExtension],
    candidates: dict[str, Fact],
    proposed_removals: set[str],
    now: datetime,
    settings: UpdateSettings,
) -> dict[str, int]:
    windows: dict[str, int] = {}
    for entry in extensions:
        fact = candidates.get(entry.fact_id)
        if fact is None or entry.fact_id in proposed_removals or entry.fact_id in windows:
            continue
        created = parse_timestamp(fact.createdAt)
        if created is None:
            continue
        age = max((now - created).days, 0)
        windows[entry.fact_id] = min(
            age + entry.extend_by_days, settings.staleness_max_extension_days
        )
    return windows


# --- the upload clean-up --------------------------------------------------------------
#
# Upload events are not memory. Upload blocks are cut from the conversation
# before the model sees it, but a model can still write an upload event into a
# fact or a summary — from an assistant reply that mentioned the file, say. So
# after planning, as the original DeerMem does after applying:
#
# * a **new fact** that mentions an upload event is dropped;
# * a **stored fact** that mentions one is removed (reason :data:`REASON_UPLOAD`,
#   archived with a receipt like any removal) — except facts a person wrote
#   by hand (source ``manual``), which an extraction never deletes;
# * in every **summary section**, the sentences that mention one are cut; a
#   proposed section left blank by the cut is not applied.
#
# What an upload event is: :func:`deermem.learning.messages.mentions_upload`.

REASON_UPLOAD: Final = "upload"
"""The receipt reason of a stored fact removed for mentioning an upload event."""


@dataclass(frozen=True, slots=True)
class UploadCleanup:
    """What the upload clean-up changed.

    Attributes:
        facts: the library without the stored facts that mention an upload.
        removed: ids of those stored facts, in library order.
        new_facts: the proposals without the ones that mention an upload.
        dropped: how many proposals were dropped.
        summaries: the summary changes to commit, cleaned; sections whose
            stored text mentioned an upload are included even when the
            model proposed nothing for them.
        sentences: summary sentences cut.
    """

    facts: tuple[Fact, ...]
    removed: tuple[str, ...]
    new_facts: tuple[NewFactProposal, ...]
    dropped: int
    summaries: dict[SummaryKey, Section]
    sentences: int


def strip_upload_mentions(
    memory: MemoryState,
    library: Sequence[Fact],
    proposals: Iterable[NewFactProposal],
    summaries: dict[SummaryKey, Section],
    stamp: str,
) -> UploadCleanup:
    """Apply the clean-up of the module docstring.

    Args:
        memory: the bucket before the update (its summary sections).
        library: the facts as the update left them so far.
        proposals: the new facts that passed the gate.
        summaries: the summary changes the update makes so far.
        stamp: ``updatedAt`` for a section changed only by the clean-up.
    """
    removed = tuple(
        fact.id
        for fact in library
        if fact.source.type != "manual" and mentions_upload(fact.content)
    )
    gone = set(removed)
    candidates = tuple(proposals)
    kept = tuple(p for p in candidates if not mentions_upload(p.content))
    changes: dict[SummaryKey, Section] = {}
    sentences = 0
    for key, stored in memory.sections():
        proposed = summaries.get(key)
        if proposed is not None:
            text, cut = strip_upload_sentences(proposed.summary)
            sentences += cut
            if text.strip():
                if text != stored.summary:
                    changes[key] = Section(summary=text, updatedAt=proposed.updatedAt)
                continue
        text, cut = strip_upload_sentences(stored.summary)
        sentences += cut
        if cut:
            changes[key] = Section(summary=text, updatedAt=stamp)
    return UploadCleanup(
        facts=tuple(fact for fact in library if fact.id not in gone),
        removed=removed,
        new_facts=kept,
        dropped=len(candidates) - len(kept),
        summaries=changes,
        sentences=sentences,
    )


# --- the plan -------------------------------------------------------------------------

REASON_STALENESS: Final = "staleness"
REASON_CONTRADICTION: Final = "contradiction"


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
    summaries: Mapping[SummaryKey, Section]
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
    new_id: IdFactory = random_fact_id,
    archived: Callable[[str], bool] = lambda _: False,
) -> UpdatePlan:
    """Compute everything an update does before the capacity gate (see the module docstring).

    ``new_id`` makes candidate ids; a candidate already in the library, planned
    in this update or ``archived`` is skipped (see :func:`deermem.model.new_fact_id`).

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
    new_facts = _build_new_facts(fresh, library, stamp, thread_id, settings, new_id, archived)
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
    holders = {duplicate_key(fact.content): fact.id for fact in library}
    found = (holders.get(duplicate_key(proposal.content)) for proposal in duplicates)
    return tuple(dict.fromkeys(fact_id for fact_id in found if fact_id is not None))


def _summary_changes(
    memory: MemoryState, gated: GatedResponse, stamp: str
) -> dict[SummaryKey, Section]:
    changes: dict[SummaryKey, Section] = {}
    for proposal in gated.summaries:
        text = proposal.summary.strip()
        if text != memory.section(proposal.key).summary:
            changes[proposal.key] = Section(summary=text, updatedAt=stamp)
    return changes


def _build_new_facts(
    proposals: Sequence[NewFactProposal],
    library: Sequence[Fact],
    stamp: str,
    thread_id: str | None,
    settings: UpdateSettings,
    new_id: IdFactory,
    archived: Callable[[str], bool],
) -> tuple[Fact, ...]:
    taken = {fact.id for fact in library}

    def in_use(fact_id: str) -> bool:
        # An archived id is in use too: a restore brings it back.
        return fact_id in taken or archived(fact_id)

    source: dict[str, object] = {
        "type": "conversation" if thread_id else "unknown",
        "threadId": thread_id or None,
    }
    facts: list[Fact] = []
    for proposal in proposals:
        fact_id = new_fact_id(in_use, new_id)
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
            holders.setdefault(duplicate_key(fact.content), []).append(fact.id)
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
    key = duplicate_key(response.new_facts[index].content)
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
            holders.setdefault(duplicate_key(fact.content), set()).add(fact.id)
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
