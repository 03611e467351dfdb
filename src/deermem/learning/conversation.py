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

What one update sends is bounded too: :func:`fit_conversation` keeps the
newest turns whose blocks fit ``max_conversation_chars`` and leaves the
older ones out, so the cost of one model call does not grow with the
length of a conversation. The newest turn always fits whole: after the cut
above no block is longer than :data:`MAX_TURN_CHARS`, and no cap below
:data:`MIN_CONVERSATION_CHARS` is accepted.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

from deermem.learning._text import escape_text

__all__ = [
    "DEFAULT_MAX_CONVERSATION_CHARS",
    "MAX_TURN_CHARS",
    "MIN_CONVERSATION_CHARS",
    "TRUNCATE_ABOVE",
    "TRUNCATE_KEEP",
    "TRUNCATION_MARKER",
    "ConversationTurn",
    "ConversationWindow",
    "TurnRole",
    "fit_conversation",
    "format_conversation",
    "render_turn",
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

_SEPARATOR: Final = "\n\n"

# Escaping turns one character into at most five ("&" -> "&amp;").
MAX_TURN_CHARS: Final = (
    max(len(label) for label in _LABELS.values())
    + len(": ")
    + 2 * TRUNCATE_KEEP * max(len(escape_text(c)) for c in "&<>")
    + len(TRUNCATION_MARKER)
)
"""The longest block one turn can render to (label, shortened and escaped text)."""

MIN_CONVERSATION_CHARS: Final = 8_000
"""The smallest cap on the conversation part of a prompt: above
:data:`MAX_TURN_CHARS`, so the newest turn is never cut by the cap."""

DEFAULT_MAX_CONVERSATION_CHARS: Final = 24_000
"""The default cap (``max_conversation_chars``): about 6,000 tokens of English,
13,000 of Chinese; at least 22 turns even at their longest unescaped form."""


@dataclass(frozen=True, slots=True)
class ConversationTurn:
    """One filtered message: who spoke, what they said, and the message id.

    Attributes:
        role: ``human`` (the user) or ``ai`` (the assistant), the roles of
            ``deermem.learning.signals.Message``.
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


def render_turn(turn: ConversationTurn) -> str:
    """One turn as the prompt shows it (``User: ...``); ``""`` when no text is left.

    Never longer than :data:`MAX_TURN_CHARS`.
    """
    text = _spoken(turn)
    if not text:
        return ""
    return f"{_LABELS[turn.role]}: {escape_text(truncate_turn(text))}"


def _spoken(turn: ConversationTurn) -> str:
    """The turn's text without upload blocks (user turns) and outer whitespace."""
    return strip_upload_blocks(turn.text) if turn.role == "human" else turn.text.strip()


def format_conversation(turns: Sequence[ConversationTurn]) -> str:
    """The conversation as escaped ``User:``/``Assistant:`` blocks joined by blank lines.

    Returns ``""`` when no turn has text left; the update then makes no
    model call. Nothing is left out: :func:`fit_conversation` applies the cap.
    """
    return _SEPARATOR.join(block for block in map(render_turn, turns) if block)


@dataclass(frozen=True, slots=True)
class ConversationWindow:
    """The part of a conversation one update sends: the newest turns that fit the cap.

    Attributes:
        text: the blocks sent, oldest first, joined by blank lines (what
            :func:`format_conversation` gives for ``turns[start:]``).
        start: where the part sent begins: ``turns[start:]`` is sent (its
            turns without text add nothing), ``turns[:start]`` is not.
        sent: turns with text in ``text``.
        left_out: turns with text that the cap left out, all older than
            every turn sent.
    """

    text: str
    start: int
    sent: int
    left_out: int


def fit_conversation(
    turns: Sequence[ConversationTurn], max_chars: int = DEFAULT_MAX_CONVERSATION_CHARS
) -> ConversationWindow:
    """The newest turns whose blocks fit in ``max_chars`` characters.

    Turns are taken newest first and kept while the joined text stays within
    ``max_chars``; the first turn that does not fit and every older one are
    left out. A turn is never cut to fit (only the per-turn shortening
    applies), and a gap never opens in the middle: the model reads an
    unbroken stretch of the conversation up to its latest turn. Turns
    without text cost nothing and are not counted.

    Raises:
        ValueError: ``max_chars`` is below :data:`MIN_CONVERSATION_CHARS`.
    """
    if max_chars < MIN_CONVERSATION_CHARS:
        raise ValueError(
            f"max_chars must be at least {MIN_CONVERSATION_CHARS:,} (so the newest turn "
            f"always fits whole), got {max_chars!r}"
        )
    blocks: list[str] = []
    used = -len(_SEPARATOR)  # no separator before the first block
    start = len(turns)
    while start > 0:
        block = render_turn(turns[start - 1])
        if block:
            if used + len(_SEPARATOR) + len(block) > max_chars:
                break
            used += len(_SEPARATOR) + len(block)
            blocks.append(block)
        start -= 1
    left_out = sum(1 for turn in turns[:start] if _spoken(turn))
    blocks.reverse()
    return ConversationWindow(_SEPARATOR.join(blocks), start, len(blocks), left_out)
