"""The archive: facts that left a library, kept so that leaving is reversible.

One JSON file per fact in ``agents/<agent>/.metadata/archive/<fact_id>.json``
holds the fact as it was, when and why it left, and the receipt that
accounts for it. Entries are written and removed inside the journaled commit
that evicts or restores the fact, so a fact is always either in the library
or in the archive (or purged on purpose) — never nowhere, never both.

The archive is bounded: beyond ``archive_max_entries`` the oldest entries
go, and entries older than ``archive_max_age_days`` (if not 0) go; their
receipts stay in the audit. Age is the entry's stored ``archivedAt``, never a
file's modification time (which a copy or a checkout resets). To apply the
bounds without reading every entry, ``.metadata/archive-index.json`` lists
each entry's id, ``archivedAt`` and a digest of its text under the duplicate
rule (:func:`~deermem.model.duplicate_digest`: no content) in the
order they arrived (which breaks ties between equal times); it changes in the
same commit as the entries (:func:`archive_changes`). The digest lets the
capacity gate find an archived fact that a new proposal says again
(:func:`archive_matches`) by reading one entry, not all of them. The index is
derived: one that is missing, malformed or out of step with the directory is
rebuilt from the entries, and entries listed without a digest (written before
digests) get theirs at the next commit that archives something.
Unlike the index, an archive entry holds content, so a malformed one is an
error, not a warning.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import NamedTuple

from deermem.errors import CorruptMemoryFile, FactValidationError
from deermem.model import (
    FACT_ID_PATTERN,
    Fact,
    Scope,
    duplicate_digest,
    duplicate_key,
    parse_timestamp,
)
from deermem.store.markdown.paths import ScopePaths
from deermem.store.records import ArchiveEntry, ReceiptEntry, UsageEntry
from deermem.store.regret_records import ShadowMark

_log = logging.getLogger("deermem.store")
_EARLIEST = datetime.min.replace(tzinfo=UTC)


class _Item(NamedTuple):
    """One entry as the index lists it."""

    fact_id: str
    archived_at: str
    digest: str | None  # the text's duplicate digest; None: not known yet


#: The archive in arrival order, as the index lists it (with each text's digest).
ArchiveIndex = list[_Item]
#: The archive in arrival order: (fact id, its stored ``archivedAt``).
ArchiveOrder = list[tuple[str, str]]

__all__ = [
    "ArchiveIndex",
    "ArchiveOrder",
    "archive_changes",
    "archive_index",
    "archive_listing",
    "archive_matches",
    "arrival_order",
    "beyond_bounds",
    "decode_entry",
    "encode_entry",
    "newest_first",
    "read_archive",
    "read_entry",
]


def encode_entry(entry: ArchiveEntry) -> bytes:
    """The entry as indented JSON: people read archive entries to decide what to restore."""
    return (json.dumps(entry.to_dict(), indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def decode_entry(data: bytes, path: str | Path, scope: Scope, expected_id: str) -> ArchiveEntry:
    """Read an archive entry strictly.

    Raises:
        CorruptMemoryFile: not a JSON object, an invalid fact, a fact whose id
            is not the file name or whose scope is another scope's.
    """
    try:
        raw = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CorruptMemoryFile(path, f"not valid JSON: {error}") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("fact"), dict):
        raise CorruptMemoryFile(path, "an archive entry must be an object with a 'fact' object")
    try:
        fact = Fact.from_dict(raw["fact"])
    except FactValidationError as error:
        raise CorruptMemoryFile(path, f"invalid archived fact: {error}") from None
    if fact.id != expected_id:
        raise CorruptMemoryFile(path, f"the archived fact {fact.id!r} does not match the file name")
    if fact.scope is not None and (
        fact.scope.agentName != scope.agent or fact.scope.userId != scope.user_id
    ):
        raise CorruptMemoryFile(path, "scope mismatch: the archived fact belongs to another scope")
    archived_at = raw.get("archivedAt")
    reason = raw.get("reason")
    if not isinstance(archived_at, str) or not isinstance(reason, str):
        raise CorruptMemoryFile(path, "an archive entry needs 'archivedAt' and 'reason' strings")
    return ArchiveEntry(
        fact=fact,
        archived_at=archived_at,
        reason=reason,
        trigger=_optional_text(raw.get("trigger")),
        receipt_id=_optional_text(raw.get("receiptId")),
        eviction=ReceiptEntry.from_dict(raw.get("eviction")),
        policy_version=_optional_text(raw.get("policyVersion")),
        usage=UsageEntry.from_dict(raw.get("usage")),
        shadow=ShadowMark.from_dict(raw.get("shadow")),
    )


def read_entry(paths: ScopePaths, scope: Scope, fact_id: str) -> ArchiveEntry | None:
    """The archive entry of one fact, or ``None``."""
    if not FACT_ID_PATTERN.fullmatch(fact_id):
        return None
    path = paths.archived(fact_id)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    return decode_entry(data, path, scope, fact_id)


def read_archive(paths: ScopePaths, scope: Scope) -> list[ArchiveEntry]:
    """Every archive entry of a scope, newest first (ties by id)."""
    entries = []
    for fact_id in sorted(_listed_ids(paths)):
        path = paths.archived(fact_id)
        try:
            data = path.read_bytes()
        except FileNotFoundError:  # restored or pruned since the listing (no lock is held)
            continue
        entries.append(decode_entry(data, path, scope, fact_id))
    return newest_first(entries)


def newest_first(entries: Iterable[ArchiveEntry]) -> list[ArchiveEntry]:
    """Archive entries as every store lists them: newest first, ties by id."""
    return sorted(entries, key=_age_key)


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
    changes.append((paths.archive_index, _encode_index(kept) if kept else None))
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
    if max_age_days > 0:
        limit = now - timedelta(days=max_age_days)
        doomed.update(order[n][0] for n in ranked[excess:] if (times[n] or limit) < limit)
    return doomed


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


def _listed_ids(paths: ScopePaths) -> list[str]:
    try:
        with os.scandir(paths.archive_dir) as listing:
            names = [item.name for item in listing]
    except FileNotFoundError:
        return []
    ids = []
    for name in names:
        if name.startswith(".") or not name.endswith(".json"):
            continue
        fact_id = name[: -len(".json")]
        if not FACT_ID_PATTERN.fullmatch(fact_id):
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
        raw = json.loads(path.read_bytes())
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
        raw = json.loads(paths.archived(item.fact_id).read_bytes())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return item
    return item._replace(digest=_content_digest(raw))


def _content_digest(raw: object) -> str | None:
    fact = raw.get("fact") if isinstance(raw, dict) else None
    content = fact.get("content") if isinstance(fact, dict) else None
    return duplicate_digest(content) if isinstance(content, str) else None


def _read_index(path: Path) -> ArchiveIndex:
    """The index's entries; an unreadable index reads as empty (it is rebuilt).

    An entry is ``[id, archivedAt, digest]``, or ``[id, archivedAt]`` as
    written before digests.
    """
    try:
        raw = json.loads(path.read_bytes())
    except FileNotFoundError:
        return []
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        _log.warning("rebuilding the malformed archive index %s: %s", path, error)
        return []
    if not isinstance(raw, list) or not all(
        isinstance(item, list) and len(item) in (2, 3) and all(isinstance(v, str) for v in item)
        for item in raw
    ):
        _log.warning("rebuilding the malformed archive index %s", path)
        return []
    return [_Item(item[0], item[1], item[2] if len(item) == 3 else None) for item in raw]


def _encode_index(order: ArchiveIndex) -> bytes:
    """One entry per line, oldest arrival first."""
    lines = [
        json.dumps(list(item) if item.digest is not None else [item.fact_id, item.archived_at])
        for item in order
    ]
    return ("[\n" + ",\n".join(lines) + "\n]\n").encode("utf-8")


def _age_key(entry: ArchiveEntry) -> tuple[float, str]:
    archived = parse_timestamp(entry.archived_at)
    # Newest first; unreadable times sort last (oldest).
    return (-archived.timestamp() if archived is not None else float("inf"), entry.fact_id)


def _optional_text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
