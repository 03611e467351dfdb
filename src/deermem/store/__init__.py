"""Storage: the :class:`Store` protocol, the Markdown store, and the capacity gate.

* :mod:`~deermem.store.protocol` — the contract (no paths): snapshots,
  change sets, commit results, :class:`Store`, :class:`StoreTransaction`.
* :class:`MarkdownStore` — the embedded default: one Markdown file per fact,
  journaled commits, per-user locks, a read cache, sidecars and the archive.
* :class:`CapacityGate` — the one path by which facts enter a library.
* :class:`Scope` — a user and an agent, validated so no identifier can
  address a path outside the store.
"""

from deermem.model import DEFAULT_AGENT, Scope, normalise_agent, safe_user_id
from deermem.store.markdown.paths import resolve_root
from deermem.store.markdown.store import MarkdownStore, MarkdownTransaction
from deermem.store.protocol import (
    HISTORY_SECTIONS,
    USER_SECTIONS,
    ChangeSet,
    CommitResult,
    FactDelete,
    FactWrite,
    ScopeSnapshot,
    Section,
    Store,
    StoreTransaction,
    SummaryDocument,
    SummaryKey,
)
from deermem.store.records import (
    REASON_CAPACITY,
    REASON_DELETED,
    REASON_REPLACED,
    TRIGGERS,
    ArchiveEntry,
    EvictionReceipt,
    ReceiptEntry,
    Trigger,
    UsageEntry,
)

__all__ = [
    "DEFAULT_AGENT",
    "HISTORY_SECTIONS",
    "REASON_CAPACITY",
    "REASON_DELETED",
    "REASON_REPLACED",
    "TRIGGERS",
    "USER_SECTIONS",
    "ArchiveEntry",
    "ChangeSet",
    "CommitResult",
    "EvictionReceipt",
    "FactDelete",
    "FactWrite",
    "MarkdownStore",
    "MarkdownTransaction",
    "ReceiptEntry",
    "Scope",
    "ScopeSnapshot",
    "Section",
    "Store",
    "StoreTransaction",
    "SummaryDocument",
    "SummaryKey",
    "Trigger",
    "UsageEntry",
    "normalise_agent",
    "resolve_root",
    "safe_user_id",
]
