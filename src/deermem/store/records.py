"""What the store keeps besides facts: usage, eviction receipts, archive entries.

These are plain values with their JSON form. The JSON keys of a receipt are
the original DeerMem's audit-event keys (``occurredAt``, ``reason``,
``policyVersion``, ``maxFacts``, ``reservedCorrectionSlots``, ``evicted``,
``shadow``) plus deermem's own (``receiptId``, ``trigger``, ``occupancy``
and, per evicted fact, ``rank`` and ``margin``), so an audit file written by
either reads in both.

A receipt never holds fact content: only ids, categories and numbers. An
archive entry does hold the fact — that is what makes an eviction reversible —
and lives in its own file, which ``purge`` deletes for good.

Reading single items is lenient: a malformed usage entry or audit event is
dropped, never fatal (an audit file that is not a list at all is an error,
see :mod:`deermem.store.sidecars`). Archive entries hold content and are
read strictly by the store.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Final, Literal

from deermem.model import Fact, parse_timestamp
from deermem.policy import EvictedFact, ShadowComparison
from deermem.store.regret_records import ShadowMark

__all__ = [
    "REASON_CAPACITY",
    "REASON_DELETED",
    "REASON_REPLACED",
    "TRIGGERS",
    "ArchiveEntry",
    "EvictionReceipt",
    "ReceiptEntry",
    "Trigger",
    "UsageEntry",
    "receipt_id_for",
]

Trigger = Literal["extraction", "manual", "import", "restore"]
TRIGGERS: Final[tuple[Trigger, ...]] = ("extraction", "manual", "import", "restore")

REASON_CAPACITY: Final = "capacity"
"""The capacity gate evicted the fact."""
REASON_DELETED: Final = "deleted"
"""Someone deleted the fact (CLI, API, tool)."""
REASON_REPLACED: Final = "replaced"
"""An import replaced the library and the fact was not in it."""


@dataclass(frozen=True, slots=True)
class UsageEntry:
    """How often and how recently a fact was recalled (the usage sidecar's value)."""

    access_heat: float
    access_count: int
    last_accessed_at: str

    def to_dict(self) -> dict[str, object]:
        return {
            "accessHeat": self.access_heat,
            "accessCount": self.access_count,
            "lastAccessedAt": self.last_accessed_at,
        }

    @classmethod
    def from_dict(cls, data: object) -> UsageEntry | None:
        """Read a sidecar value; ``None`` when it is not a usable entry."""
        if not isinstance(data, Mapping):
            return None
        heat = data.get("accessHeat")
        count = data.get("accessCount")
        accessed = data.get("lastAccessedAt")
        if isinstance(heat, bool) or not isinstance(heat, int | float):
            return None
        if not math.isfinite(float(heat)) or heat < 0:
            return None
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            return None
        if not isinstance(accessed, str):
            return None
        return cls(access_heat=float(heat), access_count=count, last_accessed_at=accessed)


@dataclass(frozen=True, slots=True)
class ReceiptEntry:
    """One fact a receipt accounts for. No content: id, category and numbers only.

    ``score``, ``components``, ``rank`` and ``margin`` are those of the
    capacity decision; they are ``None``/empty for removals that were not a
    ranking (a deletion, an import that replaced the library).
    """

    fact_id: str
    category: str
    score: float | None = None
    components: Mapping[str, float] = field(default_factory=dict)
    rank: int | None = None
    margin: float | None = None

    @classmethod
    def from_eviction(cls, evicted: EvictedFact) -> ReceiptEntry:
        return cls(
            fact_id=evicted.fact_id,
            category=evicted.category,
            score=evicted.score,
            components=dict(evicted.components),
            rank=evicted.rank,
            margin=evicted.margin,
        )

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"factId": self.fact_id, "category": self.category}
        if self.score is not None:
            out["score"] = self.score
            out["components"] = dict(self.components)
            out["rank"] = self.rank
            out["margin"] = self.margin
        return out

    @classmethod
    def from_dict(cls, data: object) -> ReceiptEntry | None:
        if not isinstance(data, Mapping):
            return None
        fact_id = data.get("factId")
        if not isinstance(fact_id, str) or not fact_id:
            return None
        category = data.get("category")
        components = data.get("components")
        return cls(
            fact_id=fact_id,
            category=category if isinstance(category, str) else "context",
            score=_number(data.get("score")),
            components=(
                {k: float(v) for k, v in components.items() if _number(v) is not None}
                if isinstance(components, Mapping)
                else {}
            ),
            rank=_whole(data.get("rank")),
            margin=_number(data.get("margin")),
        )


@dataclass(frozen=True, slots=True)
class EvictionReceipt:
    """Why facts left a library: written once per commit that removed facts.

    Attributes:
        receipt_id: ``rcpt_`` + 16 hex digits, derived from the scope, the
            commit's revision and the facts, so it is stable across runs.
            ``None`` for events written by the original DeerMem.
        occurred_at: ISO UTC timestamp of the commit (the injected clock).
        reason: ``capacity`` for the gate, ``deleted``, ``replaced``, or a
            caller's own (e.g. ``staleness``).
        trigger: what led to the commit (``extraction``, ``manual``,
            ``import``, ``restore``); ``None`` for original events.
        policy_version: the capacity policy in force.
        max_facts: the cap.
        occupancy: facts offered to the gate (``None`` for original events).
        reserved_correction_slots: slots the policy held for protected categories.
        evicted: the facts, lowest-ranked first for ``capacity``.
        shadow: the shadow policy's view, when shadow mode is on.
    """

    receipt_id: str | None
    occurred_at: str
    reason: str
    trigger: str | None
    policy_version: str
    max_facts: int
    occupancy: int | None
    reserved_correction_slots: int
    evicted: tuple[ReceiptEntry, ...]
    shadow: ShadowComparison | None = None

    @property
    def fact_ids(self) -> tuple[str, ...]:
        return tuple(entry.fact_id for entry in self.evicted)

    def entry_for(self, fact_id: str) -> ReceiptEntry | None:
        return next((entry for entry in self.evicted if entry.fact_id == fact_id), None)

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "occurredAt": self.occurred_at,
            "reason": self.reason,
            "policyVersion": self.policy_version,
            "maxFacts": self.max_facts,
            "reservedCorrectionSlots": self.reserved_correction_slots,
            "evicted": [entry.to_dict() for entry in self.evicted],
        }
        if self.shadow is not None:
            out["shadow"] = self.shadow.to_dict()
        if self.receipt_id is not None:
            out["receiptId"] = self.receipt_id
        if self.trigger is not None:
            out["trigger"] = self.trigger
        if self.occupancy is not None:
            out["occupancy"] = self.occupancy
        return out

    @classmethod
    def from_dict(cls, data: object) -> EvictionReceipt | None:
        """Read an audit event leniently: malformed parts are dropped.

        Evicted items that are not objects with a ``factId`` are dropped; a
        shadow whose ``wouldEvict`` is not a list is dropped. An event that is
        not an object, or has no ``occurredAt`` string, gives ``None``.
        """
        if not isinstance(data, Mapping):
            return None
        occurred = data.get("occurredAt")
        if not isinstance(occurred, str):
            return None
        raw_evicted = data.get("evicted")
        entries = tuple(
            entry
            for entry in map(
                ReceiptEntry.from_dict, raw_evicted if isinstance(raw_evicted, list) else []
            )
            if entry is not None
        )
        raw_shadow = data.get("shadow")
        shadow = (
            ShadowComparison.from_dict(raw_shadow)
            if isinstance(raw_shadow, Mapping) and isinstance(raw_shadow.get("wouldEvict"), list)
            else None
        )
        return cls(
            receipt_id=_text(data.get("receiptId")),
            occurred_at=occurred,
            reason=_text(data.get("reason")) or "capacity",
            trigger=_text(data.get("trigger")),
            policy_version=_text(data.get("policyVersion")) or "",
            max_facts=_whole(data.get("maxFacts")) or 0,
            occupancy=_whole(data.get("occupancy")),
            reserved_correction_slots=_whole(data.get("reservedCorrectionSlots")) or 0,
            evicted=entries,
            shadow=shadow,
        )


@dataclass(frozen=True, slots=True)
class ArchiveEntry:
    """A fact that left the library, kept so it can be restored.

    Attributes:
        fact: the fact as it was when it left (content included).
        archived_at: when it left (ISO UTC).
        reason: the receipt's reason (``capacity``, ``deleted`` ...).
        trigger: the receipt's trigger.
        receipt_id: the receipt that accounts for it.
        eviction: the fact's line of that receipt (score, rank, margin), so
            ``why`` can answer even when the bounded audit has dropped it.
        policy_version: the policy in force when it left.
        usage: its usage entry, restored with it.
        shadow: the shadow policy's counterfactual eviction of the fact, when
            it would have evicted it (before or at this eviction): regret
            about the fact counts against the shadow policy too.
    """

    fact: Fact
    archived_at: str
    reason: str
    trigger: str | None
    receipt_id: str | None
    eviction: ReceiptEntry | None = None
    policy_version: str | None = None
    usage: UsageEntry | None = None
    shadow: ShadowMark | None = None

    @property
    def fact_id(self) -> str:
        return self.fact.id

    def expired(self, now: datetime, max_age_days: int) -> bool:
        """Whether the entry is past the archive's age limit (0: no limit)."""
        return self.stamp_expired(self.archived_at, now, max_age_days)

    @staticmethod
    def stamp_expired(archived_at: str, now: datetime, max_age_days: int) -> bool:
        """Whether an entry archived at ``archived_at`` is past the age limit (0: no limit)."""
        if max_age_days <= 0:
            return False
        archived = parse_timestamp(archived_at)
        return archived is not None and now - archived > timedelta(days=max_age_days)

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "archivedAt": self.archived_at,
            "reason": self.reason,
            "trigger": self.trigger,
            "receiptId": self.receipt_id,
            "policyVersion": self.policy_version,
            "eviction": None if self.eviction is None else self.eviction.to_dict(),
            "usage": None if self.usage is None else self.usage.to_dict(),
        }
        if self.shadow is not None:
            out["shadow"] = self.shadow.to_dict()
        out["fact"] = self.fact.to_dict()
        return out


def receipt_id_for(scope_key: str, revision: int, reason: str, fact_ids: Sequence[str]) -> str:
    """A receipt id that is unique per scope and commit, and the same on every run.

    The manifest revision grows with every commit of a user, so (scope,
    revision, reason) never repeats; the fact ids only make collisions
    between scopes even less likely.
    """
    text = "\x1f".join([scope_key, str(revision), reason, *fact_ids])
    return "rcpt_" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _whole(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
