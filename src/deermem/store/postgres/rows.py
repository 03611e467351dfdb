"""What a row holds: deermem's values as JSON text, read back strictly.

Facts, archive entries, receipts, thread marks and the summary document are
stored as the JSON the Markdown store's files hold (a fact's every field, in
its key order), so a value reads back exactly as it was written and
``deermem migrate`` copies without translating. Reading is as strict as the
Markdown store's: a row that is not what it must be — not JSON, an invalid
fact, a fact of another scope — is a :class:`~deermem.CorruptMemoryFile`
naming the table and the row, never an empty memory.
"""

from __future__ import annotations

import hashlib
import json
from typing import Final

from deermem.errors import CorruptMemoryFile
from deermem.model import Fact, Scope, check_user_id, duplicate_digest
from deermem.store.records import (
    ArchiveEntry,
    SummaryDocument,
    decode_entry,
    decode_summaries,
    stored_fact,
)

__all__ = [
    "NO_USER",
    "archive_digest",
    "decode_archive_entry",
    "decode_event",
    "decode_fact",
    "decode_mark",
    "decode_summary_document",
    "encode_archive_entry",
    "encode_fact",
    "encode_json",
    "encode_mark",
    "encode_summary_document",
    "fact_content",
    "row_label",
    "thread_key",
    "user_key",
    "user_of",
]

NO_USER: Final = ""
"""The user key of the single-user layout (an empty user id is refused by ``Scope.of``)."""


def user_key(scope: Scope) -> str:
    """The ``user_id`` column of a scope: the raw user id, or ``''`` without one.

    Raises:
        UnsafeIdentifierError: the id breaks the one rule for user ids
            (:func:`~deermem.model.check_user_id`), which :meth:`Scope.of`
            applies already; checked again for a scope made without it.
    """
    if scope.user_id is None:
        return NO_USER
    return check_user_id(scope.user_id)


def user_of(key: str) -> str | None:
    """The user id of a ``user_id`` column (``None`` for the single-user layout)."""
    return None if key == NO_USER else key


def thread_key(thread_id: str) -> str:
    """A thread's key: the digest the Markdown store names its mark file with."""
    return hashlib.sha256(thread_id.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def encode_json(value: object) -> str:
    """JSON text for a row: every character escaped that a text column could refuse."""
    return json.dumps(value, ensure_ascii=True)


def row_label(database: str, table: str, scope: Scope, key: str | None = None) -> str:
    """Where a row lives, for error messages: database, table, scope and key."""
    where = f"{database} {table} ({scope}"
    return f"{where}, {key!r})" if key is not None else f"{where})"


def encode_mark(thread_id: str, mark: str, stamp: str) -> str:
    """A thread mark row: what a mark file holds (a digest, never conversation text)."""
    return encode_json({"threadId": thread_id, "mark": mark, "markedAt": stamp})


def decode_mark(document: str, label: str, thread_id: str) -> str:
    """The mark of a thread row, checked as a mark file is.

    Raises:
        CorruptMemoryFile: not a mark of this conversation (never read as
            absent: that would extract, and confirm, the conversation again).
    """
    raw = _parse(document, label)
    mark = raw.get("mark") if isinstance(raw, dict) else None
    if not isinstance(raw, dict) or not isinstance(mark, str):
        raise CorruptMemoryFile(label, "a thread mark needs 'threadId' and 'mark' strings")
    if raw.get("threadId") != thread_id:
        raise CorruptMemoryFile(label, "the thread mark belongs to another conversation")
    return mark


def encode_fact(fact: Fact) -> str:
    """A fact row: the fact's JSON, its keys in the one order of a fact (a fact file's:
    the front matter's, then ``scope``, ``content`` and ``title``;
    :data:`~deermem.model.BODY_KEYS`)."""
    return encode_json(fact.to_dict())


def decode_fact(document: str, label: str, scope: Scope, fact_id: str) -> Fact:
    """A fact row, checked as a fact file is: valid, of this id and this scope; its keys
    in the one order of a fact, whatever order the row holds (an earlier deermem wrote
    ``content`` second, as a fact is created): a copy to the Markdown store and back is
    the rows it started from, byte for byte.

    Raises:
        CorruptMemoryFile: anything else.
    """
    raw = _parse(document, label)
    if not isinstance(raw, dict):
        raise CorruptMemoryFile(label, "a fact must be a JSON object")
    return stored_fact(raw, label, scope, fact_id, "fact", "is stored under another id")


def fact_content(document: str) -> str | None:
    """The content of a fact row, read leniently (``None``: the row does not read)."""
    try:
        raw: object = json.loads(document)
    except (json.JSONDecodeError, RecursionError):
        return None
    content = raw.get("content") if isinstance(raw, dict) else None
    return content if isinstance(content, str) else None


def archive_digest(document: str) -> str | None:
    """The ``content_digest`` of an archive row: the digest of its fact's duplicate key
    (:func:`~deermem.model.duplicate_digest`), read leniently (``None``: the row does
    not read; it is reported where it is read for itself)."""
    try:
        raw: object = json.loads(document)
    except (json.JSONDecodeError, RecursionError):
        return None
    fact = raw.get("fact") if isinstance(raw, dict) else None
    content = fact.get("content") if isinstance(fact, dict) else None
    return duplicate_digest(content) if isinstance(content, str) else None


def encode_archive_entry(entry: ArchiveEntry) -> str:
    return encode_json(entry.to_dict())


def decode_archive_entry(document: str, label: str, scope: Scope, fact_id: str) -> ArchiveEntry:
    """An archive row, checked as an archive file is (see ``archive.decode_entry``)."""
    return decode_entry(document.encode("utf-8"), label, scope, fact_id)


def encode_summary_document(document: SummaryDocument) -> str:
    return encode_json(document.to_dict())


def decode_summary_document(document: str, label: str) -> SummaryDocument:
    return decode_summaries(document.encode("utf-8"), label)


def decode_event(document: str, label: str) -> object:
    """An audit event as stored (reading it as a receipt is lenient, as for the audit file)."""
    return _parse(document, label)


def _parse(document: str, label: str) -> object:
    try:
        value: object = json.loads(document)
    except json.JSONDecodeError as error:
        raise CorruptMemoryFile(label, f"not valid JSON: {error}") from None
    except RecursionError:  # the C decoder's own depth guard; nothing deermem writes
        raise CorruptMemoryFile(label, "nested too deeply to be read") from None
    return value
