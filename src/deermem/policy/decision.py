"""What the capacity gate returns: kept facts, evicted facts and their scores.

A decision over a large library is mostly read in part — the store needs the
kept facts and one receipt per evicted fact; a dashboard may want every score.
So :class:`CapacityDecision` holds the ranking and builds the evicted records
and the score table on first access, once. What it returns is the same either
way; only unread parts are never built.

When they are built, they are built column by column — ids, categories,
scores, component dicts, ranks and margins, each gathered in C or by one
comprehension — and then zipped into records: a receipt writer reads every
record, and thousands of per-record Python calls (a method per field, a
function per dict) were a large share of a decision at n = 10,000.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import repeat
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, TypeVar

from deermem.policy._batch import (
    ScoredLibrary,
    category_labels,
    id_column,
    label_columns,
    pick,
)

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
    """The scored library and the selection made from it (a NamedTuple: cheap to build).

    Attributes:
        order: input positions, best first.
        evicted_ranks: 0-based ranks (positions in ``order``) of the evicted
            facts, lowest-ranked first.
    """

    items: Sequence[Mapping[str, Any] | Fact]
    library: ScoredLibrary
    order: list[int]
    evicted_ranks: Sequence[int]
    lowest_kept: float | None

    def fact_ids(self, indices: Sequence[int]) -> Sequence[str]:
        """The ids of the facts at these input positions."""
        ids = self.library.ids
        if ids is not None:
            return pick(ids, indices)
        return id_column(pick(self.items, indices))

    def evicted_indices(self) -> tuple[int, ...]:
        """Input positions of the evicted facts, lowest-ranked first."""
        return pick(self.order, self.evicted_ranks)


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
        self._evicted: tuple[EvictedFact, ...] | None = None if ranking is not None else ()
        self._scores: Mapping[str, FactScore] | None = None if ranking is not None else {}

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
            self._evicted = _evicted_records(self._ranking)
        return self._evicted

    @property
    def scores(self) -> Mapping[str, FactScore]:
        if self._scores is None:
            assert self._ranking is not None
            ranking = self._ranking
            library = ranking.library
            everyone = range(len(library.scores))
            records = zip(library.scores, library.component_dicts(everyone), strict=True)
            self._scores = dict(
                zip(
                    ranking.fact_ids(everyone),
                    map(_NEW_TUPLE, repeat(FactScore), records),
                    strict=True,
                )
            )
        return self._scores

    @property
    def kept_ids(self) -> tuple[str, ...]:
        return tuple(id_column(self._kept))

    @property
    def evicted_ids(self) -> tuple[str, ...]:
        if self._evicted is not None:
            return tuple(item.fact_id for item in self._evicted)
        assert self._ranking is not None
        return tuple(self._ranking.fact_ids(self._ranking.evicted_indices()))

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


# ``tuple.__new__(cls, values)`` builds a NamedTuple instance from a ready tuple
# in C, skipping the class's Python-level ``__new__``: the same object, and
# ``map`` can call it without a Python frame per record.
_NEW_TUPLE: Any = tuple.__new__


def _evicted_records(ranking: Ranking) -> tuple[EvictedFact, ...]:
    """One :class:`EvictedFact` per evicted fact, lowest-ranked first.

    Each field is a column gathered in C (:func:`pick`) or by one
    comprehension, and ``zip`` feeds the rows to ``tuple.__new__``: no Python
    function runs per record.
    """
    library = ranking.library
    indices = ranking.evicted_indices()
    ids: Sequence[str]
    if library.ids is None or library.categories is None:
        ids, categories = label_columns(pick(ranking.items, indices))
    else:  # read by the scoring pass: no second visit to the facts
        ids, categories = (
            pick(library.ids, indices),
            category_labels(pick(library.categories, indices)),
        )
    scores = pick(library.scores, indices)
    lowest = ranking.lowest_kept
    columns = zip(
        ids,
        categories,
        scores,
        library.component_dicts(indices),
        [rank + 1 for rank in ranking.evicted_ranks],
        [None] * len(scores) if lowest is None else [lowest - score for score in scores],
        strict=True,
    )
    return tuple(map(_NEW_TUPLE, repeat(EvictedFact), columns))
