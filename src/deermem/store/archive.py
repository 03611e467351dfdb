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
each entry's id and ``archivedAt`` in the order they arrived (which breaks
ties between equal times); it changes in the same commit as the entries
(:func:`archive_changes`). The index is derived: one that is missing,
malformed or out of step with the directory is rebuilt from the entries.
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

from deermem._exceptions import CorruptMemoryFile, FactValidationError
from deermem.model.fact import FACT_ID_PATTERN, Fact
from deermem.model.timestamps import parse_timestamp
from deermem.store.paths import ScopePaths
from deermem.store.records import ArchiveEntry, ReceiptEntry, UsageEntry
from deermem.store.scope import Scope

_log = logging.getLogger("deermem.store")
_EARLIEST = datetime.min.replace(tzinfo=UTC)
#: The archive in arrival order: (fact id, its stored ``archivedAt``).
ArchiveOrder = list[tuple[str, str]]

__all__ = [
    "ArchiveOrder",
    "archive_changes",
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
    return _current_order(paths, set())


def archive_changes(
    paths: ScopePaths,
    *,
    puts: Sequence[ArchiveEntry],
    deletes: Iterable[str],
    now: datetime | None = None,
    max_entries: int = 0,
    max_age_days: int = 0,
) -> tuple[list[tuple[Path, bytes | None]], set[str]]:
    """What a commit that adds ``puts`` and removes ``deletes`` does to the rest of the archive.

    Returns the files to change — the entries the bounds remove, and the
    index — and the ids the bounds remove. The bounds apply when a commit
    archives something and gives the clock: the oldest entries beyond
    ``max_entries`` go (equal times: the earliest arrival), and every entry
    older than ``max_age_days`` (0: no age limit).

    Raises:
        CorruptMemoryFile: an entry the index does not know yet cannot be read.
    """
    replaced = set(deletes) | {entry.fact_id for entry in puts}
    order = [item for item in _current_order(paths, replaced) if item[0] not in replaced]
    order.extend((entry.fact_id, entry.archived_at) for entry in puts)
    doomed = set()
    if puts and now is not None:
        doomed = beyond_bounds(order, now, max_entries, max_age_days)
    kept = [item for item in order if item[0] not in doomed]
    changes: list[tuple[Path, bytes | None]] = [(paths.archived(i), None) for i in sorted(doomed)]
    changes.append((paths.archive_index, _encode_index(kept) if kept else None))
    return changes, doomed


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


def _current_order(paths: ScopePaths, leaving: set[str]) -> ArchiveOrder:
    """The index, reconciled with the directory: unknown entries are read, vanished ones dropped.

    Entries in ``leaving`` (replaced or removed by the commit) are not read.
    """
    listed = set(_listed_ids(paths)) - leaving
    indexed = _read_index(paths.archive_index)
    order: ArchiveOrder = []
    seen: set[str] = set()
    for fact_id, archived_at in indexed:
        if fact_id in listed and fact_id not in seen:
            order.append((fact_id, archived_at))
            seen.add(fact_id)
    unknown = sorted(listed - seen)
    if unknown:
        found = [(fact_id, _archived_at(paths, fact_id)) for fact_id in unknown]
        found.sort(key=lambda item: parse_timestamp(item[1]) or _EARLIEST)
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


def _archived_at(paths: ScopePaths, fact_id: str) -> str:
    """The stored time of one entry, read without validating the whole fact."""
    path = paths.archived(fact_id)
    try:
        raw = json.loads(path.read_bytes())
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CorruptMemoryFile(path, f"not valid JSON: {error}") from None
    archived_at = raw.get("archivedAt") if isinstance(raw, dict) else None
    if not isinstance(archived_at, str):
        raise CorruptMemoryFile(path, "an archive entry needs an 'archivedAt' string")
    return archived_at


def _read_index(path: Path) -> ArchiveOrder:
    """The index's entries; an unreadable index reads as empty (it is rebuilt)."""
    try:
        raw = json.loads(path.read_bytes())
    except FileNotFoundError:
        return []
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        _log.warning("rebuilding the malformed archive index %s: %s", path, error)
        return []
    if not isinstance(raw, list) or not all(
        isinstance(item, list) and len(item) == 2 and all(isinstance(v, str) for v in item)
        for item in raw
    ):
        _log.warning("rebuilding the malformed archive index %s", path)
        return []
    return [(item[0], item[1]) for item in raw]


def _encode_index(order: ArchiveOrder) -> bytes:
    """One entry per line, oldest arrival first."""
    lines = [json.dumps([fact_id, archived_at]) for fact_id, archived_at in order]
    return ("[\n" + ",\n".join(lines) + "\n]\n").encode("utf-8")


def _age_key(entry: ArchiveEntry) -> tuple[float, str]:
    archived = parse_timestamp(entry.archived_at)
    # Newest first; unreadable times sort last (oldest).
    return (-archived.timestamp() if archived is not None else float("inf"), entry.fact_id)


def _optional_text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
