"""What a change set does to a scope, worked out once for both stores.

:func:`plan_changes` turns a change set into what a commit changes (it knows
no paths or tables): preconditions (fact revisions, "must not exist", archive
entries that must exist) are checked under the lock before anything is
written, a fact write that changes nothing is dropped, and the user's next
summary document is laid out. The document (and with it the user's revision)
changes with every commit that changes a fact, an archive entry or a summary.
Each store then writes the plan its own way (the Markdown store's files:
:func:`deermem.store.markdown.store.plan_commit`; PostgreSQL's rows:
:class:`deermem.store.postgres.commit.CommitWriter`).

The rest is what both stores compute alike after a commit, so the two cannot
drift apart: the snapshot after it (:func:`patched_snapshot`, kept by each
store's :class:`ScopeCache`), the archive's order and bounds, recall counting
and the audit without removed facts.
"""

from __future__ import annotations

import bisect
import dataclasses
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import TYPE_CHECKING, TypeVar, cast

from deermem.errors import (
    FactNotFoundError,
    FactRevisionConflict,
    ManifestRevisionConflict,
)
from deermem.model import (
    Fact,
    FactScope,
    Record,
    Scope,
    format_timestamp,
    parse_timestamp,
    redact,
    redact_fact,
    redact_value,
)
from deermem.policy import decay, elapsed_days
from deermem.store.protocol import (
    ChangeSet,
    FactWrite,
    ScopeDump,
    ScopeRecords,
    ScopeSnapshot,
    UserDump,
)
from deermem.store.records import (
    DOCUMENT_VERSION,
    SUMMARY_GROUPS,
    ArchiveEntry,
    Section,
    SummaryDocument,
    UsageEntry,
)

__all__ = [
    "ArchiveOrder",
    "ChangePlan",
    "ScopeCache",
    "beyond_bounds",
    "count_recalls",
    "newest_first",
    "newest_first_ids",
    "patched_snapshot",
    "plan_changes",
    "redact_changes",
    "redact_dump",
    "redact_record",
    "redact_records",
    "redact_section",
    "redacted_changes",
    "sort_facts",
    "stored_scope",
    "strip_audit_events",
]

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

_R = TypeVar("_R", bound=Record)


# ---------------------------------------------------------------------------
# Secrets never reach a store
#
# Both stores redact what a commit (and a whole user loaded by ``deermem
# migrate``) brings, before anything is planned or written: every write path —
# a fact written by hand, an import, an extraction, a restore from the
# archive, a summary, a host backend — ends in a commit, so this one place
# covers them all (see deermem.model's "Secrets"). The authored length limits
# are checked before, by whoever wrote the text, on the text as written and
# (a person's, :func:`deermem.model.check_redacted_length`) as redacted here.
# ---------------------------------------------------------------------------


def redact_changes(changes: ChangeSet) -> tuple[ChangeSet, tuple[str, ...]]:
    """The change set with every secret in its text replaced, and the kinds replaced.

    Facts written, archive entries (the fact and its receipt line), summary
    sections, receipts, regret events, shadow marks, usage entries and
    records written back are covered; the change set itself comes back when
    nothing holds a secret.
    """
    kinds: set[str] = set()
    writes: list[FactWrite] = []
    for write in changes.writes:
        fact, found = redact_fact(write.fact)
        kinds.update(found)
        writes.append(write if not found else FactWrite(fact, write.create))
    summaries: dict[tuple[str, str], str | Section] = {}
    for key, value in changes.summaries.items():
        if isinstance(value, Section):
            section, found = redact_section(value)
            summaries[key] = section
        else:
            redaction = redact(value)
            summaries[key], found = redaction.text, redaction.kinds
        kinds.update(found)
    archive_puts = _each_record(changes.archive_puts, kinds)
    receipts = _each_record(changes.receipts, kinds)
    regret_events = _each_record(changes.regret_events, kinds)
    shadow_marks = {
        fact_id: None if mark is None else _record(mark, kinds)
        for fact_id, mark in changes.shadow_marks.items()
    }
    usage_restores = {
        fact_id: _record(entry, kinds) for fact_id, entry in changes.usage_restores.items()
    }
    records = changes.records
    if records is not None:
        records, found = redact_records(records)
        kinds.update(found)
    if not kinds:
        return changes, ()
    return (
        dataclasses.replace(
            changes,
            writes=tuple(writes),
            summaries=summaries,
            archive_puts=archive_puts,
            receipts=receipts,
            regret_events=regret_events,
            shadow_marks=shadow_marks,
            usage_restores=usage_restores,
            records=records,
        ),
        tuple(sorted(kinds)),
    )


def redacted_changes(changes: ChangeSet, enabled: bool) -> tuple[ChangeSet, tuple[str, ...]]:
    """:func:`redact_changes` when ``enabled`` (``redact_secrets``); else the change set."""
    return redact_changes(changes) if enabled else (changes, ())


def redact_section(section: Section) -> tuple[Section, tuple[str, ...]]:
    """The section with every secret replaced, and the kinds replaced.

    The whole stored object counts — the summary, and the keys the original
    DeerMem (or a person) put beside it — because a section keeps every key
    it is given; the section itself comes back when nothing holds a secret.
    Every path that redacts a section (a commit, an import, a migration,
    ``deermem redact``) uses this one function, so none covers less.
    """
    value, kinds = redact_value(section.to_dict())
    if not kinds:
        return section, ()
    assert isinstance(value, Mapping)
    return Section.from_value(value), kinds


def redact_dump(dump: UserDump) -> tuple[UserDump, tuple[str, ...]]:
    """A whole user (``deermem migrate``, an import) with every secret replaced, and the kinds.

    Everything a user carries into a store is covered: facts, archive entries
    (the fact and its receipt line), summary sections, usage entries, and the
    receipts, regret events and shadow marks as stored (every string in
    them; see :func:`redact_records`). Thread marks are not: a mark is the
    host's id of a conversation and a digest, kept as every commit keeps them.
    """
    kinds: set[str] = set()

    def section_of(section: Section) -> Section:
        redacted, found = redact_section(section)
        kinds.update(found)
        return redacted

    def fact_of(fact: Fact) -> Fact:
        redacted, found = redact_fact(fact)
        kinds.update(found)
        return redacted

    def records_of(scope: ScopeDump) -> ScopeRecords:
        redacted, found = redact_records(ScopeRecords(scope.events, scope.regret, scope.shadow))
        kinds.update(found)
        return redacted

    summaries = dataclasses.replace(
        _record(dump.summaries, kinds),  # its version and lastUpdated; the sections below
        user={name: section_of(s) for name, s in dump.summaries.user.items()},
        history={name: section_of(s) for name, s in dump.summaries.history.items()},
    )
    scopes = []
    for scope in dump.scopes:
        records = records_of(scope)
        scopes.append(
            ScopeDump(
                agent=scope.agent,
                facts=tuple(fact_of(fact) for fact in scope.facts),
                usage={key: _record(entry, kinds) for key, entry in scope.usage.items()},
                events=records.events,
                archive=_each_record(scope.archive, kinds),
                marks=scope.marks,
                regret=records.regret,
                shadow=records.shadow,
            )
        )
    if not kinds:
        return dump, ()
    return UserDump(dump.user_id, summaries, tuple(scopes)), tuple(sorted(kinds))


def redact_records(records: ScopeRecords) -> tuple[ScopeRecords, tuple[str, ...]]:
    """A scope's receipts, regret events and shadow marks, as stored, with every secret replaced.

    They hold no text anyone wrote — ids, categories, reasons, policy names,
    times, kinds — so every string in them is redacted, ids and times
    included: they are read leniently, never checked to be well formed, so a
    value holding a secret is no working id or time, and replacing it breaks
    no reference (an event it makes unreadable is skipped, as any malformed
    one). Mapping keys (a shadow mark's fact id) stay, as in
    :func:`~deermem.model.redact_value`. The records themselves come back
    when nothing holds a secret.
    """
    events, found_events = redact_value(records.events)
    regret, found_regret = redact_value(records.regret)
    shadow, found_shadow = redact_value(records.shadow)
    kinds = tuple(sorted({*found_events, *found_regret, *found_shadow}))
    if not kinds:
        return records, ()
    assert isinstance(events, tuple)
    assert isinstance(regret, tuple)
    assert isinstance(shadow, Mapping)
    return ScopeRecords(events, regret, shadow), kinds


def redact_record(record: _R) -> tuple[_R, tuple[str, ...]]:
    """One of deermem's records (an archive entry, a receipt, a usage entry ...) with
    every secret in its strings replaced, and the kinds replaced.

    A record holds no text anyone wrote but the fact an archive entry keeps
    (redacted as every fact, :func:`~deermem.model.redact_fact`), so every
    other string counts, as in :func:`redact_records`; numbers stay. The
    record itself comes back when nothing holds a secret.
    """
    kinds: set[str] = set()
    redacted = _record(record, kinds)
    return redacted, tuple(sorted(kinds))


def _record(record: _R, kinds: set[str]) -> _R:
    """:func:`redact_record`, adding the kinds replaced to ``kinds``."""
    instance = cast("DataclassInstance", record)  # every Record is a dataclass
    changed = {}
    for part in dataclasses.fields(instance):
        value = getattr(record, part.name)
        new = _redacted(value, kinds)
        if new is not value:
            changed[part.name] = new
    return cast("_R", dataclasses.replace(instance, **changed)) if changed else record


def _each_record(records: tuple[_R, ...], kinds: set[str]) -> tuple[_R, ...]:
    return tuple(_record(record, kinds) for record in records)


def _redacted(value: object, kinds: set[str]) -> object:
    """A field's value with every secret replaced; the value itself when it holds none."""
    if isinstance(value, str):
        redaction = redact(value)
        kinds.update(redaction.kinds)
        return redaction.text
    if isinstance(value, Fact):
        fact, found = redact_fact(value)
        kinds.update(found)
        return fact
    if isinstance(value, Record):
        return _record(value, kinds)
    if isinstance(value, tuple):
        items = tuple(_redacted(item, kinds) for item in value)
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    return value  # numbers, booleans, None, and mappings of numbers (a receipt's components)


# ---------------------------------------------------------------------------
# The change
# ---------------------------------------------------------------------------


# Fields whose change alone does not make a new fact revision.
_BOOKKEEPING = ("revision", "updatedAt")


@dataclass
class ChangePlan:
    """What a commit changes, whatever the store.

    Attributes:
        summaries: the user's document after the commit (the current one
            when nothing changes).
        changed: whether the commit changes anything; only then is the
            document (and the user's revision) written.
        written: the facts as they will be stored (final revisions).
        replaced: for each written fact, the stored version it replaces (if any).
        deleted: the stored facts that go.
    """

    summaries: SummaryDocument
    changed: bool = False
    written: list[Fact] = field(default_factory=list)
    replaced: dict[str, Fact] = field(default_factory=dict)
    deleted: list[Fact] = field(default_factory=list)


def plan_changes(
    lookup: Callable[[str], Fact | None],
    current: SummaryDocument,
    changes: ChangeSet,
    scope: Scope,
    archive_exists: Callable[[str], bool],
) -> ChangePlan:
    """Check preconditions and work out what a commit changes.

    Raises:
        ManifestRevisionConflict: ``expected_revision`` is not the current one.
        FactRevisionConflict: a written or deleted fact is not at the expected revision.
        FactNotFoundError: a deleted fact or archive entry does not exist.
        ValueError: the change set addresses one fact twice, or an unknown summary section.
    """
    if changes.expected_revision is not None and changes.expected_revision != current.revision:
        raise ManifestRevisionConflict(expected=changes.expected_revision, actual=current.revision)
    _check_distinct(changes)
    stamp = format_timestamp(changes.now)
    plan = ChangePlan(summaries=current)
    for write in changes.writes:
        stored = lookup(write.fact.id)
        fact = _planned_write(stored, write.fact, write.create, stamp, scope)
        if fact is None:
            continue
        if stored is not None:
            plan.replaced[fact.id] = stored
        plan.written.append(fact)
    for delete in changes.deletes:
        stored = lookup(delete.fact_id)
        if stored is None:
            raise FactNotFoundError(delete.fact_id)
        if delete.expected_revision is not None and delete.expected_revision != stored.revision:
            raise FactRevisionConflict(
                delete.fact_id, expected=delete.expected_revision, actual=stored.revision
            )
        plan.deleted.append(stored)
    for fact_id in changes.archive_deletes:
        if not archive_exists(fact_id):
            raise FactNotFoundError(fact_id, where="archive")
    sections = _changed_sections(current, changes, stamp)
    plan.changed = bool(
        plan.written or plan.deleted or changes.archive_deletes or changes.archive_puts or sections
    )
    if plan.changed:
        plan.summaries = SummaryDocument(
            version=DOCUMENT_VERSION,
            revision=current.revision + 1,
            lastUpdated=stamp,
            user={**current.user, **sections.get("user", {})},
            history={**current.history, **sections.get("history", {})},
        )
    return plan


def _planned_write(
    stored: Fact | None, fact: Fact, create: bool, stamp: str, scope: Scope
) -> Fact | None:
    """The fact as it will be stored, or ``None`` if nothing changes."""
    candidate = stored_scope(fact, scope)
    if create:
        if stored is not None:
            raise FactRevisionConflict(fact.id, expected=None, actual=stored.revision)
        return candidate
    if stored is None:
        raise FactRevisionConflict(fact.id, expected=fact.revision, actual=None)
    if fact.revision != stored.revision:
        raise FactRevisionConflict(fact.id, expected=fact.revision, actual=stored.revision)
    if _same_content(candidate, stored):
        return None
    return candidate.replace(revision=stored.revision + 1, updatedAt=stamp)


def _same_content(left: Fact, right: Fact) -> bool:
    a, b = left.to_dict(), right.to_dict()
    for key in _BOOKKEEPING:
        a.pop(key, None)
        b.pop(key, None)
    return a == b


def _check_distinct(changes: ChangeSet) -> None:
    seen: set[str] = set()
    for fact_id in [w.fact.id for w in changes.writes] + [d.fact_id for d in changes.deletes]:
        if fact_id in seen:
            raise ValueError(f"the change set addresses fact {fact_id!r} more than once")
        seen.add(fact_id)
    archived = [e.fact_id for e in changes.archive_puts] + list(changes.archive_deletes)
    if len(set(archived)) != len(archived):
        raise ValueError("the change set addresses one archive entry more than once")
    appends = changes.receipts or changes.regret_events or changes.shadow_marks
    if changes.records is not None and (appends or changes.forget_in_audit):
        raise ValueError("the change set replaces the scope's records and changes them too")


def _changed_sections(
    current: SummaryDocument, changes: ChangeSet, stamp: str
) -> dict[str, dict[str, Section]]:
    sections: dict[str, dict[str, Section]] = {}
    for (group, name), value in changes.summaries.items():
        if group not in SUMMARY_GROUPS or name not in SUMMARY_GROUPS[group]:
            raise ValueError(f"unknown summary section {group}.{name}")
        before = current.section((group, name))
        if isinstance(value, Section):
            if value == before:
                continue
            section = value
        else:
            if before.summary == value:
                continue
            section = Section(summary=value, updatedAt=stamp)
        sections.setdefault(group, {})[name] = section
    return sections


def stored_scope(fact: Fact, scope: Scope) -> Fact:
    """The fact with its scope set to the store's (what :func:`encode_fact` writes)."""
    return fact.with_scope(FactScope(userId=scope.user_id, agentName=scope.agent))


# ---------------------------------------------------------------------------
# The snapshot after a commit, and the cache that keeps snapshots between commits
#
# A store serves a cached snapshot only while the user's data is unchanged
# (each store knows its own sign: a file signature, a revision); after its own
# commit it patches the snapshot it holds instead of reading the scope again.
# The cache holds immutable snapshots, so handing them out needs no copy, and
# keeps the most recently used scopes only (a server sees many users).
# ---------------------------------------------------------------------------


_EARLIEST = datetime.min.replace(tzinfo=UTC)


def sort_facts(facts: Iterable[Fact]) -> tuple[Fact, ...]:
    """Facts by creation time, then id: the order every reader and the gate see."""
    return tuple(sorted(facts, key=_creation_key))


def _creation_key(fact: Fact) -> tuple[datetime, str]:
    return (parse_timestamp(fact.createdAt) or _EARLIEST, fact.id)


def patched_snapshot(
    snapshot: ScopeSnapshot,
    written: Iterable[Fact],
    removed: Iterable[Fact],
    summaries: SummaryDocument,
    version: str,
) -> ScopeSnapshot:
    """The snapshot after a commit, without re-reading or re-sorting the library.

    ``removed`` are the stored facts that left or were replaced (the very
    objects of ``snapshot``); each change costs a binary search, so refreshing
    the cache after adding one fact to ten thousand is a list copy, not a sort.
    """
    facts = list(snapshot.facts)
    index = snapshot.by_id.copy() if "by_id" in snapshot.__dict__ else None
    for fact in removed:
        _remove(facts, fact)
        if index is not None:
            index.pop(fact.id, None)
    for fact in written:
        bisect.insort(facts, fact, key=_creation_key)
        if index is not None:
            index[fact.id] = fact
    patched = ScopeSnapshot(snapshot.scope, summaries, tuple(facts), version)
    if index is not None:
        # Carry the id index over (it is a cached_property): rebuilding it
        # would cost a pass over the whole library on the next lookup.
        patched.__dict__["by_id"] = MappingProxyType(index)
    return patched


def _remove(facts: list[Fact], fact: Fact) -> None:
    """Remove the object ``fact`` from the sorted list (found by binary search)."""
    index = bisect.bisect_left(facts, _creation_key(fact), key=_creation_key)
    while index < len(facts) and facts[index] is not fact:
        index += 1
    if index < len(facts):
        del facts[index]


class ScopeCache:
    """Thread-safe LRU of scope snapshots keyed by ``(user_id, agent)``."""

    def __init__(self, capacity: int = 256) -> None:
        self._capacity = capacity
        self._entries: OrderedDict[tuple[str | None, str], tuple[object, ScopeSnapshot]] = (
            OrderedDict()
        )
        self._lock = threading.Lock()

    def get(self, scope: Scope, token: object) -> ScopeSnapshot | None:
        """The cached snapshot if it was loaded at ``token`` (any value that compares equal)."""
        key = (scope.user_id, scope.agent)
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry[0] != token:
                return None
            self._entries.move_to_end(key)
            return entry[1]

    def put(self, scope: Scope, token: object, snapshot: ScopeSnapshot) -> None:
        key = (scope.user_id, scope.agent)
        with self._lock:
            self._entries[key] = (token, snapshot)
            self._entries.move_to_end(key)
            while len(self._entries) > self._capacity:
                self._entries.popitem(last=False)

    def drop(self, scope: Scope) -> None:
        with self._lock:
            self._entries.pop((scope.user_id, scope.agent), None)

    def drop_user(self, user_id: str | None) -> None:
        with self._lock:
            for key in [key for key in self._entries if key[0] == user_id]:
                del self._entries[key]


# ---------------------------------------------------------------------------
# The archive's order and bounds
#
# Beyond ``archive_max_entries`` the oldest entries go, and entries older than
# ``archive_max_age_days`` (if not 0) go; their receipts stay in the audit. Age
# is the entry's stored ``archivedAt``, never a file's modification time (which
# a copy or a checkout resets).
# ---------------------------------------------------------------------------


def newest_first(entries: Iterable[ArchiveEntry]) -> list[ArchiveEntry]:
    """Archive entries as every store lists them: newest first, ties by id."""
    return sorted(entries, key=_age_key)


def newest_first_ids(listing: Mapping[str, str]) -> list[str]:
    """The ids of an archive listing (id → ``archivedAt``) in :func:`newest_first`'s order."""
    return sorted(listing, key=lambda fact_id: _age(listing[fact_id], fact_id))


def _age_key(entry: ArchiveEntry) -> tuple[float, str]:
    return _age(entry.archived_at, entry.fact_id)


def _age(archived_at: str, fact_id: str) -> tuple[float, str]:
    archived = parse_timestamp(archived_at)
    # Newest first; unreadable times sort last (oldest).
    return (-archived.timestamp() if archived is not None else float("inf"), fact_id)


#: The archive in arrival order: (fact id, its stored ``archivedAt``).
ArchiveOrder = list[tuple[str, str]]


def beyond_bounds(
    order: ArchiveOrder, now: datetime, max_entries: int, max_age_days: int
) -> set[str]:
    """The ids the archive's bounds remove from ``order`` (oldest arrival first).

    The oldest entries beyond ``max_entries`` go (equal times: the earliest
    arrival), and every entry older than ``max_age_days`` (0: no age limit).
    """
    times = [parse_timestamp(archived_at) for _, archived_at in order]
    # Oldest first; unreadable times count as oldest; ties keep the arrival order.
    ranked = sorted(range(len(order)), key=lambda n: times[n] or _EARLIEST)
    excess = max(0, len(order) - max_entries)
    doomed = {order[n][0] for n in ranked[:excess]}
    # A limit before year 1 (a clock within ``max_age_days`` of it): nothing is that old.
    if max_age_days > 0 and now - _EARLIEST > timedelta(days=max_age_days):
        limit = now - timedelta(days=max_age_days)
        doomed.update(order[n][0] for n in ranked[excess:] if (times[n] or limit) < limit)
    return doomed


# ---------------------------------------------------------------------------
# Recall counts and the audit
# ---------------------------------------------------------------------------


def count_recalls(
    usage: Mapping[str, UsageEntry], fact_ids: Iterable[str], now: datetime, half_life_days: float
) -> dict[str, UsageEntry]:
    """The new usage entry of each fact recalled once more: heat × 2^(−Δdays/half-life) + 1.

    Every store counts with this one function, so heat is the same float
    whichever store keeps it.
    """
    stamp = format_timestamp(now)
    counted: dict[str, UsageEntry] = {}
    for fact_id in dict.fromkeys(fact_ids):
        entry = usage.get(fact_id)
        heat = 0.0
        count = 0
        if entry is not None:
            count = entry.access_count
            last = parse_timestamp(entry.last_accessed_at)
            if last is not None:
                heat = entry.access_heat * decay(elapsed_days(now, last), half_life_days)
        counted[fact_id] = UsageEntry(
            access_heat=heat + 1.0, access_count=count + 1, last_accessed_at=stamp
        )
    return counted


def strip_audit_events(events: Sequence[object], ids: set[str]) -> list[object]:
    """Audit events without the given ids.

    Invalid ``evicted`` items are dropped; a shadow whose ``wouldEvict`` is
    not a list is removed, otherwise its non-string and removed ids go and
    ``disagrees`` is recomputed; an event left with no evicted fact goes.
    """
    kept: list[object] = []
    for event in events:
        if not isinstance(event, dict):
            continue
        raw = event.get("evicted")
        evicted = [
            item
            for item in (raw if isinstance(raw, list) else [])
            if isinstance(item, dict)
            and isinstance(item.get("factId"), str)
            and item["factId"] not in ids
        ]
        if not evicted:
            continue
        cleaned = dict(event)
        cleaned["evicted"] = evicted
        shadow = cleaned.get("shadow")
        if isinstance(shadow, dict):
            would = shadow.get("wouldEvict")
            if not isinstance(would, list):
                del cleaned["shadow"]
            else:
                remaining = sorted(i for i in would if isinstance(i, str) and i not in ids)
                actual = {item["factId"] for item in evicted}
                cleaned["shadow"] = {
                    **shadow,
                    "wouldEvict": remaining,
                    "disagrees": set(remaining) != actual,
                }
        kept.append(cleaned)
    return kept
