"""``PostgresStore``: the :class:`~deermem.store.Store` protocol on PostgreSQL, for many replicas.

Every process — on one machine or many — opens the same database; what one
commits, the next read of any other sees. What this class guarantees, and how:

* **one transaction per commit** — a change set's facts, summaries,
  receipts, archive changes, usage drops and restores, regret events,
  shadow marks and thread marks are written between one ``BEGIN`` and one
  ``COMMIT``: all of them or none; a search's recall counts and regret
  events likewise. A commit that raises was rolled back by the server (a
  lost connection, a statement timeout, a restart), so a retry is a new
  attempt; a commit that returns is durable.
* **one writer per user** — :meth:`PostgresStore.transaction` takes a
  transaction-scoped advisory lock on the user before it reads anything, so
  the capacity gate decides over the current library however many writers
  on however many machines compete, and the cap holds. The lock goes with
  the transaction: a writer that dies releases it with its connection.
  Within a process a user's writers first wait for their turn, before they
  take a pooled connection, so the writers waiting for one user hold one
  connection, never the pool other users need.
* **optimistic revisions** — a change set's preconditions (fact revisions,
  the document revision) are checked under that lock, with the same errors
  as the Markdown store's (the planning code is shared:
  :func:`~deermem.store.plan.plan_changes`).
* **version tokens** — each user row holds a revision and a commit id that
  changes with every commit (and with a purge, which changes the archive
  alone, so other replicas' search indexes follow it); ``version()`` is one
  indexed read of it. A snapshot is cached per process while the token is
  unchanged, so a warm load costs one round trip; the search index of each
  process is rebuilt for a scope whenever the token moved (see
  docs/postgres.md).

Connections come from a psycopg pool and are checked before each use, so a
server restart costs the connections it broke, never a request. Every
driver error reaches callers as :class:`~deermem.DatabaseError`; the
database is named by its address without the password, here and in the repr.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from datetime import datetime
from typing import TYPE_CHECKING, Final, LiteralString

import psycopg
from psycopg import sql
from psycopg_pool import ConnectionPool

import deermem.store.postgres.rows as rows
from deermem.config import redact_url, with_recorded_settings
from deermem.errors import (
    CorruptMemoryFile,
    DatabaseReadOnly,
    FactNotFoundError,
    StoreLockTimeout,
)
from deermem.model import (
    DEFAULT_ACCESS_HALF_LIFE_DAYS,
    DEFAULT_AGENT,
    Fact,
    Scope,
    duplicate_digest,
    duplicate_key,
    is_fact_id,
    listing_order,
)
from deermem.store.plan import (
    ScopeCache,
    count_recalls,
    newest_first,
    patched_snapshot,
    plan_changes,
    redacted_changes,
    sort_facts,
)
from deermem.store.postgres.commit import (
    Bounds,
    CommitWriter,
    append_regret,
    archived_contents,
    library_holds,
    put_usage,
    release_vectors,
    stored_records,
)
from deermem.store.postgres.database import (
    CLIENT_ENCODING,
    READ_COMMITTED,
    Connection,
    address_secrets,
    check_address,
    check_schema,
    connect,
    database_settings,
    read_settings,
    recorded_in,
    settle,
    translated,
)
from deermem.store.protocol import (
    ERASED_COUNTS,
    ArchiveChange,
    ChangeSet,
    CommitResult,
    MarkedSnapshot,
    ScopeRecords,
    ScopeSnapshot,
    ShadowMarksRead,
)
from deermem.store.records import (
    ArchiveEntry,
    EvictionReceipt,
    RegretEvent,
    ShadowMark,
    SummaryDocument,
    UsageEntry,
    content_key,
    usable_vector,
)
from deermem.store.turns import FairTurn

if TYPE_CHECKING:
    from deermem.config import MemoryConfig

_log = logging.getLogger("deermem.store")

__all__ = ["PostgresStore", "PostgresTransaction", "agents_of", "roll_back"]

_ABSENT: Final = "pg:0"
# Every part of a change set this store writes. A part added to ChangeSet later
# is refused until it is written here too, rather than dropped without a word.
_WRITTEN: Final = frozenset(
    {
        "now",
        "writes",
        "deletes",
        "summaries",
        "archive_puts",
        "archive_deletes",
        "receipts",
        "expected_revision",
        "forget_in_audit",
        "usage_restores",
        "watermarks",
        "regret_events",
        "shadow_marks",
        "records",
    }
)
_MEMORY: Final = ":memory:"
_memory_log = logging.getLogger("deermem.memory")  # what a memory's search says
_LOCK_NAMESPACE: Final = b"deermem user lock\x1f"

ARCHIVED_MATCHES: Final = (
    "SELECT fact_id, document FROM deermem_archive WHERE user_id = %s AND agent = %s "
    "AND (content_digest = ANY(%s) OR content_digest IS NULL) ORDER BY arrival"
)
"""The archive rows that may say what a new fact says: those with the digest of its
duplicate key (the index of schema version 6), and those an earlier deermem wrote
without one."""


# The tables erase_user empties: deermem's tables with a user_id column that the unqualified
# names of every other statement reach (pg_table_is_visible: first on the search path), not
# those of current_schema(), which may be a schema of the role's own that holds none of them.
_USER_TABLES: Final = (
    "SELECT c.relname FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid"
    " WHERE a.attname = 'user_id' AND NOT a.attisdropped AND c.relkind IN ('r', 'p')"
    " AND c.relname LIKE 'deermem\\_%' AND c.relname <> 'deermem_users'"
    " AND pg_table_is_visible(c.oid) ORDER BY c.relname"
)
_USER_ROW: Final = "SELECT revision, commit_id, summaries FROM deermem_users WHERE user_id = %s"
_USER_VERSION: Final = "SELECT revision, commit_id FROM deermem_users WHERE user_id = %s"
_RECEIPTS_QUERY: Final = (
    "SELECT position, document FROM deermem_receipts "
    "WHERE user_id = %s AND agent = %s ORDER BY position"
)
_REGRET_EVENTS_QUERY: Final = (
    "SELECT position, document FROM deermem_regret_events "
    "WHERE user_id = %s AND agent = %s ORDER BY position"
)
# One statement reads one snapshot of the database: the summaries and the
# facts of a scope always belong together. The user row is the one without a fact id.
_SCOPE: Final = """
SELECT NULL, revision, commit_id, summaries FROM deermem_users WHERE user_id = %(user)s
UNION ALL
SELECT fact_id, NULL, NULL, document FROM deermem_facts
 WHERE user_id = %(user)s AND agent = %(agent)s
"""


def _token(revision: object, commit_id: object) -> str:
    """The version token of a user row (any agent's commit changes it)."""
    return f"pg:{revision}:{commit_id}"


def _lock_key(user: str) -> int:
    """The advisory lock of a user: 64 bits of a digest (a collision only serialises more)."""
    digest = hashlib.sha256(_LOCK_NAMESPACE + user.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class PostgresStore:
    """Facts in a PostgreSQL database; see the module docstring.

    Args:
        url: ``postgresql://user:password@host:port/database?options``; any
            libpq setting goes in the query (``sslmode``, ``options=-c
            statement_timeout=5s`` …); the password may instead come from
            ``PGPASSWORD`` or ``~/.pgpass``.
        lock_timeout: seconds a writer waits for other writers of the same user (this
            process's and other replicas', in all).
        audit_max_entries: receipts kept per agent; 0 writes none.
        archive_max_entries: archive entries kept per agent.
        archive_max_age_days: archive entries older than this are dropped; 0 keeps all.
        access_half_life_days: half-life of recall heat in the usage table.
        regret_max_events: regret events kept per agent; 0 records none.
        redact_secrets: replace secrets in what a commit writes
            (:func:`deermem.store.plan.redact_changes`).
        pool_size: connections this process keeps open at most.
        connect_timeout: seconds to wait for a connection.
        check: check the schema version first; ``False`` only where the
            caller has just checked it (:meth:`configured`).

    Raises:
        DatabaseError: the database cannot be reached, or refuses the login.
        DatabaseSchemaError: the database is not migrated to this deermem's
            schema (run ``deermem db upgrade``), or is at a version it does not know.
    """

    def __init__(
        self,
        url: str,
        *,
        lock_timeout: float = 10.0,
        audit_max_entries: int = 200,
        archive_max_entries: int = 1000,
        archive_max_age_days: int = 365,
        access_half_life_days: float = DEFAULT_ACCESS_HALF_LIFE_DAYS,
        regret_max_events: int = 1000,
        redact_secrets: bool = True,
        pool_size: int = 10,
        connect_timeout: float = 10.0,
        check: bool = True,
    ) -> None:
        self.address = redact_url(url)
        # A digest of the whole URL: the address hides the password, and may hide more.
        self._identity = "postgresql:" + hashlib.sha256(url.encode()).hexdigest()
        # What the driver's messages must not show (the address above shows none of it).
        self.secrets = address_secrets(url)
        check_address(url, self.address)  # the pool would log libpq's message, which quotes it
        self.lock_timeout = lock_timeout
        self.audit_max_entries = audit_max_entries
        self.archive_max_entries = archive_max_entries
        self.archive_max_age_days = archive_max_age_days
        self.access_half_life_days = access_half_life_days
        self.regret_max_events = regret_max_events
        self.redact_secrets = redact_secrets
        self._connect_timeout = connect_timeout
        self._cache = ScopeCache()
        self._turns = _UserTurns()
        self._vectors_unwritten_said = False
        if check:
            with connect(url, self.address, timeout=connect_timeout) as connection:
                check_schema(connection, self.address)
        self._pool: ConnectionPool[Connection] = ConnectionPool(
            url,
            min_size=1,
            max_size=pool_size,
            kwargs={
                "autocommit": True,
                "connect_timeout": max(1, round(connect_timeout)),
                "client_encoding": CLIENT_ENCODING,
            },
            configure=settle,
            check=ConnectionPool.check_connection,
            timeout=connect_timeout,
            name="deermem",
            open=True,
        )

    @classmethod
    def from_config(
        cls, config: MemoryConfig, url: str | None = None, *, check: bool = True
    ) -> PostgresStore:
        """A store with the configuration's settings; ``url`` wins over ``config.store``."""
        return cls(
            url if url is not None else config.store,
            check=check,
            lock_timeout=config.file_lock_timeout_seconds,
            audit_max_entries=config.eviction_audit_max_entries,
            archive_max_entries=config.archive_max_entries,
            archive_max_age_days=config.archive_max_age_days,
            access_half_life_days=config.eviction_access_half_life_days,
            regret_max_events=config.regret_max_events,
            redact_secrets=config.redact_secrets,
        )

    @classmethod
    def configured(cls, config: MemoryConfig) -> tuple[PostgresStore, MemoryConfig]:
        """The store ``config.store`` names, and what a memory on it runs under: ``config``
        over the settings the database records (:func:`~deermem.config.with_recorded_settings`).

        The record is read in the connection that checks the schema, so opening
        a configured store costs the connections opening a store always did.

        Raises:
            DatabaseError, DatabaseSchemaError: as opening the store.
            ConfigError: the record is invalid.
        """
        address = redact_url(config.store)
        with (
            connect(config.store, address, timeout=10.0) as connection,
            translated(address, address_secrets(config.store)),
        ):
            check_schema(connection, address)
            recorded = read_settings(connection, address)
        configured = with_recorded_settings(config, recorded, recorded_in(address))
        return cls.from_config(configured, check=False), configured

    @staticmethod
    def kept_settings(url: str, *, timeout: float = 10.0) -> tuple[dict[str, object], str]:
        """The settings the database at ``url`` records (``deermem_settings``), and how
        to name that record in errors.

        Raises:
            DatabaseError, DatabaseSchemaError: as opening the store.
            ConfigError: the record is invalid.
        """
        return database_settings(url, timeout=timeout), recorded_in(redact_url(url))

    def __repr__(self) -> str:
        return f"PostgresStore({self.address!r})"

    def close(self) -> None:
        """Close the pool's connections; the store cannot be used afterwards."""
        self._pool.close()

    def __enter__(self) -> PostgresStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- connections and the user lock --------------------------------------------

    @contextmanager
    def _connection(self) -> Iterator[Connection]:
        with translated(self.address, self.secrets), self._pool.connection() as connection:
            yield connection

    @contextmanager
    def _turn(self, scope: Scope) -> Iterator[float]:
        """Wait for this process's turn to write for the scope's user; yield the seconds
        left of ``lock_timeout`` for the user's lock (:meth:`_begin_locked`).

        A process's writers of one user queue here, before they take a pooled
        connection: while another replica (or a long operation) holds the user's
        lock, one connection waits on it, and the pool stays free for other
        users' reads and writes. The whole wait, here and for the lock, is
        bounded by ``lock_timeout``.

        Raises:
            StoreLockTimeout: the turn did not come within ``lock_timeout``.
        """
        started = time.monotonic()
        with self._turns.held(rows.user_key(scope), self.lock_timeout) as had:
            if not had:
                raise self._lock_timed_out(scope)
            yield max(0.001, self.lock_timeout - (time.monotonic() - started))

    def _lock_timed_out(self, scope: Scope) -> StoreLockTimeout:
        return StoreLockTimeout(f"{self.address} (user {scope.user_id!r})", self.lock_timeout)

    def _begin_locked(
        self, connection: Connection, scope: Scope, timeout: float | None = None
    ) -> None:
        """Open a transaction and take the user's lock in it (released at its end),
        waiting ``timeout`` seconds for it (default: ``lock_timeout``).

        The transaction is ``READ COMMITTED`` whatever the server's default
        (:data:`~deermem.store.postgres.database.READ_COMMITTED`): each
        statement after the lock sees what the writer before it committed.

        Raises:
            StoreLockTimeout: another writer held the lock for ``lock_timeout``.
        """
        key = rows.user_key(scope)
        connection.execute(READ_COMMITTED)
        try:
            wait = self.lock_timeout if timeout is None else timeout
            milliseconds = max(1, round(wait * 1000))
            connection.execute(f"SET LOCAL lock_timeout = {milliseconds}")
            connection.execute("SELECT pg_advisory_xact_lock(%s)", (_lock_key(key),))
        except psycopg.errors.LockNotAvailable:
            roll_back(connection)
            raise self._lock_timed_out(scope) from None
        except BaseException:
            roll_back(connection)
            raise

    # --- reading ----------------------------------------------------------------------

    def load(self, scope: Scope) -> ScopeSnapshot:
        with self._connection() as connection:
            return self._snapshot(connection, scope)

    def load_with_marks(self, scope: Scope) -> MarkedSnapshot:
        with self._connection() as connection:  # one connection from the pool for both
            snapshot = self._snapshot(connection, scope)
            marks: ShadowMarksRead
            try:
                marks = self._shadow_marks(connection, scope)
            except CorruptMemoryFile as error:
                marks = error
        return MarkedSnapshot(snapshot, marks)

    def _snapshot(self, connection: Connection, scope: Scope) -> ScopeSnapshot:
        """The scope: from the cache while its token is current, else read in one statement."""
        row = connection.execute(_USER_VERSION, (rows.user_key(scope),)).fetchone()
        version = _ABSENT if row is None else _token(row[0], row[1])
        cached = self._cache.get(scope, version)
        if cached is not None:
            return cached
        snapshot = self._read_scope(connection, scope)
        self._cache.put(scope, snapshot.version, snapshot)
        return snapshot

    def _read_scope(self, connection: Connection, scope: Scope) -> ScopeSnapshot:
        key = rows.user_key(scope)
        summaries = SummaryDocument()
        version = _ABSENT
        facts: list[Fact] = []
        for fact_id, revision, commit_id, document in connection.execute(
            _SCOPE, {"user": key, "agent": scope.agent}
        ):
            if fact_id is None:
                summaries = rows.decode_summary_document(document, self._label("users", scope))
                version = _token(revision, commit_id)
            else:
                label = self._label("facts", scope, fact_id)
                facts.append(rows.decode_fact(document, label, scope, fact_id))
        return ScopeSnapshot(scope, summaries, sort_facts(facts), version)

    def version(self, scope: Scope) -> str:
        with self._connection() as connection:
            row = connection.execute(_USER_VERSION, (rows.user_key(scope),)).fetchone()
        return _ABSENT if row is None else _token(row[0], row[1])

    def reload(self, scope: Scope) -> ScopeSnapshot:
        self._cache.drop(scope)
        return self.load(scope)

    def erase_user(self, user_id: str) -> dict[str, int]:
        """Erase every row of a user, in one transaction under the user's lock.

        Every table with a ``user_id`` column goes (found in the catalogue, so a
        table a later schema adds — the search vectors — goes too; found as every
        statement finds them, by the search path, :data:`_USER_TABLES`); the user's
        row last. After the commit no live row names the user; the version
        token of every scope changes, so each replica's cache and search index
        let go of it at their next read. Returns the counts of :data:`ERASED_COUNTS`,
        and ``searchRows``: the user's rows of ``deermem_vectors``, the search rows the
        store keeps itself.
        """
        scope = Scope.of(user_id)
        key = rows.user_key(scope)
        counts = dict.fromkeys(ERASED_COUNTS, 0)
        agents: set[str] = set()
        with self._turn(scope) as wait, self._connection() as connection:
            self._begin_locked(connection, scope, wait)
            try:
                tables = [name for (name,) in connection.execute(_USER_TABLES)]
                for table in tables:
                    gone = connection.execute(
                        sql.SQL("DELETE FROM {} WHERE user_id = %s RETURNING agent").format(
                            sql.Identifier(table)
                        ),
                        (key,),
                    ).fetchall()
                    agents.update(agent for (agent,) in gone)
                    if table in _ERASED_TABLES:
                        counts[_ERASED_TABLES[table]] = len(gone)
                connection.execute("DELETE FROM deermem_users WHERE user_id = %s", (key,))
                connection.execute("COMMIT")
            except BaseException:
                roll_back(connection)
                raise
        counts["agents"] = len(agents)
        self._cache.drop_user(user_id)
        return counts

    def holds_user(self, user_id: str) -> bool:
        """Whether the user has a row in ``deermem_users`` (an erase deletes it last)."""
        key = rows.user_key(Scope.of(user_id))
        with self._connection() as connection:
            found = connection.execute(
                "SELECT 1 FROM deermem_users WHERE user_id = %s", (key,)
            ).fetchone()
        return found is not None

    @property
    def identity(self) -> str:
        """A digest of the connection URL (which may hold the password): objects opened
        by the same URL match."""
        return self._identity

    def search_index_location(self) -> str:
        """``":memory:"``: each process derives its own index from the database.

        The index of a scope is rebuilt from the facts whenever the scope's
        version token moved — by a commit of any replica — so every replica
        ranks with the same SQLite FTS5 code as the Markdown store, and sees
        another replica's commit at its next search.
        """
        return _MEMORY

    def stored_vectors(self, scope: Scope, model: str, keys: Sequence[str]) -> Mapping[str, bytes]:
        """The scope's search vectors of ``model`` for these content keys (``deermem_vectors``).

        A row that is not usable (:func:`~deermem.store.records.usable_vector`)
        is left out, with a warning: its text is embedded again, and the new
        vector replaces the row (:meth:`store_vectors`).
        """
        if not keys:
            return {}
        with self._connection() as connection:
            found = connection.execute(
                "SELECT content_key, vector FROM deermem_vectors WHERE user_id = %s"
                " AND agent = %s AND model = %s AND content_key = ANY(%s)",
                (rows.user_key(scope), scope.agent, model, list(keys)),
            ).fetchall()
        vectors = {str(key): bytes(vector) for key, vector in found}
        usable = {key: vector for key, vector in vectors.items() if usable_vector(vector)}
        if len(usable) < len(vectors):
            _memory_log.warning(
                "deermem_vectors held damaged vectors (%d); embedding their texts again",
                len(vectors) - len(usable),
            )
        return usable

    def store_vectors(
        self, scope: Scope, model: str, vectors: Mapping[str, bytes], *, strict: bool = False
    ) -> None:
        """Keep search vectors (text → vector) of texts the scope holds now, by content key.

        A search embeds outside the user's lock, and meanwhile a commit may take a
        text out of the scope and release its vector, or an erase take the user:
        under the lock, as a commit, only the vectors of texts a fact or an archive
        entry still holds are written. They are a cache: a lock not had in time
        writes none, and the next search embeds again; a connection that may not
        write (:class:`~deermem.DatabaseReadOnly`: a role granted ``SELECT`` only,
        a read-only transaction, a hot standby) writes none either, said once per
        store, and each search ranks by meaning with vectors made in memory.
        With ``strict`` (``deermem reindex``, whose point is that the store keeps
        them) either is raised instead.

        Raises:
            DatabaseReadOnly, StoreLockTimeout: with ``strict``, the vectors
                could not be written.
        """
        if not vectors:
            return
        try:
            self._write_vectors(scope, model, vectors)
        except StoreLockTimeout:
            if strict:
                raise
            return  # the next search embeds again
        except DatabaseReadOnly as error:
            if strict:
                raise
            if not self._vectors_unwritten_said:
                self._vectors_unwritten_said = True
                _log.warning("search vectors are not kept in the database: %s", error)

    def _write_vectors(self, scope: Scope, model: str, vectors: Mapping[str, bytes]) -> None:
        key = rows.user_key(scope)
        with self._turn(scope) as wait, self._connection() as connection:
            self._begin_locked(connection, scope, wait)
            try:
                held_texts = self._held_texts(connection, scope, list(vectors))
                held = sorted((t, vector) for t, vector in vectors.items() if t in held_texts)
                # One statement, not executemany: a refused executemany runs in
                # psycopg's pipeline, which logs its own "pipeline aborted" line.
                connection.execute(
                    "INSERT INTO deermem_vectors (user_id, agent, model, content_key, vector)"
                    " SELECT %s, %s, %s, k, v FROM unnest(%s::text[], %s::bytea[]) AS t(k, v)"
                    " WHERE EXISTS (SELECT 1 FROM deermem_users WHERE user_id = %s)"
                    " ON CONFLICT (user_id, agent, model, content_key)"
                    " DO UPDATE SET vector = EXCLUDED.vector",
                    (
                        key,
                        scope.agent,
                        model,
                        [content_key(text) for text, _ in held],
                        [vector for _, vector in held],
                        key,
                    ),
                )
                connection.execute("COMMIT")
            except BaseException:
                roll_back(connection)
                raise

    def _held_texts(self, connection: Connection, scope: Scope, texts: list[str]) -> set[str]:
        """Which of ``texts`` a fact or an archive entry of the scope holds now.

        The rows whose document holds a text's JSON form are read and checked
        whole in Python: PostgreSQL's JSON operators refuse a text holding U+0000,
        which a fact may hold. (A row written in another JSON spelling is not
        found: its text's vector is not kept, and is embedded again.)
        """
        found = connection.execute(
            "SELECT document, false FROM deermem_facts WHERE user_id = %s AND agent = %s"
            " AND EXISTS (SELECT 1 FROM unnest(%s::text[]) t WHERE strpos(document, t) > 0)"
            " UNION ALL "
            "SELECT document, true FROM deermem_archive WHERE user_id = %s AND agent = %s"
            " AND EXISTS (SELECT 1 FROM unnest(%s::text[]) t WHERE strpos(document, t) > 0)",
            (*(rows.user_key(scope), scope.agent, [rows.encode_json(t) for t in texts]) * 2,),
        )
        wanted, held = set(texts), set()
        for document, archived in found:
            try:
                data = json.loads(document)
                text = data["fact"]["content"] if archived else data["content"]
            except (ValueError, TypeError, KeyError):
                continue  # a row too damaged to read holds no text a search embeds
            if isinstance(text, str) and text in wanted:
                held.add(text)
        return held

    def usage(self, scope: Scope) -> Mapping[str, UsageEntry]:
        with self._connection() as connection:
            return self._usage(connection, scope)

    def _usage(
        self, connection: Connection, scope: Scope, fact_ids: Sequence[str] | None = None
    ) -> dict[str, UsageEntry]:
        query = (
            "SELECT fact_id, access_heat, access_count, last_accessed_at FROM deermem_usage "
            "WHERE user_id = %s AND agent = %s"
        )
        params: list[object] = [rows.user_key(scope), scope.agent]
        if fact_ids is not None:
            query += " AND fact_id = ANY(%s)"
            params.append(list(fact_ids))
        found = connection.execute(query + " ORDER BY fact_id", params)
        return {
            fact_id: UsageEntry(access_heat=heat, access_count=count, last_accessed_at=accessed)
            for fact_id, heat, count, accessed in found
        }

    def watermark(self, scope: Scope, thread_id: str) -> str | None:
        with self._connection() as connection:
            return self._marks(connection, scope, [thread_id]).get(thread_id)

    def _marks(
        self, connection: Connection, scope: Scope, thread_ids: Sequence[str]
    ) -> dict[str, str]:
        """The stored marks of these conversations (checked as the mark files are)."""
        keys = {rows.thread_key(thread_id): thread_id for thread_id in thread_ids}
        found = connection.execute(
            "SELECT thread_key, document FROM deermem_threads "
            "WHERE user_id = %s AND agent = %s AND thread_key = ANY(%s)",
            (rows.user_key(scope), scope.agent, list(keys)),
        )
        marks = {}
        for key, document in found:
            thread_id = keys[key]
            label = self._label("threads", scope, thread_id)
            marks[thread_id] = rows.decode_mark(document, label, thread_id)
        return marks

    def audit(self, scope: Scope) -> tuple[EvictionReceipt, ...]:
        events = self._events(scope, _RECEIPTS_QUERY, "receipts")
        receipts = (EvictionReceipt.from_dict(event) for event in events)
        # An event it cannot read is skipped, as in an audit file.
        return tuple(receipt for receipt in receipts if receipt is not None)

    def _events(self, scope: Scope, query: LiteralString, table: str) -> list[object]:
        """The documents of a scope's event log (receipts, regret events), oldest first.

        Args:
            query: selects ``position, document`` of one user and agent, in order.
            table: the table's name in errors.

        Raises:
            CorruptMemoryFile: a document is not JSON.
        """
        with self._connection() as connection:
            found = connection.execute(query, (rows.user_key(scope), scope.agent)).fetchall()
        return [
            rows.decode_event(document, self._label(table, scope, str(position)))
            for position, document in found
        ]

    def archived(self, scope: Scope, fact_id: str) -> ArchiveEntry | None:
        with self._connection() as connection:
            return self._archived(connection, scope, fact_id)

    def _archived(self, connection: Connection, scope: Scope, fact_id: str) -> ArchiveEntry | None:
        if not is_fact_id(fact_id):
            return None
        row = connection.execute(
            "SELECT document FROM deermem_archive "
            "WHERE user_id = %s AND agent = %s AND fact_id = %s",
            (rows.user_key(scope), scope.agent, fact_id),
        ).fetchone()
        if row is None:
            return None
        label = self._label("archive", scope, fact_id)
        return rows.decode_archive_entry(row[0], label, scope, fact_id)

    def archive(self, scope: Scope, now: datetime) -> tuple[ArchiveEntry, ...]:
        with self._connection() as connection:
            return self._archive(connection, scope, now)

    def _archive(
        self, connection: Connection, scope: Scope, now: datetime
    ) -> tuple[ArchiveEntry, ...]:
        found = connection.execute(
            "SELECT fact_id, document FROM deermem_archive WHERE user_id = %s AND agent = %s",
            (rows.user_key(scope), scope.agent),
        ).fetchall()
        entries = [
            rows.decode_archive_entry(document, self._label("archive", scope, i), scope, i)
            for i, document in found
        ]
        return tuple(
            e for e in newest_first(entries) if not e.expired(now, self.archive_max_age_days)
        )

    def _archived_matches(
        self, connection: Connection, scope: Scope, contents: Sequence[str], now: datetime
    ) -> dict[str, ArchiveEntry]:
        """Archived facts that say what one of ``contents`` says (see the protocol).

        The database narrows the archive to entries whose digest of the
        duplicate key (:func:`~deermem.model.duplicate_digest`, computed here
        and stored with each entry) is one of theirs, by the index of schema
        version 6: whatever the database's collation, it finds what the rule
        finds, and no text is sent to it. The rule itself (stripped,
        case-folded) is applied here to what it found.
        """
        keys = {duplicate_key(text) for text in contents}
        if not keys:
            return {}
        digests = sorted({duplicate_digest(text) for text in contents})
        found = connection.execute(
            ARCHIVED_MATCHES, (rows.user_key(scope), scope.agent, digests)
        ).fetchall()
        matches: dict[str, ArchiveEntry] = {}
        for fact_id, document in found:
            try:
                label = self._label("archive", scope, fact_id)
                entry = rows.decode_archive_entry(document, label, scope, fact_id)
            except CorruptMemoryFile:
                continue  # reported where it is read for itself (listing, restoring)
            key = duplicate_key(entry.fact.content)
            if key in keys and not entry.expired(now, self.archive_max_age_days):
                matches[key] = entry
        return matches

    def archived_matches(
        self, scope: Scope, contents: Sequence[str], now: datetime
    ) -> Mapping[str, ArchiveEntry]:
        with self._connection() as connection:
            return self._archived_matches(connection, scope, contents, now)

    def archive_listing(self, scope: Scope, now: datetime) -> Mapping[str, str]:
        with self._connection() as connection:
            found = connection.execute(
                "SELECT fact_id, archived_at FROM deermem_archive "
                "WHERE user_id = %s AND agent = %s ORDER BY arrival",
                (rows.user_key(scope), scope.agent),
            ).fetchall()
        limit = self.archive_max_age_days
        return {
            fact_id: archived_at
            for fact_id, archived_at in found
            if not ArchiveEntry.stamp_expired(archived_at, now, limit)
        }

    def records(self, scope: Scope) -> ScopeRecords:
        with self._connection() as connection:
            return stored_records(connection, self.address, scope)

    def regret_events(self, scope: Scope) -> tuple[RegretEvent, ...]:
        documents = self._events(scope, _REGRET_EVENTS_QUERY, "regret_events")
        events = (RegretEvent.from_dict(document) for document in documents)
        # One it cannot read is skipped, as in the events file.
        return tuple(event for event in events if event is not None)

    def shadow_marks(self, scope: Scope) -> Mapping[str, ShadowMark]:
        with self._connection() as connection:
            return self._shadow_marks(connection, scope)

    def _shadow_marks(self, connection: Connection, scope: Scope) -> dict[str, ShadowMark]:
        found = connection.execute(
            "SELECT fact_id, document FROM deermem_shadow_marks "
            "WHERE user_id = %s AND agent = %s ORDER BY fact_id",
            (rows.user_key(scope), scope.agent),
        ).fetchall()
        marks = {}
        for fact_id, document in found:
            mark = ShadowMark.from_dict(
                rows.decode_event(document, self._label("shadow_marks", scope, fact_id))
            )
            if mark is not None:  # one it cannot read is skipped, as in the marks file
                marks[fact_id] = mark
        return marks

    def agents(self, user_id: str | None) -> tuple[str, ...]:
        """The agents a user has anything stored for, sorted."""
        with self._connection() as connection:
            return agents_of(connection, rows.user_key(Scope.of(user_id)))

    def scopes(self) -> tuple[Scope, ...]:
        """Every user's agents; a user with summaries alone, with its ``__default__`` agent.

        In :func:`~deermem.model.listing_order`, sorted here: ``ORDER BY`` would
        sort by the database's collation, which two databases need not share."""
        found: list[Scope] = []
        with self._connection() as connection:
            keys = [key for (key,) in connection.execute("SELECT user_id FROM deermem_users")]
            for key in sorted(keys, key=lambda key: listing_order(rows.user_of(key))):
                agents = agents_of(connection, key) or (DEFAULT_AGENT,)
                found.extend(Scope(rows.user_of(key), agent) for agent in agents)
        return tuple(found)

    def problems(self) -> tuple[str, ...]:
        """None: every row is keyed by its user and agent, so each belongs to one scope."""
        return ()

    def _label(self, table: str, scope: Scope, key: str | None = None) -> str:
        return rows.row_label(self.address, f"deermem_{table}", scope, key)

    # --- writing ----------------------------------------------------------------------

    @contextmanager
    def transaction(self, scope: Scope) -> Iterator[PostgresTransaction]:
        with self._turn(scope) as wait, self._connection() as connection:
            transaction = PostgresTransaction(self, connection, scope, wait)
            try:
                transaction.lock()
                yield transaction
            finally:
                transaction.end()

    def commit(self, scope: Scope, changes: ChangeSet) -> CommitResult:
        with self.transaction(scope) as transaction:
            return transaction.commit(changes)

    def record_access(
        self,
        scope: Scope,
        fact_ids: Iterable[str],
        now: datetime,
        *,
        regret: Sequence[RegretEvent] = (),
    ) -> None:
        wanted = [fact_id for fact_id in fact_ids if is_fact_id(fact_id)]
        if not wanted and not regret:
            return
        key = rows.user_key(scope)
        with self._turn(scope) as wait, self._connection() as connection:
            self._begin_locked(connection, scope, wait)
            try:
                if connection.execute(_USER_VERSION, (key,)).fetchone() is None:
                    # Erased since the search read it (the lock orders the two): nothing
                    # of the user is left to count, and no row for an event to belong to.
                    connection.execute("COMMIT")
                    return
                present = {
                    fact_id
                    for (fact_id,) in connection.execute(
                        "SELECT fact_id FROM deermem_facts "
                        "WHERE user_id = %s AND agent = %s AND fact_id = ANY(%s)",
                        (key, scope.agent, wanted),
                    )
                }
                recalled = [fact_id for fact_id in wanted if fact_id in present]
                if recalled:
                    usage = self._usage(connection, scope, recalled)
                    counted = count_recalls(usage, recalled, now, self.access_half_life_days)
                    put_usage(connection, key, scope.agent, counted)
                append_regret(connection, key, scope.agent, regret, self.regret_max_events)
                connection.execute("COMMIT")
            except BaseException:
                roll_back(connection)
                raise

    def purge(self, scope: Scope, fact_id: str) -> None:
        with self.transaction(scope) as transaction:
            transaction.purge(fact_id)

    def _commit_locked(
        self,
        connection: Connection,
        scope: Scope,
        snapshot: ScopeSnapshot | None,
        changes: ChangeSet,
    ) -> tuple[CommitResult, ScopeSnapshot | None]:
        """Write a change set inside the open, locked transaction (the caller commits it).

        With a current snapshot (the transaction's, or a valid cache entry)
        facts are looked up in it; without one only the facts the change set
        names are read. Returns the result and the scope's snapshot after
        the commit (``None`` when none was at hand).
        """
        unknown = [
            part.name
            for part in dataclasses.fields(changes)
            if part.name not in _WRITTEN and getattr(changes, part.name)
        ]
        if unknown:
            raise NotImplementedError(f"the PostgreSQL store does not write {unknown} yet")
        key = rows.user_key(scope)
        row = connection.execute(_USER_ROW, (key,)).fetchone()
        current = SummaryDocument()
        version = _ABSENT
        if row is not None:
            current = rows.decode_summary_document(row[2], self._label("users", scope))
            version = _token(row[0], row[1])
        if snapshot is None or snapshot.version != version:
            snapshot = self._cache.get(scope, version)
        previous_version = version
        lookup: Callable[[str], Fact | None]
        if snapshot is not None:
            lookup = snapshot.get
        else:
            named = [w.fact.id for w in changes.writes] + [d.fact_id for d in changes.deletes]
            lookup = self._facts(connection, scope, named).get
        in_archive = self._archived_ids(connection, scope, changes.archive_deletes)
        plan = plan_changes(lookup, current, changes, scope, in_archive.__contains__)
        bounds = Bounds(
            self.audit_max_entries,
            self.archive_max_entries,
            self.archive_max_age_days,
            self.regret_max_events,
        )
        writer = CommitWriter(
            connection,
            scope,
            changes,
            plan,
            bounds=bounds,
            database=self.address,
            library=None if snapshot is None else snapshot.facts,
        )
        archive = ArchiveChange(previous_version, {}, frozenset(), bounded=False)
        if writer.anything(self._marks(connection, scope, list(changes.watermarks))):
            if row is None:
                version = _token(0, writer.new_user_row())
            writer.write()
            if changes.archive_puts or changes.archive_deletes:
                archive = ArchiveChange.of(
                    previous_version, changes.archive_puts, changes.archive_deletes, writer.dropped
                )
            if plan.changed:
                commit_id = uuid.uuid4()
                connection.execute(
                    "UPDATE deermem_users SET revision = %s, commit_id = %s, summaries = %s "
                    "WHERE user_id = %s",
                    (
                        plan.summaries.revision,
                        commit_id,
                        rows.encode_summary_document(plan.summaries),
                        key,
                    ),
                )
                version = _token(plan.summaries.revision, commit_id)
        deleted = tuple(fact.id for fact in plan.deleted)
        result = CommitResult(
            revision=plan.summaries.revision,
            written=tuple(plan.written),
            deleted=deleted,
            changed=plan.changed,
            version=version,
            archive=archive,
        )
        if snapshot is not None and snapshot.version != version:
            if plan.changed:
                removed = [*plan.deleted, *plan.replaced.values()]
                snapshot = patched_snapshot(
                    snapshot, plan.written, removed, plan.summaries, version
                )
            else:
                snapshot = dataclasses.replace(snapshot, version=version)
        return result, snapshot

    def _facts(
        self, connection: Connection, scope: Scope, fact_ids: Sequence[str]
    ) -> dict[str, Fact]:
        if not fact_ids:
            return {}
        found = connection.execute(
            "SELECT fact_id, document FROM deermem_facts "
            "WHERE user_id = %s AND agent = %s AND fact_id = ANY(%s)",
            (rows.user_key(scope), scope.agent, list(fact_ids)),
        )
        return {
            fact_id: rows.decode_fact(
                document, self._label("facts", scope, fact_id), scope, fact_id
            )
            for fact_id, document in found
        }

    def _archived_ids(
        self, connection: Connection, scope: Scope, fact_ids: Sequence[str]
    ) -> set[str]:
        if not fact_ids:
            return set()
        found = connection.execute(
            "SELECT fact_id FROM deermem_archive "
            "WHERE user_id = %s AND agent = %s AND fact_id = ANY(%s)",
            (rows.user_key(scope), scope.agent, list(fact_ids)),
        )
        return {fact_id for (fact_id,) in found}


def agents_of(connection: Connection, user: str) -> tuple[str, ...]:
    """The agents a user has any row for, sorted."""
    parts = " UNION ".join(
        f"SELECT agent FROM {table} WHERE user_id = %(user)s"
        for table in (
            "deermem_facts",
            "deermem_archive",
            "deermem_receipts",
            "deermem_usage",
            "deermem_threads",
            "deermem_regret_events",
            "deermem_shadow_marks",
        )
    )
    found = connection.execute(parts, {"user": user})
    return tuple(sorted(agent for (agent,) in found))  # by code point, whatever the collation


class PostgresTransaction:
    """A locked scope of a :class:`PostgresStore` (see :class:`~deermem.store.StoreTransaction`).

    The database transaction — and with it the user's lock — opens when the
    transaction is entered and ends with each :meth:`commit`, which is
    durable when it returns. Anything after a commit opens a new transaction
    and takes the lock again, so it sees what other writers committed meanwhile.
    """

    def __init__(
        self,
        store: PostgresStore,
        connection: Connection,
        scope: Scope,
        first_wait: float | None = None,
    ) -> None:
        self._store = store
        self._connection = connection
        self._scope = scope
        # What is left of lock_timeout after the turn (PostgresStore._turn), for the
        # first lock; a lock taken again after a commit waits the whole lock_timeout.
        self._first_wait = first_wait
        self._open = False
        self._snapshot: ScopeSnapshot | None = None

    def lock(self) -> None:
        """Take the user's lock now (as entering :meth:`PostgresStore.transaction` does)."""
        with translated(self._store.address, self._store.secrets):
            self._locked()

    def _locked(self) -> Connection:
        if not self._open:
            wait, self._first_wait = self._first_wait, None
            self._store._begin_locked(self._connection, self._scope, wait)
            self._open = True
            self._snapshot = None  # read again under the lock
        return self._connection

    @property
    def snapshot(self) -> ScopeSnapshot:
        with translated(self._store.address, self._store.secrets):
            connection = self._locked()
            if self._snapshot is None:
                self._snapshot = self._store._snapshot(connection, self._scope)
            return self._snapshot

    def usage(self) -> Mapping[str, UsageEntry]:
        with translated(self._store.address, self._store.secrets):
            return self._store._usage(self._locked(), self._scope)

    def archived(self, fact_id: str) -> ArchiveEntry | None:
        with translated(self._store.address, self._store.secrets):
            return self._store._archived(self._locked(), self._scope, fact_id)

    def archive(self, now: datetime) -> tuple[ArchiveEntry, ...]:
        with translated(self._store.address, self._store.secrets):
            return self._store._archive(self._locked(), self._scope, now)

    def records(self) -> ScopeRecords:
        with translated(self._store.address, self._store.secrets):
            return stored_records(self._locked(), self._store.address, self._scope)

    def archived_matches(
        self, contents: Sequence[str], now: datetime
    ) -> Mapping[str, ArchiveEntry]:
        with translated(self._store.address, self._store.secrets):
            return self._store._archived_matches(self._locked(), self._scope, contents, now)

    def shadow_marks(self) -> Mapping[str, ShadowMark]:
        with translated(self._store.address, self._store.secrets):
            return self._store._shadow_marks(self._locked(), self._scope)

    def watermark(self, thread_id: str) -> str | None:
        # On the locked connection: every commit that moves a mark holds the user's advisory
        # lock, so no other writer can move it between this read and this commit.
        with translated(self._store.address, self._store.secrets):
            return self._store._marks(self._locked(), self._scope, [thread_id]).get(thread_id)

    def commit(self, changes: ChangeSet) -> CommitResult:
        changes, redacted = redacted_changes(changes, self._store.redact_secrets)
        with translated(self._store.address, self._store.secrets):
            connection = self._locked()
            try:
                result, snapshot = self._store._commit_locked(
                    connection, self._scope, self._snapshot, changes
                )
                connection.execute("COMMIT")
            except BaseException:
                self.end()
                raise
            self._open = False
        if snapshot is not None:
            self._store._cache.put(self._scope, snapshot.version, snapshot)
        return result._replace(redacted=redacted) if redacted else result

    def purge(self, fact_id: str) -> None:
        """Delete an archive entry (even one too damaged to read); see :meth:`Store.purge`."""
        # An id that no fact can have is not found, as on Markdown; it never
        # reaches the database, which refuses some (a NUL) with an error of its own.
        if not is_fact_id(fact_id):
            raise FactNotFoundError(fact_id, where="archive")
        with translated(self._store.address, self._store.secrets):
            connection = self._locked()
            key = rows.user_key(self._scope)
            gone = connection.execute(
                "DELETE FROM deermem_archive WHERE user_id = %s AND agent = %s AND fact_id = %s "
                "RETURNING fact_id, document",
                (key, self._scope.agent, fact_id),
            ).fetchone()
            if gone is None:
                raise FactNotFoundError(fact_id, where="archive")
            # Nothing of a forgotten fact stays: its search vector goes too, unless
            # a fact of the scope holds the same text.
            texts = set(archived_contents(self._store.address, self._scope, [gone]))
            held = library_holds(connection, key, self._scope.agent, texts) if texts else set()
            release_vectors(connection, key, self._scope.agent, texts - held)
            # The archive changed: a new token, so that every replica's search
            # index lists it again (the revision counts commits of facts only).
            connection.execute(
                "UPDATE deermem_users SET commit_id = %s WHERE user_id = %s",
                (uuid.uuid4(), rows.user_key(self._scope)),
            )
            connection.execute("COMMIT")
            self._open = False

    def end(self) -> None:
        """Roll back what was not committed, releasing the lock."""
        if self._open:
            self._open = False
            roll_back(self._connection)


class _UserTurns:
    """A process's writers of each user, one at a time, in the order they asked
    (:meth:`PostgresStore._turn`).

    Each user's threads are served first come, first served (a
    :class:`FairTurn`), as PostgreSQL's lock queue orders the processes. A
    user's turn exists while a writer holds or waits for it, so a process
    serving many users keeps turns for those it is writing for only. A turn is
    re-entrant: a thread that holds it and writes again for the user waits on
    the user's lock in the database, as it did before turns.
    """

    def __init__(self) -> None:
        self._guard = threading.Lock()
        # Each user's turn, with how many threads hold or wait for it (guarded).
        self._turns: dict[str, tuple[FairTurn, int]] = {}

    @contextmanager
    def held(self, key: str, timeout: float) -> Iterator[bool]:
        """Hold the user's turn while the block runs; ``False``: not had within ``timeout``."""
        deadline = time.monotonic() + timeout
        with self._guard:
            turn, users = self._turns.get(key) or (FairTurn(), 0)
            self._turns[key] = (turn, users + 1)
        try:
            had = turn.take(deadline)
            try:
                yield had
            finally:
                if had:
                    turn.give_back()
        finally:
            with self._guard:
                users = self._turns[key][1] - 1
                if users:
                    self._turns[key] = (turn, users)
                else:
                    del self._turns[key]


# The tables :meth:`PostgresStore.erase_user` counts, by the count they make.
_ERASED_TABLES: Final = {
    "deermem_facts": "facts",
    "deermem_usage": "usage",
    "deermem_receipts": "events",
    "deermem_archive": "archived",
    "deermem_threads": "marks",
    "deermem_regret_events": "regretEvents",
    "deermem_shadow_marks": "shadowMarks",
    # The store's own search rows: counted as a memory counts its index's (docs/privacy.md).
    "deermem_vectors": "searchRows",
}


def roll_back(connection: Connection) -> None:
    """End the open transaction; a connection that is gone has ended it already."""
    if connection.closed:
        return
    # If it fails, the server ended the transaction (the connection broke) and
    # the pool discards the connection.
    with suppress(psycopg.Error):
        connection.execute("ROLLBACK")
