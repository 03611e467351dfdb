"""Schema problems and how to describe a found value without repeating private text."""

from __future__ import annotations

import json
from dataclasses import dataclass

__all__ = ["FieldProblem", "describe_value"]


@dataclass(frozen=True, slots=True)
class FieldProblem:
    """One way a record breaks its schema.

    Attributes:
        field: the key (``"grade_rule"``, ``"(keys)"``, ``"policy"``).
        expected: what the schema asks for.
        actual: what was found, described without echoing suspect text.
        row: the ``row_id`` (or ``case <id>``) the problem belongs to, when known.
    """

    field: str
    expected: str
    actual: str
    row: str | None = None

    def __str__(self) -> str:
        where = f"{self.row}: " if self.row else ""
        return f"{where}{self.field}: expected {self.expected}, got {self.actual}"


def describe_value(value: object, *, reveal: bool = True) -> str:
    """Describe a found value for a message; with ``reveal=False`` give only its shape.

    Values that might be private text (an unexpected key, a malformed
    identifier) are described by type and length, so that an error report never
    republishes what the check is there to keep out.
    """
    if not reveal:
        if isinstance(value, str):
            return f"a string of {len(value)} characters"
        return f"a JSON {_json_type(value)}"
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= 80 else text[:77] + "..."


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "string"
