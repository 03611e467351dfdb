"""Counters of one update: what the model proposed and what each gate refused.

The names of the first group and of the rejection counters are the
original DeerMem's extraction metrics, so dashboards built for it read
deermem's too. Counters only: no fact content, no ids, nothing a log must
not hold.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

__all__ = ["FactRejections", "RemovalRejections", "SummaryRejections", "UpdateMetrics"]


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
