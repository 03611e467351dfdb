"""The archive: facts that left a library, kept so that leaving is reversible.

One JSON file per fact in ``agents/<agent>/.metadata/archive/<fact_id>.json``
holds the fact as it was, when and why it left, and the receipt that
accounts for it. Entries are written and removed inside the journaled commit
that evicts or restores the fact, so a fact is always either in the library
or in the archive (or purged on purpose) — never nowhere.

The archive is bounded: beyond ``archive_max_entries`` the oldest entries
go, and entries older than ``archive_max_age_days`` (if not 0) go; their
receipts stay in the audit. Bounds are enforced after each commit that
archives (:func:`beyond_bounds`), without reading the whole archive. Unlike the
sidecars, an archive entry holds content, so a malformed one is an error,
not a warning.
"""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path

from deermem._exceptions import CorruptMemoryFile, FactValidationError
from deermem.model.fact import FACT_ID_PATTERN, Fact
from deermem.model.timestamps import parse_timestamp
from deermem.store.paths import ScopePaths
from deermem.store.records import ArchiveEntry, ReceiptEntry, UsageEntry
from deermem.store.scope import Scope

__all__ = [
    "beyond_bounds",
    "decode_entry",
    "encode_entry",
    "read_archive",
    "read_entry",
]


def encode_entry(entry: ArchiveEntry) -> bytes:
    """The entry as indented JSON: people read archive entries to decide what to restore."""
    return (json.dumps(entry.to_dict(), indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def decode_entry(data: bytes, path: Path, scope: Scope, expected_id: str) -> ArchiveEntry:
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
    try:
        names = [item.name for item in paths.archive_dir.iterdir()]
    except FileNotFoundError:
        return []
    entries = []
    for name in sorted(names):
        if name.startswith(".") or not name.endswith(".json"):
            continue
        fact_id = name[: -len(".json")]
        path = paths.archive_dir / name
        if not FACT_ID_PATTERN.fullmatch(fact_id):
            raise CorruptMemoryFile(path, "the file name is not a valid fact id")
        try:
            data = path.read_bytes()
        except FileNotFoundError:  # restored or pruned since the listing (no lock is held)
            continue
        entries.append(decode_entry(data, path, scope, fact_id))
    return sorted(entries, key=_age_key)


def beyond_bounds(
    paths: ScopePaths, scope: Scope, now: datetime, max_entries: int, max_age_days: int
) -> list[str]:
    """The ids of the entries the archive's bounds remove.

    Runs after every commit that archives, so it must not read the whole
    archive: the count bound uses the directory listing alone (entries are
    written once, so their modification time orders them by arrival), and
    the age bound reads entries oldest first and stops at the first one still
    young enough. An entry that expires out of that order is hidden from
    :func:`read_archive`'s callers at once and removed by the count bound later.
    """
    try:
        with os.scandir(paths.archive_dir) as listing:
            found = [
                (item.stat().st_mtime_ns, item.name[: -len(".json")])
                for item in listing
                if item.name.endswith(".json") and not item.name.startswith(".")
            ]
    except FileNotFoundError:
        return []
    found.sort()
    excess = max(0, len(found) - max_entries)
    doomed = [fact_id for _, fact_id in found[:excess]]
    if max_age_days > 0:
        for _, fact_id in found[excess:]:
            entry = read_entry(paths, scope, fact_id)
            if entry is None or not entry.expired(now, max_age_days):
                break
            doomed.append(fact_id)
    return doomed


def _age_key(entry: ArchiveEntry) -> tuple[float, str]:
    archived = parse_timestamp(entry.archived_at)
    # Newest first; unreadable times sort last (oldest).
    return (-archived.timestamp() if archived is not None else float("inf"), entry.fact_id)


def _optional_text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
