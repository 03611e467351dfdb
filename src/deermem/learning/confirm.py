"""Confirmation: when a fact counts as confirmed by the user, and what changes.

Confirmation is what lets ``hybrid-v1`` keep a 0.7 fact the user said
"exactly, keep doing that" about a week ago over a 0.9 fact nobody has
mentioned in six months. It is therefore guarded: a fact is confirmed —
``lastConfirmedAt = now``, ``confirmationCount + 1`` — only when **all** hold:

* a ``reinforcement`` signal was detected in the user's recent messages
  (the model alone cannot confirm anything);
* the model listed the fact's id in ``factsToReinforce`` with scope
  ``user`` and a non-empty reason;
* the id names a fact in the bucket.

The policy plays no part: ``lastConfirmedAt`` and ``confirmationCount`` are
facts about what the user said, recorded under every policy, and policies
differ only in how they rank them. So a deployment that runs ``confidence``
today can switch to ``hybrid-v1`` with its confirmation history. (The
original records confirmations only under ``hybrid-v1`` or shadow mode.)

Extracting a duplicate, injecting a fact into a prompt and finding it in a
search never confirm it. A confirmation also restarts the fact's staleness
clock, and because confirmations are applied first, a fact confirmed in a
cycle cannot be removed as stale in the same cycle.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from deermem.learning.responses import ReinforceEntry
from deermem.model import Fact, format_timestamp

__all__ = [
    "REINFORCEMENT_SIGNAL",
    "ConfirmationOutcome",
    "confirm_facts",
    "confirmation_allowed",
    "next_confirmation_count",
]

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


def next_confirmation_count(prior: object) -> int:
    """The count after one more confirmation: ``prior + 1``, or 1 when ``prior``
    is not a non-negative whole number (``3`` → 4, ``0`` → 1; ``True``, ``-1``,
    ``"3"``, ``None`` → 1)."""
    if isinstance(prior, bool) or not isinstance(prior, int) or prior < 0:
        return 1
    return prior + 1


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
