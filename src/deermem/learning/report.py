"""What one update did, as ids and counters: :class:`UpdateReport`.

The report is what :meth:`deermem.Memory.learn` returns (with the facts it names) and what
``deermem ingest --json`` prints. Like a receipt it holds **no content** —
fact ids, categories, receipt ids, section names and counters only — so it
can be logged, stored and shipped to a dashboard without leaking anything a
user said.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from deermem.learning.limits import OverLimits
from deermem.learning.metrics import UpdateMetrics
from deermem.model import Fact

__all__ = ["FactChange", "ModelCall", "UpdateOutcome", "UpdateReport", "UpdateResult"]

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
class FactChange:
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

    def to_dict(self) -> dict[str, object]:
        return {
            "factId": self.fact_id,
            "category": self.category,
            "reason": self.reason,
            "receiptId": self.receipt_id,
        }


@dataclass(frozen=True, slots=True)
class ModelCall:
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

    def to_dict(self) -> dict[str, object]:
        return {
            "model": self.model,
            "attempts": self.attempts,
            "promptTokens": self.prompt_tokens,
            "completionTokens": self.completion_tokens,
            "truncated": self.truncated,
        }


@dataclass(frozen=True, slots=True)
class UpdateReport:
    """What one update did (ids and counters only).

    Attributes:
        thread_id: the conversation.
        outcome: how it ended (see :data:`UpdateOutcome`).
        dry_run: computed without writing anything.
        detail: why there was no update (a :class:`~deermem.learning.NoUpdate`
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
            limit of :mod:`deermem.learning.limits`, by limit (also when the
            answer was refused whole).
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

    def to_dict(self) -> dict[str, object]:
        """The report as JSON-ready data (camelCase keys; content-free)."""
        return {
            "threadId": self.thread_id,
            "outcome": self.outcome,
            "dryRun": self.dry_run,
            "detail": self.detail,
            "signals": list(self.signals),
            "messagesSent": self.messages_sent,
            "messagesLeftOut": self.messages_left_out,
            "added": list(self.added),
            "relearned": list(self.relearned),
            "confirmed": list(self.confirmed),
            "extended": list(self.extended),
            "summaries": list(self.summaries),
            "removed": [change.to_dict() for change in self.removed],
            "evicted": [change.to_dict() for change in self.evicted],
            "blockedRemovals": list(self.blocked_removals),
            "revision": self.revision,
            "commitAttempts": self.commit_attempts,
            "modelCall": None if self.model_call is None else self.model_call.to_dict(),
            "counts": self.counts(),
            "metrics": self.metrics.to_dict(),
            "overLimits": self.over_limits.to_dict(),
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
