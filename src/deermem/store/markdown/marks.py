"""Thread marks: how far each conversation of a scope has been extracted.

One small JSON file per conversation, ``agents/<agent>/.metadata/threads/<digest>.json``
(the digest of the thread id, which may be any text), holding the thread
id, the mark of the last message extracted (a digest: no conversation text),
when it was set, and its owner (``userId``, ``agentName``: a mark that names
another scope is refused; marks written before they carried one are read).
A mark is written by the commit that applied what was extracted, in its
journal, so after any crash the mark and the facts agree.

A mark that cannot be read is an error naming its file, not an absent mark:
reading it as absent would extract — and confirm — the conversation again.
Deleting a mark file is safe: the conversation is extracted whole once more.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple

from deermem.errors import CorruptMemoryFile
from deermem.store.markdown.listing import check_owner_fields, owner_fields
from deermem.store.markdown.paths import ScopePaths

__all__ = ["ThreadMark", "encode_mark", "read_mark", "read_marks"]


def encode_mark(paths: ScopePaths, thread_id: str, mark: str, stamp: str) -> bytes:
    """The mark file of a conversation of the scope of ``paths``."""
    value = {"threadId": thread_id, "mark": mark, "markedAt": stamp, **owner_fields(paths)}
    return (json.dumps(value, ensure_ascii=False) + "\n").encode("utf-8", "surrogatepass")


class ThreadMark(NamedTuple):
    """One conversation's mark, as stored."""

    thread_id: str
    mark: str
    marked_at: str


def read_marks(paths: ScopePaths) -> list[ThreadMark]:
    """Every mark of a scope, by thread id (for copying a scope whole).

    Raises:
        CorruptMemoryFile: a mark file that is not a mark, or not named after its thread.
    """
    try:
        names = sorted(item.name for item in paths.threads_dir.iterdir())
    except FileNotFoundError:
        return []
    marks = []
    for name in names:
        if name.startswith(".") or not name.endswith(".json"):
            continue
        path = paths.threads_dir / name
        data = path.read_bytes()
        try:
            raw = json.loads(data.decode("utf-8", "surrogatepass"))
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
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    return _decode(data, paths, path, thread_id)


def _decode(data: bytes, paths: ScopePaths, path: Path, thread_id: str) -> str:
    try:
        raw = json.loads(data.decode("utf-8", "surrogatepass"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CorruptMemoryFile(path, f"a thread mark that is not valid JSON: {error}") from None
    mark = raw.get("mark") if isinstance(raw, dict) else None
    if not isinstance(mark, str) or not isinstance(raw.get("threadId"), str):
        raise CorruptMemoryFile(path, "a thread mark needs 'threadId' and 'mark' strings")
    if raw["threadId"] != thread_id:
        raise CorruptMemoryFile(path, "the thread mark belongs to another conversation")
    check_owner_fields(raw, paths, path)
    return mark
