"""What the capacity gate returns: kept facts, evicted facts and their scores."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, TypeVar

from deermem.policy.scoring import Scores, Signals, fact_id_of, named_components

if TYPE_CHECKING:
    from deermem.model import Fact

__all__ = ["CapacityDecision", "EvictedFact", "F", "FactScore"]

F = TypeVar("F", bound="Mapping[str, Any] | Fact")


class FactScore(NamedTuple):
    """A fact's policy score and the signals it was summed from."""

    score: float
    components: Mapping[str, float]


class EvictedFact(NamedTuple):
    """One fact the gate let go, with what is needed to explain why.

    Attributes:
        fact_id: the fact's id.
        category: its category (``context`` when it has none).
        score: its policy score.
        signals: under ``hybrid-v1``, the (confidence, confirmation freshness,
            access heat) the score was summed from; ``None`` under
            ``confidence``. Read them by name through :attr:`components`.
        rank: 1-based position in the policy's ranking (1 = best).
        margin: the lowest kept score minus this fact's score; positive when
            the fact simply scored lower than every survivor, negative when a
            reserved correction with a lower score kept its place. ``None``
            when nothing was kept (a cap of 0).
    """

    fact_id: str
    category: str
    score: float
    signals: Signals | None
    rank: int
    margin: float | None

    @property
    def components(self) -> dict[str, float]:
        """The signals the score was summed from, by name.

        Built when read: a decision over a large library evicts many facts,
        and most callers read only their ids.
        """
        return named_components(self.score, self.signals)


@dataclass(frozen=True, repr=False)
class CapacityDecision(Generic[F]):
    """What the capacity gate decided. Read-only.

    Attributes:
        kept: the surviving facts, the objects passed in, in rank order (input
            order when nothing had to go).
        evicted: the facts that must go, lowest-ranked first.
        reserved_correction_slots: slots actually held for corrections
            (always 0 under ``confidence``).
        policy: the name of the policy that decided.
        max_facts: the cap the decision was made for.
        offered: the facts passed in, in input order.
        scored: their scores, in the same order; ``None`` when the library
            was at or below the cap (nothing was scored). Read them by id
            through :attr:`scores`.
    """

    kept: tuple[F, ...]
    evicted: tuple[EvictedFact, ...]
    reserved_correction_slots: int
    policy: str
    max_facts: int
    offered: tuple[F, ...] = field(compare=False)
    scored: Scores | None = field(compare=False)

    @functools.cached_property
    def scores(self) -> Mapping[str, FactScore]:
        """Fact id → score and components for every fact scored.

        Built on first access: the store and the evaluation's receipts need
        only the evicted records, a dashboard may want every score.
        """
        scored = self.scored
        if scored is None:  # at or below the cap nothing was scored
            return {}
        return {
            fact_id_of(fact.get("id")): FactScore(scored.values[index], scored.components(index))
            for index, fact in enumerate(self.offered)
        }

    @property
    def occupancy(self) -> int:
        """How many facts were offered to the gate."""
        return len(self.offered)

    @property
    def kept_ids(self) -> tuple[str, ...]:
        return tuple(fact_id_of(fact.get("id")) for fact in self.kept)

    @property
    def evicted_ids(self) -> tuple[str, ...]:
        return tuple(item.fact_id for item in self.evicted)

    def __repr__(self) -> str:
        return (
            f"CapacityDecision(policy={self.policy!r}, max_facts={self.max_facts}, "
            f"kept={list(self.kept_ids)!r}, evicted={list(self.evicted_ids)!r}, "
            f"reserved_correction_slots={self.reserved_correction_slots})"
        )
