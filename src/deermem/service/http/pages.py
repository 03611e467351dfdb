"""Paged lists with keyset cursors: a page never repeats or skips an item.

A cursor is the sort key of the last item a page held, encoded (URL-safe
base64 of a JSON list). The next page holds the items whose keys come after
it in the list's order. Unlike an offset, the key survives changes between
two requests: a fact deleted or evicted meanwhile shifts nothing, and a new
fact shows up where its key puts it.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["InvalidCursor", "Page", "paginate"]

T = TypeVar("T")
Key = tuple[str, ...]


class InvalidCursor(ValueError):
    """The ``cursor`` parameter is not one this server issued."""


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    """One page of items and the cursor of the next (``None``: this is the last)."""

    items: tuple[T, ...]
    next_cursor: str | None


def paginate(
    items: Sequence[T],
    key: Callable[[T], Key],
    *,
    limit: int,
    cursor: str | None,
    descending: bool = False,
) -> Page[T]:
    """The page of ``items`` after ``cursor``, sorted by ``key``.

    Args:
        items: every item, in any order.
        key: the sort key; it must be unique per item (end it with an id).
        limit: the page size (at least 1).
        cursor: the previous page's ``next_cursor``, ``None`` for the first.
        descending: newest first, for keys that start with a timestamp.

    Raises:
        InvalidCursor: the cursor cannot be decoded.
    """
    ordered = sorted(items, key=key, reverse=descending)
    if cursor is not None:
        after = _decode(cursor)
        if descending:
            ordered = [item for item in ordered if key(item) < after]
        else:
            ordered = [item for item in ordered if key(item) > after]
    page = tuple(ordered[:limit])
    more = len(ordered) > limit
    return Page(page, _encode(key(page[-1])) if more and page else None)


def _encode(key: Key) -> str:
    raw = json.dumps(list(key), ensure_ascii=True, separators=(",", ":")).encode("ascii")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def _decode(cursor: str) -> Key:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        value = json.loads(raw)
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise InvalidCursor(cursor) from None
    if not isinstance(value, list) or not all(isinstance(part, str) for part in value):
        raise InvalidCursor(cursor)
    return tuple(value)
