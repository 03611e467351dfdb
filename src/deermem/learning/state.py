"""The memory an update starts from: summary sections and the bucket's facts.

The update functions read the current memory but never the store, so they
take it as a value. :class:`MemoryState` is that value. The store's own
snapshot converts into it without copying facts (:meth:`MemoryState.from_summaries`
accepts anything with ``user`` and ``history`` mappings of sections, which is
the shape of the store's summary document).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol

from deermem.model import Fact

__all__ = [
    "HISTORY_SECTIONS",
    "SUMMARY_KEYS",
    "USER_SECTIONS",
    "MemoryState",
    "SectionLike",
    "SummaryKey",
    "SummarySection",
]

USER_SECTIONS: Final = ("workContext", "personalContext", "topOfMind")
HISTORY_SECTIONS: Final = ("recentMonths", "earlierContext", "longTermBackground")

SummaryKey = tuple[str, str]
"""``(group, section)``, e.g. ``("user", "workContext")``."""

SUMMARY_KEYS: Final[tuple[SummaryKey, ...]] = tuple(
    [("user", name) for name in USER_SECTIONS] + [("history", name) for name in HISTORY_SECTIONS]
)


class SectionLike(Protocol):
    """Anything with a section's two fields (the store's ``Section`` is one)."""

    @property
    def summary(self) -> str: ...

    @property
    def updatedAt(self) -> str: ...  # the stored key's name


class _SummaryDocumentLike(Protocol):
    @property
    def user(self) -> Mapping[str, SectionLike]: ...

    @property
    def history(self) -> Mapping[str, SectionLike]: ...


@dataclass(frozen=True, slots=True)
class SummarySection:
    """One summary section: its text and when it last changed."""

    summary: str = ""
    updatedAt: str = ""  # the stored key's name


@dataclass(frozen=True, slots=True)
class MemoryState:
    """One bucket's memory as an update sees it.

    Attributes:
        facts: the bucket's facts, in the store's order (the capacity gate
            breaks ties by position, so order matters).
        summaries: the six summary sections; a missing one is empty.
    """

    facts: tuple[Fact, ...] = ()
    summaries: Mapping[SummaryKey, SectionLike] = field(default_factory=dict)

    @classmethod
    def from_summaries(cls, document: _SummaryDocumentLike, facts: Sequence[Fact]) -> MemoryState:
        """Build a state from a summary document with ``user``/``history`` mappings."""
        summaries: dict[SummaryKey, SectionLike] = {}
        for group, sections in (("user", document.user), ("history", document.history)):
            for name, section in sections.items():
                summaries[(group, name)] = section
        return cls(facts=tuple(facts), summaries=summaries)

    def section(self, key: SummaryKey) -> SectionLike:
        """The section under ``key``; an empty one when it does not exist."""
        return self.summaries.get(key) or SummarySection()

    def sections(self) -> Iterator[tuple[SummaryKey, SectionLike]]:
        """The six known sections in their canonical order."""
        for key in SUMMARY_KEYS:
            yield key, self.section(key)
