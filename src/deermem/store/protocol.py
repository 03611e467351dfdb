"""The storage contract: what every store offers, in terms of facts, not files.

Everything above :mod:`deermem.store` talks to a :class:`Store`; nothing
there knows about paths or tables. Two stores implement it: the Markdown
store (the embedded default) and the PostgreSQL store; one contract test
suite runs on both. What a store keeps besides facts is described in
:mod:`deermem.store.records`.

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

A store that can be copied whole (``deermem migrate``) also implements
:class:`Transfer`, over :class:`UserDump` values.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from types import MappingProxyType
from typing import NamedTuple, Protocol

from deermem.errors import CorruptMemoryFile
from deermem.model import NO_ENTRIES, Fact, Scope
from deermem.store.records import (
    ArchiveEntry,
    EvictionReceipt,
    RegretEvent,
    Section,
    ShadowMark,
    SummaryDocument,
    SummaryKey,
    ThreadMark,
    UsageEntry,
)

__all__ = [
    "ERASED_COUNTS",
    "ArchiveChange",
    "ChangeSet",
    "CommitResult",
    "FactDelete",
    "FactWrite",
    "MarkedSnapshot",
    "ScopeDump",
    "ScopeRecords",
    "ScopeSnapshot",
    "ShadowMarksRead",
    "Store",
    "StoreTransaction",
    "Transfer",
    "UserDump",
]


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


ShadowMarksRead = Mapping[str, ShadowMark] | CorruptMemoryFile | OSError
"""A scope's shadow marks (fact id → mark) as a read found them, or the error the read raised."""


class MarkedSnapshot(NamedTuple):
    """A scope's snapshot and its shadow marks, read together (:meth:`Store.load_with_marks`).

    Attributes:
        snapshot: the scope, as :meth:`Store.load` reads it.
        marks: fact id → the shadow policy's mark, as :meth:`Store.shadow_marks`
            reads them; or the error that reading them raised.
    """

    snapshot: ScopeSnapshot
    marks: ShadowMarksRead


class FactWrite(NamedTuple):
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


class FactDelete(NamedTuple):
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
            that conversation (see :mod:`deermem.learning.queue`), set by
            the commit that applied what was extracted.
        regret_events: regret events to record (see
            :mod:`deermem.store.records`), with what caused them.
        shadow_marks: fact id → the shadow policy's mark to set on a fact
            of the library, or ``None`` to clear it.
        records: the scope's receipts, regret events and shadow marks as
            stored, replacing the ones the store holds (``deermem redact``
            writes them back with their secrets replaced); a part equal to
            the stored one is not written. ``None`` keeps them. A change set
            with records appends no receipt, regret event or mark and
            forgets nothing in the audit (the two would disagree on the result).
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
    records: ScopeRecords | None = None

    @property
    def empty(self) -> bool:
        return self.records is None and not (
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


class ArchiveChange(NamedTuple):
    """What one commit did to its scope's archive: all that data derived from the
    archive (the search index's archive rows) needs to follow it without listing it.

    Attributes:
        previous_version: the scope's version token the commit was made on.
        added: the entries the commit wrote and kept, id → ``archivedAt``
            (an entry the archive's bounds dropped at once is not added).
        removed: the ids whose entries the commit removed — restored,
            deleted, or dropped by the archive's bounds — and did not write
            again. An id the archive did not hold may be named.
        bounded: whether the commit applied the archive's bounds at its time
            (every commit that archives something does). Only then is the
            archive after it what a listing shows, which leaves out entries
            past the age limit: without the bounds, an entry may have aged
            out since the last commit that applied them.
    """

    previous_version: str
    added: Mapping[str, str]
    removed: frozenset[str]
    bounded: bool

    @classmethod
    def of(
        cls,
        previous_version: str,
        puts: Sequence[ArchiveEntry],
        deletes: Iterable[str],
        dropped: Iterable[str],
    ) -> ArchiveChange:
        """The change of a commit that wrote ``puts``, removed ``deletes`` and whose
        bounds dropped ``dropped`` (the same rule on every store: the bounds
        apply when a commit archives something)."""
        dropped = set(dropped)
        added = {e.fact_id: e.archived_at for e in puts if e.fact_id not in dropped}
        removed = frozenset((set(deletes) | dropped) - added.keys())
        return cls(previous_version, added, removed, bounded=bool(puts))


class CommitResult(NamedTuple):
    """What a commit did.

    Attributes:
        revision: the user's document revision after the commit.
        written: the facts as stored (final revisions), created or changed.
        deleted: ids of the facts deleted.
        changed: whether anything was written at all.
        version: the scope's version token after the commit.
        redacted: the kinds of secret replaced in what the commit wrote
            (sorted; never the values), see :func:`deermem.store.plan.redact_changes`.
        archive: what the commit did to the archive; ``None`` where the
            committer does not say (a follower then lists the archive).
    """

    revision: int
    written: tuple[Fact, ...]
    deleted: tuple[str, ...]
    changed: bool
    version: str
    redacted: tuple[str, ...] = ()
    archive: ArchiveChange | None = None


class StoreTransaction(Protocol):
    """One scope, locked: read a snapshot, decide, commit (possibly several times)."""

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

    def archive(self, now: datetime) -> tuple[ArchiveEntry, ...]:
        """As :meth:`Store.archive`, read under this transaction's lock.

        On the transaction's own connection where the store has one: a
        transaction that read through the store instead would need a second
        pooled connection while it holds the first, and a pool of one (or as
        many such transactions as connections) would wait for itself.
        """
        ...

    def records(self) -> ScopeRecords:
        """As :meth:`Store.records`, read under this transaction's lock (see :meth:`archive`)."""
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

    def watermark(self, thread_id: str) -> str | None:
        """A conversation's mark as stored now, under this transaction's lock.

        An update reads it again here, just before it commits: if another
        update (another thread or process) applied the conversation while the
        model was being asked, the mark has moved and this one must not apply
        it a second time.

        Raises:
            CorruptMemoryFile: the stored mark cannot be read (never read as absent).
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
    def identity(self) -> str:
        """Which store this is: equal for every object of this process opened on the
        same files or database, different for any other store.

        Work a process holds for a store outside it (conversations queued by
        another memory on the same root) is found by it, so that erasing a
        user through one memory reaches them all. Never shown: it may be
        derived from a database URL's password.
        """
        ...

    def load(self, scope: Scope) -> ScopeSnapshot:
        """A consistent snapshot of one scope.

        Raises:
            CorruptMemoryFile: a canonical file cannot be read; nothing is
                treated as empty and nothing is overwritten.
        """
        ...

    def load_with_marks(self, scope: Scope) -> MarkedSnapshot:
        """:meth:`load` and :meth:`shadow_marks` in one read of the scope: what a
        search that is recorded needs (its results are checked against the marks).

        The scope's checks (an interrupted commit rolled back, directories that
        are another's refused) are made once for both.

        Raises:
            CorruptMemoryFile: as :meth:`load`; marks that cannot be read are
                returned as their error instead (a search goes on without them).
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

    def records(self, scope: Scope) -> ScopeRecords:
        """The scope's receipts, regret events and shadow marks as stored.

        Unreadable events and marks and unknown keys included, which
        :meth:`audit`, :meth:`regret_events` and :meth:`shadow_marks` skip:
        what ``deermem redact`` must look through.

        Raises:
            CorruptMemoryFile: a part is not what it must be (an audit that is
                not a list, a row that is not JSON).
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
        rebuilding the search index. The order is the same on every store:
        users by :func:`~deermem.model.listing_order` (the single-user layout
        first, then by the user id's code points), each user's agents by code
        point. What it cannot list is in :meth:`problems`, never left out silently.
        """
        ...

    def problems(self) -> tuple[str, ...]:
        """Each place that holds memory no scope can be read from, with why (one line each).

        A Markdown directory whose owner cannot be told, or that two user ids
        share (written before owners were recorded), or an agent directory
        that names no agent. Empty when all is well.
        """
        ...

    def erase_user(self, user_id: str) -> dict[str, int]:
        """Erase everything the store holds for a user: every agent's facts, the
        summaries, the archive, receipts, usage, regret events, shadow marks,
        conversation marks, journals and temporary files.

        Crash-safe: a process killed at any point leaves the user intact or
        erased at the next open, never half. Derived data (the search index)
        is the caller's to forget (:class:`deermem.recall.index.SearchIndex`);
        nothing of the user stays in the store's own files or rows.

        Returns:
            What was removed, by :data:`ERASED_COUNTS` (all 0 for a user the
            store does not hold), and ``searchRows`` for a store that keeps
            search rows of its own (PostgreSQL's vectors).
        """
        ...

    def holds_user(self, user_id: str) -> bool:
        """Whether the store holds anything of a user: ``False`` once the user is erased.

        Cheap (a stat or one indexed row): a search index that has just written
        a user's rows asks it, to undo rows an erase in another process raced
        past (:class:`deermem.recall.index.SearchIndex`).
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

    def stored_vectors(self, scope: Scope, model: str, keys: Sequence[str]) -> Mapping[str, bytes]:
        """The search vectors of model ``model`` the store keeps for these content keys.

        Vectors are derived data: a store whose search index is a file keeps
        them there and returns ``{}``; a store whose index lives in each
        process's memory (PostgreSQL) keeps them itself, so a new process
        does not embed every fact again.
        """
        ...

    def store_vectors(
        self, scope: Scope, model: str, vectors: Mapping[str, bytes], *, strict: bool = False
    ) -> None:
        """Keep search vectors (text → vector) of model ``model`` for the scope, by the
        texts' content keys (:func:`~deermem.store.records.content_key`).

        Never part of a commit (it is not the facts' data), and only for texts
        the scope still holds: a search embeds outside the user's lock, and a
        commit meanwhile may have taken a text out. A store with no place for
        them ignores them. Vectors are a cache, so a store that cannot write
        them now (read-only, its lock not had in time) may leave them to the
        next search; with ``strict`` (a reindex, whose point is that the store
        keeps them) it raises that error instead.
        """
        ...


# ---------------------------------------------------------------------------
# A user's whole memory as one value: what ``deermem migrate`` copies between stores
#
# A UserDump holds everything a store keeps for one user — the summary document
# (with its revision and ``lastUpdated``) and, per agent, the facts, recall
# counts, audit events, archive entries (in arrival order), thread marks, regret
# events and shadow marks — exactly as stored, so writing it into another store
# and dumping it from there gives the same value. Its ``document()`` is the
# comparable form ``deermem migrate`` verifies a copy with.
#
# A store that can be copied implements Transfer: list its users, dump one, and
# load one into a store that does not hold that user yet, in one atomic write.
# ---------------------------------------------------------------------------


ERASED_COUNTS = (
    "agents",
    "facts",
    "usage",
    "events",
    "archived",
    "marks",
    "regretEvents",
    "shadowMarks",
)
"""What :meth:`Store.erase_user` counts: the keys of :meth:`UserDump.counts`."""


class ScopeRecords(NamedTuple):
    """A scope's receipts, regret events and shadow marks, as stored.

    As stored means every event and mark as the store holds it, unreadable
    ones and unknown keys included (the original DeerMem's events keep keys
    deermem does not read): what :meth:`Store.records` reads and a
    :attr:`ChangeSet.records` writes back.

    Attributes:
        events: the audit's events, oldest first.
        regret: the regret events, oldest first.
        shadow: the shadow policy's marks, by fact id.
    """

    events: tuple[object, ...] = ()
    regret: tuple[object, ...] = ()
    shadow: Mapping[str, object] = NO_ENTRIES


class ScopeDump(NamedTuple):
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
    usage: Mapping[str, UsageEntry] = NO_ENTRIES
    events: tuple[object, ...] = ()
    archive: tuple[ArchiveEntry, ...] = ()
    marks: tuple[ThreadMark, ...] = ()
    regret: tuple[object, ...] = ()
    shadow: Mapping[str, object] = NO_ENTRIES

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


class UserDump(NamedTuple):
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
        """Every user the store holds anything for, in :func:`~deermem.model.listing_order`."""
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
