"""The text boundary: which text may reach a file, decided in one place.

Two levels, because stored data and new data differ in what they owe us:

* **Storable** (:func:`check_storable`) — every string a fact or a summary
  holds, on every path (a file read back, an import, a person, a model),
  must be valid Unicode: a lone surrogate cannot be written as UTF-8, and it
  is what an undecodable byte becomes when Python decodes a command-line
  argument (``surrogateescape``) or what a JSON ``"\\ud800"`` escape yields.
  Values must also be plain data a YAML and a JSON writer can represent,
  nested at most :data:`MAX_NESTING` deep (the writers recurse: a value
  nested hundreds deep would fail to be written, or be written by one store
  and not by the other); and what a fact or a summary section keeps without
  knowing it — its unknown fields — holds at most :data:`MAX_KEPT_SIZE`.
  :meth:`deermem.model.Fact.from_dict` applies this to every field, so a
  fact that exists can be written and read back, on either store.
* **Authored** (:func:`check_line`, :func:`check_lines`) — text a person or a
  model writes *now* (``facts add``, ``facts edit``, a model's answer) also
  keeps to a shape and a length: one-line fields (a category, a topic, a
  thread id) hold no control character and no line break; multi-line fields
  (content, summaries, ``sourceError``) hold no control character but tab
  and line breaks; and each has the length limit of a fact extracted by a
  model. Data that already exists — files written by the original DeerMem,
  documents ``deermem export`` wrote — is not held to these: reading it, or
  importing it again, must not fail on a limit it was never written under.

Both raise :class:`~deermem.InvalidTextError` (a
:class:`~deermem.FactValidationError`) naming the field, the character and
its position; a length over the limit is a plain ``FactValidationError``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

from deermem.errors import FactValidationError, InvalidTextError

__all__ = [
    "LINE_BREAKS",
    "MAX_CATEGORY_CHARS",
    "MAX_CONTENT_CHARS",
    "MAX_KEPT_SIZE",
    "MAX_LINE_CHARS",
    "MAX_NESTING",
    "MAX_SOURCE_ERROR_CHARS",
    "MAX_SUMMARY_CHARS",
    "MAX_TOPICS",
    "check_line",
    "check_lines",
    "check_storable",
]

MAX_CONTENT_CHARS: Final = 4_000
"""Longest fact content a person or a model may write (about 1,000 tokens)."""
MAX_CATEGORY_CHARS: Final = 64
"""Longest category (or own label, or topic) a person or a model may write."""
MAX_SOURCE_ERROR_CHARS: Final = 2_000
"""Longest ``sourceError`` (what the assistant got wrong) a person or a model may write."""
MAX_SUMMARY_CHARS: Final = 8_000
"""Longest summary section a model may write."""
MAX_LINE_CHARS: Final = 256
"""Longest other one-line value written by hand (a thread id, a source type)."""
MAX_TOPICS: Final = 32
"""Most topics a fact written by hand may carry."""
MAX_NESTING: Final = 32
"""Deepest nesting of lists and mappings in any stored value (no field deermem
knows nests more than two deep; a writer that recurses stays far from its limit)."""
MAX_KEPT_SIZE: Final = 65_536
"""Largest size of the unknown fields a fact keeps together (and of its ``source``,
and of a summary section's unknown keys): characters of text, keys included, plus
one per value."""

LINE_BREAKS: Final = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"
"""Every character :meth:`str.splitlines` breaks a line at."""

# Control characters (C0, DEL, C1) and the two Unicode line separators: none
# belongs in a one-line field.
_NOT_IN_A_LINE: Final = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
# In multi-line text tab, line feed and carriage return are text; U+2028/9
# are left to the writer, who may mean them.
_NOT_IN_LINES: Final = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")

# What YAML's safe dumper and json can both write (and their loaders give back):
# a fact goes to front matter, to archive entries and to exports.
_SCALARS: Final = (str, bool, int, float, type(None))


def check_storable(field: str, value: object, *, max_size: int | None = None) -> int:
    """Refuse a value that cannot be stored as it is: a lone surrogate in any
    string (keys included, at any depth), a type no file format represents,
    lists and mappings nested deeper than :data:`MAX_NESTING`, or (with
    ``max_size``) a value larger than that.

    The walk keeps its own stack, so no value — however deep a JSON or YAML
    reader built it — makes it recurse.

    Args:
        field: the name of the value, for the error (``"topics"``, ``"source"``).
        value: a string, number, boolean, ``None``, or a list (or tuple, which
            is written as a list) or mapping of those: what both YAML and JSON
            hold.
        max_size: the largest size allowed (``None``: any size).

    Returns:
        The value's size: the characters of its text, mapping keys included,
        plus one for each value (a scalar, a list, a mapping).

    Raises:
        InvalidTextError: a string (or a mapping key) holds a lone surrogate;
            ``field`` names where (``"source.threadId"``, ``"topics[2]"``).
        FactValidationError: a value of another type (a tuple, an object),
            nested too deep, or larger than ``max_size``.
    """
    if isinstance(value, str):  # the common case, without a walk
        _check_unicode(field, value)
        size = 1 + len(value)
    else:
        size = _walk(field, value, max_size)
    if max_size is not None and size > max_size:
        raise _too_large(field, max_size)
    return size


def _walk(field: str, value: object, max_size: int | None) -> int:
    size = 0
    # (where, value, how many lists and mappings hold it), depth first, in order.
    stack: list[tuple[str, object, int]] = [(field, value, 0)]
    while stack:
        where, item, depth = stack.pop()
        size += 1
        if isinstance(item, str):
            _check_unicode(where, item)
            size += len(item)
        elif isinstance(item, Mapping | list | tuple):
            if depth >= MAX_NESTING:
                raise FactValidationError(
                    where,
                    f"<{type(item).__name__} nested {depth + 1} deep>",  # never the value itself
                    f"expected lists and mappings nested at most {MAX_NESTING} deep",
                )
            children: list[tuple[str, object, int]] = []
            if isinstance(item, Mapping):
                for key, child in item.items():
                    if isinstance(key, str):
                        _check_unicode(f"{where} key", key)
                        size += len(key)
                    elif not isinstance(key, _SCALARS):
                        raise FactValidationError(
                            where, item, "expected keys that are plain values"
                        )
                    children.append((f"{where}.{key}", child, depth + 1))
            else:
                children = [(f"{where}[{n}]", child, depth + 1) for n, child in enumerate(item)]
            stack.extend(reversed(children))
        elif not isinstance(item, _SCALARS):
            raise FactValidationError(
                where, item, "expected text, a number, a boolean, null, a list or a mapping"
            )
        if max_size is not None and size > max_size:
            raise _too_large(field, max_size)
    return size


def _too_large(field: str, max_size: int) -> FactValidationError:
    return FactValidationError(
        field,
        "<too large>",  # never the value itself: it may be megabytes
        f"expected at most {max_size:,} characters (and values) in what deermem keeps "
        "without knowing it",
    )


def check_line(field: str, value: str, limit: int) -> str:
    """Check one line of text written now; return it unchanged.

    Raises:
        InvalidTextError: a lone surrogate, a control character or a line break.
        FactValidationError: more than ``limit`` characters.
    """
    _check_unicode(field, value)
    found = _NOT_IN_A_LINE.search(value)
    if found is not None:
        raise _control(field, value, found.start(), "one line of text")
    return _check_length(field, value, limit)


def check_lines(field: str, value: str, limit: int) -> str:
    """Check text of one or more lines written now; return it unchanged.

    Raises:
        InvalidTextError: a lone surrogate, or a control character other than
            tab, line feed and carriage return.
        FactValidationError: more than ``limit`` characters.
    """
    _check_unicode(field, value)
    found = _NOT_IN_LINES.search(value)
    if found is not None:
        raise _control(field, value, found.start(), "text")
    return _check_length(field, value, limit)


def _check_unicode(field: str, value: str) -> None:
    if value.isascii():
        return
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        position = error.start
        character = value[position]
        point = ord(character)
        if 0xDC80 <= point <= 0xDCFF:
            # How Python's surrogateescape carries a byte that is not UTF-8.
            problem = (
                f"byte 0x{point - 0xDC00:02X} at position {position} is not UTF-8; "
                "expected UTF-8 text"
            )
        else:
            problem = (
                f"U+{point:04X} at position {position} is a lone surrogate; "
                "expected valid Unicode text"
            )
        raise InvalidTextError(
            field, value, position=position, character=character, problem=problem
        ) from None


def _control(field: str, value: str, position: int, kind: str) -> InvalidTextError:
    character = value[position]
    return InvalidTextError(
        field,
        value,
        position=position,
        character=character,
        problem=(
            f"control character U+{ord(character):04X} at position {position}; expected {kind} "
            "without control characters"
        ),
    )


def _check_length(field: str, value: str, limit: int) -> str:
    if len(value) > limit:
        raise FactValidationError(
            field, value, f"expected at most {limit:,} characters, found {len(value):,}"
        )
    return value
