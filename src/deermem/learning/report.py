"""What one update did, as ids and counters: :class:`UpdateReport` and its :class:`UpdateMetrics`.

The report is what :meth:`deermem.Memory.learn` returns (with the facts it names) and what
``deermem ingest --json`` prints. Like a receipt it holds **no content** —
fact ids, categories, receipt ids, section names and counters only — so it
can be logged, stored and shipped to a dashboard without leaking anything a
user said. The names of the metrics' first group and of the rejection
counters are the original DeerMem's extraction metrics, so dashboards built
for it read deermem's too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Literal

from deermem.learning.answer import OverLimits
from deermem.model import Fact, Record

__all__ = [
    "FactChange",
    "FactRejections",
    "ModelCall",
    "RemovalRejections",
    "SummaryRejections",
    "UpdateMetrics",
    "UpdateOutcome",
    "UpdateReport",
    "UpdateResult",
]


@dataclass(frozen=True, slots=True)
class FactRejections:
    """New facts refused by the label gate, by the first label that failed."""

    missing: int = 0
    scope: int = 0
    durability: int = 0
    authority: int = 0


@dataclass(frozen=True, slots=True)
class SummaryRejections:
    """Summary sections refused by the label gate."""

    missing: int = 0
    scope: int = 0
    authority: int = 0


@dataclass(frozen=True, slots=True)
class RemovalRejections:
    """Contradiction removals refused: unlabelled or unreasoned, wrong scope, or
    a replacement that is invalid, refused, or did not survive the capacity gate."""

    missing: int = 0
    scope: int = 0
    replacement: int = 0


@dataclass(frozen=True, slots=True)
class UpdateMetrics:
    """Every counter of one update.

    Attributes:
        facts_extracted: well-formed new facts in the response.
        facts_passed_scope_gate / rejected_by_scope_gate: the label gate.
        facts_passed_confidence / rejected_low_confidence: the threshold,
            among facts that passed the label gate.
        rejected_empty_content: passed both, but blank.
        duplicate_facts: repeated a stored fact or an earlier one of the batch.
        malformed_new_facts: dropped by normalisation (wrong types, over a limit).
        new_facts_planned: new facts proposed to the capacity gate.
        summaries_updated: sections changed.
        upload_facts_dropped / upload_removals / upload_sentences_removed:
            the upload clean-up: new facts dropped, stored facts removed and
            summary sentences cut for mentioning an upload event.
        confirmations / confirmations_refused: ``factsToReinforce`` entries
            applied, and refused (no reinforcement signal, wrong scope, no
            reason, unknown id, repeated id).
        stale_removals / stale_refused / stale_capped: staleness removals
            applied, refused (not a current candidate), and left out by the
            per-cycle cap.
        extensions / extensions_refused: staleness extensions applied and refused.
        contradiction_removals: contradiction removals applied (known after
            the capacity gate; see ``resolve_contradiction_removals``).
        unknown_removals: contradiction removals naming no stored fact.
    """

    facts_extracted: int = 0
    facts_passed_scope_gate: int = 0
    rejected_by_scope_gate: int = 0
    facts_passed_confidence: int = 0
    rejected_low_confidence: int = 0
    rejected_empty_content: int = 0
    duplicate_facts: int = 0
    malformed_new_facts: int = 0
    new_facts_planned: int = 0
    summaries_updated: int = 0
    upload_facts_dropped: int = 0
    upload_removals: int = 0
    upload_sentences_removed: int = 0
    confirmations: int = 0
    confirmations_refused: int = 0
    stale_removals: int = 0
    stale_refused: int = 0
    stale_capped: int = 0
    extensions: int = 0
    extensions_refused: int = 0
    contradiction_removals: int = 0
    unknown_removals: int = 0
    fact_rejections: FactRejections = FactRejections()
    summary_rejections: SummaryRejections = SummaryRejections()
    removal_rejections: RemovalRejections = RemovalRejections()

    def to_dict(self) -> dict[str, object]:
        """Plain counters; the rejections under ``scope_gate_rejections`` as in the original."""
        out: dict[str, object] = {}
        for item in fields(self):
            value = getattr(self, item.name)
            if isinstance(value, int):
                out[item.name] = value
        out["scope_gate_rejections"] = {
            "facts": _counts(self.fact_rejections),
            "summaries": _counts(self.summary_rejections),
            "removals": _counts(self.removal_rejections),
        }
        return out


def _counts(value: FactRejections | SummaryRejections | RemovalRejections) -> dict[str, int]:
    return {item.name: getattr(value, item.name) for item in fields(value)}


UpdateOutcome = Literal[
    "applied", "unchanged", "no-conversation", "nothing-new", "no-update", "rejected"
]
"""How an update ended:

* ``applied`` — the change set was committed (or, in a dry run, would be);
* ``unchanged`` — the model's answer was applied and changed nothing;
* ``no-conversation`` — after filtering, nothing to learn from (no user turn
  and assistant reply left, or no text); no model call was made;
* ``nothing-new`` — every message was already extracted (the watermark); no call;
* ``no-update`` — the answer held no memory update (see ``detail``); nothing changed;
* ``rejected`` — the answer was refused whole (see ``detail``): it removed
  facts while some new facts were malformed, or none of its fields had the
  type of the reply schema; nothing changed.
"""


@dataclass(frozen=True, slots=True)
class FactChange(Record):
    """A fact that left the library, and why.

    Attributes:
        fact_id: the fact.
        category: its category (as receipts record it).
        reason: ``capacity`` (evicted by the capacity gate), ``staleness``,
            ``contradiction`` or ``upload``.
        receipt_id: the receipt that records it (in either eviction mode).
    """

    fact_id: str
    category: str
    reason: str
    receipt_id: str | None


@dataclass(frozen=True, slots=True)
class ModelCall(Record):
    """The model call of an update: who answered and what it cost.

    Attributes:
        model: the model's label (never a secret).
        attempts: HTTP attempts the call took (retries included).
        prompt_tokens / completion_tokens: as reported, when reported.
        truncated: generation stopped at the token limit.
    """

    model: str
    attempts: int = 1
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    truncated: bool = False


@dataclass(frozen=True, slots=True)
class UpdateReport(Record):
    """What one update did (ids and counters only).

    Attributes:
        thread_id: the conversation.
        outcome: how it ended (see :data:`UpdateOutcome`).
        dry_run: computed without writing anything.
        detail: why there was no update (a :class:`~deermem.learning.answer.NoUpdate`
            reason, ``removals-with-malformed-facts`` or ``wrong-field-types``),
            else ``None``.
        signals: the signals detected in the messages sent to the model.
        messages_sent: messages with text the model was sent.
        messages_left_out: older messages with text that were not sent, because
            the conversation part of the prompt is capped at
            ``max_conversation_chars``; always the oldest ones.
        added: new facts stored (new facts the capacity gate evicted at once
            are in ``evicted`` instead); a relearned fact under its archived id.
        relearned: archived facts that came back because the answer said
            them again (see docs/regret.md); also in ``added`` when kept.
        confirmed: facts confirmed (``lastConfirmedAt`` and
            ``confirmationCount`` written).
        extended: facts whose staleness window was extended.
        summaries: summary sections changed, as ``group.section``.
        removed: facts removed by the update itself (staleness,
            contradiction, upload), with their receipts.
        evicted: facts the capacity gate evicted, lowest-ranked first, with
            the receipt.
        blocked_removals: contradiction removals not applied because their
            replacement did not make it into the library.
        revision: the user's document revision after the commit (``None``
            when nothing was committed).
        commit_attempts: transactions it took (a revision conflict makes
            the update reload and apply the same answer again, up to 3 times).
        model_call: the model call, when one was made.
        metrics: every gate counter.
        over_limits: entries of the model's answer dropped for exceeding a
            limit of the answer (:mod:`deermem.learning.answer`), by limit (also when the
            answer was refused whole).
        redacted: the kinds of secret replaced (never the values) in the
            conversation before it was sent to the model, and in what the
            update wrote (``redact_secrets``; docs/privacy.md).
    """

    thread_id: str
    outcome: UpdateOutcome
    dry_run: bool = False
    detail: str | None = None
    signals: tuple[str, ...] = ()
    messages_sent: int = 0
    messages_left_out: int = 0
    added: tuple[str, ...] = ()
    relearned: tuple[str, ...] = ()
    confirmed: tuple[str, ...] = ()
    extended: tuple[str, ...] = ()
    summaries: tuple[str, ...] = ()
    removed: tuple[FactChange, ...] = ()
    evicted: tuple[FactChange, ...] = ()
    blocked_removals: tuple[str, ...] = ()
    revision: int | None = None
    commit_attempts: int = 0
    model_call: ModelCall | None = None
    metrics: UpdateMetrics = field(default_factory=UpdateMetrics)
    over_limits: OverLimits = field(default_factory=OverLimits)
    redacted: tuple[str, ...] = ()

    # Its JSON form (camelCase keys; content-free): the fields, the headline counts before
    # the metrics.
    json_fields = (
        "thread_id",
        "outcome",
        "dry_run",
        "detail",
        "signals",
        "messages_sent",
        "messages_left_out",
        "added",
        "relearned",
        "confirmed",
        "extended",
        "summaries",
        "removed",
        "evicted",
        "blocked_removals",
        "revision",
        "commit_attempts",
        "model_call",
        "counts",
        "metrics",
        "over_limits",
        "redacted",
    )

    @property
    def committed(self) -> bool:
        """Whether this update wrote anything."""
        return self.outcome == "applied" and not self.dry_run

    @property
    def succeeded(self) -> bool:
        """Whether the conversation counts as extracted (the watermark may move)."""
        return self.outcome in ("applied", "unchanged", "no-conversation", "nothing-new")

    @property
    def answer_unusable(self) -> bool:
        """Whether the model answered but nothing in its answer could be used.

        Its text held no memory update (empty, too large, not JSON, or cut
        off before the update was complete) or the update was refused whole;
        nothing changed and the watermark stays, so the messages are offered
        again. ``deermem ingest`` exits with status 3 for it.
        """
        return self.outcome in ("no-update", "rejected")

    @property
    def rejected(self) -> int:
        """New facts refused before the capacity gate: malformed, by the label
        gate, below the confidence threshold, or blank."""
        m = self.metrics
        return (
            m.malformed_new_facts
            + m.rejected_by_scope_gate
            + m.rejected_low_confidence
            + m.rejected_empty_content
        )

    def counts(self) -> dict[str, int]:
        """The headline counters of the update."""
        return {
            "added": len(self.added),
            "relearned": len(self.relearned),
            "confirmed": len(self.confirmed),
            "extended": len(self.extended),
            "removed": len(self.removed),
            "evicted": len(self.evicted),
            "rejected": self.rejected,
            "duplicates": self.metrics.duplicate_facts,
            "blockedRemovals": len(self.blocked_removals),
            "overLimits": self.over_limits.total,
        }


@dataclass(frozen=True, slots=True)
class UpdateResult:
    """An update's report, and the facts it names (for display).

    Attributes:
        report: ids and counters only (see :class:`~deermem.learning.UpdateReport`).
        facts: every fact the report names — new and changed ones as
            planned, the others as they were before the update. These hold
            content; show them to the user, never log them.
    """

    report: UpdateReport
    facts: Mapping[str, Fact] = field(default_factory=dict)
