"""Finding the memory update in whatever a model answered.

Models wrap JSON in many ways: prose before and after it, Markdown code
fences, ``<think>`` reasoning (closed or cut off), an example object they
quote before the real one, content blocks instead of a string. The parser
does not try to recognise each wrapper; it tries a JSON decode at every
``{`` and accepts the first object that *is* a memory update — one with the
keys ``user``, ``history`` and ``newFacts`` — so every wrapper is handled
by the same rule. Closed ``<think>`` blocks are set aside first, so a draft
the model reasoned about loses to the answer it gave; the draft is used only
when the answer holds no update at all.

Parsing never raises on any input: an answer without an update is a
:class:`NoUpdate` with a reason, and nothing changes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from deermem.learning.limits import MAX_DECODE_ATTEMPTS, MAX_RESPONSE_CHARS, MAX_SCAN_CHARS

__all__ = [
    "UPDATE_KEYS",
    "NoUpdate",
    "NoUpdateReason",
    "UpdatePayload",
    "is_update_object",
    "parse_update_response",
    "response_text",
]

UPDATE_KEYS: Final = ("user", "history", "newFacts")
"""The keys that make a JSON object a memory update."""

NoUpdateReason = Literal["empty", "too-large", "no-update-object", "scan-limit"]

_TEXT_BLOCK_TYPES: Final = frozenset({"text", "output_text"})
# Reasoning blocks. Found with bounded patterns and a forward scan, never one
# backtracking pattern: "<think>" repeated 40,000 times must stay linear.
_THINK_OPEN: Final = re.compile(r"<(think|thinking)\b[^<>]{0,64}>", re.IGNORECASE)
_THINK_CLOSE: Final = {
    name: re.compile(rf"</{name}\s{{0,8}}>", re.IGNORECASE) for name in ("think", "thinking")
}
_DECODER: Final = json.JSONDecoder()
# Where an object can start: "{" then a key or the closing brace.
_OBJECT_START: Final = re.compile(r'\{\s*["}]')


@dataclass(frozen=True, slots=True)
class UpdatePayload:
    """The update object found in an answer.

    Attributes:
        data: the decoded object (not yet normalised: see :mod:`deermem.learning.normalize`).
        offset: where in the answer's text the object began.
    """

    data: Mapping[str, object]
    offset: int


@dataclass(frozen=True, slots=True)
class NoUpdate:
    """The answer holds no usable update; nothing is to change.

    Attributes:
        reason: ``empty`` (no text), ``too-large`` (over
            :data:`~deermem.learning.limits.MAX_RESPONSE_CHARS`),
            ``no-update-object`` (no JSON object with the update keys), or
            ``scan-limit`` (the search budget ran out first).
    """

    reason: NoUpdateReason


def response_text(content: object) -> str:
    """The text of a model answer given as a string or as content blocks.

    Strings are returned as they are. In a list, adjacent plain strings are
    chunks of one text and are joined directly; each ``{"type": "text",
    "text": ...}`` block is a text of its own; texts are joined with a
    newline, and blocks of other types (images, tool calls) are skipped.
    ``None`` is no text; any other value is rendered with ``str``.
    """
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    if not isinstance(content, Sequence) or isinstance(content, bytes | bytearray):
        return str(content)
    texts: list[str] = []
    chunk: list[str] = []
    for item in content:
        if isinstance(item, str):
            chunk.append(item)
            continue
        if chunk:
            texts.append("".join(chunk))
            chunk = []
        if isinstance(item, Mapping) and item.get("type") in _TEXT_BLOCK_TYPES:
            text = item.get("text")
            if isinstance(text, str):
                texts.append(text)
    if chunk:
        texts.append("".join(chunk))
    return "\n".join(texts)


def is_update_object(value: object) -> bool:
    """Whether a decoded JSON value is a memory update (an object with the update keys)."""
    return isinstance(value, dict) and all(key in value for key in UPDATE_KEYS)


def parse_update_response(content: object) -> UpdatePayload | NoUpdate:
    """Find the first memory-update object in a model's answer.

    Args:
        content: the answer, as a string or content blocks (see :func:`response_text`).

    Returns:
        The update object, or :class:`NoUpdate` saying why there is none.
        Never raises.
    """
    text = response_text(content)
    if not text.strip():
        return NoUpdate("empty")
    if len(text) > MAX_RESPONSE_CHARS:
        return NoUpdate("too-large")
    budget = _Budget(MAX_SCAN_CHARS, MAX_DECODE_ATTEMPTS)
    answer = _blank_reasoning(text)
    found = _first_update(answer, budget)
    if found is None and answer != text and not budget.spent:
        found = _first_update(text, budget)  # the update exists only inside the reasoning
    if found is not None:
        return found
    return NoUpdate("scan-limit" if budget.spent else "no-update-object")


class _Budget:
    """Characters the decoder may still examine, and decode attempts left."""

    def __init__(self, chars: int, attempts: int) -> None:
        self.left = chars
        self.attempts = attempts

    @property
    def spent(self) -> bool:
        return self.left <= 0 or self.attempts <= 0

    def charge(self, chars: int) -> None:
        self.left -= max(chars, 1)
        self.attempts -= 1


def _blank_reasoning(text: str) -> str:
    """``text`` with each closed reasoning block replaced by spaces of the same
    length (so offsets stay offsets into the original); an unclosed block is kept."""
    parts: list[str] = []
    position = 0
    while (opening := _THINK_OPEN.search(text, position)) is not None:
        closing = _THINK_CLOSE[opening.group(1).lower()].search(text, opening.end())
        if closing is None:
            break
        parts.append(text[position : opening.start()])
        parts.append(" " * (closing.end() - opening.start()))
        position = closing.end()
    parts.append(text[position:])
    return "".join(parts)


def _first_update(text: str, budget: _Budget) -> UpdatePayload | None:
    start = _OBJECT_START.search(text)
    while start is not None and not budget.spent:
        position = start.start()
        try:
            value, end = _DECODER.raw_decode(text, position)
        except json.JSONDecodeError as error:
            budget.charge(error.pos - position + 1)
        except ValueError:
            # An integer literal beyond the interpreter's digit limit: not JSON we take.
            budget.charge(len(text) - position)
        except RecursionError:
            # Nested past the recursion limit: how far it scanned is unknown, so
            # charge the rest of the text; no honest answer is nested this deep.
            budget.charge(len(text) - position)
        else:
            budget.charge(end - position)
            if is_update_object(value):
                return UpdatePayload(data=value, offset=position)
        start = _OBJECT_START.search(text, position + 1)
    return None
