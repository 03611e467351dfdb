"""The per-agent sidecars: recall counts (usage) and eviction receipts (audit).

Both live in ``agents/<agent>/.metadata/`` and change inside the journaled
commit they belong to (receipts of the evictions it makes, usage it drops or
restores), so a receipt exists exactly when its commit happened.

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
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path

from deermem.errors import CorruptMemoryFile
from deermem.model import format_timestamp, parse_timestamp
from deermem.policy import decay, elapsed_days
from deermem.store.records import EvictionReceipt, UsageEntry

__all__ = [
    "SidecarChange",
    "audit_after_commit",
    "count_recalls",
    "encode_events",
    "encode_json",
    "encode_usage",
    "read_audit",
    "read_events",
    "read_json",
    "read_usage",
    "strip_audit_events",
    "usage_after_access",
    "usage_after_commit",
]

#: A sidecar's new content (``None``: remove the file).
SidecarChange = tuple[Path, bytes | None]

_log = logging.getLogger("deermem.store")


def read_json(path: Path) -> object | None:
    """The sidecar's JSON, or ``None`` when it is missing.

    Raises:
        ValueError: the file is not JSON (``UnicodeDecodeError``, ``JSONDecodeError``).
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    value: object = json.loads(data)
    return value


def encode_json(value: list[object] | dict[str, object]) -> bytes:
    """One receipt (or one fact's usage) per line, so the files read and diff line by line."""
    if isinstance(value, dict):
        items = [f"{json.dumps(k, ensure_ascii=False)}: {_compact(v)}" for k, v in value.items()]
        text = "{\n" + ",\n".join(items) + "\n}\n" if items else "{}\n"
    else:
        lines = [_compact(item) for item in value]
        text = "[\n" + ",\n".join(lines) + "\n]\n" if lines else "[]\n"
    return text.encode("utf-8")


def encode_usage(usage: Mapping[str, UsageEntry]) -> bytes:
    """The usage sidecar's content, one fact per line, by fact id."""
    return encode_json({key: usage[key].to_dict() for key in sorted(usage)})


def encode_events(events: Sequence[object]) -> bytes:
    """The audit's content, one event per line, oldest first."""
    return encode_json(list(events))


def _compact(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


# --- usage -----------------------------------------------------------------


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


# --- audit -----------------------------------------------------------------


def read_events(path: Path) -> list[object]:
    """The audit's events as stored, oldest first (``[]`` when there is no audit yet).

    Raises:
        CorruptMemoryFile: the file is not a JSON list.
    """
    try:
        raw = read_json(path)
    except ValueError as error:
        raise CorruptMemoryFile(path, f"the eviction audit is not valid JSON: {error}") from None
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise CorruptMemoryFile(path, "the eviction audit is not a JSON list")
    return raw


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
    events = read_events(path)
    kept = strip_audit_events(events, ids) if ids else events
    if not appending:
        if kept == events:
            return None
        return path, encode_json(kept) if kept else None
    kept = [*kept, *(receipt.to_dict() for receipt in receipts)]
    return path, encode_json(kept[-max_entries:])


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
