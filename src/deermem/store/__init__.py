"""Storage: the :class:`Store` contract, its two stores, and choosing one.

* :mod:`~deermem.store.protocol` — the contract (no paths): snapshots,
  change sets, commit results, :class:`Store`, :class:`StoreTransaction`,
  and the records a store keeps besides facts (usage, receipts, archive
  entries, regret events, shadow marks, thread marks).
* :mod:`~deermem.store.plan` — what a change set does, computed once for
  both stores.
* :mod:`~deermem.store.migrate` — a user's whole memory as one value, and
  ``deermem migrate`` copying it between stores.
* :mod:`~deermem.store.markdown` — the embedded default: one Markdown file
  per fact, journaled commits, per-user locks, sidecars and the archive.
* :mod:`~deermem.store.postgres` — many replicas on one database.

:func:`open_store` is the one place that knows both stores, so nothing above
:mod:`deermem.store` picks one by hand.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from deermem.config import MemoryConfig, redact_url, with_store_settings
from deermem.errors import ConfigError
from deermem.store.markdown.files import resolve_root
from deermem.store.markdown.store import MarkdownStore
from deermem.store.protocol import (
    ChangeSet,
    CommitResult,
    FactDelete,
    FactWrite,
    ScopeSnapshot,
    Store,
    StoreTransaction,
)
from deermem.store.records import (
    HISTORY_SECTIONS,
    REASON_DELETED,
    USER_SECTIONS,
    ArchiveEntry,
    EvictionReceipt,
    ReceiptEntry,
    Section,
    SummaryDocument,
    UsageEntry,
)

if TYPE_CHECKING:
    from deermem.store.postgres import PostgresStore

__all__ = [
    "HISTORY_SECTIONS",
    "REASON_DELETED",
    "USER_SECTIONS",
    "ArchiveEntry",
    "ChangeSet",
    "CommitResult",
    "EvictionReceipt",
    "FactDelete",
    "FactWrite",
    "MarkdownStore",
    "ReceiptEntry",
    "ScopeSnapshot",
    "Section",
    "Store",
    "StoreTransaction",
    "SummaryDocument",
    "UsageEntry",
    "database_settings",
    "open_configured",
    "open_store",
    "resolve_root",
]


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
    return _postgres(config, root).from_config(config)


def open_configured(
    config: MemoryConfig, root: str | os.PathLike[str] | None = None
) -> tuple[Store, MemoryConfig]:
    """The store ``config`` names (:func:`open_store`), and what a memory on it runs
    under: ``config`` over the settings the store keeps — a Markdown store's
    ``deermem.yaml`` (:func:`~deermem.config.with_store_settings`), a
    database's ``deermem_settings`` — the store itself built with the result.

    Raises:
        ConfigError: as :func:`open_store`, or the store's record is invalid.
        DatabaseError, DatabaseSchemaError: as :func:`open_store`.
    """
    if not config.store:
        directory = Path(root) if root is not None else resolve_root(config.storage_path)
        configured = with_store_settings(config, directory)
        return MarkdownStore.from_config(configured, directory), configured
    return _postgres(config, root).configured(config)


def database_settings(config: MemoryConfig) -> tuple[dict[str, object], str]:
    """The settings the database ``config.store`` names records, and the record's name
    (``deermem_settings of <database>``, for errors and ``deermem config show``).

    Raises:
        ConfigError, DatabaseError, DatabaseSchemaError: as :func:`open_store`.
    """
    return _postgres(config, None).kept_settings(config.store)


def _postgres(config: MemoryConfig, root: str | os.PathLike[str] | None) -> type[PostgresStore]:
    """The PostgreSQL store, for the database ``config.store`` names.

    Raises:
        ConfigError: ``root`` is given too, or the ``postgres`` extra is not installed.
    """
    address = redact_url(config.store or "")
    if root is not None:
        raise ConfigError(
            [
                f"a store directory ({os.fspath(root)}) and a database (store = {address}) "
                "are both given; use one of them"
            ]
        )
    try:  # the driver is an optional extra: imported only when a database is named
        from deermem.store.postgres import PostgresStore
    except ModuleNotFoundError as error:
        raise ConfigError(
            [
                f"store = {address}: PostgreSQL needs the postgres extra "
                f"(uv sync --extra postgres); {error}"
            ]
        ) from None
    return PostgresStore
