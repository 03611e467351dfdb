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

from deermem.config import MemoryConfig, redact_database_url
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
    address = redact_database_url(config.store)
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
    return PostgresStore.from_config(config)
