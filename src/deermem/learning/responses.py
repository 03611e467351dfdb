"""What a normalised model answer holds: typed, bounded proposals.

These values are produced by :func:`deermem.learning.normalize.normalize_response`
and read by the gate and the planner. :meth:`NormalizedResponse.to_payload`
renders one back in the model's JSON shape, which normalises to the same
value (normalisation is idempotent).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, Literal

from deermem.learning.limits import OverLimits
from deermem.learning.state import SummaryKey

__all__ = [
    "NewFactProposal",
    "NormalizedResponse",
    "ReinforceEntry",
    "RejectedResponse",
    "RemovalEntry",
    "StaleExtension",
    "StaleRemoval",
    "SummaryProposal",
]

_INVALID_INDEX: Final = "invalid"


@dataclass(frozen=True, slots=True)
class SummaryProposal:
    """A summary section as the model proposed it (labels not yet checked)."""

    key: SummaryKey
    summary: str
    should_update: bool
    scope: str | None
    authority: str | None


@dataclass(frozen=True, slots=True)
class NewFactProposal:
    """A well-formed new fact (labels, threshold and duplicates not yet checked).

    Attributes:
        index: position in the normalised ``newFacts`` list, which is what a
            removal's ``replacementFactIndex`` refers to.
        content: as given (not stripped: blank content is the gate's to refuse).
        category: trimmed; ``context`` when it was empty or not a string.
        expected_valid_days: a whole number of at least 1, or ``None``.
    """

    index: int
    content: str
    category: str
    confidence: float
    scope: str | None
    durability: str | None
    authority: str | None
    source_error: str | None = None
    expected_valid_days: int | None = None


@dataclass(frozen=True, slots=True)
class ReinforceEntry:
    """A fact the model says the user just confirmed."""

    fact_id: str
    scope: str | None
    reason: str


@dataclass(frozen=True, slots=True)
class RemovalEntry:
    """A fact the model says the conversation contradicts.

    Attributes:
        replacement_index: ``replacementFactIndex`` when it is a whole number
            (possibly negative: the gate refuses those).
        replacement_given: the model gave an index at all; with
            ``replacement_index`` ``None`` it was not a whole number.
    """

    fact_id: str
    scope: str | None
    reason: str
    replacement_index: int | None = None
    replacement_given: bool = False


@dataclass(frozen=True, slots=True)
class StaleRemoval:
    """An aged fact the model proposes to remove."""

    fact_id: str
    reason: str


@dataclass(frozen=True, slots=True)
class StaleExtension:
    """An aged fact the model proposes to keep for ``extend_by_days`` more days."""

    fact_id: str
    extend_by_days: int
    reason: str


@dataclass(frozen=True, slots=True)
class NormalizedResponse:
    """Everything usable in a model's update, typed and bounded.

    Attributes:
        malformed_new_facts: new facts dropped as malformed, those with a
            field over its limit included (not compared).
        ignored: per list (``factsToRemove``, ``staleFactsToExtend`` ...),
            entries left out because they were not objects or had no usable
            id or day count (not compared).
        over_limits: entries left out because they exceeded a limit of
            :mod:`deermem.learning.limits`, by limit (not compared).
    """

    summaries: tuple[SummaryProposal, ...] = ()
    new_facts: tuple[NewFactProposal, ...] = ()
    reinforce: tuple[ReinforceEntry, ...] = ()
    remove: tuple[RemovalEntry, ...] = ()
    stale_remove: tuple[StaleRemoval, ...] = ()
    stale_extend: tuple[StaleExtension, ...] = ()
    malformed_new_facts: int = field(default=0, compare=False)
    ignored: Mapping[str, int] = field(default_factory=dict, compare=False)
    over_limits: OverLimits = field(default_factory=OverLimits, compare=False)

    def to_payload(self) -> dict[str, object]:
        """The response in the model's JSON shape (normalising it changes nothing)."""
        groups: dict[str, dict[str, object]] = {"user": {}, "history": {}}
        for proposal in self.summaries:
            group, name = proposal.key
            groups[group][name] = _drop_none(
                {
                    "summary": proposal.summary,
                    "shouldUpdate": proposal.should_update,
                    "scope": proposal.scope,
                    "authority": proposal.authority,
                }
            )
        return {
            "user": groups["user"],
            "history": groups["history"],
            "newFacts": [_fact_payload(fact) for fact in self.new_facts],
            "factsToReinforce": [
                _drop_none({"id": e.fact_id, "scope": e.scope, "reason": e.reason})
                for e in self.reinforce
            ],
            "factsToRemove": [_removal_payload(entry) for entry in self.remove],
            "staleFactsToRemove": [
                {"id": e.fact_id, "reason": e.reason} for e in self.stale_remove
            ],
            "staleFactsToExtend": [
                {"id": e.fact_id, "extend_by_days": e.extend_by_days, "reason": e.reason}
                for e in self.stale_extend
            ],
        }


@dataclass(frozen=True, slots=True)
class RejectedResponse:
    """A response refused whole, so that nothing of it is applied.

    Attributes:
        reason: ``removals-with-malformed-facts`` (it removes facts while
            some new facts were malformed), or ``wrong-field-types`` (none of
            its fields has the type the reply schema gives it: not an update
            that can be read at all).
        malformed_new_facts: how many new facts were malformed (``-1`` when
            ``newFacts`` was not a list at all).
        removals: how many removals it asked for.
        over_limits: entries that exceeded a limit (facts over a length limit
            are among the malformed ones).
    """

    reason: Literal["removals-with-malformed-facts", "wrong-field-types"]
    malformed_new_facts: int
    removals: int
    over_limits: OverLimits = field(default_factory=OverLimits)


def _drop_none(values: dict[str, object]) -> dict[str, object]:
    return {key: value for key, value in values.items() if value is not None}


def _fact_payload(fact: NewFactProposal) -> dict[str, object]:
    return _drop_none(
        {
            "content": fact.content,
            "category": fact.category,
            "confidence": fact.confidence,
            "scope": fact.scope,
            "durability": fact.durability,
            "authority": fact.authority,
            "sourceError": fact.source_error,
            "expected_valid_days": fact.expected_valid_days,
        }
    )


def _removal_payload(entry: RemovalEntry) -> dict[str, object]:
    index: object = entry.replacement_index
    if entry.replacement_given and index is None:
        index = _INVALID_INDEX
    return _drop_none(
        {
            "id": entry.fact_id,
            "scope": entry.scope,
            "reason": entry.reason,
            "replacementFactIndex": index,
        }
    )
