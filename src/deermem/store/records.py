"""What a store keeps besides facts, and the stored form of each: one description
per record, shared by both stores.

* the user's **summary document** (``memory.json`` on disk, a JSON column in
  PostgreSQL): its sections and its revision, which every commit advances;
* **usage** (recall counts), **eviction receipts** and **archive entries**;
* **regret events** and the shadow policy's **marks**;
* **thread marks**: how far each conversation has been extracted.

These are plain values with their JSON form. The JSON keys of a receipt are
the original DeerMem's audit-event keys (``occurredAt``, ``reason``,
``policyVersion``, ``maxFacts``, ``reservedCorrectionSlots``, ``evicted``,
``shadow``) plus deermem's own (``receiptId``, ``trigger``, ``occupancy``
and, per evicted fact, ``rank`` and ``margin``), so an audit file written by
either reads in both.

A receipt never holds fact content: only ids, categories and numbers; nor
does a regret event or a mark. An archive entry does hold the fact — that is
what makes an eviction reversible — and lives in its own file (or row), which
``purge`` deletes for good.

Reading single items is lenient: a malformed usage entry, audit event or
regret event is dropped, never fatal (an audit that is not a list at all is an
error, see :mod:`deermem.store.markdown.sidecars`). Archive entries and the
summary document hold content and are read strictly: what is not what it must
be is a :class:`~deermem.CorruptMemoryFile` naming the file or row.
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Any, Final, Literal, NamedTuple, get_args

from pydantic import BaseModel, ConfigDict, Field

from deermem.errors import CorruptMemoryFile, FactValidationError, described
from deermem.model import (
    FLATTEN,
    MAX_WHOLE_NUMBER,
    OMIT_NONE,
    Fact,
    FactOut,
    Record,
    Scope,
    WireForm,
    duplicate_key,
    json_form,
    json_key,
    parse_json,
    parse_timestamp,
)
from deermem.policy import EvictedFact, ShadowComparison

__all__ = [
    "DOCUMENT_VERSION",
    "HISTORY_SECTIONS",
    "REASON_CAPACITY",
    "REASON_DELETED",
    "REASON_REPLACED",
    "REGRET_KINDS",
    "SUMMARY_GROUPS",
    "TRIGGERS",
    "USER_SECTIONS",
    "VECTOR_BYTES",
    "ArchiveEntry",
    "ArchiveEntryJson",
    "ArchivedJson",
    "EvictionReceipt",
    "ReceiptEntry",
    "ReceiptJson",
    "RegretEvent",
    "RegretKind",
    "RegretRole",
    "Section",
    "ShadowMark",
    "SummaryDocument",
    "SummaryKey",
    "ThreadMark",
    "Trigger",
    "UsageEntry",
    "content_key",
    "decode_entry",
    "decode_summaries",
    "encode_entry",
    "encode_summaries",
    "margin_words",
    "query_digest",
    "receipt_id_for",
    "stored_fact",
    "summaries_header_problem",
    "usable_vector",
]


# ---------------------------------------------------------------------------
# The user's summary document
# ---------------------------------------------------------------------------


DOCUMENT_VERSION: Final = "2.0"

USER_SECTIONS: Final = ("workContext", "personalContext", "topOfMind")

HISTORY_SECTIONS: Final = ("recentMonths", "earlierContext", "longTermBackground")

SUMMARY_GROUPS: Final[Mapping[str, tuple[str, ...]]] = {
    "user": USER_SECTIONS,
    "history": HISTORY_SECTIONS,
}

SummaryKey = tuple[str, str]
"""``(group, section)``, e.g. ``("user", "workContext")``."""


@dataclass(frozen=True, slots=True)
class Section(Record):
    """One summary section of the user-global document.

    ``summary`` and ``updatedAt`` are text. ``extra`` holds what a stored
    section has besides: unknown keys, and a ``summary`` or ``updatedAt``
    that is not a string (the original accepts any JSON value there; its
    text here is what the original's prompt shows: ``str(value)``, or ``""``
    for an empty one). They are written back as they were read; a section
    that changes is replaced whole, as in the original.
    """

    summary: str = ""
    updatedAt: str = ""
    extra: Mapping[str, object] = field(default_factory=dict, metadata=FLATTEN)

    @classmethod
    def from_value(cls, value: Mapping[str, object]) -> Section:
        """A section from its stored object (any values; see the class docstring)."""
        summary = value.get("summary", "")
        updated = value.get("updatedAt", "")
        extra = {
            key: item
            for key, item in value.items()
            if key not in ("summary", "updatedAt") or not isinstance(item, str)
        }
        return cls(
            summary=summary if isinstance(summary, str) else str(summary) if summary else "",
            updatedAt=updated if isinstance(updated, str) else str(updated) if updated else "",
            extra=MappingProxyType(extra),
        )


def _empty_sections(names: tuple[str, ...]) -> Mapping[str, Section]:
    return {name: Section() for name in names}


@dataclass(frozen=True, slots=True)
class SummaryDocument(Record):
    """The user-global summaries (``memory.json``): never holds facts.

    ``revision`` grows by one with every commit of the user (any agent);
    ``version`` is ``"1.0"`` until the first commit writes the document.
    """

    version: str = "1.0"
    revision: int = 0
    lastUpdated: str = ""
    user: Mapping[str, Section] = field(default_factory=lambda: _empty_sections(USER_SECTIONS))
    history: Mapping[str, Section] = field(
        default_factory=lambda: _empty_sections(HISTORY_SECTIONS)
    )

    def section(self, key: SummaryKey) -> Section:
        group, name = key
        sections = self.user if group == "user" else self.history
        return sections.get(name, Section())


def encode_summaries(document: SummaryDocument) -> bytes:
    """``memory.json``: the summaries only, never facts — as the original writes it.

    A summary read with a lone surrogate (a JSON ``"\\ud800"`` escape) cannot
    be written as UTF-8; such a document is written with every non-ASCII
    character escaped instead, which reads back as the same values.
    """
    data = document.to_dict()
    try:
        return json.dumps(data, indent=2, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(data, indent=2).encode("utf-8")


def decode_summaries(data: bytes, path: str | Path) -> SummaryDocument:
    """Read ``memory.json``.

    Raises:
        CorruptMemoryFile: not a JSON object, a field of the wrong type, or a
            version-1 document that still holds facts (deermem does not
            migrate those; the original's migration tool does).
    """
    try:
        document = parse_json(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CorruptMemoryFile(path, f"not valid JSON: {error}") from None
    except RecursionError:  # the C decoder's own depth guard; nothing deermem writes
        raise CorruptMemoryFile(path, "nested too deeply to be read") from None
    if not isinstance(document, dict):
        raise CorruptMemoryFile(path, f"expected a JSON object, found {type(document).__name__}")
    if document.get("facts"):
        raise CorruptMemoryFile(
            path,
            "a version-1 document that still holds facts; migrate it with the original "
            "DeerMem's migration tool first (deermem reads the version-2 layout)",
        )
    problem = summaries_header_problem(document)
    if problem is not None:
        name, value, expected = problem
        raise CorruptMemoryFile(path, f"field {name!r} has {described(value)}; {expected}")
    version = document.get("version", "1.0")
    revision = document.get("revision", 0)
    updated = document.get("lastUpdated", "")
    # Checked just above (summaries_header_problem).
    assert isinstance(version, str)
    assert isinstance(revision, int)
    assert isinstance(updated, str)
    return SummaryDocument(
        version=version,
        revision=revision,
        lastUpdated=updated,
        user=_sections(document, "user", path),
        history=_sections(document, "history", path),
    )


def summaries_header_problem(document: Mapping[str, object]) -> tuple[str, object, str] | None:
    """The first of a summary document's ``version``, ``revision`` and ``lastUpdated``
    that is not what it must be, as (field, value, what is expected); ``None`` when
    all are (or are missing: they have defaults). The value is for an error to
    describe (:func:`~deermem.errors.described`), never to quote: a document
    given by a caller may hold anything there."""
    version = document.get("version", "1.0")
    revision = document.get("revision", 0)
    updated = document.get("lastUpdated", "")
    if not isinstance(version, str):
        return "version", version, "expected a text"
    if (
        isinstance(revision, bool)
        or not isinstance(revision, int)
        or not 0 <= revision <= MAX_WHOLE_NUMBER
    ):
        return "revision", revision, f"expected a whole number from 0 to {MAX_WHOLE_NUMBER}"
    if not isinstance(updated, str):
        return "lastUpdated", updated, "expected a text"
    return None


def _sections(
    document: Mapping[str, object], group: str, path: str | Path
) -> Mapping[str, Section]:
    defaults = SummaryDocument()
    base = dict(defaults.user if group == "user" else defaults.history)
    raw = document.get(group)
    if raw is None:
        return base
    if not isinstance(raw, dict):
        raise CorruptMemoryFile(path, f"'{group}' must be an object, found {type(raw).__name__}")
    for name, value in raw.items():
        if not isinstance(value, dict):
            raise CorruptMemoryFile(path, f"'{group}.{name}' must be an object")
        base[name] = Section.from_value(value)
    return base


# ---------------------------------------------------------------------------
# Usage, eviction receipts and archive entries
# ---------------------------------------------------------------------------


Trigger = Literal["extraction", "manual", "import", "restore"]

TRIGGERS: Final[tuple[Trigger, ...]] = ("extraction", "manual", "import", "restore")

REASON_CAPACITY: Final = "capacity"
"""The capacity gate evicted the fact."""

REASON_DELETED: Final = "deleted"
"""Someone deleted the fact (CLI, API, tool)."""

REASON_REPLACED: Final = "replaced"
"""An import replaced the library and the fact was not in it."""


@dataclass(frozen=True, slots=True)
class UsageEntry(Record):
    """How often and how recently a fact was recalled (the usage sidecar's value)."""

    access_heat: float
    access_count: int
    last_accessed_at: str

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
        if isinstance(count, bool) or not isinstance(count, int):
            return None
        if not 0 <= count <= MAX_WHOLE_NUMBER:
            return None
        if not isinstance(accessed, str):
            return None
        return cls(access_heat=float(heat), access_count=count, last_accessed_at=accessed)


_MARGIN_SHOWN: Final = 0.00005
"""Margins smaller than this print as 0.0000 at four decimals, so they are said otherwise."""


def margin_words(
    margin: float | None,
    *,
    rank: int | None = None,
    max_facts: int | None = None,
    reserved: int | None = None,
) -> str | None:
    """Where an evicted fact's score stood against the lowest fact kept, in one phrase.

    Every interface says it in these words, so none can state a sign the
    decision did not have. A positive margin is a lower score; a negative
    one a higher score that lost its slot to a reserved correction; 0 is a
    tie, which the ranking breaks by input order (the fact that came first
    stays); a margin too small to show at four decimals (``hybrid-v1``
    between equal facts) says so instead of "0.0000". ``None`` when the
    receipt holds no margin.

    A tie is said with what its receipt tells, when given: the line's
    ``rank``, the receipt's ``max_facts`` and its ``reserved`` slots. A fact
    ranked within the cap lost its slot to a reserved correction, tie or
    not; and in a decision that reserved slots the lowest kept fact may be a
    correction that came later, so there a tie is not said to have gone by
    order.
    """
    if margin is None:
        return None
    held = "a reserved correction held its slot"
    if margin == 0:
        if rank is not None and max_facts is not None and rank <= max_facts:
            return f"tied with the lowest kept ({held})"
        if reserved:
            return "tied with the lowest kept"
        return "tied with the lowest kept (a tie keeps the fact that came first)"
    size = f"{abs(margin):.4f}" if abs(margin) >= _MARGIN_SHOWN else "less than 0.0001"
    if margin > 0:
        return f"{size} below the lowest kept"
    return f"{size} above the lowest kept ({held})"


# A receipt line's decision numbers are written only for a ranking (one with a score).
_WITH_SCORE: Final = json_key(present_with="score")


@dataclass(frozen=True, slots=True)
class ReceiptEntry(Record):
    """One fact a receipt accounts for. No content: id, category and numbers only.

    ``score``, ``components``, ``rank`` and ``margin`` are those of the
    capacity decision; they are ``None``/empty for removals that were not a
    ranking (a deletion, an import that replaced the library).
    """

    fact_id: str
    category: str
    score: float | None = field(default=None, metadata=OMIT_NONE)
    components: Mapping[str, float] = field(default_factory=dict, metadata=_WITH_SCORE)
    rank: int | None = field(default=None, metadata=_WITH_SCORE)
    margin: float | None = field(default=None, metadata=_WITH_SCORE)

    @property
    def margin_words(self) -> str | None:
        """The margin in words (:func:`margin_words`) when the receipt is not at hand
        (:meth:`EvictionReceipt.margin_words` says a tie as its receipt tells)."""
        return margin_words(self.margin)

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
class EvictionReceipt(Record):
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

    receipt_id: str | None = field(metadata=OMIT_NONE)
    occurred_at: str
    reason: str
    trigger: str | None = field(metadata=OMIT_NONE)
    policy_version: str
    max_facts: int
    occupancy: int | None = field(metadata=OMIT_NONE)
    reserved_correction_slots: int
    evicted: tuple[ReceiptEntry, ...]
    shadow: ShadowComparison | None = field(default=None, metadata=OMIT_NONE)

    # The audit file's order (the original's keys first, deermem's own after).
    json_fields = (
        "occurred_at",
        "reason",
        "policy_version",
        "max_facts",
        "reserved_correction_slots",
        "evicted",
        "shadow",
        "receipt_id",
        "trigger",
        "occupancy",
    )

    @property
    def fact_ids(self) -> tuple[str, ...]:
        return tuple(entry.fact_id for entry in self.evicted)

    def entry_for(self, fact_id: str) -> ReceiptEntry | None:
        return next((entry for entry in self.evicted if entry.fact_id == fact_id), None)

    def margin_words(self, line: ReceiptEntry) -> str | None:
        """One of its lines' margin in words (:func:`margin_words`), told with the cap and
        the reserve this receipt records, as the CLI and the inspector both say it."""
        return margin_words(
            line.margin,
            rank=line.rank,
            max_facts=self.max_facts,
            reserved=self.reserved_correction_slots,
        )

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
class ArchiveEntry(Record):
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
    shadow: ShadowMark | None = field(default=None, metadata=OMIT_NONE)

    # The entry file's order: why it left first, the fact last.
    json_fields = (
        "archived_at",
        "reason",
        "trigger",
        "receipt_id",
        "policy_version",
        "eviction",
        "usage",
        "shadow",
        "fact",
    )

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


def receipt_id_for(scope_key: str, revision: int, reason: str, fact_ids: Sequence[str]) -> str:
    """A receipt id that is unique per scope and commit, and the same on every run.

    The manifest revision grows with every commit of a user, so (scope,
    revision, reason) never repeats; the fact ids only make collisions
    between scopes even less likely.
    """
    text = "\x1f".join([scope_key, str(revision), reason, *fact_ids])
    return "rcpt_" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def encode_entry(entry: ArchiveEntry) -> bytes:
    """The entry as indented JSON: people read archive entries to decide what to restore."""
    return (json.dumps(entry.to_dict(), indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def stored_fact(
    raw: dict[str, object],
    where: str | Path,
    scope: Scope,
    expected_id: str,
    what: str,
    elsewhere: str,
) -> Fact:
    """A stored fact, checked as every store reads one: valid, of its id and of this scope.

    Args:
        where: the file or row, for the error.
        what: the fact's name in the errors (``"fact"``, ``"archived fact"``).
        elsewhere: what the errors say when the fact carries another id.

    Raises:
        CorruptMemoryFile: it is not a valid fact, or another id's or another scope's.
    """
    try:
        fact = Fact.from_dict(raw)
    except FactValidationError as error:
        raise CorruptMemoryFile(where, f"invalid {what}: {error}") from None
    if fact.id != expected_id:
        raise CorruptMemoryFile(where, f"the {what} {fact.id!r} {elsewhere}")
    if fact.scope is not None and (
        fact.scope.agentName != scope.agent or fact.scope.userId != scope.user_id
    ):
        raise CorruptMemoryFile(where, f"scope mismatch: the {what} belongs to another scope")
    return fact


def decode_entry(data: bytes, path: str | Path, scope: Scope, expected_id: str) -> ArchiveEntry:
    """Read an archive entry strictly.

    Raises:
        CorruptMemoryFile: not a JSON object, an invalid fact, a fact whose id
            is not the file name or whose scope is another scope's.
    """
    try:
        raw = parse_json(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CorruptMemoryFile(path, f"not valid JSON: {error}") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("fact"), dict):
        raise CorruptMemoryFile(path, "an archive entry must be an object with a 'fact' object")
    fact = stored_fact(
        raw["fact"], path, scope, expected_id, "archived fact", "does not match the file name"
    )
    archived_at = raw.get("archivedAt")
    reason = raw.get("reason")
    if not isinstance(archived_at, str) or not isinstance(reason, str):
        raise CorruptMemoryFile(path, "an archive entry needs 'archivedAt' and 'reason' strings")
    return ArchiveEntry(
        fact=fact,
        archived_at=archived_at,
        reason=reason,
        trigger=_text(raw.get("trigger")),
        receipt_id=_text(raw.get("receiptId")),
        eviction=ReceiptEntry.from_dict(raw.get("eviction")),
        policy_version=_text(raw.get("policyVersion")),
        usage=UsageEntry.from_dict(raw.get("usage")),
        shadow=ShadowMark.from_dict(raw.get("shadow")),
    )


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


# ---------------------------------------------------------------------------
# Regret: the store's records of evidence that a fact should not have left
#
# A *regret event* says that a fact a capacity policy evicted — or, in shadow
# mode, would have evicted — turned out to be wanted after all. It is written by
# the commit that observed it (a relearned or restored fact comes back in the
# same commit; a search records its missed recalls with its recall counts), and
# it holds no content: ids, a category, policy versions, times, kinds, and for a
# search the rank and a digest of the query.
#
# The kinds, and the policy each counts against:
#
# * ``relearned`` — a proposal (extraction, import, manual create) said again
#   what an archived fact says (the duplicate rule, deermem.model.duplicate_key),
#   so the archived fact came back through the capacity gate with its history;
#   under the shadow policy: the proposal repeated a fact the shadow would have
#   evicted;
# * ``restored`` — a user or tool restored the archived fact;
# * ``missed_recall`` — a search's top results would have included the archived
#   fact had it still been in the library;
# * ``confirmed``, ``recalled``, ``corrected`` — shadow only: the user confirmed,
#   a search returned, or the user corrected (a contradiction removal) a fact
#   that the shadow policy would have evicted but the active policy kept.
#
# Each event names its ``role``: ``active`` counts against the policy that
# evicted the fact, ``shadow`` against the policy that would have. A fact both
# evicted gets one event per policy.
#
# A ShadowMark remembers that the shadow policy would have evicted a fact that
# the active policy kept; marks live while the fact is in the library and travel
# with it into its archive entry when it leaves.
# ---------------------------------------------------------------------------


RegretKind = Literal["relearned", "restored", "missed_recall", "confirmed", "recalled", "corrected"]

REGRET_KINDS: Final[tuple[RegretKind, ...]] = get_args(RegretKind)

RegretRole = Literal["active", "shadow"]

REGRET_ROLES: Final[tuple[RegretRole, ...]] = get_args(RegretRole)


def query_digest(query: str) -> str:
    """``sha256:`` and 16 hex digits of the query, stripped and case-folded.

    Lets a reader group the searches that asked the same thing without
    storing what they asked. It is a digest, not encryption: a short query
    can be found by hashing guesses.
    """
    key = duplicate_key(query).encode("utf-8", "surrogatepass")
    return "sha256:" + hashlib.sha256(key).hexdigest()[:16]


def content_key(content: str) -> str:
    """The key a text's search vector is kept under: a digest of exactly the text embedded.

    Stores keep vectors by it (PostgreSQL's ``deermem_vectors``, the search
    index's ``vec``), never the text itself.
    """
    return hashlib.blake2b(content.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


VECTOR_BYTES: Final = (384 + 512) * 4
"""A search vector as stores keep it: e5's 384 and USE's 512 float32 side by side,
little-endian (``deermem.recall.embedding`` makes them)."""


def usable_vector(vector: bytes) -> bool:
    """Whether a kept search vector can be compared: :data:`VECTOR_BYTES` long, every float finite.

    Vectors are derived data read back from a database, where a row can be
    written by another version or edited by hand. Whoever reads them treats
    one that is not usable as missing — its text is embedded again — because
    comparing it would fail the whole search (a wrong length) or rank at
    random (a NaN).
    """
    if len(vector) != VECTOR_BYTES:
        return False
    floats = array("f", vector)
    if sys.byteorder == "big":
        floats.byteswap()
    # 896 float32s cannot overflow a float64 sum: it is finite exactly when every one is.
    return math.isfinite(sum(floats))


@dataclass(frozen=True, slots=True)
class ShadowMark(Record):
    """The shadow policy would have evicted this fact; the active policy kept it.

    Attributes:
        policy_version: the shadow policy, e.g. ``hybrid-v1``.
        since: when it first would have (ISO UTC).
        receipt_id: the capacity receipt whose ``shadow.wouldEvict`` named it.
        category: the fact's category then.
    """

    policy_version: str
    since: str
    receipt_id: str | None
    category: str

    @classmethod
    def from_dict(cls, data: object) -> ShadowMark | None:
        """Read a stored mark; ``None`` when it is not a usable one."""
        if not isinstance(data, Mapping):
            return None
        policy, since = data.get("policyVersion"), data.get("since")
        if not isinstance(policy, str) or not policy or not isinstance(since, str):
            return None
        receipt, category = data.get("receiptId"), data.get("category")
        return cls(
            policy_version=policy,
            since=since,
            receipt_id=receipt if isinstance(receipt, str) and receipt else None,
            category=category if isinstance(category, str) and category else "context",
        )


@dataclass(frozen=True, slots=True)
class RegretEvent(Record):
    """One piece of evidence against one policy's (counterfactual) eviction of one fact.

    Attributes:
        kind: what happened (see the module docstring).
        occurred_at: when (ISO UTC, the injected clock).
        fact_id: the fact.
        category: its category.
        policy_version: the policy the event counts against.
        role: ``active`` — that policy evicted the fact; ``shadow`` — it
            would have, in shadow mode.
        evicted_at: when the fact left (``active``) or was first marked (``shadow``).
        receipt_id: the receipt of that eviction, when known.
        reason: why the fact left the library (``capacity`` for a policy's
            eviction; ``deleted``, ``staleness`` ... for removals, which the
            report does not count against a policy).
        trigger: what caused the event: ``extraction``, ``manual``,
            ``import``, ``restore`` or ``search``.
        query_digest: for search events, :func:`query_digest` of the query.
        rank: for search events, the fact's place in the results (1 = first).
    """

    kind: RegretKind
    occurred_at: str
    fact_id: str
    category: str
    policy_version: str
    role: RegretRole
    evicted_at: str
    receipt_id: str | None
    reason: str
    trigger: str
    query_digest: str | None = field(default=None, metadata=OMIT_NONE)
    rank: int | None = field(default=None, metadata=OMIT_NONE)

    @classmethod
    def from_dict(cls, data: object) -> RegretEvent | None:
        """Read a stored event leniently; ``None`` when it is not a usable one."""
        if not isinstance(data, Mapping):
            return None
        kind, role = data.get("kind"), data.get("role")
        texts = [data.get(key) for key in ("occurredAt", "factId", "policyVersion", "evictedAt")]
        if kind not in REGRET_KINDS or role not in REGRET_ROLES:
            return None
        if not all(isinstance(text, str) and text for text in texts):
            return None
        occurred, fact_id, policy, evicted = (str(text) for text in texts)
        rank = data.get("rank")
        return cls(
            kind=kind,
            occurred_at=occurred,
            fact_id=fact_id,
            category=_text(data.get("category")) or "context",
            policy_version=policy,
            role=role,
            evicted_at=evicted,
            receipt_id=_text(data.get("receiptId")),
            reason=_text(data.get("reason")) or "capacity",
            trigger=_text(data.get("trigger")) or "unknown",
            query_digest=_text(data.get("queryDigest")),
            rank=rank if isinstance(rank, int) and not isinstance(rank, bool) else None,
        )


# ---------------------------------------------------------------------------
# Thread marks: how far each conversation of a scope has been extracted
# ---------------------------------------------------------------------------


class ThreadMark(NamedTuple):
    """One conversation's mark, as stored."""

    thread_id: str
    mark: str
    marked_at: str


# --- the records on the wire -----------------------------------------------------------------
#
# An interface hands a receipt or an archive entry out in its file's form (the one
# its to_dict writes, byte-pinned by the store's tests); these annotations give
# pydantic that form and describe it for the HTTP and MCP schemas.

_CLOSED = ConfigDict(defer_build=True, extra="forbid")


class _ReceiptLineShape(BaseModel):
    """One fact a receipt accounts for: id, category and the decision's numbers."""

    model_config = _CLOSED

    factId: str
    category: str
    score: float | None = None
    components: dict[str, float] = {}
    rank: int | None = None
    margin: float | None = Field(None, description="score gap to the lowest fact that stayed")


class _ReceiptShape(BaseModel):
    """An eviction receipt: why facts left the library (never their content)."""

    model_config = _CLOSED

    occurredAt: str
    reason: str = Field(description="capacity, deleted, replaced, staleness ...")
    policyVersion: str
    maxFacts: int
    reservedCorrectionSlots: int
    evicted: list[_ReceiptLineShape]
    shadow: dict[str, Any] | None = Field(None, description="the shadow policy's view, if on")
    receiptId: str | None = None
    trigger: str | None = Field(None, description="manual, extraction, import, restore")
    occupancy: int | None = None


class _ArchivedShape(BaseModel):
    """Why an archived fact left, and when."""

    model_config = _CLOSED

    archivedAt: str
    reason: str
    trigger: str | None
    receiptId: str | None
    policyVersion: str | None
    eviction: _ReceiptLineShape | None
    usage: dict[str, Any] | None
    shadow: dict[str, Any] | None = None


class _ArchiveEntryShape(_ArchivedShape):
    """An archived fact and why it left."""

    fact: FactOut


def _archived_without_fact(entry: ArchiveEntry) -> dict[str, object]:
    return {key: value for key, value in json_form(entry).items() if key != "fact"}


ReceiptJson = Annotated[EvictionReceipt, WireForm(json_form, _ReceiptShape)]
"""An eviction receipt on the wire: its audit-file form (no content)."""
ArchiveEntryJson = Annotated[ArchiveEntry, WireForm(json_form, _ArchiveEntryShape)]
"""An archive entry on the wire: its file's form, the fact included."""
ArchivedJson = Annotated[ArchiveEntry, WireForm(_archived_without_fact, _ArchivedShape)]
"""Why an archived fact left: its archive entry without the fact."""
