"""The storage contract: what every store offers, in terms of facts, not files.

Everything above :mod:`deermem.store` talks to a :class:`Store`; nothing
there knows about paths, so a later ``PostgresStore`` can implement the same
protocol. The embedded default is :class:`~deermem.store.MarkdownStore`.

A change is described by a :class:`ChangeSet` — facts to write or delete,
summary sections to set, archive entries to add or drop, receipts to append,
recall counts to restore, conversations marked as extracted, regret events
to record and shadow marks to set — and applied
by :meth:`StoreTransaction.commit` atomically, all of it: after a crash the
store holds the state before the commit or after it, never a mix; a commit
that raises changed nothing; a commit that returns has written every receipt
it was given.

Two ways to change data:

* optimistic — :meth:`Store.commit` with preconditions (``expected_revision``
  on the change set, a revision on each written fact);
* pessimistic — :meth:`Store.transaction`, which holds the user's lock while
  the caller reads a snapshot, decides (e.g. runs the capacity gate) and
  commits. Decisions that depend on the whole library, such as capacity,
  use this, so they need no retries however many writers compete.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from types import MappingProxyType
from typing import Final, Protocol

from deermem.model import Fact, Scope
from deermem.store.records import ArchiveEntry, EvictionReceipt, UsageEntry
from deermem.store.regret_records import RegretEvent, ShadowMark

__all__ = [
    "DOCUMENT_VERSION",
    "HISTORY_SECTIONS",
    "SUMMARY_GROUPS",
    "USER_SECTIONS",
    "ChangeSet",
    "CommitResult",
    "FactDelete",
    "FactWrite",
    "ScopeSnapshot",
    "Section",
    "Store",
    "StoreTransaction",
    "SummaryDocument",
    "SummaryKey",
]

DOCUMENT_VERSION: Final = "2.0"
USER_SECTIONS: Final = ("workContext", "personalContext", "topOfMind")
HISTORY_SECTIONS: Final = ("recentMonths", "earlierContext", "longTermBackground")
SUMMARY_GROUPS: Final[Mapping[str, tuple[str, ...]]] = {
    "user": USER_SECTIONS,
    "history": HISTORY_SECTIONS,
}

SummaryKey = tuple[str, str]
"""``(group, section)``, e.g. ``("user", "workContext")``."""


@dataclass(frozen=True, slots=True)
class Section:
    """One summary section of the user-global document.

    ``summary`` and ``updatedAt`` are text. ``extra`` holds what a stored
    section has besides: unknown keys, and a ``summary`` or ``updatedAt``
    that is not a string (the original accepts any JSON value there; its
    text here is what the original's prompt shows: ``str(value)``, or ``""``
    for an empty one). They are written back as they were read; a section
    that changes is replaced whole, as in the original.
    """

    summary: str = ""
    updatedAt: str = ""
    extra: Mapping[str, object] = field(default_factory=dict)

    @classmethod
    def from_value(cls, value: Mapping[str, object]) -> Section:
        """A section from its stored object (any values; see the class docstring)."""
        summary = value.get("summary", "")
        updated = value.get("updatedAt", "")
        extra = {
            key: item
            for key, item in value.items()
            if key not in ("summary", "updatedAt") or not isinstance(item, str)
        }
        return cls(
            summary=summary if isinstance(summary, str) else str(summary) if summary else "",
            updatedAt=updated if isinstance(updated, str) else str(updated) if updated else "",
            extra=MappingProxyType(extra),
        )

    def to_dict(self) -> dict[str, object]:
        return {"summary": self.summary, "updatedAt": self.updatedAt, **self.extra}


def _empty_sections(names: tuple[str, ...]) -> Mapping[str, Section]:
    return {name: Section() for name in names}


@dataclass(frozen=True, slots=True)
class SummaryDocument:
    """The user-global summaries (``memory.json``): never holds facts.

    ``revision`` grows by one with every commit of the user (any agent);
    ``version`` is ``"1.0"`` until the first commit writes the document.
    """

    version: str = "1.0"
    revision: int = 0
    lastUpdated: str = ""
    user: Mapping[str, Section] = field(default_factory=lambda: _empty_sections(USER_SECTIONS))
    history: Mapping[str, Section] = field(
        default_factory=lambda: _empty_sections(HISTORY_SECTIONS)
    )

    def section(self, key: SummaryKey) -> Section:
        group, name = key
        sections = self.user if group == "user" else self.history
        return sections.get(name, Section())

    def to_dict(self) -> dict[str, object]:
        return {
            "version": self.version,
            "revision": self.revision,
            "lastUpdated": self.lastUpdated,
            "user": {name: section.to_dict() for name, section in self.user.items()},
            "history": {name: section.to_dict() for name, section in self.history.items()},
        }


@dataclass(frozen=True)
class ScopeSnapshot:
    """A consistent view of one scope: the summaries and every active fact.

    Facts are ordered by creation time, then id, so every reader — and the
    capacity gate's tie-break by position — sees the same order.
    """

    scope: Scope
    summaries: SummaryDocument
    facts: tuple[Fact, ...]
    version: str
    """Changes whenever the scope may have changed; see :meth:`Store.version`."""

    @property
    def revision(self) -> int:
        return self.summaries.revision

    @cached_property
    def by_id(self) -> MappingProxyType[str, Fact]:
        """Facts by id (built on first use; read-only)."""
        return MappingProxyType({fact.id: fact for fact in self.facts})

    def get(self, fact_id: str) -> Fact | None:
        return self.by_id.get(fact_id)

    def __contains__(self, fact_id: object) -> bool:
        return fact_id in self.by_id


@dataclass(frozen=True, slots=True)
class FactWrite:
    """Write one fact.

    Attributes:
        fact: the fact as it should be stored; its ``scope`` is overwritten
            with the store's scope.
        create: ``True`` — the id must not exist yet (the fact is stored with
            its own ``revision``, normally 1); ``False`` — the fact must exist
            with ``fact.revision`` as its stored revision, and is stored with
            revision + 1 and ``updatedAt`` = the change set's clock if
            anything but those two fields changed (else nothing is written).
    """

    fact: Fact
    create: bool


@dataclass(frozen=True, slots=True)
class FactDelete:
    """Delete one fact; ``expected_revision`` (if given) must be its stored revision."""

    fact_id: str
    expected_revision: int | None = None


@dataclass(frozen=True, slots=True)
class ChangeSet:
    """Everything one commit changes in one scope.

    Attributes:
        now: the clock for ``updatedAt``, ``lastUpdated`` and section times.
        writes: facts to create or update.
        deletes: facts to delete.
        summaries: summary sections to set: a text (stamped with ``now``) or
            a whole :class:`Section` (kept as given, e.g. by an import).
        archive_puts: entries to add to (or replace in) the scope's archive.
        archive_deletes: fact ids whose archive entries go (restore, purge).
        receipts: eviction receipts, appended to the audit.
        expected_revision: if set, the user's document must still be at this
            revision (optimistic concurrency); else the commit applies to
            whatever is current.
        forget_in_audit: strip the deleted ids from earlier receipts, as the
            original does when it deletes facts physically (``eviction_mode:
            delete``). The archive keeps receipts intact.
        usage_restores: usage entries to put back (facts restored from the
            archive keep their recall history).
        watermarks: thread id → the mark of the last message extracted from
            that conversation (see :mod:`deermem.learning.watermark`), set by
            the commit that applied what was extracted.
        regret_events: regret events to record (see
            :mod:`deermem.store.regret_records`), with what caused them.
        shadow_marks: fact id → the shadow policy's mark to set on a fact
            of the library, or ``None`` to clear it.
    """

    now: datetime
    writes: tuple[FactWrite, ...] = ()
    deletes: tuple[FactDelete, ...] = ()
    summaries: Mapping[SummaryKey, str | Section] = field(default_factory=dict)
    archive_puts: tuple[ArchiveEntry, ...] = ()
    archive_deletes: tuple[str, ...] = ()
    receipts: tuple[EvictionReceipt, ...] = ()
    expected_revision: int | None = None
    forget_in_audit: bool = False
    usage_restores: Mapping[str, UsageEntry] = field(default_factory=dict)
    watermarks: Mapping[str, str] = field(default_factory=dict)
    regret_events: tuple[RegretEvent, ...] = ()
    shadow_marks: Mapping[str, ShadowMark | None] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not (
            self.writes
            or self.deletes
            or self.summaries
            or self.archive_puts
            or self.archive_deletes
            or self.receipts
            or self.watermarks
            or self.regret_events
            or self.shadow_marks
        )


@dataclass(frozen=True, slots=True)
class CommitResult:
    """What a commit did.

    Attributes:
        revision: the user's document revision after the commit.
        written: the facts as stored (final revisions), created or changed.
        deleted: ids of the facts deleted.
        changed: whether anything was written at all.
        version: the scope's version token after the commit.
    """

    revision: int
    written: tuple[Fact, ...]
    deleted: tuple[str, ...]
    changed: bool
    version: str


class StoreTransaction(Protocol):
    """One scope, locked: read a snapshot, decide, commit (possibly several times)."""

    @property
    def records_regret(self) -> bool:
        """Whether the store records regret events and shadow marks (see :class:`Store`)."""
        ...

    @property
    def snapshot(self) -> ScopeSnapshot:
        """The scope as of now (refreshed after each commit)."""
        ...

    def usage(self) -> Mapping[str, UsageEntry]:
        """The usage sidecar (fact id → entry); empty when absent or malformed."""
        ...

    def archived(self, fact_id: str) -> ArchiveEntry | None:
        """The archive entry of a fact, if it has one."""
        ...

    def archived_matches(
        self, contents: Sequence[str], now: datetime
    ) -> Mapping[str, ArchiveEntry]:
        """Archived facts that say what one of ``contents`` says (the duplicate rule).

        Keyed by :func:`~deermem.model.duplicate_key` of the
        content; entries past the archive's age limit do not count.

        Raises:
            CorruptMemoryFile: a matching archive entry cannot be read.
        """
        ...

    def shadow_marks(self) -> Mapping[str, ShadowMark]:
        """Facts of the library that the shadow policy would have evicted.

        Raises:
            CorruptMemoryFile: the marks cannot be read (never read as none).
        """
        ...

    def commit(self, changes: ChangeSet) -> CommitResult:
        """Apply a change set atomically (see :class:`ChangeSet`).

        Raises:
            CorruptMemoryFile: a file the commit must read (the audit, an
                archive entry) is malformed; nothing was changed.
            OSError: the file system refused; nothing was changed.
        """
        ...


class Store(Protocol):
    """A place where scopes of facts live. Implementations must be thread-safe."""

    @property
    def records_regret(self) -> bool:
        """Whether this store records regret events and shadow marks.

        A store that does not (yet) is never given any: the capacity gate
        and search leave them out, and ``Memory.regret`` says the store does
        not record them. Relearning works on every store.
        """
        ...

    def load(self, scope: Scope) -> ScopeSnapshot:
        """A consistent snapshot of one scope.

        Raises:
            CorruptMemoryFile: a canonical file cannot be read; nothing is
                treated as empty and nothing is overwritten.
        """
        ...

    def version(self, scope: Scope) -> str:
        """A cheap token that changes whenever the scope may have changed.

        Derived indexes (search) compare it with the token they were built
        at. Changes made to files behind the store's back need
        :meth:`reload`.
        """
        ...

    def transaction(self, scope: Scope) -> AbstractContextManager[StoreTransaction]:
        """Lock the scope's user and open a transaction on the scope."""
        ...

    def commit(self, scope: Scope, changes: ChangeSet) -> CommitResult:
        """Apply one change set in its own transaction."""
        ...

    def record_access(
        self,
        scope: Scope,
        fact_ids: Iterable[str],
        now: datetime,
        *,
        regret: Sequence[RegretEvent] = (),
    ) -> None:
        """Count a recall of each fact in the usage sidecar (heat decays, then +1).

        Ids without a stored fact are skipped. Never touches a fact itself.
        ``regret`` — the search's missed recalls and shadow recalls — is
        recorded in the same atomic change, even when no id is counted.

        Raises:
            CorruptMemoryFile: the regret events cannot be read; nothing changed.
        """
        ...

    def usage(self, scope: Scope) -> Mapping[str, UsageEntry]:
        """The usage sidecar of a scope."""
        ...

    def watermark(self, scope: Scope, thread_id: str) -> str | None:
        """The mark of the last message extracted from a conversation, or ``None``.

        Raises:
            CorruptMemoryFile: the stored mark cannot be read (never read as
                absent: that would extract, and confirm, the conversation again).
        """
        ...

    def audit(self, scope: Scope) -> tuple[EvictionReceipt, ...]:
        """The scope's receipts, oldest first.

        Raises:
            CorruptMemoryFile: the audit cannot be read (never read as empty).
        """
        ...

    def archived(self, scope: Scope, fact_id: str) -> ArchiveEntry | None:
        """The archive entry of one fact, or ``None``."""
        ...

    def archived_matches(
        self, scope: Scope, contents: Sequence[str], now: datetime
    ) -> Mapping[str, ArchiveEntry]:
        """As :meth:`StoreTransaction.archived_matches`, without the lock (dry runs)."""
        ...

    def archive_listing(self, scope: Scope, now: datetime) -> Mapping[str, str]:
        """Each archived fact's id and its ``archivedAt``, without reading the entries.

        For derived data that must follow the archive (the search index):
        an entry whose time changed was archived again. Entries past their
        age limit are left out.
        """
        ...

    def regret_events(self, scope: Scope) -> tuple[RegretEvent, ...]:
        """The scope's regret events, oldest first.

        Raises:
            CorruptMemoryFile: they cannot be read (never read as none).
        """
        ...

    def shadow_marks(self, scope: Scope) -> Mapping[str, ShadowMark]:
        """As :meth:`StoreTransaction.shadow_marks`, without the lock."""
        ...

    def archive(self, scope: Scope, now: datetime) -> tuple[ArchiveEntry, ...]:
        """The scope's archive, newest first, without entries past their age limit."""
        ...

    def purge(self, scope: Scope, fact_id: str) -> None:
        """Delete a fact's archive entry for good (even one too damaged to read); its receipts stay.

        Raises:
            FactNotFoundError: the archive has no entry for this id.
        """
        ...

    def reload(self, scope: Scope) -> ScopeSnapshot:
        """Forget cached state and read the scope from the source again."""
        ...

    def agents(self, user_id: str | None) -> tuple[str, ...]:
        """The agent buckets a user has, sorted (``None``: the single-user layout).

        For operations over everything a user owns, such as clearing it.
        """
        ...

    def scopes(self) -> tuple[Scope, ...]:
        """Every scope the store holds anything for (facts, archive, receipts, summaries).

        For listings (``deermem scopes``) and store-wide work such as
        rebuilding the search index; order is stable. What it cannot list is
        in :meth:`problems`, never left out silently.
        """
        ...

    def problems(self) -> tuple[str, ...]:
        """Each place that holds memory no scope can be read from, with why (one line each).

        A Markdown directory whose owner cannot be told, or that two user ids
        share (written before owners were recorded), or an agent directory
        that names no agent. Empty when all is well.
        """
        ...

    def search_index_location(self) -> str | os.PathLike[str]:
        """Where the search index derived from this store lives, ready to be opened.

        The store decides where derived data goes, so nothing above it
        builds paths: a file location (its directory created), or
        ``":memory:"`` for a store with no place for derived files. The
        index is rebuilt from the facts whenever it is missing or stale.

        Raises:
            OSError: the location cannot be prepared (a read-only root).
        """
        ...
