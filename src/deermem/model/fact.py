"""The canonical fact: one durable statement about a user, with its metadata.

:class:`Fact` is an immutable value. :meth:`Fact.from_dict` is the single place
where the field rules of the canonical schema are enforced, for facts coming
from a user, a model, an import or a file on disk, so every layer above can
trust a ``Fact`` without re-checking it. Field names are the camelCase keys of
the stored format (``createdAt``, ``lastConfirmedAt`` ...), so the Python
attribute, the JSON key and the front-matter key are one and the same name.

Unknown keys are not an error: they are kept in :attr:`Fact.extra` and written
back unchanged, so data from a newer or older writer survives a round trip.
So is the order of the keys (:attr:`Fact.key_order`): a fact keeps the order
it was given or read in, and keys it gains are appended, exactly as the
original DeerMem's dictionaries do — so both write a fact's file alike.

Every string a fact holds must be valid Unicode (:mod:`deermem.model.text`):
a fact that exists can be written as UTF-8 and read back.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Final, Literal

from deermem.errors import FactValidationError
from deermem.model.categories import canonical_category
from deermem.model.text import LINE_BREAKS, MAX_KEPT_SIZE, check_storable
from deermem.model.timestamps import format_timestamp

__all__ = [
    "FACT_ID_PATTERN",
    "FACT_SCHEMA_VERSION",
    "MAX_FACT_ID_LENGTH",
    "MAX_TITLE_LENGTH",
    "TIMESTAMP_FIELDS",
    "Fact",
    "FactScope",
    "FactSource",
    "derived_heading",
]

FACT_ID_PATTERN: Final = re.compile(r"[A-Za-z0-9_-]+")
# Ids become file names: ``<id>.md`` for the fact, ``<id>.json`` in the
# archive. 250 characters keeps both inside the 255-byte name limit of common
# file systems (ids are ASCII), and takes every id the original can write.
MAX_FACT_ID_LENGTH: Final = 250
MAX_TITLE_LENGTH: Final = 160
FACT_SCHEMA_VERSION: Final = 2

# Source types that carry no thread; any other string is a conversation thread id.
_PLAIN_SOURCE_TYPES: Final = frozenset({"manual", "consolidation", "import", "unknown"})

# The storage scope's front-matter keys: the store writes them, a fact never holds them.
_SCOPE_KEYS: Final = frozenset({"user_id", "agent_name"})

# The order of a new fact's keys, as the original DeerMem's manual and
# extraction paths build it ...
_CREATION_ORDER: Final = (
    "id",
    "content",
    "category",
    "confidence",
    "createdAt",
    "source",
    "sourceError",
    "expected_valid_days",
)
# ... and the order in which it appends the keys a fact lacks when it stores
# it (then, later, the keys a confirmation adds). Every key Fact models is here.
_APPEND_ORDER: Final = (
    "id",
    "content",
    "schemaVersion",
    "category",
    "categoryExtension",
    "confidence",
    "status",
    "scope",
    "topics",
    "consolidatedFrom",
    "source",
    "title",
    "createdAt",
    "updatedAt",
    "revision",
    "consolidatedAt",
    "lastConfirmedAt",
    "confirmationCount",
    "sourceError",
    "expected_valid_days",
)
_KNOWN_KEYS: Final = frozenset(_APPEND_ORDER)
TIMESTAMP_FIELDS: Final = frozenset({"createdAt", "updatedAt", "lastConfirmedAt", "consolidatedAt"})
"""The fields that hold a time; a ``datetime`` given for one is written as ISO text."""
_DEFAULT_ORDER: Final = tuple(dict.fromkeys((*_CREATION_ORDER, *_APPEND_ORDER)))


@dataclass(frozen=True, slots=True)
class FactSource:
    """Where a fact came from: a conversation thread, or a kind of manual path.

    Attributes:
        type: ``conversation``, ``manual``, ``import``, ``consolidation``,
            ``unknown`` or another writer's own.
        threadId: the conversation's thread, if any.
        extra: other keys of a stored source, kept and written back.
        key_order: the stored keys' order (``threadId`` only if it was
            there), so a source is written back as it was read.
    """

    type: str
    threadId: str | None = None
    # Not hashed (its values may be lists): equal sources still hash alike.
    extra: Mapping[str, object] = field(default_factory=dict, hash=False)
    key_order: tuple[str, ...] = field(default=("type", "threadId"), compare=False, repr=False)

    @classmethod
    def from_value(cls, value: object) -> FactSource:
        """Normalise the loose forms the original accepts into a structured source.

        ``"manual"``, ``"consolidation"``, ``"import"`` and ``"unknown"`` name a
        type without a thread; any other string is a conversation thread id; a
        mapping keeps its ``type`` and ``threadId`` (a missing or non-string
        type reads as ``unknown``, a non-string thread as none) and its other
        keys; anything else is unknown.

        Raises:
            InvalidTextError: a string in it is not valid Unicode.
        """
        if isinstance(value, FactSource):
            return value
        if isinstance(value, str | Mapping):
            check_storable("source", value)
        if isinstance(value, str):
            if value in _PLAIN_SOURCE_TYPES:
                return cls(type=value)
            return cls(type="conversation", threadId=value)
        if isinstance(value, Mapping):
            kind = value.get("type")
            thread = value.get("threadId")
            return cls(
                type=kind if isinstance(kind, str) else "unknown",
                threadId=thread if isinstance(thread, str) else None,
                extra=MappingProxyType(
                    {k: v for k, v in value.items() if k not in ("type", "threadId")}
                ),
                key_order=tuple(dict.fromkeys((*map(str, value), "type"))),
            )
        return cls(type="unknown")

    def to_dict(self) -> dict[str, object]:
        """The stored form: the keys in their order, ``threadId`` if it was there or is set."""
        out: dict[str, object] = {}
        for key in (*self.key_order, "type", "threadId", *self.extra):
            if key in out:
                continue
            if key == "type":
                out[key] = self.type
            elif key == "threadId":
                if self.threadId is not None or key in self.key_order:
                    out[key] = self.threadId
            elif key in self.extra:
                out[key] = self.extra[key]
        return out

    def legacy_string(self) -> str:
        """The single-string form older callers expect (thread id, else type)."""
        if self.type == "conversation" and self.threadId:
            return self.threadId
        return self.type or self.threadId or "unknown"


@dataclass(frozen=True, slots=True)
class FactScope:
    """The storage bucket a fact lives in: the raw user id and the agent name."""

    userId: str | None
    agentName: str

    def to_dict(self) -> dict[str, str | None]:
        return {"userId": self.userId, "agentName": self.agentName}


@dataclass(frozen=True, slots=True)
class Fact:
    """One stored fact, validated.

    Build facts with :meth:`from_dict` (which validates and normalises) rather
    than the constructor, which trusts its arguments.

    ``extra`` holds the keys :class:`Fact` does not model, and stored values
    of modelled keys that mean nothing and are only kept: a
    ``categoryExtension`` beside a core category (the original keeps one when
    a fact's category changes) and a blank ``lastConfirmedAt`` or
    ``consolidatedAt`` (read as absent). ``key_order`` is the order of the
    fact's keys, for writing; it is not part of a fact's value (two facts
    that differ only in it are equal).
    """

    id: str
    content: str
    createdAt: str
    """When the fact was created; ``""`` when stored data does not say."""
    updatedAt: str
    category: str = "context"
    categoryExtension: str | None = None
    confidence: float = 0.5
    status: Literal["active"] = "active"
    schemaVersion: int = FACT_SCHEMA_VERSION
    source: FactSource = field(default_factory=lambda: FactSource(type="unknown"))
    scope: FactScope | None = None
    topics: tuple[str, ...] = ()
    revision: int = 1
    lastConfirmedAt: str | None = None
    confirmationCount: int | None = None
    consolidatedFrom: tuple[str, ...] = ()
    consolidatedAt: str | None = None
    title: str | None = None
    # Passed through verbatim: the original does not validate these at storage.
    sourceError: object = None
    expected_valid_days: object = None
    extra: Mapping[str, object] = field(default_factory=dict)
    key_order: tuple[str, ...] = field(default=_DEFAULT_ORDER, compare=False, repr=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, object], *, now: datetime | None = None) -> Fact:
        """Validate a mapping with canonical keys and build a fact from it.

        Args:
            data: the fact's fields under their canonical camelCase keys.
                Their order is kept (keys the fact lacks are appended).
                ``user_id`` and ``agent_name`` are the store's to write and
                are ignored.
            now: the clock used for ``createdAt`` when the mapping has none;
                without it a missing (or blank) ``createdAt`` is unknown (``""``).

        Raises:
            InvalidTextError: a string anywhere in the fact is not valid
                Unicode (a lone surrogate: an undecodable byte, say).
            FactValidationError: naming the first field whose value is not
                allowed, the value, and what the field accepts.
        """
        raw_id = data.get("id")
        fact_id = raw_id if isinstance(raw_id, str) else None
        try:
            return cls._build(data, now)
        except FactValidationError as error:
            if error.fact_id is not None or not fact_id or error.field == "id":
                raise
            # Name the fact in the message: "which fact" matters as much as "which field".
            raise error.naming(fact_id) from None

    @classmethod
    def _build(cls, data: Mapping[str, object], now: datetime | None) -> Fact:
        # What the fact keeps without knowing it shares one budget; ``source``
        # (which keeps its unknown keys too) has one of its own.
        unknown_budget = MAX_KEPT_SIZE
        for key, value in data.items():
            if not isinstance(key, str):
                raise FactValidationError(repr(key), value, "expected a string key")
            check_storable(key, key)
            if key in _SCOPE_KEYS or isinstance(value, FactSource | FactScope):
                continue
            if key in TIMESTAMP_FIELDS and isinstance(value, datetime):
                continue  # formatted as text below
            if key == "source":
                check_storable(key, value, max_size=MAX_KEPT_SIZE)
            elif key in _KNOWN_KEYS:
                check_storable(key, value)
            else:
                unknown_budget -= check_storable(key, value, max_size=MAX_KEPT_SIZE) + len(key)
                if unknown_budget < 0:
                    raise FactValidationError(
                        key,
                        "<too large>",
                        f"expected the fields deermem does not know to hold at most "
                        f"{MAX_KEPT_SIZE:,} characters (and values) together",
                    )
        content = _content(data.get("content"))
        category, extension, stale_extension = _category(data)
        created = _timestamp(data, "createdAt")
        if created is None:
            created = "" if now is None else format_timestamp(now)
        updated = _timestamp(data, "updatedAt") or created
        consolidated_from = _string_list(data, "consolidatedFrom")
        consolidated_at = _timestamp(data, "consolidatedAt")
        if consolidated_from and consolidated_at is None:
            consolidated_at = updated
        extra = {
            key: value
            for key, value in data.items()
            if key not in _KNOWN_KEYS and key not in _SCOPE_KEYS
        }
        if stale_extension is not None:
            extra["categoryExtension"] = stale_extension
        for name in ("lastConfirmedAt", "consolidatedAt"):
            stored = data.get(name)
            if isinstance(stored, str) and not stored.strip():
                extra[name] = stored  # blank: read as absent, written back as it was
        return cls(
            id=_fact_id(data.get("id")),
            content=content,
            title=_title(data.get("title"), content),
            category=category,
            categoryExtension=extension,
            confidence=_confidence(data.get("confidence", 0.5)),
            status=_status(data.get("status", "active")),
            schemaVersion=FACT_SCHEMA_VERSION,
            source=FactSource.from_value(data.get("source")),
            scope=_scope(data.get("scope")),
            topics=_string_list(data, "topics"),
            createdAt=created,
            updatedAt=updated,
            revision=_revision(data.get("revision", 1)),
            lastConfirmedAt=_timestamp(data, "lastConfirmedAt"),
            confirmationCount=_confirmation_count(data.get("confirmationCount")),
            consolidatedFrom=consolidated_from,
            consolidatedAt=consolidated_at,
            sourceError=data.get("sourceError"),
            expected_valid_days=data.get("expected_valid_days"),
            # Read-only: facts are shared (e.g. from a store's cache), never copied.
            extra=MappingProxyType(extra),
            key_order=tuple(
                dict.fromkeys([*(key for key in data if key not in _SCOPE_KEYS), *_APPEND_ORDER])
            ),
        )

    def to_dict(self) -> dict[str, object]:
        """The canonical mapping, in the fact's key order, unset optional fields omitted.

        ``topics`` and ``consolidatedFrom`` are always there (as lists), as the
        original writes them. ``from_dict(fact.to_dict()) == fact`` holds for
        every valid fact, key order included.
        """
        values: dict[str, object] = {
            "id": self.id,
            "content": self.content,
            "category": self.category,
            "categoryExtension": self.categoryExtension,
            "confidence": self.confidence,
            "status": self.status,
            "schemaVersion": self.schemaVersion,
            "source": self.source.to_dict(),
            "scope": None if self.scope is None else self.scope.to_dict(),
            "topics": list(self.topics),
            "createdAt": self.createdAt,
            "updatedAt": self.updatedAt,
            "revision": self.revision,
            "lastConfirmedAt": self.lastConfirmedAt,
            "confirmationCount": self.confirmationCount,
            "consolidatedFrom": list(self.consolidatedFrom),
            "consolidatedAt": self.consolidatedAt,
            "sourceError": self.sourceError,
            "expected_valid_days": self.expected_valid_days,
            "title": self.title,
        }
        out: dict[str, object] = {}
        for key in (*self.key_order, *_DEFAULT_ORDER, *self.extra):
            if key in out:
                continue
            value = values.get(key)
            if value is not None:
                out[key] = value
            elif key in self.extra:
                out[key] = self.extra[key]
        return out

    def get(self, key: str, default: object = None) -> object:
        """The value stored under ``key`` (a field name or an extra key), else ``default``.

        Reads a fact the way one reads its canonical mapping, so code that
        accepts both — the capacity policies do — reads them alike, without
        converting a fact to a dict. Values are returned as the fact holds
        them (``source`` as a :class:`FactSource`, ``topics`` as a tuple);
        an unset optional field gives ``default``, as its absent key would.
        """
        value = getattr(self, key) if key in _KNOWN_KEYS else self.extra.get(key)
        return default if value is None else value

    def heading(self) -> str:
        """The Markdown heading: the explicit title, else the first content line.

        The first line is what :meth:`str.splitlines` gives, cut to 160
        characters and stripped (see :func:`derived_heading`).
        """
        return self.title if self.title else derived_heading(self.content)

    def replace(self, **changes: object) -> Fact:
        """Return a copy with fields changed, re-validated through :meth:`from_dict`.

        A field that was unset and is set now goes after the fact's other keys.
        """
        data = self.to_dict()
        for key, value in changes.items():
            if key in ("extra", "key_order"):
                raise TypeError(f"change extra keys by name, not through {key!r}")
            data[key] = value.to_dict() if isinstance(value, FactSource | FactScope) else value
        return Fact.from_dict(data)


def derived_heading(content: str) -> str:
    """The heading a fact without a title gets: its first line, cut to 160, stripped.

    As the original DeerMem writes it: the first of :meth:`str.splitlines`
    (which also breaks at U+2028, U+0085 ...). Stripped after the cut too, so
    the heading read back from a file is the heading derived from its content.
    """
    lines = content.splitlines()
    return (lines[0].strip() if lines else "")[:MAX_TITLE_LENGTH].rstrip()


def _fact_id(value: object) -> str:
    allowed = (
        f"expected a non-empty string of letters, digits, '_' or '-' "
        f"of at most {MAX_FACT_ID_LENGTH} characters"
    )
    if not isinstance(value, str) or not FACT_ID_PATTERN.fullmatch(value):
        raise FactValidationError("id", value, allowed)
    if len(value) > MAX_FACT_ID_LENGTH:
        raise FactValidationError("id", value, allowed)
    return value


def _content(value: object) -> str:
    if not isinstance(value, str):
        raise FactValidationError("content", value, "expected a string")
    text = value.strip()
    if not text:
        raise FactValidationError("content", value, "expected text that is not blank")
    return text


_LINE_BREAK_TABLE: Final = dict.fromkeys(map(ord, LINE_BREAKS), " ")


def _title(value: object, content: str) -> str | None:
    """An explicit title on one line, cut to 160; none when it is the derived heading."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise FactValidationError("title", value, "expected a string")
    text = value.translate(_LINE_BREAK_TABLE).strip()[:MAX_TITLE_LENGTH].strip()
    if not text or text == derived_heading(content):
        return None
    return text


def _category(data: Mapping[str, object]) -> tuple[str, str | None, object]:
    """``(category, own label, a categoryExtension beside a core category)``.

    A stored ``categoryExtension`` names an ``other`` fact's own label (and
    wins over the label a non-core category gives, as in the original); one
    beside a core category is returned third, to be kept as it is.
    """
    value = data.get("category", "")
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise FactValidationError("category", value, "expected a string")
    category, extension = canonical_category(value)
    stored = data.get("categoryExtension")
    if category != "other":
        return category, None, stored
    if stored is not None and not isinstance(stored, str):
        raise FactValidationError("categoryExtension", stored, "expected a string")
    return category, stored or extension, None


def _confidence(value: object) -> float:
    allowed = "expected a number between 0 and 1"
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise FactValidationError("confidence", value, allowed)
    number = float(value)
    if not math.isfinite(number) or not 0.0 <= number <= 1.0:
        raise FactValidationError("confidence", value, allowed)
    return number


def _status(value: object) -> Literal["active"]:
    if value != "active":
        raise FactValidationError("status", value, "only 'active' is allowed")
    return "active"


def _scope(value: object) -> FactScope | None:
    if value is None:
        return None
    if isinstance(value, FactScope):
        return value
    allowed = "expected a mapping with 'userId' (string or null) and 'agentName' (string)"
    if not isinstance(value, Mapping):
        raise FactValidationError("scope", value, allowed)
    user_id = value.get("userId")
    agent = value.get("agentName")
    if (user_id is not None and not isinstance(user_id, str)) or not isinstance(agent, str):
        raise FactValidationError("scope", value, allowed)
    return FactScope(userId=user_id, agentName=agent)


def _string_list(data: Mapping[str, object], name: str) -> tuple[str, ...]:
    value = data.get(name)
    if value is None:
        return ()
    if isinstance(value, list | tuple) and all(isinstance(item, str) for item in value):
        return tuple(value)
    raise FactValidationError(name, value, "expected a list of strings")


def _timestamp(data: Mapping[str, object], name: str) -> str | None:
    """A timestamp as stored; ``None`` when missing or blank (blank reads as absent)."""
    value = data.get(name)
    if isinstance(value, datetime):
        return format_timestamp(value)
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if not isinstance(value, str):
        raise FactValidationError(name, value, "expected an ISO 8601 timestamp string")
    return value


def _revision(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise FactValidationError("revision", value, "expected a whole number of at least 1")
    return value


def _confirmation_count(value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise FactValidationError(
            "confirmationCount", value, "expected a whole number of at least 1"
        )
    return value
