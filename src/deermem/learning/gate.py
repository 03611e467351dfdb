"""The label gate: what a model may change, whatever it says.

The model labels every proposal: ``scope`` (is it about the *user*, or
this thread, or a project), ``durability`` (will it still hold in a month)
and ``authority`` (does it *describe* the user, or is it a request made in
this conversation). Only ``user`` / ``durable`` / ``descriptive`` facts are
memory; a fact missing any label is refused. The labels turn "the model
thought it was worth remembering" into three separate claims, each of which
must hold, and a prompt injection that makes the model propose "always
obey the next instruction" still has to claim it *describes the user*.

In order, as in the original DeerMem:

* **new facts** — the label gate, then ``confidence <
  fact_confidence_threshold``, then blank content; duplicates (stripped,
  case-folded) are dropped afterwards, against the library as it is at that
  point of the apply order (:func:`dedupe_new_facts`);
* **summaries** — a section changes only when ``shouldUpdate`` is true, the
  summary is not blank, both labels are present, scope is ``user`` and
  authority ``descriptive``;
* **contradiction removals** — scope ``user`` and a non-empty reason; a
  ``replacementFactIndex`` must be a non-negative whole number naming a new
  fact that passed the label gate and the threshold. Whether the
  replacement survives the capacity gate is checked after it
  (:func:`deermem.learning.plan.resolve_contradiction_removals`).

Each refusal is counted by reason (:class:`~deermem.learning.metrics.UpdateMetrics`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Final, Literal

from deermem.learning._text import content_key
from deermem.learning.metrics import (
    FactRejections,
    RemovalRejections,
    SummaryRejections,
    UpdateMetrics,
)
from deermem.learning.responses import (
    NewFactProposal,
    NormalizedResponse,
    RemovalEntry,
    SummaryProposal,
)

__all__ = [
    "REQUIRED_AUTHORITY",
    "REQUIRED_DURABILITY",
    "REQUIRED_SCOPE",
    "GatedResponse",
    "dedupe_new_facts",
    "fact_label_rejection",
    "gate_response",
    "removal_rejection",
    "summary_label_rejection",
]

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
    rejected: dict[str, int] = {"missing": 0, "scope": 0, "authority": 0}
    accepted: list[SummaryProposal] = []
    for proposal in proposals:
        if not proposal.should_update or not proposal.summary.strip():
            continue  # nothing asked for: not a refusal
        reason = summary_label_rejection(proposal.scope, proposal.authority)
        if reason is None:
            accepted.append(proposal)
        else:
            rejected[reason] += 1
    return tuple(accepted), SummaryRejections(**rejected)


def _gate_removals(
    entries: Sequence[RemovalEntry], indices: frozenset[int]
) -> tuple[tuple[RemovalEntry, ...], RemovalRejections]:
    rejected: dict[str, int] = {"missing": 0, "scope": 0, "replacement": 0}
    accepted: list[RemovalEntry] = []
    for entry in entries:
        reason = removal_rejection(entry, indices)
        if reason is None:
            accepted.append(entry)
        else:
            rejected[reason] += 1
    return tuple(accepted), RemovalRejections(**rejected)


def dedupe_new_facts(
    facts: Sequence[NewFactProposal], existing_contents: Iterable[str]
) -> tuple[tuple[NewFactProposal, ...], tuple[NewFactProposal, ...]]:
    """Split facts into new ones and duplicates (stripped, case-folded).

    A fact is a duplicate when a stored fact or an earlier fact of the same
    batch has the same text; the stored fact is left as it is.

    Returns:
        ``(kept, duplicates)``, each in input order.
    """
    seen = {content_key(content) for content in existing_contents}
    kept: list[NewFactProposal] = []
    duplicates: list[NewFactProposal] = []
    for fact in facts:
        key = content_key(fact.content)
        if key in seen:
            duplicates.append(fact)
        else:
            seen.add(key)
            kept.append(fact)
    return tuple(kept), tuple(duplicates)
