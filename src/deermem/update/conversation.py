"""The conversation as the update prompt shows it.

The signals layer filters a conversation (hidden turns, tool traffic,
trivial acknowledgements) and the wiring converts what is left into
:class:`ConversationTurn` values — a role, the text and the message id —
which is all the prompt needs. :func:`format_conversation` then renders
them as ``User:`` / ``Assistant:`` blocks:

* upload blocks (``<uploaded_files>``, ``<current_uploads>``) are cut from
  user turns — file lists are not facts about the user — and a turn left
  empty is skipped;
* a text over 1000 characters keeps its first and last 500 with a marker
  between: the start usually states the request and the end the
  conclusion, and one pasted log must not crowd out the memory;
* ``&``, ``<`` and ``>`` are escaped *after* cutting, so no turn can close
  the ``<conversation>`` block and speak as the prompt, and the marker
  stays intact.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

from deermem.update._text import escape_text

__all__ = [
    "TRUNCATE_ABOVE",
    "TRUNCATE_KEEP",
    "TRUNCATION_MARKER",
    "ConversationTurn",
    "TurnRole",
    "format_conversation",
    "strip_upload_blocks",
    "truncate_turn",
]

TurnRole = Literal["human", "ai"]

TRUNCATE_ABOVE: Final = 1000
"""Texts longer than this many characters are shortened."""
TRUNCATE_KEEP: Final = 500
"""Characters kept from each end of a shortened text."""
TRUNCATION_MARKER: Final = "\n[... middle of this message left out ...]\n"

_LABELS: Final = {"human": "User", "ai": "Assistant"}
# Tag attributes are bounded ({0,256}): an unbounded [^>]* would rescan the rest
# of a long message at every "<uploaded_files" that never closes.
_UPLOAD_BLOCK: Final = re.compile(
    r"<(uploaded_files|current_uploads)\b[^<>]{0,256}>.*?(?:</\1\s{0,8}>|\Z)"
    r"|</(?:uploaded_files|current_uploads)\s{0,8}>",
    re.IGNORECASE | re.DOTALL,
)


@dataclass(frozen=True, slots=True)
class ConversationTurn:
    """One filtered message: who spoke, what they said, and the message id.

    Attributes:
        role: ``human`` (the user) or ``ai`` (the assistant), the roles of
            ``deermem.signals.Message``.
        text: the message text.
        id: the source message's id, if it had one (the queue's watermark
            uses it to tell messages apart).
    """

    role: TurnRole
    text: str
    id: str | None = None

    def __post_init__(self) -> None:
        if self.role not in _LABELS:
            raise ValueError(f"role must be 'human' or 'ai', got {self.role!r}")
        if not isinstance(self.text, str):
            raise TypeError(f"text must be a string, got {type(self.text).__name__}")


def strip_upload_blocks(text: str) -> str:
    """``text`` without upload blocks (an unclosed block runs to the end), stripped."""
    return _UPLOAD_BLOCK.sub("", text).strip()


def truncate_turn(text: str) -> str:
    """Keep the first and last 500 characters of a text over 1000, with a marker between."""
    if len(text) <= TRUNCATE_ABOVE:
        return text
    return text[:TRUNCATE_KEEP] + TRUNCATION_MARKER + text[-TRUNCATE_KEEP:]


def format_conversation(turns: Sequence[ConversationTurn]) -> str:
    """The conversation as escaped ``User:``/``Assistant:`` blocks joined by blank lines.

    Returns ``""`` when no turn has text left; the update then makes no
    model call.
    """
    blocks: list[str] = []
    for turn in turns:
        text = strip_upload_blocks(turn.text) if turn.role == "human" else turn.text.strip()
        if not text:
            continue
        blocks.append(f"{_LABELS[turn.role]}: {escape_text(truncate_turn(text))}")
    return "\n\n".join(blocks)
