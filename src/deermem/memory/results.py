"""What :class:`~deermem.memory.Memory` operations return.

Plain frozen values with a ``to_dict()`` for the CLI's ``--json`` and for
APIs. Receipts in them carry no content; facts do (they are the caller's own
memory).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

# The standing of a fact is the capacity gate's view of it, and a search's
# results are the search's: they are written where the work is done.
from deermem.library.gate import Standing
from deermem.model import Fact, Scope
from deermem.recall.search import ReindexReport, SearchResult
from deermem.store.records import ArchiveEntry, EvictionReceipt, ReceiptEntry

__all__ = [
    "CreateResult",
    "ErasureResult",
    "Explanation",
    "FactStatus",
    "ImportResult",
    "ReindexReport",
    "RestoreResult",
    "ScopeSummary",
    "SearchResult",
    "Standing",
]

FactStatus = Literal["active", "archived", "gone"]


@dataclass(frozen=True, slots=True)
class CreateResult:
    """The outcome of :meth:`Memory.create_fact`.

    Attributes:
        fact_id: the new fact's id, or ``None`` when the capacity gate evicted
            the new fact itself (it is then in the archive, restorable). For
            a relearned fact, the archived fact's id.
        fact: the fact as proposed (as stored, when it was kept).
        evicted: every fact the gate evicted, lowest-ranked first.
        receipts: the receipts of this commit.
        relearned: the archived fact that came back instead of a new one,
            because it says the same (see docs/regret.md), else ``None``.
        redacted: the kinds of secret replaced by ``[redacted: KIND]`` before
            anything was written (never the values; docs/privacy.md).
    """

    fact_id: str | None
    fact: Fact
    evicted: tuple[str, ...]
    receipts: tuple[EvictionReceipt, ...]
    relearned: str | None = None
    redacted: tuple[str, ...] = ()

    @property
    def kept(self) -> bool:
        return self.fact_id is not None

    def to_dict(self) -> dict[str, object]:
        return {
            "factId": self.fact_id,
            "kept": self.kept,
            "proposedFactId": self.fact.id,
            "relearned": self.relearned,
            "evicted": list(self.evicted),
            "receipts": [receipt.to_dict() for receipt in self.receipts],
            "redacted": list(self.redacted),
        }


@dataclass(frozen=True, slots=True)
class RestoreResult:
    """The outcome of :meth:`Memory.restore`: back in the library, or evicted again.

    ``redacted``: the kinds of secret an entry archived before redaction held,
    replaced as it came back (never the values).
    """

    fact_id: str
    restored: bool
    evicted: tuple[str, ...]
    receipts: tuple[EvictionReceipt, ...]
    redacted: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, object]:
        return {
            "factId": self.fact_id,
            "restored": self.restored,
            "evicted": list(self.evicted),
            "receipts": [receipt.to_dict() for receipt in self.receipts],
            "redacted": list(self.redacted),
        }


@dataclass(frozen=True, slots=True)
class ImportResult:
    """The outcome of :meth:`Memory.import_document`.

    Attributes:
        kept: ids of the document's facts now stored.
        evicted: ids the capacity gate evicted.
        replaced: ids of stored facts the document did not contain (removed).
        receipts: the receipts of this commit.
        redacted: the kinds of secret replaced before anything was written.
    """

    kept: tuple[str, ...]
    evicted: tuple[str, ...]
    replaced: tuple[str, ...]
    receipts: tuple[EvictionReceipt, ...]
    redacted: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, object]:
        return {
            "kept": list(self.kept),
            "evicted": list(self.evicted),
            "replaced": list(self.replaced),
            "receipts": [receipt.to_dict() for receipt in self.receipts],
            "redacted": list(self.redacted),
        }


@dataclass(frozen=True, slots=True)
class Explanation:
    """Why a fact is where it is: :meth:`Memory.why`.

    Attributes:
        fact_id: the id asked about.
        status: ``active`` (in the library), ``archived`` (evicted or
            removed, restorable) or ``gone`` (only receipts remain: purged, or
            deleted with ``eviction_mode: delete``).
        fact: the fact, when it is active or archived.
        receipts: the receipts that name the fact, oldest first.
        archive_entry: its archive entry, when archived.
        standing: its rank under the current policy, when active.
    """

    fact_id: str
    status: FactStatus
    fact: Fact | None
    receipts: tuple[EvictionReceipt, ...]
    archive_entry: ArchiveEntry | None
    standing: Standing | None

    @property
    def last_eviction(self) -> tuple[EvictionReceipt | None, ReceiptEntry | None]:
        """The latest receipt naming the fact and its line, falling back to the archive's copy."""
        for receipt in reversed(self.receipts):
            line = receipt.entry_for(self.fact_id)
            if line is not None:
                return receipt, line
        if self.archive_entry is not None:
            return None, self.archive_entry.eviction
        return None, None

    def to_dict(self) -> dict[str, object]:
        return {
            "factId": self.fact_id,
            "status": self.status,
            "fact": None if self.fact is None else self.fact.to_dict(),
            "receipts": [receipt.to_dict() for receipt in self.receipts],
            "archive": None
            if self.archive_entry is None
            else {
                key: value for key, value in self.archive_entry.to_dict().items() if key != "fact"
            },
            "standing": None if self.standing is None else self.standing.to_dict(),
        }


@dataclass(frozen=True, slots=True)
class ScopeSummary:
    """One user and agent of a store, and how much it holds (:meth:`Memory.scopes`).

    Attributes:
        scope: the user (``None``: the single-user layout) and agent.
        facts: active facts.
        archived: archived facts (within ``archive_max_age_days``).
    """

    scope: Scope
    facts: int
    archived: int

    def to_dict(self) -> dict[str, object]:
        return {
            "user": self.scope.user_id,
            "agent": self.scope.agent,
            "facts": self.facts,
            "archived": self.archived,
        }


@dataclass(frozen=True, slots=True)
class ErasureResult:
    """The outcome of :meth:`Memory.erase_user` (counts only: no content).

    Attributes:
        user_id: the user erased.
        counts: what went, by :data:`deermem.store.protocol.ERASED_COUNTS`, plus
            ``searchRows`` (rows of the search index) and ``queued``
            (conversations waiting to be learned from); all 0 for a user the
            store did not hold.
    """

    user_id: str
    counts: Mapping[str, int]

    @property
    def erased(self) -> bool:
        """Whether anything was held for the user."""
        return any(self.counts.values())

    def to_dict(self) -> dict[str, object]:
        return {"userId": self.user_id, "erased": self.erased, "counts": dict(self.counts)}
