"""The PostgreSQL store: one memory shared by any number of processes and machines.

Needs the ``postgres`` extra (``uv sync --extra postgres``: psycopg 3
with its pool). :class:`PostgresStore` implements :class:`~deermem.store.Store`;
:mod:`~deermem.store.postgres.database` holds the versioned migrations that
``deermem db upgrade`` applies. See docs/postgres.md.
"""

from deermem.store.postgres.database import latest_version, migrations
from deermem.store.postgres.store import PostgresStore, PostgresTransaction

__all__ = ["PostgresStore", "PostgresTransaction", "latest_version", "migrations"]
