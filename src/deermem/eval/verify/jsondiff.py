"""Explain why a published JSON document differs from the one re-derived.

A byte comparison says *that* two files differ; a reviewer needs to know
*where*: which field, what was expected, what was found. Differences are
reported in three tiers, stopping at the first that finds something:

1. the content (a changed number, a missing or extra key, a different type —
   ``1`` is not ``1.0`` and ``true`` is not ``1``), by JSON path;
2. the key order, where the content is equal but an object's keys are not sorted;
3. the layout (indentation, separators, float spelling, final newline), by line.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from deermem.eval._problems import describe_value

__all__ = ["Difference", "document_differences", "first_text_difference"]


@dataclass(frozen=True, slots=True)
class Difference:
    """One difference: a JSON path or layout label, expected and actual, maybe a line."""

    field: str
    expected: str
    actual: str
    line: int | None = None


def document_differences(expected_text: str, actual_text: str) -> list[Difference]:
    """All differences between the expected document text and the published one."""
    if expected_text == actual_text:
        return []
    try:
        actual = json.loads(actual_text, object_pairs_hook=_reject_duplicate_keys)
    except _DuplicateKeyError as error:
        return [Difference(error.key, "the key once", "the key twice in one object")]
    except json.JSONDecodeError as error:
        found = f"invalid JSON ({error.msg} at line {error.lineno} column {error.colno})"
        return [Difference("(document)", "valid JSON", found, error.lineno)]
    expected = json.loads(expected_text)
    differences = _content_differences(expected, actual, "")
    if differences:
        return differences
    differences = _key_order_differences(actual, "")
    if differences:
        return differences
    return [first_text_difference(expected_text, actual_text)]


def first_text_difference(expected_text: str, actual_text: str) -> Difference:
    """The first line where two texts differ, or their ends if only those do."""
    if expected_text.rstrip("\n") == actual_text.rstrip("\n"):
        return Difference(
            "(end of file)",
            _newline_count(expected_text),
            _newline_count(actual_text),
        )
    expected_lines = expected_text.split("\n")
    actual_lines = actual_text.split("\n")
    for number, (want, got) in enumerate(zip(expected_lines, actual_lines, strict=False), 1):
        if want != got:
            return Difference("(layout)", _excerpt(want), _excerpt(got), number)
    number = min(len(expected_lines), len(actual_lines)) + 1
    return Difference(
        "(layout)", f"{len(expected_lines)} lines", f"{len(actual_lines)} lines", number
    )


class _DuplicateKeyError(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _reject_duplicate_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    result: dict[str, object] = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKeyError(repr(key))
        result[key] = value
    return result


def _content_differences(expected: object, actual: object, path: str) -> list[Difference]:
    where = path or "(document)"
    if type(expected) is not type(actual):
        return [Difference(where, describe_value(expected), describe_value(actual))]
    if isinstance(expected, dict) and isinstance(actual, dict):
        differences: list[Difference] = []
        for key in expected:
            child = f"{path}.{key}" if path else key
            if key not in actual:
                differences.append(Difference(child, describe_value(expected[key]), "no such key"))
            else:
                differences.extend(_content_differences(expected[key], actual[key], child))
        for key in actual:
            if key not in expected:
                child = f"{path}.{key}" if path else key
                hidden = describe_value(actual[key], reveal=False)
                differences.append(Difference(child, "no such key", hidden))
        return differences
    if isinstance(expected, list) and isinstance(actual, list):
        differences = []
        if len(expected) != len(actual):
            differences.append(Difference(where, f"{len(expected)} items", f"{len(actual)} items"))
        for index, (want, got) in enumerate(zip(expected, actual, strict=False)):
            differences.extend(_content_differences(want, got, f"{path}[{index}]"))
        return differences
    if expected != actual:
        return [Difference(where, describe_value(expected), describe_value(actual))]
    return []


def _key_order_differences(value: object, path: str) -> list[Difference]:
    if isinstance(value, dict):
        keys = list(value)
        if keys != sorted(keys):
            where = f"{path} (key order)" if path else "(key order)"
            return [Difference(where, ", ".join(sorted(keys)), ", ".join(keys))]
        found: list[Difference] = []
        for key, child in value.items():
            found.extend(_key_order_differences(child, f"{path}.{key}" if path else key))
        return found
    if isinstance(value, list):
        found = []
        for index, item in enumerate(value):
            found.extend(_key_order_differences(item, f"{path}[{index}]"))
        return found
    return []


def _newline_count(text: str) -> str:
    count = len(text) - len(text.rstrip("\n"))
    if count == 1:
        return "one newline at the end"
    return "no newline at the end" if count == 0 else f"{count} newlines at the end"


def _excerpt(line: str, limit: int = 60) -> str:
    return repr(line) if len(line) <= limit else repr(line[: limit - 3] + "...")
