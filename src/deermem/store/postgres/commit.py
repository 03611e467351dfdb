"""The statements of one commit, inside the open and locked transaction.

:class:`CommitWriter` turns a planned change set (:func:`~deermem.store.plan.plan_changes`)
into rows: the facts, then the bookkeeping the Markdown store keeps in its
sidecars — recall counts dropped and restored, receipts appended (and, in
delete mode, deleted ids stripped from earlier ones) and trimmed to their
bound, regret events appended and trimmed to theirs, shadow marks set and
cleared, thread marks — then the archive with its bounds. The caller updates
the user's row and commits; until then nothing is visible to anyone. Last,
the search vectors of the texts the commit took out of the scope go.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import LiteralString

import deermem.store.postgres.rows as rows
from deermem.errors import CorruptMemoryFile
from deermem.model import Fact, Scope, duplicate_digest, format_timestamp
from deermem.store.plan import ChangePlan, beyond_bounds, strip_audit_events
from deermem.store.postgres.database import Connection
from deermem.store.protocol import ChangeSet, ScopeRecords
from deermem.store.records import (
    ArchiveEntry,
    RegretEvent,
    SummaryDocument,
    UsageEntry,
    content_key,
)

__all__ = [
    "Bounds",
    "CommitWriter",
    "append_regret",
    "archived_contents",
    "insert_archive",
    "library_holds",
    "put_usage",
    "release_vectors",
    "stored_records",
]


@dataclass(frozen=True, slots=True)
class Bounds:
    """What a commit keeps: receipts and regret events per agent, the archive's size and age.

    0 receipts or regret events writes none; an age of 0 sets no age limit.
    """

    audit_max_entries: int
    archive_max_entries: int
    archive_max_age_days: int
    regret_max_events: int


class CommitWriter:
    """The statements of one commit, in the open transaction (facts, bookkeeping, archive)."""

    def __init__(
        self,
        connection: Connection,
        scope: Scope,
        changes: ChangeSet,
        plan: ChangePlan,
        *,
        bounds: Bounds,
        database: str,
        library: Sequence[Fact] | None = None,
    ) -> None:
        """``library``: the scope's facts before the commit, when the caller has them
        (else the texts still held are asked of the database)."""
        self.bounds = bounds
        self.library = library
        self.database = database
        self.connection = connection
        self.scope = scope
        self.key = rows.user_key(scope)
        self.changes = changes
        self.plan = plan
        self.deleted = [fact.id for fact in plan.deleted]
        self.marks: dict[str, str] = {}
        self.dropped: set[str] = set()  # the archive entries its bounds removed
        self.unarchived: list[str] = []  # the texts of the archive entries it removed

    def anything(self, stored_marks: Mapping[str, str]) -> bool:
        """Whether the commit writes anything at all (remembering which marks moved)."""
        changes = self.changes
        self.marks = {
            thread_id: mark
            for thread_id, mark in changes.watermarks.items()
            if stored_marks.get(thread_id) != mark
        }
        appending = self.bounds.audit_max_entries > 0 and bool(changes.receipts)
        regret = self.bounds.regret_max_events > 0 and bool(changes.regret_events)
        return bool(
            self.plan.changed
            or appending
            or regret
            or changes.shadow_marks
            or self.marks
            or changes.usage_restores
            or (changes.forget_in_audit and self.deleted)
            or changes.records is not None
        )

    def new_user_row(self) -> uuid.UUID:
        """Create the user's row (revision 0, no summaries): the scope's rows refer to it."""
        commit_id = uuid.uuid4()
        self.connection.execute(
            "INSERT INTO deermem_users (user_id, revision, commit_id, summaries) "
            "VALUES (%s, 0, %s, %s)",
            (self.key, commit_id, rows.encode_summary_document(SummaryDocument())),
        )
        return commit_id

    def write(self) -> None:
        self._facts()
        self._usage()
        self._audit()
        append_regret(
            self.connection,
            self.key,
            self.scope.agent,
            self.changes.regret_events,
            self.bounds.regret_max_events,
        )
        self._shadow_marks()
        self._records()
        self._marks()
        self._archive()
        self._vectors()

    def _scope_params(self) -> tuple[str, str]:
        return self.key, self.scope.agent

    def _facts(self) -> None:
        if self.deleted:
            self.connection.execute(
                "DELETE FROM deermem_facts WHERE user_id = %s AND agent = %s AND fact_id = ANY(%s)",
                (*self._scope_params(), self.deleted),
            )
        if self.plan.written:
            with self.connection.cursor() as cursor:
                cursor.executemany(
                    "INSERT INTO deermem_facts (user_id, agent, fact_id, revision, document) "
                    "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (user_id, agent, fact_id) "
                    "DO UPDATE SET revision = EXCLUDED.revision, document = EXCLUDED.document",
                    [
                        (*self._scope_params(), fact.id, fact.revision, rows.encode_fact(fact))
                        for fact in self.plan.written
                    ],
                )

    def _usage(self) -> None:
        """The usage of deleted facts goes; that of restored facts comes back."""
        if self.deleted:
            self.connection.execute(
                "DELETE FROM deermem_usage WHERE user_id = %s AND agent = %s AND fact_id = ANY(%s)",
                (*self._scope_params(), self.deleted),
            )
        put_usage(self.connection, self.key, self.scope.agent, self.changes.usage_restores)

    def _audit(self) -> None:
        """Strip deleted ids from earlier receipts (delete mode), append, keep the newest."""
        if self.changes.forget_in_audit and self.deleted:
            self._forget_in_audit(set(self.deleted))
        bound = self.bounds.audit_max_entries
        if bound <= 0 or not self.changes.receipts:
            return
        with self.connection.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO deermem_receipts (user_id, agent, document) VALUES (%s, %s, %s)",
                [
                    (*self._scope_params(), rows.encode_json(receipt.to_dict()))
                    for receipt in self.changes.receipts
                ],
            )
        self.connection.execute(
            "DELETE FROM deermem_receipts WHERE user_id = %(user)s AND agent = %(agent)s "
            "AND position <= (SELECT position FROM deermem_receipts "
            "WHERE user_id = %(user)s AND agent = %(agent)s "
            "ORDER BY position DESC OFFSET %(bound)s LIMIT 1)",
            {"user": self.key, "agent": self.scope.agent, "bound": bound},
        )

    def _forget_in_audit(self, ids: set[str]) -> None:
        found = self.connection.execute(
            "SELECT position, document FROM deermem_receipts "
            "WHERE user_id = %s AND agent = %s ORDER BY position",
            self._scope_params(),
        ).fetchall()
        for position, document in found:
            label = rows.row_label(self.database, "deermem_receipts", self.scope, str(position))
            event = rows.decode_event(document, label)
            kept = strip_audit_events([event], ids)
            if not kept:
                self.connection.execute(
                    "DELETE FROM deermem_receipts WHERE user_id = %s AND agent = %s "
                    "AND position = %s",
                    (*self._scope_params(), position),
                )
            elif kept[0] != event:
                self.connection.execute(
                    "UPDATE deermem_receipts SET document = %s "
                    "WHERE user_id = %s AND agent = %s AND position = %s",
                    (rows.encode_json(kept[0]), *self._scope_params(), position),
                )

    def _shadow_marks(self) -> None:
        """Set the marks the change set names, clear those it maps to ``None``."""
        changes = self.changes.shadow_marks
        cleared = sorted(fact_id for fact_id, mark in changes.items() if mark is None)
        if cleared:
            self.connection.execute(
                "DELETE FROM deermem_shadow_marks "
                "WHERE user_id = %s AND agent = %s AND fact_id = ANY(%s)",
                (*self._scope_params(), cleared),
            )
        marks = sorted((fact_id, mark) for fact_id, mark in changes.items() if mark is not None)
        if not marks:
            return
        with self.connection.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO deermem_shadow_marks (user_id, agent, fact_id, document) "
                "VALUES (%s, %s, %s, %s) ON CONFLICT (user_id, agent, fact_id) "
                "DO UPDATE SET document = EXCLUDED.document",
                [
                    (*self._scope_params(), fact_id, rows.encode_json(mark.to_dict()))
                    for fact_id, mark in marks
                ],
            )

    def _records(self) -> None:
        """Replace the scope's receipts, regret events and shadow marks, each only if it differs.

        Never with appends to them in the same change set (plan_changes refuses).
        """
        records = self.changes.records
        if records is None:
            return
        stored = stored_records(self.connection, self.database, self.scope)
        logs = (
            ("deermem_receipts", records.events, stored.events),
            ("deermem_regret_events", records.regret, stored.regret),
        )
        for table, new, old in logs:
            if list(new) == list(old):
                continue
            self.connection.execute(
                f"DELETE FROM {table} WHERE user_id = %s AND agent = %s", self._scope_params()
            )
            for event in new:  # one by one: the positions follow the order given
                self.connection.execute(
                    f"INSERT INTO {table} (user_id, agent, document) VALUES (%s, %s, %s)",
                    (*self._scope_params(), rows.encode_json(event)),
                )
        if dict(records.shadow) != dict(stored.shadow):
            self.connection.execute(
                "DELETE FROM deermem_shadow_marks WHERE user_id = %s AND agent = %s",
                self._scope_params(),
            )
            with self.connection.cursor() as cursor:
                cursor.executemany(
                    "INSERT INTO deermem_shadow_marks (user_id, agent, fact_id, document) "
                    "VALUES (%s, %s, %s, %s)",
                    [
                        (*self._scope_params(), fact_id, rows.encode_json(mark))
                        for fact_id, mark in sorted(records.shadow.items())
                    ],
                )

    def _marks(self) -> None:
        if not self.marks:
            return
        stamp = format_timestamp(self.changes.now)
        with self.connection.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO deermem_threads (user_id, agent, thread_key, document) "
                "VALUES (%s, %s, %s, %s) ON CONFLICT (user_id, agent, thread_key) "
                "DO UPDATE SET document = EXCLUDED.document",
                [
                    (
                        *self._scope_params(),
                        rows.thread_key(thread_id),
                        rows.encode_mark(thread_id, mark, stamp),
                    )
                    for thread_id, mark in self.marks.items()
                ],
            )

    def _archive(self) -> None:
        """Put and remove entries; with puts and a clock, apply the archive's bounds."""
        changes = self.changes
        if not (changes.archive_puts or changes.archive_deletes):
            return
        leaving = [entry.fact_id for entry in changes.archive_puts] + list(changes.archive_deletes)
        gone = self.connection.execute(
            "DELETE FROM deermem_archive WHERE user_id = %s AND agent = %s AND fact_id = ANY(%s)"
            " RETURNING fact_id, document",
            (*self._scope_params(), leaving),
        ).fetchall()
        self.unarchived += archived_contents(self.database, self.scope, gone)
        if not changes.archive_puts:
            return
        insert_archive(self.connection, self.key, self.scope.agent, changes.archive_puts)
        order = [
            (fact_id, archived_at)
            for fact_id, archived_at in self.connection.execute(
                "SELECT fact_id, archived_at FROM deermem_archive "
                "WHERE user_id = %s AND agent = %s ORDER BY arrival",
                self._scope_params(),
            )
        ]
        doomed = beyond_bounds(
            order, changes.now, self.bounds.archive_max_entries, self.bounds.archive_max_age_days
        )
        self.dropped = doomed
        if doomed:
            gone = self.connection.execute(
                "DELETE FROM deermem_archive WHERE user_id = %s AND agent = %s "
                "AND fact_id = ANY(%s) RETURNING fact_id, document",
                (*self._scope_params(), sorted(doomed)),
            ).fetchall()
            self.unarchived += archived_contents(self.database, self.scope, gone)

    def _vectors(self) -> None:
        """Release the vectors of the texts the commit took out of the scope.

        A text goes with an edited fact's old version, a fact deleted, an
        archive entry removed (restored, deleted, replaced or dropped by the
        bounds) — unless the commit wrote it again (an evicted fact is in its
        archive entry) or a fact the commit left alone holds it. An archive
        entry it left alone is not asked: reading every entry at each commit
        would cost more than embedding again the rare entry whose text
        another one just gave up.
        """
        plan = self.plan
        gone = {fact.content for fact in (*plan.deleted, *plan.replaced.values())}
        gone.update(self.unarchived)
        gone.difference_update(fact.content for fact in plan.written)
        gone.difference_update(entry.fact.content for entry in self.changes.archive_puts)
        if not gone:
            return
        if self.library is None:
            held = library_holds(self.connection, self.key, self.scope.agent, gone)
        else:
            touched = {fact.id for fact in (*plan.written, *plan.deleted)}
            held = {fact.content for fact in self.library if fact.id not in touched}
        release_vectors(self.connection, self.key, self.scope.agent, gone - held)


def archived_contents(database: str, scope: Scope, found: Iterable[tuple[str, str]]) -> list[str]:
    """The texts of archive rows (fact id, document) read back; a row too damaged to
    read has none to give (its vector, if any, stays until the scope is erased)."""
    contents = []
    for fact_id, document in found:
        label = rows.row_label(database, "deermem_archive", scope, fact_id)
        try:
            contents.append(rows.decode_archive_entry(document, label, scope, fact_id).fact.content)
        except CorruptMemoryFile:
            continue
    return contents


def library_holds(
    connection: Connection, user: str, agent: str, texts: Collection[str]
) -> set[str]:
    """Which of ``texts`` a fact of the scope holds now (each fact's document read).

    The documents are read here, not by the database: PostgreSQL's JSON
    operators refuse a text holding U+0000 (``\\u0000``), which a fact may hold.
    A document that does not read holds none of them.
    """
    found = connection.execute(
        "SELECT document FROM deermem_facts WHERE user_id = %s AND agent = %s", (user, agent)
    )
    held = set()
    for (document,) in found:
        content = rows.fact_content(document)
        if content is not None and content in texts:
            held.add(content)
    return held


def release_vectors(connection: Connection, user: str, agent: str, texts: Iterable[str]) -> None:
    """Delete the scope's search vectors of ``texts``, whatever model made them: a
    text the scope no longer holds keeps nothing in ``deermem_vectors``."""
    keys = sorted({content_key(text) for text in texts})
    if keys:
        connection.execute(
            "DELETE FROM deermem_vectors WHERE user_id = %s AND agent = %s"
            " AND content_key = ANY(%s)",
            (user, agent, keys),
        )


def insert_archive(
    connection: Connection, user: str, agent: str, entries: Sequence[ArchiveEntry]
) -> None:
    """Add archive entries in this order: each arrives after the ones before it."""
    for entry in entries:  # one by one: the arrival numbers follow the order given
        connection.execute(
            "INSERT INTO deermem_archive "
            "(user_id, agent, fact_id, archived_at, document, content_digest) "
            "VALUES (%s, %s, %s, %s, %s, %s)",
            (
                user,
                agent,
                entry.fact_id,
                entry.archived_at,
                rows.encode_archive_entry(entry),
                duplicate_digest(entry.fact.content),
            ),
        )


def stored_records(connection: Connection, database: str, scope: Scope) -> ScopeRecords:
    """The scope's receipts, regret events and shadow marks as stored.

    Raises:
        CorruptMemoryFile: a row that is not JSON (named).
    """
    params = (rows.user_key(scope), scope.agent)

    def log(table: LiteralString) -> tuple[object, ...]:
        return tuple(
            rows.decode_event(document, rows.row_label(database, table, scope, str(position)))
            for position, document in connection.execute(
                f"SELECT position, document FROM {table} "
                "WHERE user_id = %s AND agent = %s ORDER BY position",
                params,
            )
        )

    shadow = {
        fact_id: rows.decode_event(
            document, rows.row_label(database, "deermem_shadow_marks", scope, fact_id)
        )
        for fact_id, document in connection.execute(
            "SELECT fact_id, document FROM deermem_shadow_marks WHERE user_id = %s AND agent = %s",
            params,
        )
    }
    # By fact id in Python's order, as the Markdown store's file holds them (not the
    # database's collation).
    return ScopeRecords(
        log("deermem_receipts"), log("deermem_regret_events"), dict(sorted(shadow.items()))
    )


def append_regret(
    connection: Connection, user: str, agent: str, events: Sequence[RegretEvent], bound: int
) -> None:
    """Append regret events, then keep the scope's newest ``bound`` (0: record none).

    Events already stored are never read: a row this deermem cannot read is
    kept as it is, as the Markdown store keeps an event it cannot read.
    """
    if bound <= 0 or not events:
        return
    with connection.cursor() as cursor:  # in order: the positions follow the events
        cursor.executemany(
            "INSERT INTO deermem_regret_events (user_id, agent, document) VALUES (%s, %s, %s)",
            [(user, agent, rows.encode_json(event.to_dict())) for event in events],
        )
    connection.execute(
        "DELETE FROM deermem_regret_events WHERE user_id = %(user)s AND agent = %(agent)s "
        "AND position <= (SELECT position FROM deermem_regret_events "
        "WHERE user_id = %(user)s AND agent = %(agent)s "
        "ORDER BY position DESC OFFSET %(bound)s LIMIT 1)",
        {"user": user, "agent": agent, "bound": bound},
    )


def put_usage(
    connection: Connection, user: str, agent: str, usage: Mapping[str, UsageEntry]
) -> None:
    """Write recall counts (replacing what a fact had)."""
    if not usage:
        return
    with connection.cursor() as cursor:
        cursor.executemany(
            "INSERT INTO deermem_usage (user_id, agent, fact_id, access_heat, access_count, "
            "last_accessed_at) VALUES (%s, %s, %s, %s, %s, %s) "
            "ON CONFLICT (user_id, agent, fact_id) DO UPDATE SET "
            "access_heat = EXCLUDED.access_heat, access_count = EXCLUDED.access_count, "
            "last_accessed_at = EXCLUDED.last_accessed_at",
            [
                (user, agent, fact_id, e.access_heat, e.access_count, e.last_accessed_at)
                for fact_id, e in usage.items()
            ],
        )
