"""Everything of an agent besides its facts: the sidecars, the thread marks and the archive.

All of it lives in ``agents/<agent>/.metadata/`` and changes inside the
journaled commit it belongs to, so after any crash it agrees with the facts.

The usage and the audit sidecars change with the commit they belong to
(receipts of the evictions it makes, usage it drops or restores), so a
receipt exists exactly when its commit happened:

* ``fact-usage.json`` — ``{fact_id: {accessHeat, accessCount, lastAccessedAt}}``:
  derived data, lost without losing a fact. A malformed file is logged and
  read as empty, as the original does. A recall decays the stored heat with
  the access half-life, then adds 1.
* ``eviction-audit.json`` — a JSON list of receipts, newest last, trimmed to
  ``eviction_audit_max_entries``. Canonical data: the receipts of purged
  facts exist nowhere else. A file that is not a JSON list is an error naming
  it, never read as empty and never overwritten; single events it cannot
  read are skipped when reading and kept as they are when receipts are
  appended, as are events written by the original DeerMem.

What a commit does to them is computed by :func:`usage_after_commit` and
:func:`audit_after_commit` — one new content per file, however many kinds of
change the commit makes. A sidecar whose content would not change is not
written.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Final, NamedTuple, TypeVar

from deermem.errors import CorruptMemoryFile
from deermem.model import (
    Scope,
    duplicate_digest,
    duplicate_key,
    is_fact_id,
    parse_json,
    parse_timestamp,
)
from deermem.store.markdown.files import (
    KnownFiles,
    ScopePaths,
    check_owner_fields,
    owner_fields,
    read_if_exists,
)
from deermem.store.plan import (
    ArchiveOrder,
    beyond_bounds,
    count_recalls,
    newest_first,
    strip_audit_events,
)
from deermem.store.protocol import ScopeRecords
from deermem.store.records import (
    ArchiveEntry,
    EvictionReceipt,
    RegretEvent,
    ShadowMark,
    ThreadMark,
    UsageEntry,
    decode_entry,
)

__all__ = [
    "ArchiveIndex",
    "archive_changes",
    "archive_index",
    "archive_listing",
    "archive_matches",
    "arrival_order",
    "audit_after_commit",
    "encode_events",
    "encode_mark",
    "encode_regret_events",
    "encode_shadow_marks",
    "encode_usage",
    "raw_regret_events",
    "raw_shadow_marks",
    "read_archive",
    "read_audit",
    "read_entry",
    "read_events",
    "read_mark",
    "read_marks",
    "read_records",
    "read_regret_events",
    "read_shadow_marks",
    "read_usage",
    "records_after_commit",
    "regret_after_commit",
    "shadow_marks_after_commit",
    "usage_after_access",
    "usage_after_commit",
]


#: A sidecar's new content (``None``: remove the file).
SidecarChange = tuple[Path, bytes | None]

_log = logging.getLogger("deermem.store")
_Document = TypeVar("_Document", list[object], dict[str, object])
_JSON_SHAPES: Final[dict[type, str]] = {list: "a JSON list", dict: "a JSON object"}


def read_json(path: Path) -> object | None:
    """The sidecar's JSON, or ``None`` when it is missing.

    Raises:
        ValueError: the file is not JSON (``UnicodeDecodeError``, ``JSONDecodeError``).
    """
    data = read_if_exists(path)
    if data is None:
        return None
    value: object = parse_json(data)
    return value


def _read_strict(path: Path, what: str, kind: type[_Document]) -> _Document:
    """A sidecar that must hold a JSON ``kind`` (empty when it is missing); ``what`` names it
    in the error, with its verb (``"the regret events are"``).

    Raises:
        CorruptMemoryFile: the file is not JSON, or not a ``kind``.
    """
    return _parse_strict(read_if_exists(path), path, what, kind)


def _parse_strict(data: bytes | None, path: Path, what: str, kind: type[_Document]) -> _Document:
    """:func:`_read_strict` of the file's bytes (``None``: there is no file)."""
    if data is None:
        return kind()
    try:
        raw: object = parse_json(data)
    except ValueError as error:
        raise CorruptMemoryFile(path, f"{what} not valid JSON: {error}") from None
    if not isinstance(raw, kind):
        raise CorruptMemoryFile(path, f"{what} not {_JSON_SHAPES[kind]}")
    return raw


def encode_json(value: list[object] | dict[str, object]) -> bytes:
    """One receipt (or one fact's usage) per line, so the files read and diff line by line."""
    if isinstance(value, dict):
        items = [f"{json.dumps(k, ensure_ascii=False)}: {_compact(v)}" for k, v in value.items()]
        return ("{\n" + ",\n".join(items) + "\n}\n" if items else "{}\n").encode("utf-8")
    return _list_bytes([_compact(item) for item in value])


def _list_bytes(lines: Sequence[str]) -> bytes:
    """A JSON list of the items written as ``lines``, one per line."""
    return ("[\n" + ",\n".join(lines) + "\n]\n" if lines else "[]\n").encode("utf-8")


# The list sidecars commits append to (the audits, the regret events) as this
# process last read or wrote them: each item as its line. At most 32 files (an
# audit at its bound of 200 receipts keeps ≈ 0.2 MB).
_KNOWN_LISTS: Final = KnownFiles[tuple[str, ...]](32)


def _appended(path: Path, what: str, items: Iterable[object], max_entries: int) -> SidecarChange:
    """The list sidecar with ``items`` appended and the newest ``max_entries`` kept.

    The content is ``encode_json`` of the items kept. A file holding exactly
    the bytes this process last read or wrote there is not decoded, nor its
    items encoded, again: an audit at its bound is a few hundred receipts,
    and a commit appends one.

    Raises:
        CorruptMemoryFile: the file is not a JSON list: it is not overwritten.
    """
    data = read_if_exists(path)
    lines = _KNOWN_LISTS.get(path, data)
    if lines is None:
        lines = tuple(_compact(item) for item in _parse_strict(data, path, what, list))
    kept = (*lines, *(_compact(item) for item in items))[-max_entries:]
    content = _list_bytes(kept)
    _KNOWN_LISTS.put(path, content, kept)
    return path, content


def encode_usage(usage: Mapping[str, UsageEntry]) -> bytes:
    """The usage sidecar's content, one fact per line, by fact id."""
    return encode_json({key: usage[key].to_dict() for key in sorted(usage)})


def encode_events(events: Sequence[object]) -> bytes:
    """The audit's content, one event per line, oldest first."""
    return encode_json(list(events))


def _compact(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


def read_usage(path: Path) -> dict[str, UsageEntry]:
    """The usage sidecar; malformed entries are dropped, a malformed file reads as empty."""
    try:
        raw = read_json(path)
    except ValueError as error:
        _log.warning("ignoring malformed sidecar %s: %s", path, error)
        return {}
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        _log.warning("ignoring malformed sidecar %s: not a JSON object", path)
        return {}
    usage: dict[str, UsageEntry] = {}
    for fact_id, value in raw.items():
        entry = UsageEntry.from_dict(value)
        if entry is None:
            _log.warning("ignoring a malformed usage entry in %s", path)
            continue
        usage[fact_id] = entry
    return usage


def _usage_change(path: Path, usage: Mapping[str, UsageEntry]) -> SidecarChange:
    if not usage:
        return path, None
    return path, encode_usage(usage)


def usage_after_access(
    path: Path, fact_ids: Iterable[str], now: datetime, half_life_days: float
) -> SidecarChange:
    """The usage sidecar after one recall of each fact (see :func:`count_recalls`)."""
    usage = read_usage(path)
    usage.update(count_recalls(usage, fact_ids, now, half_life_days))
    return _usage_change(path, usage)


def usage_after_commit(
    path: Path, *, forget: Iterable[str], restore: Mapping[str, UsageEntry]
) -> SidecarChange | None:
    """The usage sidecar after a commit deleted ``forget`` and restored ``restore``.

    ``None`` when nothing changes: the file is not rewritten.
    """
    forget = list(forget)
    if not forget and not restore:
        return None
    usage = read_usage(path)
    dropped = [usage.pop(fact_id) for fact_id in forget if fact_id in usage]
    if not dropped and not restore:
        return None
    usage.update(restore)
    return _usage_change(path, usage)


_AUDIT: Final = "the eviction audit is"


def read_events(path: Path) -> list[object]:
    """The audit's events as stored, oldest first (``[]`` when there is no audit yet).

    Raises:
        CorruptMemoryFile: the file is not a JSON list.
    """
    return _read_strict(path, _AUDIT, list)


def read_audit(path: Path) -> tuple[EvictionReceipt, ...]:
    """The receipts, oldest first; malformed events are skipped (and kept in the file).

    Raises:
        CorruptMemoryFile: the file is not a JSON list.
    """
    receipts = []
    for event in read_events(path):
        receipt = EvictionReceipt.from_dict(event)
        if receipt is None:
            _log.warning("ignoring a malformed audit event in %s", path)
            continue
        receipts.append(receipt)
    return tuple(receipts)


def audit_after_commit(
    path: Path,
    receipts: Sequence[EvictionReceipt],
    max_entries: int,
    *,
    forget: Iterable[str],
) -> SidecarChange | None:
    """The audit after a commit: ``receipts`` appended, the newest ``max_entries`` kept.

    ``max_entries`` 0 appends nothing. ``forget`` ids are first removed from
    every earlier receipt (the original's behaviour when it deletes facts
    physically). ``None`` when nothing changes; a removal when stripping
    leaves no receipt and none is appended.

    Raises:
        CorruptMemoryFile: the audit is not a JSON list: it is not overwritten.
    """
    ids = set(forget)
    appending = max_entries > 0 and bool(receipts)
    if not appending and not (ids and path.exists()):
        return None
    if not ids:
        return _appended(path, _AUDIT, (r.to_dict() for r in receipts), max_entries)
    events = read_events(path)
    kept = strip_audit_events(events, ids) if ids else events
    if not appending:
        if kept == events:
            return None
        return path, encode_json(kept) if kept else None
    kept = [*kept, *(receipt.to_dict() for receipt in receipts)]
    return path, encode_json(kept[-max_entries:])


# ---------------------------------------------------------------------------
# Thread marks: how far each conversation of a scope has been extracted.
#
# One small JSON file per conversation, ``agents/<agent>/.metadata/threads/<digest>.json``
# (the digest of the thread id, which may be any text), holding the thread
# id, the mark of the last message extracted (a digest: no conversation text),
# when it was set, and its owner (``userId``, ``agentName``: a mark that names
# another scope is refused; marks written before they carried one are read).
# A mark is written by the commit that applied what was extracted, in its
# journal, so after any crash the mark and the facts agree.
#
# A mark that cannot be read is an error naming its file, not an absent mark:
# reading it as absent would extract — and confirm — the conversation again.
# Deleting a mark file is safe: the conversation is extracted whole once more.
# ---------------------------------------------------------------------------


def encode_mark(paths: ScopePaths, thread_id: str, mark: str, stamp: str) -> bytes:
    """The mark file of a conversation of the scope of ``paths``."""
    value = {"threadId": thread_id, "mark": mark, "markedAt": stamp, **owner_fields(paths)}
    return (json.dumps(value, ensure_ascii=False) + "\n").encode("utf-8", "surrogatepass")


def read_marks(paths: ScopePaths) -> list[ThreadMark]:
    """Every mark of a scope, by thread id (for copying a scope whole).

    Raises:
        CorruptMemoryFile: a mark file that is not a mark, or not named after its thread.
    """
    marks = []
    for name in sorted(_json_names(paths.threads_dir)):
        path = paths.threads_dir / name
        data = path.read_bytes()
        try:
            raw = parse_json(data.decode("utf-8", "surrogatepass"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            raw = None  # _decode names the problem
        thread_id = raw.get("threadId") if isinstance(raw, dict) else None
        mark = _decode(data, paths, path, thread_id if isinstance(thread_id, str) else "")
        if not isinstance(raw, dict) or paths.thread_mark(raw["threadId"]) != path:
            raise CorruptMemoryFile(path, "the thread mark is not named after its thread")
        stamp = raw.get("markedAt")
        marks.append(ThreadMark(raw["threadId"], mark, stamp if isinstance(stamp, str) else ""))
    return sorted(marks)


def read_mark(paths: ScopePaths, thread_id: str) -> str | None:
    """The stored mark of a conversation, or ``None`` if it has none.

    Raises:
        CorruptMemoryFile: the file is not a mark of this conversation.
        OwnerConflictError: the mark names another scope.
    """
    path = paths.thread_mark(thread_id)
    data = read_if_exists(path)
    return None if data is None else _decode(data, paths, path, thread_id)


def _decode(data: bytes, paths: ScopePaths, path: Path, thread_id: str) -> str:
    try:
        raw = parse_json(data.decode("utf-8", "surrogatepass"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CorruptMemoryFile(path, f"a thread mark that is not valid JSON: {error}") from None
    mark = raw.get("mark") if isinstance(raw, dict) else None
    if not isinstance(mark, str) or not isinstance(raw.get("threadId"), str):
        raise CorruptMemoryFile(path, "a thread mark needs 'threadId' and 'mark' strings")
    if raw["threadId"] != thread_id:
        raise CorruptMemoryFile(path, "the thread mark belongs to another conversation")
    check_owner_fields(raw, paths, path)
    return mark


# ---------------------------------------------------------------------------
# The regret sidecars: regret events, and the facts the shadow policy would have evicted.
#
# Both live in ``agents/<agent>/.metadata/`` beside the audit, hold no content
# (see deermem.store.records) and change inside the commit that
# caused them, journaled with the facts:
#
# * ``regret-events.json`` — a JSON list of regret events, newest last,
#   trimmed to ``regret_max_events``. Canonical data, like the audit: the
#   evidence exists nowhere else. A file that is not a JSON list is an error
#   naming it, never read as empty and never overwritten; single events it
#   cannot read are skipped when reading and kept as they are when events are
#   appended.
# * ``shadow-evictions.json`` — ``{fact_id: mark}`` for the facts of the
#   library that the shadow policy would have evicted and the active policy
#   kept. A mark is cleared when its fact leaves the library (it moves into
#   the fact's archive entry) or its regret is settled, so the file is bounded
#   by the library. A file that is not a JSON object is an error naming it;
#   an entry it cannot read is skipped when reading and kept as it is when
#   other marks change.
# ---------------------------------------------------------------------------


_REGRET_EVENTS: Final = "the regret events are"


def raw_regret_events(path: Path) -> list[object]:
    """The events as stored, unread ones included (for a copy of the store).

    Raises:
        CorruptMemoryFile: the file is not a JSON list.
    """
    return _read_strict(path, _REGRET_EVENTS, list)


def raw_shadow_marks(path: Path) -> dict[str, object]:
    """The marks as stored, unread ones included (for a copy of the store).

    Raises:
        CorruptMemoryFile: the file is not a JSON object.
    """
    return _read_strict(path, "the shadow marks are", dict)


def encode_regret_events(events: Sequence[object]) -> bytes:
    """The events file's content: one event per line."""
    return encode_json(list(events))


def encode_shadow_marks(marks: Mapping[str, object]) -> bytes:
    """The marks file's content: one mark per line, by fact id."""
    return encode_json({key: marks[key] for key in sorted(marks)})


def read_regret_events(path: Path) -> tuple[RegretEvent, ...]:
    """The recorded events, oldest first; events that cannot be read are skipped.

    Raises:
        CorruptMemoryFile: the file is not a JSON list.
    """
    events = (RegretEvent.from_dict(item) for item in raw_regret_events(path))
    return tuple(event for event in events if event is not None)


def regret_after_commit(
    path: Path, events: Sequence[RegretEvent], max_entries: int
) -> SidecarChange | None:
    """The file after ``events`` are appended and the newest ``max_entries`` kept.

    ``None`` when there is nothing to append (or ``max_entries`` is 0).

    Raises:
        CorruptMemoryFile: the file is not a JSON list: it is not overwritten.
    """
    if not events or max_entries <= 0:
        return None
    return _appended(path, _REGRET_EVENTS, (event.to_dict() for event in events), max_entries)


def read_shadow_marks(path: Path) -> dict[str, ShadowMark]:
    """The marks by fact id; entries that cannot be read are skipped.

    Raises:
        CorruptMemoryFile: the file is not a JSON object.
    """
    marks = {}
    for fact_id, value in raw_shadow_marks(path).items():
        mark = ShadowMark.from_dict(value)
        if mark is not None:
            marks[fact_id] = mark
    return marks


def shadow_marks_after_commit(
    path: Path, changes: Mapping[str, ShadowMark | None]
) -> SidecarChange | None:
    """The file after setting (a mark) or clearing (``None``) the marks of ``changes``.

    ``None`` when nothing changes; a removal when no mark is left.

    Raises:
        CorruptMemoryFile: the file is not a JSON object: it is not overwritten.
    """
    if not changes:
        return None
    raw = raw_shadow_marks(path)
    marks = dict(raw)
    for fact_id, mark in changes.items():
        if mark is None:
            marks.pop(fact_id, None)
        else:
            marks[fact_id] = mark.to_dict()
    if marks == raw:
        return None
    return path, encode_shadow_marks(marks) if marks else None


# ---------------------------------------------------------------------------
# The archive: facts that left a library, kept so that leaving is reversible.
#
# One JSON file per fact in ``agents/<agent>/.metadata/archive/<fact_id>.json``
# holds the fact as it was, when and why it left, and the receipt that
# accounts for it. Entries are written and removed inside the journaled commit
# that evicts or restores the fact, so a fact is always either in the library
# or in the archive (or purged on purpose) — never nowhere, never both.
#
# The archive is bounded: beyond ``archive_max_entries`` the oldest entries
# go, and entries older than ``archive_max_age_days`` (if not 0) go; their
# receipts stay in the audit. Age is the entry's stored ``archivedAt``, never a
# file's modification time (which a copy or a checkout resets). To apply the
# bounds without reading every entry, ``.metadata/archive-index.json`` lists
# each entry's id, ``archivedAt`` and a digest of its text under the duplicate
# rule (:func:`~deermem.model.duplicate_digest`: no content) in the
# order they arrived (which breaks ties between equal times); it changes in the
# same commit as the entries (:func:`archive_changes`). The digest lets the
# capacity gate find an archived fact that a new proposal says again
# (:func:`archive_matches`) by reading one entry, not all of them. The index is
# derived: one that is missing, malformed or out of step with the directory is
# rebuilt from the entries, and entries listed without a digest (written before
# digests) get theirs at the next commit that archives something.
# Unlike the index, an archive entry holds content, so a malformed one is an
# error, not a warning.
# ---------------------------------------------------------------------------


_EARLIEST = datetime.min.replace(tzinfo=UTC)


class _Item(NamedTuple):
    """One entry as the index lists it."""

    fact_id: str
    archived_at: str
    digest: str | None  # the text's duplicate digest; None: not known yet


#: The archive in arrival order, as the index lists it (with each text's digest).
ArchiveIndex = list[_Item]


def read_entry(paths: ScopePaths, scope: Scope, fact_id: str) -> ArchiveEntry | None:
    """The archive entry of one fact, or ``None``."""
    if not is_fact_id(fact_id):
        return None
    path = paths.archived(fact_id)
    data = read_if_exists(path)
    return None if data is None else decode_entry(data, path, scope, fact_id)


def read_archive(paths: ScopePaths, scope: Scope) -> list[ArchiveEntry]:
    """Every archive entry of a scope, newest first (ties by id)."""
    entries = []
    for fact_id in sorted(_listed_ids(paths)):
        path = paths.archived(fact_id)
        data = read_if_exists(path)
        if data is not None:  # else restored or pruned since the listing (no lock is held)
            entries.append(decode_entry(data, path, scope, fact_id))
    return newest_first(entries)


def arrival_order(paths: ScopePaths) -> ArchiveOrder:
    """The archive's entries in the order they arrived (the index, reconciled with the directory).

    Raises:
        CorruptMemoryFile: an entry the index does not know cannot be read.
    """
    return [(item.fact_id, item.archived_at) for item in _current_order(paths, set())]


def archive_changes(
    paths: ScopePaths,
    *,
    puts: Sequence[ArchiveEntry],
    deletes: Iterable[str],
    now: datetime | None = None,
    max_entries: int = 0,
    max_age_days: int = 0,
    order: ArchiveIndex | None = None,
) -> tuple[list[tuple[Path, bytes | None]], set[str]]:
    """What a commit that adds ``puts`` and removes ``deletes`` does to the rest of the archive.

    Returns the files to change — the entries the bounds remove, and the
    index — and the ids the bounds remove. The bounds apply when a commit
    archives something and gives the clock: the oldest entries beyond
    ``max_entries`` go (equal times: the earliest arrival), and every entry
    older than ``max_age_days`` (0: no age limit). ``order`` is the archive as
    :func:`archive_index` read it under the same lock, if the caller has it.

    Raises:
        CorruptMemoryFile: an entry the index does not know yet cannot be read.
    """
    replaced = set(deletes) | {entry.fact_id for entry in puts}
    current = _current_order(paths, replaced) if order is None else order
    order = [item for item in current if item.fact_id not in replaced]
    if puts:
        order = [_with_digest(paths, item) for item in order]
    order.extend(
        _Item(entry.fact_id, entry.archived_at, duplicate_digest(entry.fact.content))
        for entry in puts
    )
    doomed = set()
    if puts and now is not None:
        pairs = [(item.fact_id, item.archived_at) for item in order]
        doomed = beyond_bounds(pairs, now, max_entries, max_age_days)
    kept = [item for item in order if item.fact_id not in doomed]
    changes: list[tuple[Path, bytes | None]] = [(paths.archived(i), None) for i in sorted(doomed)]
    index = _encode_index(paths.archive_index, kept) if kept else None
    changes.append((paths.archive_index, index))
    return changes, doomed


def archive_index(paths: ScopePaths) -> ArchiveIndex:
    """The archive in arrival order with each text's digest (the index, reconciled).

    Raises:
        CorruptMemoryFile: an entry the index does not list cannot be read.
    """
    return _current_order(paths, set())


def archive_matches(
    paths: ScopePaths,
    scope: Scope,
    contents: Iterable[str],
    now: datetime,
    max_age_days: int,
    order: ArchiveIndex | None = None,
) -> dict[str, ArchiveEntry]:
    """Archived facts that say what one of ``contents`` says, keyed by its duplicate key.

    Only the entries whose digest matches (or is not known yet) are read and
    compared by their text; of several that match, the latest to arrive
    wins. Entries past ``max_age_days`` (0: no limit) do not count, nor do
    entries that cannot be read: they are logged, and reported as errors
    where they are read for themselves (listing, restoring), so a damaged
    entry never stops a fact from being added.
    """
    wanted = {duplicate_digest(text): duplicate_key(text) for text in contents}
    if not wanted:
        return {}
    keys = set(wanted.values())
    found: dict[str, ArchiveEntry] = {}
    if order is None:
        try:
            order = _current_order(paths, set())
        except CorruptMemoryFile as error:
            _log.warning("not comparing with the archive: %s", error)
            return found
    for item in order:
        if item.digest is not None and item.digest not in wanted:
            continue
        try:
            entry = read_entry(paths, scope, item.fact_id)
        except CorruptMemoryFile as error:
            _log.warning("not comparing a damaged archive entry: %s", error)
            continue
        if entry is None or entry.expired(now, max_age_days):
            continue
        key = duplicate_key(entry.fact.content)
        if key in keys:
            found[key] = entry
    return found


def archive_listing(paths: ScopePaths, now: datetime, max_age_days: int) -> dict[str, str]:
    """Each entry's id and stored ``archivedAt``, from the index; expired entries left out."""
    return {
        item.fact_id: item.archived_at
        for item in _current_order(paths, set())
        if not ArchiveEntry.stamp_expired(item.archived_at, now, max_age_days)
    }


def _current_order(paths: ScopePaths, leaving: set[str]) -> ArchiveIndex:
    """The index, reconciled with the directory: unknown entries are read, vanished ones dropped.

    Entries in ``leaving`` (replaced or removed by the commit) are not read.
    """
    listed = set(_listed_ids(paths)) - leaving
    indexed = _read_index(paths.archive_index)
    order: ArchiveIndex = []
    seen: set[str] = set()
    for item in indexed:
        if item.fact_id in listed and item.fact_id not in seen:
            order.append(item)
            seen.add(item.fact_id)
    unknown = sorted(listed - seen)
    if unknown:
        found = [_unindexed(paths, fact_id) for fact_id in unknown]
        found.sort(key=lambda item: parse_timestamp(item.archived_at) or _EARLIEST)
        order.extend(found)
    return order


def _json_names(directory: Path) -> list[str]:
    """The names of a directory's JSON files in listing order; hidden ones (temporary files)
    left out. None when the directory does not exist."""
    try:
        with os.scandir(directory) as listing:
            names = [item.name for item in listing]
    except FileNotFoundError:
        return []
    return [name for name in names if name.endswith(".json") and not name.startswith(".")]


def _listed_ids(paths: ScopePaths) -> list[str]:
    ids = []
    for name in _json_names(paths.archive_dir):
        fact_id = name[: -len(".json")]
        if not is_fact_id(fact_id):
            raise CorruptMemoryFile(
                paths.archive_dir / name, "the file name is not a valid fact id"
            )
        ids.append(fact_id)
    return ids


def _unindexed(paths: ScopePaths, fact_id: str) -> _Item:
    """An entry the index does not list: its time and digest, without validating the fact.

    Raises:
        CorruptMemoryFile: the entry is not JSON or has no ``archivedAt``.
    """
    path = paths.archived(fact_id)
    try:
        raw = parse_json(path.read_bytes())
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CorruptMemoryFile(path, f"not valid JSON: {error}") from None
    archived_at = raw.get("archivedAt") if isinstance(raw, dict) else None
    if not isinstance(archived_at, str):
        raise CorruptMemoryFile(path, "an archive entry needs an 'archivedAt' string")
    return _Item(fact_id, archived_at, _content_digest(raw))


def _with_digest(paths: ScopePaths, item: _Item) -> _Item:
    """The item with its digest, read from its entry if the index did not have it.

    An entry that cannot be read keeps no digest (it is read, and reported,
    when someone looks for it); the commit that rewrites the index goes on.
    """
    if item.digest is not None:
        return item
    try:
        raw = parse_json(paths.archived(item.fact_id).read_bytes())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return item
    return item._replace(digest=_content_digest(raw))


def _content_digest(raw: object) -> str | None:
    fact = raw.get("fact") if isinstance(raw, dict) else None
    content = fact.get("content") if isinstance(fact, dict) else None
    return duplicate_digest(content) if isinstance(content, str) else None


# The archive indexes as this process last read or wrote them: their entries,
# and the line of each entry it wrote. An archive at its bound lists a thousand
# entries and a commit that archives a fact changes one or two. At most 32
# indexes (≈ 0.5 MB each at that bound).
_KNOWN_INDEXES: Final = KnownFiles[tuple[tuple[_Item, ...], Mapping[_Item, str]]](32)


def _read_index(path: Path) -> ArchiveIndex:
    """The index's entries; an unreadable index reads as empty (it is rebuilt).

    An entry is ``[id, archivedAt, digest]``, or ``[id, archivedAt]`` as
    written before digests.
    """
    data = read_if_exists(path)
    if data is None:
        return []
    known = _KNOWN_INDEXES.get(path, data)
    if known is not None:
        return list(known[0])
    try:
        raw = parse_json(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        _log.warning("rebuilding the malformed archive index %s: %s", path, error)
        return []
    if not isinstance(raw, list) or not all(
        isinstance(item, list) and len(item) in (2, 3) and all(isinstance(v, str) for v in item)
        for item in raw
    ):
        _log.warning("rebuilding the malformed archive index %s", path)
        return []
    items = [_Item(item[0], item[1], item[2] if len(item) == 3 else None) for item in raw]
    _KNOWN_INDEXES.put(path, data, (tuple(items), {}))
    return items


def _encode_index(path: Path, order: ArchiveIndex) -> bytes:
    """One entry per line, oldest arrival first (the lines of entries this process wrote
    at ``path`` last are not encoded again)."""
    # An entry's line depends on the entry alone: those written last serve whatever
    # the file holds now.
    known = _KNOWN_INDEXES.latest(path)
    written = {} if known is None else known[1]
    lines = [written.get(item) or _index_line(item) for item in order]
    data = ("[\n" + ",\n".join(lines) + "\n]\n").encode("utf-8")
    _KNOWN_INDEXES.put(path, data, (tuple(order), dict(zip(order, lines, strict=True))))
    return data


def _index_line(item: _Item) -> str:
    return json.dumps(list(item) if item.digest is not None else [item.fact_id, item.archived_at])


# ---------------------------------------------------------------------------
# The three logs together, as stored: what ``deermem redact`` reads and writes back
# ---------------------------------------------------------------------------


def read_records(paths: ScopePaths) -> ScopeRecords:
    """The scope's audit events, regret events and shadow marks as stored.

    Raises:
        CorruptMemoryFile: a file that is not a JSON list (or object, for the marks).
    """
    return ScopeRecords(
        events=tuple(read_events(paths.audit)),
        regret=tuple(raw_regret_events(paths.regret_events)),
        shadow=raw_shadow_marks(paths.shadow_marks),
    )


def records_after_commit(paths: ScopePaths, records: ScopeRecords) -> list[SidecarChange]:
    """The files that change when the scope's records become ``records``.

    Only a file whose records differ from the stored ones is written; one
    left with no record is removed.

    Raises:
        CorruptMemoryFile: a file that is not what it must be: it is not overwritten.
    """
    stored = read_records(paths)
    changes: list[SidecarChange] = []
    if list(records.events) != list(stored.events):
        changes.append((paths.audit, encode_events(records.events) if records.events else None))
    if list(records.regret) != list(stored.regret):
        data = encode_regret_events(records.regret) if records.regret else None
        changes.append((paths.regret_events, data))
    if dict(records.shadow) != dict(stored.shadow):
        data = encode_shadow_marks(records.shadow) if records.shadow else None
        changes.append((paths.shadow_marks, data))
    return changes
