"""Connections to the database, and the driver's errors in deermem's terms.

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

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TypeAlias

import psycopg
from psycopg.rows import TupleRow
from psycopg_pool import PoolTimeout

from deermem.errors import DatabaseError, DatabaseUnavailable

__all__ = ["Connection", "connect", "translated"]

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
