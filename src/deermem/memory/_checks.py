"""Checks on what a caller asks the memory to store: one place, clear errors.

A fact written by hand (``facts add``, ``facts edit``, a tool, the Python
API) keeps to the limits of a fact a model extracts — the text boundary of
:mod:`deermem.model` — so neither path can plant a 100 KB fact that
breaks the prompt budget, or a category spanning lines that breaks a table.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from deermem.errors import DuplicateFactError, FactValidationError
from deermem.model import (
    MAX_CATEGORY_CHARS,
    MAX_CONTENT_CHARS,
    MAX_LINE_CHARS,
    MAX_SOURCE_ERROR_CHARS,
    MAX_TOPICS,
    check_given_category,
    check_line,
    check_lines,
)
from deermem.store import ScopeSnapshot

__all__ = [
    "check_confidence",
    "check_not_duplicate",
    "checked_category",
    "checked_content",
    "checked_source_error",
    "checked_thread_id",
    "checked_topics",
]


def checked_content(content: object) -> str:
    """The content trimmed: text of at most 4,000 characters that is not blank."""
    if not isinstance(content, str):
        raise FactValidationError("content", content, "expected a string")
    text = content.strip()
    if not text:
        raise FactValidationError("content", content, "expected text that is not blank")
    return check_lines("content", text, MAX_CONTENT_CHARS)


def checked_category(category: object) -> str:
    """One line of at most 64 characters (trimmed); blank means the default; not a
    misspelled core category (:func:`~deermem.model.check_given_category`)."""
    if not isinstance(category, str):
        raise FactValidationError("category", category, "expected a string")
    line = check_line("category", category.strip(), MAX_CATEGORY_CHARS)
    check_given_category(line)
    return line


def checked_topics(topics: Iterable[object]) -> list[str]:
    """At most 32 topics, each one line of at most 64 characters."""
    tags: list[str] = []
    for index, tag in enumerate(topics):
        if not isinstance(tag, str):
            raise FactValidationError(f"topics[{index}]", tag, "expected a string")
        tags.append(check_line(f"topics[{index}]", tag, MAX_CATEGORY_CHARS))
    if len(tags) > MAX_TOPICS:
        raise FactValidationError("topics", tags, f"expected at most {MAX_TOPICS} topics")
    return tags


def checked_source_error(source_error: object) -> str | None:
    """What the assistant got wrong, trimmed: text of at most 2,000 characters, or none."""
    if source_error is None:
        return None
    if not isinstance(source_error, str):
        raise FactValidationError("sourceError", source_error, "expected a string")
    text = check_lines("sourceError", source_error.strip(), MAX_SOURCE_ERROR_CHARS)
    return text or None


def checked_thread_id(thread_id: object) -> str:
    """A conversation's id — the source of the facts learned from it: one line of
    at most 256 characters, checked before the model is asked."""
    if not isinstance(thread_id, str):
        raise FactValidationError("threadId", thread_id, "expected a string")
    return check_line("threadId", thread_id, MAX_LINE_CHARS)


def check_confidence(confidence: object) -> None:
    """A real number in [0, 1] (not a boolean, not NaN)."""
    if (
        isinstance(confidence, bool)
        or not isinstance(confidence, int | float)
        or not math.isfinite(confidence)
        or not 0.0 <= confidence <= 1.0
    ):
        raise FactValidationError("confidence", confidence, "expected a number between 0 and 1")


def check_not_duplicate(snapshot: ScopeSnapshot, text: str) -> None:
    """No active fact may say the same, compared stripped and case-folded."""
    key = text.strip().casefold()
    for fact in snapshot.facts:
        if fact.content.strip().casefold() == key:
            raise DuplicateFactError(fact.id)
