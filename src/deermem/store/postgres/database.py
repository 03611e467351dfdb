"""The database itself: connections, the driver's errors in deermem's terms, and the schema.

Every connection runs in autocommit mode: a read is one statement (one
snapshot of the database), and a write opens its transaction explicitly
(``BEGIN`` … ``COMMIT``), so nothing is ever left open on a connection that
goes back to the pool. Every transaction runs under ``READ COMMITTED``, set
on each connection (:func:`settle`) whatever the server's, the database's,
the role's or the URL's default: the user's lock, not the snapshot, orders
a user's writers (see :mod:`deermem.store.postgres.store`).

:func:`translated` turns what psycopg raises — a lost connection, a server
restart, a statement timeout, a refused login — into
:class:`~deermem.DatabaseError` naming the database without its password, so
callers catch deermem's errors only and no credential reaches a message.
What may pass by itself — the driver's operational errors (the server is
gone, restarting, out of connections or resources; a timeout; a lost
serialisation conflict) and a pool with no connection to give — is
:class:`~deermem.DatabaseUnavailable`, which a server answers with 503.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Final, TypeAlias

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import TupleRow
from psycopg_pool import PoolTimeout

import deermem.store.postgres.rows as rows
from deermem.config import (
    REDACTED,
    MemoryConfig,
    check_recorded,
    database_scheme_problem,
    is_database_url,
    new_store_settings,
    recorded_settings,
    records_settings,
    redact_url,
    url_secrets,
    with_recorded_settings,
)
from deermem.errors import (
    ConfigError,
    DatabaseError,
    DatabaseReadOnly,
    DatabaseSchemaError,
    DatabaseUnavailable,
)
from deermem.model import Record, json_key

__all__ = [
    "READ_COMMITTED",
    "Connection",
    "Migration",
    "address_secrets",
    "check_address",
    "check_encoding",
    "check_schema",
    "connect",
    "database_settings",
    "database_status",
    "holds_users",
    "latest_version",
    "migrations",
    "read_settings",
    "recorded_in",
    "settle",
    "translated",
    "upgrade",
    "upgrade_database",
    "write_settings",
]

Connection: TypeAlias = psycopg.Connection[TupleRow]


CLIENT_ENCODING: Final = "UTF8"
"""The client encoding of every connection, whatever the address's ``client_encoding``
says: deermem's text is any Unicode, and the driver would refuse to encode (or would
not decode) what another encoding cannot hold."""


def connect(url: str, database: str, *, timeout: float) -> Connection:
    """One connection of its own (for ``db upgrade`` and the check at open), settled
    (:func:`settle`).

    Raises:
        DatabaseError: the server cannot be reached or refuses the login.
    """
    check_address(url, database)
    with translated(database, address_secrets(url)):
        connection = psycopg.connect(
            url,
            autocommit=True,
            connect_timeout=max(1, round(timeout)),
            client_encoding=CLIENT_ENCODING,
        )
        try:
            settle(connection)
        except BaseException:
            connection.close()
            raise
        return connection


READ_COMMITTED: Final = "BEGIN ISOLATION LEVEL READ COMMITTED"
"""How deermem opens a transaction it writes in.

Under ``REPEATABLE READ`` or ``SERIALIZABLE`` a transaction's snapshot is
taken by its first statement — the user's lock, before it is granted — so a
writer that queued behind another would read the library as it was before
that writer's commit, and its own commit would fail ("could not serialize
access"); ``SERIALIZABLE`` would also fail writers of different users
whose reads share index pages. The user's lock already orders a user's writers."""


def settle(connection: Connection) -> None:
    """Set on a new connection what deermem relies on, whatever the server, role or URL chose.

    * Every transaction runs under ``READ COMMITTED``. The session's default
      covers the single statements a read is; the connection's own level
      makes the ``BEGIN`` psycopg sends for ``connection.transaction()`` say
      it too. A transaction that needs more says so itself (a dump reads one
      user in ``REPEATABLE READ``).
    * ``extra_float_digits = 3``: ``double precision`` comes back as text
      whose digits follow it; below 1 (PostgreSQL 11's default, still set by
      some servers, roles and poolers) a recall heat would read back rounded
      to 15 digits, unlike the value written and the Markdown store's, and a
      copy by ``deermem migrate`` would not compare equal. At 3 every float
      reads back exactly.
    """
    connection.isolation_level = psycopg.IsolationLevel.READ_COMMITTED
    connection.execute("SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL READ COMMITTED")
    connection.execute("SET extra_float_digits = 3")


def check_address(url: str, database: str) -> None:
    """Refuse an address libpq cannot parse, or would parse otherwise than deermem, before
    anything connects with it.

    libpq's own message quotes the whole address, password included
    (``… in URI: "postgresql://user:secret@[::1"``); the error keeps what
    comes before the first quotation mark — what is wrong, never where.

    A URL's password ends, for libpq, at its first ``@``, and for
    :func:`~deermem.config.redact_url` at its last: a password that holds an
    unencoded ``@`` would reach libpq cut in two, the rest read as the host,
    and the driver's message (``failed to resolve host 'ssSECRET@…'``) would
    show that rest. Such an address is refused, naming the rule only.

    Raises:
        DatabaseError: the address is neither a connection URI nor a
            ``key=value`` string libpq reads, its scheme is not in lower case
            (:func:`~deermem.config.database_scheme_problem`), or a URL holds
            an ``@`` beyond the one that ends its user and password.
    """
    problem = database_scheme_problem(url)
    if problem is not None:
        raise DatabaseError(database, problem)
    stray = _stray_at_sign(url)
    if stray == "/":
        raise DatabaseError(
            database,
            "the address holds an `@` after a `/`, and libpq ends the user and password at "
            "the first `@` or `/`; write a `/` inside the password (or user) as `%2F`, and "
            "write an `@` inside the password (or user, host or database name) as `%40`",
        )
    if stray == "@":
        raise DatabaseError(
            database,
            "the address holds an `@` besides the one that ends the user and password; "
            "write an `@` inside the password (or user, host or database name) as `%40`",
        )
    if not is_database_url(url) and "=" not in url:
        # libpq's reason for a directory's path is one word ("missing", the rest quotes it).
        raise DatabaseError(
            database,
            "the address cannot be parsed (it is neither a postgresql:// URL nor libpq's "
            "key=value settings)",
        )
    try:
        conninfo_to_dict(url)
    except psycopg.Error as error:
        what = str(error).split('"', 1)[0].strip().rstrip(":").strip()
        reason = f" ({' '.join(what.split())})" if what else ""
        raise DatabaseError(database, f"the address cannot be parsed{reason}") from None


def _stray_at_sign(url: str) -> str | None:
    """Whether a URL holds an ``@`` that libpq would read as part of its hosts or path:
    ``None`` if not, else the character that ended libpq's scan for the user and
    password first — ``"@"`` (an ``@`` inside the password, or beyond) or ``"/"``
    (a ``/`` inside the password, so the ``@`` that was meant to end it is read
    as part of the hosts).

    libpq ends the user and password at the first ``@`` found before any
    ``/``; what follows, up to the query's ``?``, is hosts, ports and the
    database name, where an ``@`` only appears when a password's ``@`` (or
    ``/``) was left unencoded. An ``@`` in the query (``?user=me@example.com``)
    is a parameter's value, which libpq reads whole.
    """
    _scheme, separator, rest = url.strip().partition("://")
    if not separator:
        return None
    end = next((i for i, char in enumerate(rest) if char in "@/"), len(rest))
    first = rest[end] if end < len(rest) else None
    if first == "@":
        rest = rest[end + 1 :]
    if "@" not in rest.partition("?")[0]:
        return None
    return "/" if first == "/" else "@"


def address_secrets(url: str) -> tuple[str, ...]:
    """What of ``url`` no message may show, longest first: the password and keys as
    deermem reads them (:func:`~deermem.config.url_secrets`) and the password as
    libpq reads it, which also covers a ``key=value`` string's ``password=``."""
    found = set(url_secrets(url))
    try:
        password = conninfo_to_dict(url).get("password")
    except psycopg.Error:
        password = None
    if isinstance(password, str) and password:
        found.add(password)
    return tuple(sorted(found, key=len, reverse=True))


# SQLSTATEs of a statement this connection may not run: insufficient_privilege (a role
# granted SELECT only) and read_only_sql_transaction (a read-only transaction, a hot standby).
_READ_ONLY: Final = frozenset({"42501", "25006"})


@contextmanager
def translated(database: str, secrets: tuple[str, ...] = ()) -> Iterator[None]:
    """Raise the driver's and the pool's errors as :class:`~deermem.DatabaseError`.

    ``secrets`` (:func:`address_secrets`) are replaced by ``***`` in the driver's
    message: libpq does not quote a password, but nothing else would stand
    between a message that did and the person reading it.
    """
    try:
        yield
    except PoolTimeout as error:
        raise DatabaseUnavailable(
            database,
            f"no database connection could be had in time ({_one_line(error, secrets)})",
        ) from None
    except psycopg.Error as error:
        reason = _one_line(error, secrets)
        if error.sqlstate in _READ_ONLY:
            raise DatabaseReadOnly(database, reason) from None
        if isinstance(error, psycopg.OperationalError):
            raise DatabaseUnavailable(database, reason) from None
        raise DatabaseError(database, reason) from None


def _one_line(error: BaseException, secrets: tuple[str, ...] = ()) -> str:
    """The driver's message on one line (libpq's span several), without ``secrets``.

    Of an error the server sent, only its primary message: the DETAIL and
    CONTEXT lines that follow it may quote the data of the statement (the
    text of a fact, a key's values), which is no error message's to show.
    ``secrets`` go longest first, so a password is hidden whole rather than
    around a shorter secret inside it.
    """
    primary = error.diag.message_primary if isinstance(error, psycopg.Error) else None
    text = " ".join((primary or str(error)).split()) or type(error).__name__
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return text


# ---------------------------------------------------------------------------
# The database schema: versioned migrations, applied by ``deermem db upgrade``, checked at open.
#
# A migration is a plain SQL file shipped in the package,
# ``migrations/NNNN_name.sql``; its number is its version. ``deermem_migrations``
# records each one applied (version, name, when). :func:`upgrade` applies the
# missing ones in order, all in one transaction under an advisory lock, so two
# replicas upgrading at once apply each migration once and a failed migration
# leaves the database as it was. A later change (a new table, a new column)
# is a new file: existing files never change. (The one exception, 0005, now
# builds nothing: its index could not be built over an archive holding U+0000,
# which stopped the upgrade; version 6, applied with it, replaces that index.)
#
# :func:`check_schema` runs when a store opens: a database that was never
# migrated, one behind this deermem, or one at a version this deermem does not
# know (a newer deermem migrated it) is refused with a
# :class:`~deermem.errors.DatabaseSchemaError` that says what to do.
# ---------------------------------------------------------------------------


MIGRATIONS_TABLE: Final = "deermem_migrations"

_FILE_NAME: Final = re.compile(r"(\d{4})_([a-z0-9_]+)\.sql")


# Any fixed number: every upgrade of every replica waits on this one lock.
_UPGRADE_LOCK: Final = 0x6465_6572_6D65_6D00  # "deermem\0"


@dataclass(frozen=True, slots=True)
class Migration:
    """One migration file: its version, name and SQL."""

    version: int
    name: str
    sql: str


@cache
def migrations() -> tuple[Migration, ...]:
    """Every migration shipped with this deermem, by version (1, 2, … without gaps)."""
    found = []
    for item in resources.files("deermem.store.postgres").joinpath("migrations").iterdir():
        match = _FILE_NAME.fullmatch(item.name)
        if match is not None:
            found.append(Migration(int(match[1]), match[2], item.read_text("utf-8")))
    found.sort(key=lambda migration: migration.version)
    if [m.version for m in found] != list(range(1, len(found) + 1)):
        raise RuntimeError("deermem's migration files are not numbered 1, 2, … without gaps")
    return tuple(found)


def latest_version() -> int:
    """The schema version this deermem reads and writes."""
    return migrations()[-1].version


def applied_versions(connection: Connection) -> list[int] | None:
    """The versions recorded in the database, ascending; ``None`` if it was never migrated."""
    exists = connection.execute("SELECT to_regclass(%s)", (MIGRATIONS_TABLE,)).fetchone()
    if exists is None or exists[0] is None:
        return None
    rows = connection.execute(f"SELECT version FROM {MIGRATIONS_TABLE} ORDER BY version")
    return [int(row[0]) for row in rows]


def check_encoding(connection: Connection, database: str) -> None:
    """Refuse a database whose encoding is not UTF8.

    Under ``SQL_ASCII`` (what ``initdb`` gives under the C locale) the server
    checks nothing and the driver hands text back as bytes; ``LATIN1`` and the
    other single-byte encodings cannot hold most user ids and facts. Either
    would fail later, at a write or a read, not where the cause is.

    Raises:
        DatabaseError: the database's encoding is another, named.
    """
    encoding = connection.info.parameter_status("server_encoding")
    if encoding != "UTF8":
        raise DatabaseError(
            database,
            f"the database's encoding is {encoding}; deermem needs a UTF8 database "
            "(CREATE DATABASE … ENCODING 'UTF8')",
        )


def check_schema(connection: Connection, database: str) -> int:
    """Refuse a database this deermem cannot use; return its version.

    Raises:
        DatabaseError: its encoding is not UTF8 (:func:`check_encoding`).
        DatabaseSchemaError: never migrated, behind, or at an unknown version.
    """
    check_encoding(connection, database)
    expected = latest_version()
    applied = applied_versions(connection)
    if not applied:
        raise DatabaseSchemaError(
            database,
            "the database holds no deermem schema yet; run `deermem db upgrade` "
            "(with this database as `store`) first",
            found=None,
            expected=expected,
        )
    found = applied[-1]
    if found > expected or applied != list(range(1, found + 1)):
        raise DatabaseSchemaError(
            database,
            f"the database is at schema version {found}, which this deermem does not know "
            f"(it knows 1 to {expected}); a newer deermem migrated it: upgrade deermem",
            found=found,
            expected=expected,
        )
    if found < expected:
        raise DatabaseSchemaError(
            database,
            f"the database is at schema version {found} and this deermem needs {expected}; "
            "run `deermem db upgrade`",
            found=found,
            expected=expected,
        )
    return found


def upgrade(
    connection: Connection, database: str, config: MemoryConfig | None = None
) -> tuple[list[int], tuple[str, ...]]:
    """Apply the migrations the database lacks, in one transaction.

    The upgrade that adds ``deermem_settings`` (:data:`SETTINGS_VERSION`) to
    a database holding no user yet creates a store: it records a new store's
    settings there — ``config``'s chosen ones over
    :data:`~deermem.config.NEW_STORE_SETTINGS`, as ``deermem init`` does in a
    new directory. A database that already holds users records none, so it
    keeps running as it did (``confidence`` unless a configuration names a policy).

    Until the store holds a user, a later upgrade given settings records them
    too, laid over the record (which keeps the rest), as ``deermem init`` does
    in an existing directory: a database's settings are given by ``db
    upgrade`` (``deermem init`` is for directories). Once it holds users its
    record is left as it is — the data was written under it — and the
    settings given apply where they are given.

    Returns:
        The versions applied, and the names of the settings recorded (sorted):
        empty when the upgrade recorded none.

    Raises:
        DatabaseError: the database's encoding is not UTF8 (:func:`check_encoding`);
            nothing was applied.
        DatabaseSchemaError: the database is at a version this deermem does not know.
        ConfigError: the record is invalid, or the settings given do not fit with it.
        psycopg.Error: a migration failed; nothing was applied.
    """
    check_encoding(connection, database)
    with connection.transaction():
        connection.execute("SELECT pg_advisory_xact_lock(%s)", (_UPGRADE_LOCK,))
        connection.execute(
            f"CREATE TABLE IF NOT EXISTS {MIGRATIONS_TABLE} ("
            "version integer PRIMARY KEY, name text NOT NULL, "
            "applied_at timestamptz NOT NULL DEFAULT now())"
        )
        applied = applied_versions(connection) or []
        known = [m.version for m in migrations()]
        if applied and (applied[-1] > known[-1] or applied != known[: len(applied)]):
            raise DatabaseSchemaError(
                database,
                f"the database is at schema version {applied[-1]}, which this deermem does "
                f"not know (it knows 1 to {known[-1]}); a newer deermem migrated it",
                found=applied[-1],
                expected=known[-1],
            )
        done = []
        for migration in migrations()[len(applied) :]:
            connection.execute(migration.sql.encode("utf-8"))
            connection.execute(
                f"INSERT INTO {MIGRATIONS_TABLE} (version, name) VALUES (%s, %s)",
                (migration.version, migration.name),
            )
            if migration.version == ARCHIVE_DIGEST_VERSION:
                fill_archive_digests(connection)
            done.append(migration.version)
        given = config or MemoryConfig()
        if SETTINGS_VERSION in [*applied, *done] and not holds_users(connection):
            if SETTINGS_VERSION in done:
                record = recorded_settings(new_store_settings(given))
            elif records_settings(given):
                kept = read_settings(connection, database)
                record = recorded_settings(
                    with_recorded_settings(given, kept, recorded_in(database))
                )
                if record == kept:
                    return done, tuple(sorted(record))
            else:
                return done, ()
            write_settings(connection, record)
            return done, tuple(sorted(record))
        return done, ()


ARCHIVE_DIGEST_VERSION: Final = 6
"""The schema version that adds ``deermem_archive.content_digest``: applying it
computes the digest of every row already there (:func:`fill_archive_digests`)."""


def fill_archive_digests(connection: Connection) -> int:
    """Give every archive row without a ``content_digest`` its digest (inside the
    caller's transaction); return how many rows got one.

    The digest is deermem's duplicate rule (:func:`~deermem.model.duplicate_digest`),
    which SQL cannot compute (Python's ``casefold``), so the rows are read here,
    a batch at a time. A row that does not read keeps none: it is reported where
    it is read for itself.
    """
    filled = 0
    with connection.cursor(name="deermem_archive_digests") as cursor:
        cursor.itersize = _DIGEST_BATCH
        cursor.execute(
            "SELECT user_id, agent, fact_id, document FROM deermem_archive "
            "WHERE content_digest IS NULL"
        )
        while batch := cursor.fetchmany(_DIGEST_BATCH):
            found = [
                (digest, user, agent, fact_id)
                for user, agent, fact_id, document in batch
                if (digest := rows.archive_digest(document)) is not None
            ]
            if not found:
                continue
            connection.cursor().executemany(
                "UPDATE deermem_archive SET content_digest = %s "
                "WHERE user_id = %s AND agent = %s AND fact_id = %s",
                found,
            )
            filled += len(found)
    return filled


_DIGEST_BATCH: Final = 1_000


def holds_users(connection: Connection) -> bool:
    """Whether the database holds any user: one that holds none is a new store."""
    return connection.execute("SELECT EXISTS (SELECT 1 FROM deermem_users)").fetchone() == (True,)


# ---------------------------------------------------------------------------
# The store's own settings: ``deermem_settings`` (schema version 4)
#
# What a Markdown store keeps in its deermem.yaml, one row per setting, its
# value as JSON text (:func:`deermem.config.recorded_settings`' form). Laid
# under every explicit source when a memory opens the database
# (:func:`deermem.config.with_recorded_settings`).
# ---------------------------------------------------------------------------

SETTINGS_VERSION: Final = 4
"""The schema version that adds ``deermem_settings``: applying it to a database
without users is creating a store."""


def recorded_in(database: str) -> str:
    """How errors and ``deermem config show`` name a database's record."""
    return f"deermem_settings of {database}"


def read_settings(connection: Connection, database: str) -> dict[str, object]:
    """The settings the database records (empty: none — a store created before them).

    Raises:
        ConfigError: a row is not JSON, or names a setting no store may keep;
            the error names the table, the database and the setting.
    """
    values: dict[str, object] = {}
    for name, value in connection.execute("SELECT name, value FROM deermem_settings ORDER BY name"):
        try:
            values[name] = json.loads(value)
        except ValueError:
            raise ConfigError(
                [f"{name}: the recorded value is not JSON"], source=recorded_in(database)
            ) from None
    check_recorded(values, recorded_in(database))
    return values


def write_settings(connection: Connection, settings: Mapping[str, object]) -> None:
    """Make ``settings`` the database's whole record (inside the caller's transaction)."""
    connection.execute("DELETE FROM deermem_settings")
    connection.cursor().executemany(
        "INSERT INTO deermem_settings (name, value) VALUES (%s, %s)",
        [(name, json.dumps(value, ensure_ascii=False)) for name, value in settings.items()],
    )


@dataclass(frozen=True, slots=True)
class SchemaStatus(Record):
    """Where a database stands: the version it is at and the one this deermem needs.

    Attributes:
        database: the database, without its password.
        found: its version (``None``: never migrated).
        expected: the version this deermem reads and writes.
        applied: the versions an upgrade just applied (empty for a status check).
        settings: the settings an upgrade recorded (names only): one that created
            the store, or one given settings while the store holds no user.
    """

    database: str
    found: int | None = field(metadata=json_key("version"))
    expected: int
    applied: tuple[int, ...] = ()
    settings: tuple[str, ...] = ()

    json_fields = ("database", "found", "expected", "applied", "settings", "current")

    @property
    def current(self) -> bool:
        """Whether the database is at the version this deermem needs."""
        return self.found == self.expected

    @property
    def created_store(self) -> bool:
        """Whether this upgrade created the store (added ``deermem_settings`` to a
        database without users, and recorded a new store's settings)."""
        return SETTINGS_VERSION in self.applied and bool(self.settings)

    @property
    def kept_as_before(self) -> bool:
        """Whether this upgrade added ``deermem_settings`` to a database that holds users:
        it records none, so the store runs as it did (``confidence`` unless a
        configuration names a policy)."""
        return SETTINGS_VERSION in self.applied and not self.settings


def database_status(url: str, *, timeout: float = 10.0) -> SchemaStatus:
    """The schema version of the database at ``url`` (read only).

    Raises:
        DatabaseError: the database cannot be reached.
    """
    database = redact_url(url)
    with (
        connect(url, database, timeout=timeout) as connection,
        translated(database, address_secrets(url)),
    ):
        applied = applied_versions(connection)
    return SchemaStatus(database, applied[-1] if applied else None, latest_version())


def upgrade_database(
    url: str, config: MemoryConfig | None = None, *, timeout: float = 10.0
) -> SchemaStatus:
    """Apply the migrations the database at ``url`` lacks (see :func:`upgrade`;
    ``config``'s chosen settings go into a new store's record).

    Raises:
        DatabaseError: the database cannot be reached, its encoding is not UTF8, or a
            migration failed (nothing was applied).
        DatabaseSchemaError: the database is at a version this deermem does not know.
    """
    database = redact_url(url)
    with (
        connect(url, database, timeout=timeout) as connection,
        translated(database, address_secrets(url)),
    ):
        applied, recorded = upgrade(connection, database, config)
        versions = applied_versions(connection)
    found = versions[-1] if versions else None
    return SchemaStatus(database, found, latest_version(), tuple(applied), recorded)


def database_settings(url: str, *, timeout: float = 10.0) -> dict[str, object]:
    """The settings the database at ``url`` records (see :func:`read_settings`).

    Raises:
        DatabaseError: the database cannot be reached.
        DatabaseSchemaError: it is not at this deermem's schema version.
        ConfigError: the record is invalid.
    """
    database = redact_url(url)
    with (
        connect(url, database, timeout=timeout) as connection,
        translated(database, address_secrets(url)),
    ):
        check_schema(connection, database)
        return read_settings(connection, database)
