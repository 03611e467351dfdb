"""The canonical fact: one durable statement about a user, with its metadata.

:class:`Fact` is an immutable value. :meth:`Fact.from_dict` is the single place
where the field rules of the canonical schema are enforced, for facts coming
from a user, a model, an import or a file on disk, so every layer above can
trust a ``Fact`` without re-checking it. Field names are the camelCase keys of
the stored format (``createdAt``, ``lastConfirmedAt`` ...), so the Python
attribute, the JSON key and the front-matter key are one and the same name.

Unknown keys are not an error: they are kept in :attr:`Fact.extra` and written
back unchanged, so data from a newer or older writer survives a round trip.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Final, Literal

from deermem._exceptions import FactValidationError
from deermem.model.categories import canonical_category
from deermem.model.timestamps import format_timestamp

__all__ = [
    "FACT_ID_PATTERN",
    "FACT_SCHEMA_VERSION",
    "MAX_FACT_ID_LENGTH",
    "MAX_TITLE_LENGTH",
    "Fact",
    "FactScope",
    "FactSource",
]

FACT_ID_PATTERN: Final = re.compile(r"[A-Za-z0-9_-]+")
# Ids become file names (``<id>.md``); 200 characters keeps every id well
# inside the 255-byte name limit of common file systems.
MAX_FACT_ID_LENGTH: Final = 200
MAX_TITLE_LENGTH: Final = 160
FACT_SCHEMA_VERSION: Final = 2

# Source types that carry no thread; any other string is a conversation thread id.
_PLAIN_SOURCE_TYPES: Final = frozenset({"manual", "consolidation", "import", "unknown"})

# Keys that Fact models explicitly; everything else goes to ``extra``.
_KNOWN_KEYS: Final = frozenset(
    {
        "id",
        "content",
        "title",
        "category",
        "categoryExtension",
        "confidence",
        "status",
        "schemaVersion",
        "source",
        "scope",
        "topics",
        "createdAt",
        "updatedAt",
        "revision",
        "lastConfirmedAt",
        "confirmationCount",
        "consolidatedFrom",
        "consolidatedAt",
        "sourceError",
        "expected_valid_days",
    }
)


@dataclass(frozen=True, slots=True)
class FactSource:
    """Where a fact came from: a conversation thread, or a kind of manual path."""

    type: str
    threadId: str | None = None

    @classmethod
    def from_value(cls, value: object) -> FactSource:
        """Normalise the loose forms the original accepts into a structured source.

        ``"manual"``, ``"consolidation"``, ``"import"`` and ``"unknown"`` name a
        type without a thread; any other string is a conversation thread id; a
        mapping keeps its ``type`` and ``threadId``; anything else is unknown.
        """
        if isinstance(value, FactSource):
            return value
        if isinstance(value, str):
            if value in _PLAIN_SOURCE_TYPES:
                return cls(type=value)
            return cls(type="conversation", threadId=value)
        if isinstance(value, Mapping):
            kind = value.get("type")
            thread = value.get("threadId")
            return cls(
                type=kind if isinstance(kind, str) and kind else "unknown",
                threadId=thread if isinstance(thread, str) and thread else None,
            )
        return cls(type="unknown")

    def to_dict(self) -> dict[str, str | None]:
        return {"type": self.type, "threadId": self.threadId}

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
    """

    id: str
    content: str
    createdAt: str
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

    @classmethod
    def from_dict(cls, data: Mapping[str, object], *, now: datetime | None = None) -> Fact:
        """Validate a mapping with canonical keys and build a fact from it.

        Args:
            data: the fact's fields under their canonical camelCase keys.
            now: the clock used for ``createdAt`` when the mapping has none;
                without it a missing ``createdAt`` is an error.

        Raises:
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
            raise FactValidationError(
                error.field, error.value, error.allowed, fact_id=fact_id
            ) from None

    @classmethod
    def _build(cls, data: Mapping[str, object], now: datetime | None) -> Fact:
        category, extension = _category(data)
        created = _timestamp(data, "createdAt", required=now is None)
        if created is None:
            assert now is not None  # required=True above otherwise
            created = format_timestamp(now)
        updated = _timestamp(data, "updatedAt", required=False) or created
        consolidated_from = _string_list(data, "consolidatedFrom")
        consolidated_at = _timestamp(data, "consolidatedAt", required=False)
        if consolidated_from and consolidated_at is None:
            consolidated_at = updated
        return cls(
            id=_fact_id(data.get("id")),
            content=_content(data.get("content")),
            title=_title(data.get("title")),
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
            lastConfirmedAt=_timestamp(data, "lastConfirmedAt", required=False),
            confirmationCount=_confirmation_count(data.get("confirmationCount")),
            consolidatedFrom=consolidated_from,
            consolidatedAt=consolidated_at,
            sourceError=data.get("sourceError"),
            expected_valid_days=data.get("expected_valid_days"),
            # Read-only: facts are shared (e.g. from a store's cache), never copied.
            extra=MappingProxyType(
                {key: value for key, value in data.items() if key not in _KNOWN_KEYS}
            ),
        )

    def to_dict(self) -> dict[str, object]:
        """The canonical mapping, in a stable key order, optional fields omitted.

        ``from_dict(fact.to_dict()) == fact`` holds for every valid fact.
        """
        out: dict[str, object] = {
            "id": self.id,
            "content": self.content,
            "category": self.category,
        }
        if self.categoryExtension is not None:
            out["categoryExtension"] = self.categoryExtension
        out["confidence"] = self.confidence
        out["status"] = self.status
        out["schemaVersion"] = self.schemaVersion
        out["source"] = self.source.to_dict()
        if self.scope is not None:
            out["scope"] = self.scope.to_dict()
        out["topics"] = list(self.topics)
        out["createdAt"] = self.createdAt
        out["updatedAt"] = self.updatedAt
        out["revision"] = self.revision
        optional: dict[str, object] = {
            "lastConfirmedAt": self.lastConfirmedAt,
            "confirmationCount": self.confirmationCount,
            "consolidatedFrom": list(self.consolidatedFrom) or None,
            "consolidatedAt": self.consolidatedAt,
            "sourceError": self.sourceError,
            "expected_valid_days": self.expected_valid_days,
            "title": self.title,
        }
        out.update((key, value) for key, value in optional.items() if value is not None)
        out.update(self.extra)
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

        Newlines become spaces and the result is cut to 160 characters.
        """
        base = self.title if self.title else self.content.split("\n", 1)[0]
        return base.replace("\r", " ").replace("\n", " ").strip()[:MAX_TITLE_LENGTH]

    def replace(self, **changes: object) -> Fact:
        """Return a copy with fields changed, re-validated through :meth:`from_dict`."""
        data = self.to_dict()
        for key, value in changes.items():
            if key == "extra":
                raise TypeError("change extra keys by name, not through 'extra'")
            data[key] = value.to_dict() if isinstance(value, FactSource | FactScope) else value
        return Fact.from_dict(data)


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


def _title(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise FactValidationError("title", value, "expected a string")
    text = value.replace("\r", " ").replace("\n", " ").strip()[:MAX_TITLE_LENGTH]
    return text or None


def _category(data: Mapping[str, object]) -> tuple[str, str | None]:
    value = data.get("category", "")
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise FactValidationError("category", value, "expected a string")
    category, extension = canonical_category(value)
    stored_extension = data.get("categoryExtension")
    if stored_extension is not None and not isinstance(stored_extension, str):
        raise FactValidationError("categoryExtension", stored_extension, "expected a string")
    if extension is None and category == "other" and stored_extension:
        extension = stored_extension
    return category, extension


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


def _timestamp(data: Mapping[str, object], name: str, *, required: bool) -> str | None:
    value = data.get(name)
    if value is None:
        if required:
            raise FactValidationError(name, value, "expected an ISO 8601 timestamp string")
        return None
    if isinstance(value, datetime):
        return format_timestamp(value)
    if not isinstance(value, str) or not value.strip():
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
