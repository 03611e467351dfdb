"""The watermark: how far each conversation has already been extracted.

An agent hands over the whole conversation after every turn. Extracting all
of it each time would bill the model for the same turns again and again,
offer it the same facts to re-add — and let the same "yes, exactly" confirm
a fact twice. So for each ``(thread, user, agent)`` the watermark remembers
the last message of the last *successful* extraction, and only the messages
after it are fed next time.

* The mark is a digest of the message's id when it has one, else of its
  role and text (:func:`mark_of`): no conversation text is kept.
* If the mark is not found (the conversation was cut or rewritten), the
  whole conversation is fed again: re-extracting is safe (duplicates are
  dropped), skipping is not.
* If the same text occurs twice, the *first* occurrence counts, for the same
  reason: it may feed a turn twice, never zero times.
* The mark moves only after a successful extraction; a failed one leaves it,
  so those messages are fed again next time.
* Emergency extractions (a host flushing a conversation it is about to
  summarise away) feed their messages whole and never move the mark.

Where marks live is the queue's :class:`Marks`: a :class:`~deermem.Memory`
keeps them in its store, written by the very commit that applied the update
(so a new process never extracts, or confirms, an applied conversation
again); :class:`Watermark` keeps them in memory, a bounded LRU
(``max_keys``, 0 = unbounded), for a queue used on its own.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Protocol, TypeVar

__all__ = ["Identifiable", "M", "Marks", "Watermark", "WatermarkKey", "mark_of", "messages_after"]

WatermarkKey = tuple[str, str | None, str]
"""``(thread_id, user_id, agent)``."""


class Identifiable(Protocol):
    """What the queue needs of a message (``ConversationTurn`` and
    ``deermem.learning.signals.Message`` both have it)."""

    @property
    def role(self) -> str: ...

    @property
    def text(self) -> str: ...

    @property
    def id(self) -> str | None: ...


M = TypeVar("M", bound=Identifiable)


def mark_of(message: Identifiable) -> str:
    """The mark of a message: a digest of its id, else of its role and text."""
    identity = f"id\x1f{message.id}" if message.id else f"text\x1f{message.role}\x1f{message.text}"
    return hashlib.sha256(identity.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def messages_after(messages: Sequence[M], mark: str | None) -> tuple[M, ...]:
    """The messages after the first one with this mark; all of them when none has it."""
    if mark is not None:
        for position, message in enumerate(messages):
            if mark_of(message) == mark:
                return tuple(messages[position + 1 :])
    return tuple(messages)


class Marks(Protocol):
    """Where a queue finds and moves its marks."""

    def unseen(self, key: WatermarkKey, messages: Sequence[M]) -> tuple[M, ...]:
        """The messages after the conversation's mark."""
        ...

    def advance(self, key: WatermarkKey, messages: Sequence[M]) -> None:
        """Mark ``messages`` as extracted, once their update succeeded."""
        ...


class Watermark:
    """A thread-safe, bounded table of extraction marks, in memory.

    Args:
        max_keys: how many conversations to remember; 0 = no limit.
    """

    def __init__(self, max_keys: int = 4096) -> None:
        if max_keys < 0:
            raise ValueError(f"max_keys must be 0 (no limit) or more, got {max_keys}")
        self._max_keys = max_keys
        self._marks: OrderedDict[WatermarkKey, str] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._marks)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._marks

    def unseen(self, key: WatermarkKey, messages: Sequence[M]) -> tuple[M, ...]:
        """The messages after the mark; all of them when there is no usable mark."""
        with self._lock:
            mark = self._marks.get(key)
            if mark is not None:
                self._marks.move_to_end(key)
        return messages_after(messages, mark)

    def advance(self, key: WatermarkKey, messages: Sequence[M]) -> None:
        """Mark ``messages`` as extracted (the mark becomes the last one)."""
        if not messages:
            return
        mark = mark_of(messages[-1])
        with self._lock:
            self._marks[key] = mark
            self._marks.move_to_end(key)
            while self._max_keys and len(self._marks) > self._max_keys:
                self._marks.popitem(last=False)

    def forget(self, key: WatermarkKey) -> None:
        """Drop a conversation's mark (its next extraction is a full one)."""
        with self._lock:
            self._marks.pop(key, None)
