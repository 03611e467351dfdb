"""The JSON Schema of a memory-update reply, for constrained decoding.

A backend that supports it (the local llama.cpp model; OpenAI-compatible
servers with ``response_format: json_schema``) generates only replies of
this shape, which matters most for small models. The schema is deliberately
plain — objects, arrays, enums, numbers; no ``$ref``, no ``oneOf`` — because
grammar converters support little else. It is stricter than the parser:
the parser still accepts, and the gate still judges, any reply.

Array lengths are bounded with the same limits normalisation applies, so a
constrained model cannot be made to loop through thousands of entries.
"""

from __future__ import annotations

import copy
from typing import Any, Final

import deermem.learning.limits as limits
from deermem.learning.state import HISTORY_SECTIONS, USER_SECTIONS
from deermem.model import CORE_CATEGORIES

__all__ = ["AUTHORITY_LABELS", "DURABILITY_LABELS", "SCOPE_LABELS", "response_json_schema"]

SCOPE_LABELS: Final = ("user", "thread", "project")
DURABILITY_LABELS: Final = ("durable", "transient")
AUTHORITY_LABELS: Final = ("descriptive", "transactional")

_STRING: Final = {"type": "string"}


def _obj(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def _array(items: dict[str, Any], max_items: int) -> dict[str, Any]:
    return {"type": "array", "items": items, "maxItems": max_items}


def _section() -> dict[str, Any]:
    return _obj(
        {
            "summary": {"type": "string", "maxLength": limits.MAX_SUMMARY_CHARS},
            "shouldUpdate": {"type": "boolean"},
            "scope": {"enum": list(SCOPE_LABELS)},
            "authority": {"enum": list(AUTHORITY_LABELS)},
        },
        ["summary", "shouldUpdate", "scope", "authority"],
    )


def _new_fact() -> dict[str, Any]:
    return _obj(
        {
            "content": {"type": "string", "minLength": 1, "maxLength": limits.MAX_CONTENT_CHARS},
            "category": {"enum": list(CORE_CATEGORIES)},
            "confidence": {"type": "number", "minimum": 0, "maximum": 1},
            "scope": {"enum": list(SCOPE_LABELS)},
            "durability": {"enum": list(DURABILITY_LABELS)},
            "authority": {"enum": list(AUTHORITY_LABELS)},
            "sourceError": {"type": "string", "maxLength": limits.MAX_SOURCE_ERROR_CHARS},
            "expected_valid_days": {"type": "integer", "minimum": 1},
        },
        ["content", "category", "confidence", "scope", "durability", "authority"],
    )


def _build() -> dict[str, Any]:
    reason = {"type": "string", "maxLength": limits.MAX_REASON_CHARS}
    fact_id = {"type": "string", "minLength": 1, "maxLength": limits.MAX_ID_CHARS}
    return _obj(
        {
            "user": _obj({name: _section() for name in USER_SECTIONS}, []),
            "history": _obj({name: _section() for name in HISTORY_SECTIONS}, []),
            "newFacts": _array(_new_fact(), limits.MAX_NEW_FACTS),
            "factsToReinforce": _array(
                _obj(
                    {"id": fact_id, "scope": {"enum": list(SCOPE_LABELS)}, "reason": reason},
                    ["id", "scope", "reason"],
                ),
                limits.MAX_REINFORCEMENTS,
            ),
            "factsToRemove": _array(
                _obj(
                    {
                        "id": fact_id,
                        "scope": {"enum": list(SCOPE_LABELS)},
                        "reason": reason,
                        "replacementFactIndex": {"type": "integer", "minimum": 0},
                    },
                    ["id", "scope", "reason"],
                ),
                limits.MAX_REMOVALS,
            ),
            "staleFactsToRemove": _array(
                _obj({"id": fact_id, "reason": reason}, ["id", "reason"]),
                limits.MAX_STALE_REMOVALS,
            ),
            "staleFactsToExtend": _array(
                _obj(
                    {
                        "id": fact_id,
                        "extend_by_days": {"type": "integer", "minimum": 1},
                        "reason": reason,
                    },
                    ["id", "extend_by_days", "reason"],
                ),
                limits.MAX_EXTENSIONS,
            ),
        },
        [
            "user",
            "history",
            "newFacts",
            "factsToReinforce",
            "factsToRemove",
            "staleFactsToRemove",
            "staleFactsToExtend",
        ],
    )


_SCHEMA: Final = _build()


def response_json_schema() -> dict[str, Any]:
    """The reply schema, as a fresh copy the caller may change."""
    return copy.deepcopy(_SCHEMA)
