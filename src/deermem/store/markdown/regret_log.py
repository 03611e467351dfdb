"""The regret sidecars: regret events, and the facts the shadow policy would have evicted.

Both live in ``agents/<agent>/.metadata/`` beside the audit, hold no content
(see :mod:`deermem.store.regret_records`) and change inside the commit that
caused them, journaled with the facts:

* ``regret-events.json`` — a JSON list of regret events, newest last,
  trimmed to ``regret_max_events``. Canonical data, like the audit: the
  evidence exists nowhere else. A file that is not a JSON list is an error
  naming it, never read as empty and never overwritten; single events it
  cannot read are skipped when reading and kept as they are when events are
  appended.
* ``shadow-evictions.json`` — ``{fact_id: mark}`` for the facts of the
  library that the shadow policy would have evicted and the active policy
  kept. A mark is cleared when its fact leaves the library (it moves into
  the fact's archive entry) or its regret is settled, so the file is bounded
  by the library. A file that is not a JSON object is an error naming it;
  an entry it cannot read is skipped when reading and kept as it is when
  other marks change.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from deermem.errors import CorruptMemoryFile
from deermem.store.regret_records import RegretEvent, ShadowMark
from deermem.store.sidecars import SidecarChange, encode_json, read_json

__all__ = [
    "encode_regret_events",
    "encode_shadow_marks",
    "raw_regret_events",
    "raw_shadow_marks",
    "read_regret_events",
    "read_shadow_marks",
    "regret_after_commit",
    "shadow_marks_after_commit",
]


def raw_regret_events(path: Path) -> list[object]:
    """The events as stored, unread ones included (for a copy of the store).

    Raises:
        CorruptMemoryFile: the file is not a JSON list.
    """
    return _raw_events(path)


def raw_shadow_marks(path: Path) -> dict[str, object]:
    """The marks as stored, unread ones included (for a copy of the store).

    Raises:
        CorruptMemoryFile: the file is not a JSON object.
    """
    return _raw_marks(path)


def encode_regret_events(events: Sequence[object]) -> bytes:
    """The events file's content: one event per line."""
    return encode_json(list(events))


def encode_shadow_marks(marks: Mapping[str, object]) -> bytes:
    """The marks file's content: one mark per line, by fact id."""
    return encode_json({key: marks[key] for key in sorted(marks)})


def _raw_events(path: Path) -> list[object]:
    try:
        raw = read_json(path)
    except ValueError as error:
        raise CorruptMemoryFile(path, f"the regret events are not valid JSON: {error}") from None
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise CorruptMemoryFile(path, "the regret events are not a JSON list")
    return raw


def read_regret_events(path: Path) -> tuple[RegretEvent, ...]:
    """The recorded events, oldest first; events that cannot be read are skipped.

    Raises:
        CorruptMemoryFile: the file is not a JSON list.
    """
    events = (RegretEvent.from_dict(item) for item in _raw_events(path))
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
    kept = [*_raw_events(path), *(event.to_dict() for event in events)]
    return path, encode_regret_events(kept[-max_entries:])


def _raw_marks(path: Path) -> dict[str, object]:
    try:
        raw = read_json(path)
    except ValueError as error:
        raise CorruptMemoryFile(path, f"the shadow marks are not valid JSON: {error}") from None
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise CorruptMemoryFile(path, "the shadow marks are not a JSON object")
    return raw


def read_shadow_marks(path: Path) -> dict[str, ShadowMark]:
    """The marks by fact id; entries that cannot be read are skipped.

    Raises:
        CorruptMemoryFile: the file is not a JSON object.
    """
    marks = {}
    for fact_id, value in _raw_marks(path).items():
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
    raw = _raw_marks(path)
    marks = dict(raw)
    for fact_id, mark in changes.items():
        if mark is None:
            marks.pop(fact_id, None)
        else:
            marks[fact_id] = mark.to_dict()
    if marks == raw:
        return None
    return path, encode_shadow_marks(marks) if marks else None
