"""Choosing the store a configuration names: PostgreSQL for a ``store`` URL, else Markdown.

The one place that knows both stores, so nothing above :mod:`deermem.store`
picks one by hand. The PostgreSQL store's driver is imported only when a
configuration names a database: the Markdown store needs no extra.
"""

from __future__ import annotations

import os
from pathlib import Path

from deermem.config import MemoryConfig, redact_database_url
from deermem.errors import ConfigError
from deermem.store.markdown.store import MarkdownStore
from deermem.store.protocol import Store

__all__ = ["open_store"]


def open_store(config: MemoryConfig, root: str | os.PathLike[str] | None = None) -> Store:
    """The store ``config`` names.

    Args:
        config: with ``store`` set, the PostgreSQL database it names; else the
            Markdown store at ``storage_path`` (then ``$DEERMEM_DATA_DIR``,
            then ``~/.deermem``).
        root: a Markdown store directory chosen explicitly (``--root``); it
            wins over ``storage_path``, and cannot be combined with ``store``.

    Raises:
        ConfigError: both ``root`` and ``store`` are given, or ``store`` names
            a database and the ``postgres`` extra is not installed.
        DatabaseError: the database cannot be reached.
        DatabaseSchemaError: the database is not migrated (``deermem db upgrade``).
    """
    if not config.store:
        return MarkdownStore.from_config(config, Path(root) if root is not None else None)
    address = redact_database_url(config.store)
    if root is not None:
        raise ConfigError(
            [
                f"a store directory ({os.fspath(root)}) and a database (store = {address}) "
                "are both given; use one of them"
            ]
        )
    try:
        from deermem.store.postgres import PostgresStore
    except ModuleNotFoundError as error:
        raise ConfigError(
            [
                f"store = {address}: PostgreSQL needs the postgres extra "
                f"(pip install 'deermem[postgres]'); {error}"
            ]
        ) from None
    return PostgresStore.from_config(config)
