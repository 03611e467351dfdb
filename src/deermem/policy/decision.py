"""What the capacity gate returns: kept facts, evicted facts and their scores.

A decision over a large library is mostly read in part — the store needs the
kept facts and one receipt per evicted fact; a dashboard may want every score.
So :class:`CapacityDecision` holds the ranking and builds the evicted records
and the score table on first access, once. What it returns is the same either
way; only unread parts are never built.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, TypeVar

from deermem.policy._batch import ScoredLibrary, fact_id_of, field_of

if TYPE_CHECKING:
    from deermem.model.fact import Fact

__all__ = ["CapacityDecision", "EvictedFact", "F", "FactScore", "Ranking"]

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
        components: the signals the score was summed from.
        rank: 1-based position in the policy's ranking (1 = best).
        margin: the lowest kept score minus this fact's score; positive when
            the fact simply scored lower than every survivor, negative when a
            reserved correction with a lower score kept its place. ``None``
            when nothing was kept (a cap of 0).
    """

    fact_id: str
    category: str
    score: float
    components: Mapping[str, float]
    rank: int
    margin: float | None


class Ranking(NamedTuple):
    """The scored library and the selection made from it.

    Attributes:
        order: input positions, best first.
        evicted_ranks: 0-based ranks (positions in ``order``) of the evicted
            facts, lowest-ranked first.
    """

    items: Sequence[Mapping[str, Any] | Fact]
    library: ScoredLibrary
    order: list[int]
    evicted_ranks: list[int]
    lowest_kept: float | None

    def fact_id(self, index: int) -> str:
        ids = self.library.ids
        return ids[index] if ids is not None else fact_id_of(self.items[index])


class CapacityDecision(Generic[F]):
    """What the capacity gate decided. Read-only.

    Attributes:
        kept: the surviving facts, the objects passed in, in rank order (input
            order when nothing had to go).
        evicted: the facts that must go, lowest-ranked first.
        scores: fact id → score and components for every fact scored; empty
            when the library was at or below the cap (nothing was scored).
        reserved_correction_slots: slots actually held for corrections
            (always 0 under ``confidence``).
        policy: the policy that decided.
        max_facts: the cap the decision was made for.
    """

    __slots__ = ("_evicted", "_kept", "_max_facts", "_policy", "_ranking", "_reserved", "_scores")

    def __init__(
        self,
        *,
        kept: tuple[F, ...],
        reserved_correction_slots: int,
        policy: str,
        max_facts: int,
        ranking: Ranking | None,
    ) -> None:
        self._kept = kept
        self._reserved = reserved_correction_slots
        self._policy = policy
        self._max_facts = max_facts
        self._ranking = ranking
        self._evicted: tuple[EvictedFact, ...] | None = None if ranking else ()
        self._scores: Mapping[str, FactScore] | None = None if ranking else {}

    @property
    def kept(self) -> tuple[F, ...]:
        return self._kept

    @property
    def reserved_correction_slots(self) -> int:
        return self._reserved

    @property
    def policy(self) -> str:
        return self._policy

    @property
    def max_facts(self) -> int:
        return self._max_facts

    @property
    def evicted(self) -> tuple[EvictedFact, ...]:
        if self._evicted is None:
            assert self._ranking is not None
            self._evicted = tuple(_evicted_records(self._ranking))
        return self._evicted

    @property
    def scores(self) -> Mapping[str, FactScore]:
        if self._scores is None:
            assert self._ranking is not None
            ranking = self._ranking
            library = ranking.library
            self._scores = {
                ranking.fact_id(index): FactScore(score, library.components(index))
                for index, score in enumerate(library.scores)
            }
        return self._scores

    @property
    def kept_ids(self) -> tuple[str, ...]:
        return tuple(fact_id_of(fact) for fact in self._kept)

    @property
    def evicted_ids(self) -> tuple[str, ...]:
        if self._evicted is not None:
            return tuple(item.fact_id for item in self._evicted)
        assert self._ranking is not None
        ranking = self._ranking
        order = ranking.order
        return tuple(ranking.fact_id(order[rank]) for rank in ranking.evicted_ranks)

    @property
    def occupancy(self) -> int:
        """How many facts were offered to the gate."""
        if self._ranking is None:
            return len(self._kept)
        return len(self._ranking.items)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CapacityDecision):
            return NotImplemented
        return self._key() == other._key()

    __hash__ = None  # type: ignore[assignment]  # mutable-looking contents; compare, don't hash

    def _key(self) -> tuple[object, ...]:
        return (self._kept, self.evicted, self._reserved, self._policy, self._max_facts)

    def __repr__(self) -> str:
        return (
            f"CapacityDecision(policy={self._policy!r}, max_facts={self._max_facts}, "
            f"kept={list(self.kept_ids)!r}, evicted={list(self.evicted_ids)!r}, "
            f"reserved_correction_slots={self._reserved})"
        )


def _evicted_records(ranking: Ranking) -> Iterator[EvictedFact]:
    library = ranking.library
    scores = library.scores
    lowest = ranking.lowest_kept
    order, items = ranking.order, ranking.items
    build = tuple.__new__  # skips NamedTuple's Python-level __new__: same tuple, faster
    for rank in ranking.evicted_ranks:
        index = order[rank]
        score = scores[index]
        category = field_of(items[index], "category")
        yield build(
            EvictedFact,
            (
                ranking.fact_id(index),
                category if isinstance(category, str) and category else "context",
                score,
                library.components(index),
                rank + 1,
                None if lowest is None else lowest - score,
            ),
        )
