"""The PostgreSQL store seen whole, user by user (:class:`~deermem.store.protocol.Transfer`).

A dump reads one user in one ``REPEATABLE READ`` transaction (one snapshot
of the database, whatever other replicas commit meanwhile); a load writes
one user in one transaction under the user's lock, after checking that the
database holds nothing of that user yet. Rows are written with the same
encoders the store commits with; the archive in the dump's arrival order and
the receipts and regret events in theirs. Regret events and shadow marks are
copied as stored, those this deermem cannot read included, as the Markdown
store's copy keeps them.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING

from deermem.errors import ConfigError, CorruptMemoryFile
from deermem.model import Scope, listing_order
from deermem.store.postgres import rows
from deermem.store.postgres.commit import insert_archive, stored_records
from deermem.store.postgres.database import (
    Connection,
    holds_users,
    read_settings,
    recorded_in,
    write_settings,
)
from deermem.store.postgres.store import PostgresStore, agents_of, roll_back
from deermem.store.protocol import ScopeDump, UserDump
from deermem.store.records import SummaryDocument, ThreadMark, UsageEntry

if TYPE_CHECKING:
    from deermem.config import MemoryConfig

__all__ = ["PostgresTransfer"]


class PostgresTransfer:
    """Dump and load whole users of a :class:`PostgresStore`."""

    def __init__(self, store: PostgresStore) -> None:
        self.store = store

    @classmethod
    def open(cls, config: MemoryConfig, url: str) -> PostgresTransfer:
        """A transfer over the database at ``url``, with a store of its own (close it after)."""
        return cls(PostgresStore.from_config(config, url))

    def settings(self) -> dict[str, object]:
        """The settings the database records (``deermem_settings``; empty: none)."""
        with self.store._connection() as connection:
            return read_settings(connection, self.store.address)

    def keep_settings(self, settings: Mapping[str, object]) -> None:
        """Make ``settings`` (:func:`deermem.config.recorded_settings`' form) the database's record.

        A database that holds no user yet is a new store: its record is
        replaced. One that holds users keeps its own; the same settings are
        fine, others are refused.

        Raises:
            ConfigError: the database holds users and records other settings;
                nothing was changed.
        """
        address = self.store.address
        with self.store._connection() as connection, connection.transaction():
            if read_settings(connection, address) == dict(settings):
                return
            if holds_users(connection):
                raise ConfigError(
                    [
                        "the database already holds users and keeps other settings; nothing "
                        "was copied (migrate into a database that holds no user yet)"
                    ],
                    source=recorded_in(address),
                )
            write_settings(connection, settings)

    def users(self) -> tuple[str | None, ...]:
        with self.store._connection() as connection:
            found = connection.execute("SELECT user_id FROM deermem_users")
            return tuple(sorted((rows.user_of(key) for (key,) in found), key=listing_order))

    def dump_user(self, user_id: str | None) -> UserDump | None:
        store = self.store
        scope = Scope.of(user_id)
        key = rows.user_key(scope)
        with store._connection() as connection, connection.transaction():
            connection.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            row = connection.execute(
                "SELECT summaries FROM deermem_users WHERE user_id = %s", (key,)
            ).fetchone()
            if row is None:
                return None
            summaries = rows.decode_summary_document(row[0], store._label("users", scope))
            scopes = []
            for agent in agents_of(connection, key):
                dump = self._scope(connection, Scope.of(user_id, agent))
                if not dump.empty:
                    scopes.append(dump)
        return UserDump(user_id, summaries, tuple(scopes))

    def _scope(self, connection: Connection, scope: Scope) -> ScopeDump:
        store = self.store
        params = (rows.user_key(scope), scope.agent)
        where = "WHERE user_id = %s AND agent = %s"
        snapshot = store._read_scope(connection, scope)
        records = stored_records(connection, store.address, scope)
        archive = tuple(
            rows.decode_archive_entry(document, store._label("archive", scope, i), scope, i)
            for i, document in connection.execute(
                f"SELECT fact_id, document FROM deermem_archive {where} ORDER BY arrival", params
            )
        )
        marks = []
        for key, document in connection.execute(
            f"SELECT thread_key, document FROM deermem_threads {where}", params
        ):
            label = store._label("threads", scope, key)
            raw = rows.decode_event(document, label)
            if not isinstance(raw, dict) or not isinstance(raw.get("threadId"), str):
                raise CorruptMemoryFile(label, "a thread mark needs a 'threadId' string")
            thread_id = raw["threadId"]
            if rows.thread_key(thread_id) != key:
                raise CorruptMemoryFile(label, "the thread mark is stored under another key")
            stamp = raw.get("markedAt")
            marks.append(
                ThreadMark(
                    thread_id,
                    rows.decode_mark(document, label, thread_id),
                    stamp if isinstance(stamp, str) else "",
                )
            )
        return ScopeDump(
            agent=scope.agent,
            facts=snapshot.facts,
            usage=store._usage(connection, scope),
            events=records.events,
            archive=archive,
            marks=tuple(sorted(marks)),
            regret=records.regret,
            shadow=records.shadow,
        )

    def load_user(self, dump: UserDump) -> None:
        store = self.store
        scope = Scope.of(dump.user_id)
        key = rows.user_key(scope)
        with store._turn(scope) as wait, store._connection() as connection:
            store._begin_locked(connection, scope, wait)
            try:
                if _holds(connection, key):
                    raise FileExistsError(
                        f"{store.address}: the destination already holds user "
                        f"{dump.user_id!r}; migrate into an empty store"
                    )
                _insert_user(connection, key, dump.summaries)
                for scope_dump in dump.scopes:
                    _insert_scope(connection, key, scope_dump)
                connection.execute("COMMIT")
            except BaseException:
                roll_back(connection)
                raise
        store._cache.drop_user(dump.user_id)


def _holds(connection: Connection, key: str) -> bool:
    row = connection.execute("SELECT 1 FROM deermem_users WHERE user_id = %s", (key,)).fetchone()
    return row is not None


def _insert_user(connection: Connection, key: str, summaries: SummaryDocument) -> None:
    connection.execute(
        "INSERT INTO deermem_users (user_id, revision, commit_id, summaries) "
        "VALUES (%s, %s, %s, %s)",
        (key, summaries.revision, uuid.uuid4(), rows.encode_summary_document(summaries)),
    )


def _insert_scope(connection: Connection, key: str, dump: ScopeDump) -> None:
    agent = dump.agent
    with connection.cursor() as cursor:
        cursor.executemany(
            "INSERT INTO deermem_facts (user_id, agent, fact_id, revision, document) "
            "VALUES (%s, %s, %s, %s, %s)",
            [(key, agent, f.id, f.revision, rows.encode_fact(f)) for f in dump.facts],
        )
        cursor.executemany(
            "INSERT INTO deermem_usage (user_id, agent, fact_id, access_heat, access_count, "
            "last_accessed_at) VALUES (%s, %s, %s, %s, %s, %s)",
            [_usage_row(key, agent, fact_id, entry) for fact_id, entry in dump.usage.items()],
        )
        cursor.executemany(
            "INSERT INTO deermem_threads (user_id, agent, thread_key, document) "
            "VALUES (%s, %s, %s, %s)",
            [(key, agent, rows.thread_key(m.thread_id), rows.encode_mark(*m)) for m in dump.marks],
        )
        cursor.executemany(
            "INSERT INTO deermem_shadow_marks (user_id, agent, fact_id, document) "
            "VALUES (%s, %s, %s, %s)",
            [(key, agent, i, rows.encode_json(mark)) for i, mark in dump.shadow.items()],
        )
    # One by one, in order: the positions and arrival numbers keep the dump's order.
    for event in dump.events:
        connection.execute(
            "INSERT INTO deermem_receipts (user_id, agent, document) VALUES (%s, %s, %s)",
            (key, agent, rows.encode_json(event)),
        )
    for event in dump.regret:
        connection.execute(
            "INSERT INTO deermem_regret_events (user_id, agent, document) VALUES (%s, %s, %s)",
            (key, agent, rows.encode_json(event)),
        )
    insert_archive(connection, key, agent, dump.archive)


def _usage_row(
    key: str, agent: str, fact_id: str, entry: UsageEntry
) -> tuple[str, str, str, float, int, str]:
    return (key, agent, fact_id, entry.access_heat, entry.access_count, entry.last_accessed_at)
