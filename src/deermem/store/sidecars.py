"""The per-agent sidecars: recall counts (usage) and eviction receipts (audit).

Both live in ``agents/<agent>/.metadata/`` and are *derived* data: they can
be lost without losing a fact. So a malformed sidecar is logged and read as
empty instead of failing the load, and they are written after the canonical
commit has succeeded (a crash in between loses a receipt, never a fact; the
archive entry of an evicted fact carries its own copy of the receipt line).

* ``fact-usage.json`` — ``{fact_id: {accessHeat, accessCount, lastAccessedAt}}``.
  A recall decays the stored heat with the access half-life, then adds 1.
* ``eviction-audit.json`` — a JSON list of receipts, newest last, trimmed to
  ``eviction_audit_max_entries``. Events written by the original DeerMem are
  kept as they are when new receipts are appended.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path

from deermem.model.timestamps import format_timestamp, parse_timestamp
from deermem.policy import decay, elapsed_days
from deermem.store.atomic import atomic_write, remove_durably
from deermem.store.records import EvictionReceipt, UsageEntry

__all__ = [
    "append_receipts",
    "forget_in_audit",
    "forget_usage",
    "read_audit",
    "read_usage",
    "record_access",
    "restore_usage",
    "strip_audit_events",
]

_log = logging.getLogger("deermem.store")


def _read_json(path: Path) -> object | None:
    """The sidecar's JSON, or ``None`` when it is missing or unreadable (logged)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        value: object = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        _log.warning("ignoring malformed sidecar %s: %s", path, error)
        return None
    return value


def _write_json(path: Path, value: list[object] | dict[str, object]) -> None:
    """One item per line: readable, diffable, and encoded by the C encoder.

    (``indent=`` would switch ``json`` to its pure-Python encoder, which costs
    milliseconds for a full audit on every eviction.)
    """
    if isinstance(value, dict):
        items = [f"{json.dumps(k, ensure_ascii=False)}: {_compact(v)}" for k, v in value.items()]
        text = "{\n" + ",\n".join(items) + "\n}\n" if items else "{}\n"
    else:
        lines = [_compact(item) for item in value]
        text = "[\n" + ",\n".join(lines) + "\n]\n" if lines else "[]\n"
    atomic_write(path, text.encode("utf-8"))


def _compact(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


# --- usage -----------------------------------------------------------------


def read_usage(path: Path) -> dict[str, UsageEntry]:
    """The usage sidecar; malformed entries are dropped, a malformed file reads as empty."""
    raw = _read_json(path)
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


def _write_usage(path: Path, usage: Mapping[str, UsageEntry]) -> None:
    if not usage:
        remove_durably(path)
        return
    _write_json(path, {key: usage[key].to_dict() for key in sorted(usage)})


def record_access(
    path: Path, fact_ids: Iterable[str], now: datetime, half_life_days: float
) -> None:
    """Count one recall of each fact: heat × 2^(−Δdays/half-life) + 1, count + 1."""
    usage = read_usage(path)
    stamp = format_timestamp(now)
    for fact_id in dict.fromkeys(fact_ids):
        entry = usage.get(fact_id)
        heat = 0.0
        count = 0
        if entry is not None:
            count = entry.access_count
            last = parse_timestamp(entry.last_accessed_at)
            if last is not None:
                heat = entry.access_heat * decay(elapsed_days(now, last), half_life_days)
        usage[fact_id] = UsageEntry(
            access_heat=heat + 1.0, access_count=count + 1, last_accessed_at=stamp
        )
    _write_usage(path, usage)


def restore_usage(path: Path, entries: Mapping[str, UsageEntry]) -> None:
    """Put usage entries back (for facts restored from the archive)."""
    if not entries:
        return
    usage = read_usage(path)
    usage.update(entries)
    _write_usage(path, usage)


def forget_usage(path: Path, fact_ids: Iterable[str]) -> dict[str, UsageEntry]:
    """Drop the entries of these facts; return what was dropped."""
    usage = read_usage(path)
    dropped = {fact_id: usage.pop(fact_id) for fact_id in fact_ids if fact_id in usage}
    if dropped:
        _write_usage(path, usage)
    return dropped


# --- audit -----------------------------------------------------------------


def _raw_events(path: Path) -> list[object]:
    raw = _read_json(path)
    if raw is None:
        return []
    if not isinstance(raw, list):
        _log.warning("ignoring malformed sidecar %s: not a JSON list", path)
        return []
    return raw


def read_audit(path: Path) -> tuple[EvictionReceipt, ...]:
    """The receipts, oldest first; malformed events are skipped."""
    receipts = []
    for event in _raw_events(path):
        receipt = EvictionReceipt.from_dict(event)
        if receipt is None:
            _log.warning("ignoring a malformed audit event in %s", path)
            continue
        receipts.append(receipt)
    return tuple(receipts)


def append_receipts(path: Path, receipts: Sequence[EvictionReceipt], max_entries: int) -> None:
    """Append receipts and keep the newest ``max_entries``; 0 writes nothing."""
    if max_entries <= 0 or not receipts:
        return
    events = _raw_events(path)
    events.extend(receipt.to_dict() for receipt in receipts)
    _write_json(path, events[-max_entries:])


def forget_in_audit(path: Path, fact_ids: Iterable[str]) -> None:
    """Remove these ids from every receipt (the original's behaviour on physical deletion)."""
    ids = set(fact_ids)
    if not ids or not path.exists():
        return
    events = _raw_events(path)
    kept = strip_audit_events(events, ids)
    if kept == events:
        return
    if kept:
        _write_json(path, kept)
    else:
        remove_durably(path)


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
