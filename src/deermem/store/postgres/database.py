"""The database itself: connections, the driver's errors in deermem's terms, and the schema.

Every connection runs in autocommit mode: a read is one statement (one
snapshot of the database), and a write opens its transaction explicitly
(``BEGIN`` … ``COMMIT``), so nothing is ever left open on a connection that
goes back to the pool.

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

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Final, TypeAlias

import psycopg
from psycopg.rows import TupleRow
from psycopg_pool import PoolTimeout

from deermem.config import redact_database_url
from deermem.errors import DatabaseError, DatabaseSchemaError, DatabaseUnavailable
from deermem.model import Record, json_key

__all__ = [
    "Connection",
    "Migration",
    "check_schema",
    "connect",
    "database_status",
    "latest_version",
    "migrations",
    "translated",
    "upgrade",
    "upgrade_database",
]

Connection: TypeAlias = psycopg.Connection[TupleRow]


def connect(url: str, database: str, *, timeout: float) -> Connection:
    """One connection of its own (for ``db upgrade`` and the check at open).

    Raises:
        DatabaseError: the server cannot be reached or refuses the login.
    """
    with translated(database):
        return psycopg.connect(url, autocommit=True, connect_timeout=max(1, round(timeout)))


@contextmanager
def translated(database: str) -> Iterator[None]:
    """Raise the driver's and the pool's errors as :class:`~deermem.DatabaseError`."""
    try:
        yield
    except PoolTimeout as error:
        raise DatabaseUnavailable(
            database, f"no database connection could be had in time ({_one_line(error)})"
        ) from None
    except psycopg.OperationalError as error:
        raise DatabaseUnavailable(database, _one_line(error)) from None
    except psycopg.Error as error:
        raise DatabaseError(database, _one_line(error)) from None


def _one_line(error: BaseException) -> str:
    """The driver's message on one line (libpq's span several)."""
    return " ".join(str(error).split()) or type(error).__name__


# ---------------------------------------------------------------------------
# The database schema: versioned migrations, applied by ``deermem db upgrade``, checked at open.
#
# A migration is a plain SQL file shipped in the package,
# ``migrations/NNNN_name.sql``; its number is its version. ``deermem_migrations``
# records each one applied (version, name, when). :func:`upgrade` applies the
# missing ones in order, all in one transaction under an advisory lock, so two
# replicas upgrading at once apply each migration once and a failed migration
# leaves the database as it was. A later change (a new table, a new column)
# is a new file: existing files never change.
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


def check_schema(connection: Connection, database: str) -> int:
    """Refuse a database this deermem cannot use; return its version.

    Raises:
        DatabaseSchemaError: never migrated, behind, or at an unknown version.
    """
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


def upgrade(connection: Connection, database: str) -> list[int]:
    """Apply the migrations the database lacks, in one transaction; return their versions.

    Raises:
        DatabaseSchemaError: the database is at a version this deermem does not know.
        psycopg.Error: a migration failed; nothing was applied.
    """
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
            done.append(migration.version)
        return done


@dataclass(frozen=True, slots=True)
class SchemaStatus(Record):
    """Where a database stands: the version it is at and the one this deermem needs.

    Attributes:
        database: the database, without its password.
        found: its version (``None``: never migrated).
        expected: the version this deermem reads and writes.
        applied: the versions an upgrade just applied (empty for a status check).
    """

    database: str
    found: int | None = field(metadata=json_key("version"))
    expected: int
    applied: tuple[int, ...] = ()

    json_fields = ("database", "found", "expected", "applied", "current")

    @property
    def current(self) -> bool:
        """Whether the database is at the version this deermem needs."""
        return self.found == self.expected


def database_status(url: str, *, timeout: float = 10.0) -> SchemaStatus:
    """The schema version of the database at ``url`` (read only).

    Raises:
        DatabaseError: the database cannot be reached.
    """
    database = redact_database_url(url)
    with connect(url, database, timeout=timeout) as connection, translated(database):
        applied = applied_versions(connection)
    return SchemaStatus(database, applied[-1] if applied else None, latest_version())


def upgrade_database(url: str, *, timeout: float = 10.0) -> SchemaStatus:
    """Apply the migrations the database at ``url`` lacks (see :func:`upgrade`).

    Raises:
        DatabaseError: the database cannot be reached, or a migration failed
            (nothing was applied).
        DatabaseSchemaError: the database is at a version this deermem does not know.
    """
    database = redact_database_url(url)
    with connect(url, database, timeout=timeout) as connection, translated(database):
        applied = upgrade(connection, database)
        versions = applied_versions(connection)
    found = versions[-1] if versions else None
    return SchemaStatus(database, found, latest_version(), tuple(applied))
