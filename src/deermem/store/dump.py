"""A user's whole memory as one value: what ``deermem migrate`` copies between stores.

A :class:`UserDump` holds everything a store keeps for one user — the
summary document (with its revision and ``lastUpdated``) and, per agent,
the facts, recall counts, audit events, archive entries (in arrival order),
thread marks, regret events and shadow marks — exactly as stored, so writing
it into another store and dumping it from there gives the same value. Its
:meth:`UserDump.document` is the comparable form ``deermem migrate`` verifies
a copy with.

A store that can be copied implements :class:`Transfer`: list its users,
dump one, and load one into a store that does not hold that user yet, in one
atomic write.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from deermem.model import Fact
from deermem.store.markdown.marks import ThreadMark
from deermem.store.protocol import SummaryDocument
from deermem.store.records import ArchiveEntry, UsageEntry

__all__ = ["ScopeDump", "ThreadMark", "Transfer", "UserDump"]


@dataclass(frozen=True)
class ScopeDump:
    """Everything one agent of a user holds.

    Attributes:
        agent: the agent bucket.
        facts: the active facts, in the store's order (creation time, then id).
        usage: recall counts by fact id.
        events: the audit's events as stored (receipts, and events the
            original DeerMem wrote), oldest first.
        archive: the archive's entries in the order they arrived.
        marks: the conversations' marks, by thread id.
        regret: the regret events as stored, oldest first (see docs/regret.md).
        shadow: the shadow policy's marks as stored, by fact id.
    """

    agent: str
    facts: tuple[Fact, ...] = ()
    usage: Mapping[str, UsageEntry] = field(default_factory=dict)
    events: tuple[object, ...] = ()
    archive: tuple[ArchiveEntry, ...] = ()
    marks: tuple[ThreadMark, ...] = ()
    regret: tuple[object, ...] = ()
    shadow: Mapping[str, object] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not (
            self.facts
            or self.usage
            or self.events
            or self.archive
            or self.marks
            or self.regret
            or self.shadow
        )

    def document(self) -> dict[str, object]:
        return {
            "facts": [fact.to_dict() for fact in self.facts],
            "usage": {key: entry.to_dict() for key, entry in sorted(self.usage.items())},
            "events": list(self.events),
            "archive": [entry.to_dict() for entry in self.archive],
            "marks": [mark._asdict() for mark in self.marks],
            "regret": list(self.regret),
            "shadowMarks": dict(sorted(self.shadow.items())),
        }


@dataclass(frozen=True)
class UserDump:
    """Everything a store holds for one user (``None``: the single-user layout)."""

    user_id: str | None
    summaries: SummaryDocument
    scopes: tuple[ScopeDump, ...]

    def document(self) -> dict[str, object]:
        """The dump as plain data: two stores hold the same user exactly when these are equal."""
        return {
            "userId": self.user_id,
            "summaries": self.summaries.to_dict(),
            "agents": {scope.agent: scope.document() for scope in self.scopes},
        }

    def counts(self) -> dict[str, int]:
        """How much the dump holds, for reports (no content)."""
        return {
            "agents": len(self.scopes),
            "facts": sum(len(s.facts) for s in self.scopes),
            "usage": sum(len(s.usage) for s in self.scopes),
            "events": sum(len(s.events) for s in self.scopes),
            "archived": sum(len(s.archive) for s in self.scopes),
            "marks": sum(len(s.marks) for s in self.scopes),
            "regretEvents": sum(len(s.regret) for s in self.scopes),
            "shadowMarks": sum(len(s.shadow) for s in self.scopes),
        }


class Transfer(Protocol):
    """A store seen whole, user by user: what ``deermem migrate`` reads and writes."""

    def users(self) -> tuple[str | None, ...]:
        """Every user the store holds anything for."""
        ...

    def dump_user(self, user_id: str | None) -> UserDump | None:
        """Everything held for one user (scopes with nothing in them left out), or ``None``."""
        ...

    def load_user(self, dump: UserDump) -> None:
        """Write a user whole, in one atomic commit.

        Raises:
            FileExistsError: the store already holds something for this user;
                nothing was written.
        """
        ...
