"""Which messages of a conversation memory may learn from.

Memory learns from what the user said and what the assistant answered, and
from nothing else. :func:`filter_messages` keeps human turns and the
assistant's plain replies, and drops:

* system and tool messages, and assistant messages that call tools (their
  text is plumbing, not conversation);
* human messages the host hid from the user (``hide_from_ui``) — injected
  memory, summaries, instructions — except a well-formed answer to a
  clarification question, which the user did type (a hook may decide instead);
* upload blocks (``<uploaded_files>…</uploaded_files>``,
  ``<current_uploads>…</current_uploads>``): their file lists and paths are
  session details, not facts about the user. A turn that held nothing else is
  dropped;
* human turns with no text left.

A human turn that is dropped takes its reply with it: the assistant messages
that follow it, up to the next human turn that is kept. A reply to a hidden
instruction or to a bare upload is not something to learn from either.
:func:`filter_trivial` applies the same rule to pure acknowledgements.

Everything here is pure: messages in, messages out, never new text other than
a human message with its upload blocks cut out.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Final

from deermem.learning.signals.messages import Message
from deermem.learning.signals.patterns import PatternSet

__all__ = [
    "KeepHidden",
    "filter_messages",
    "filter_trivial",
    "is_clarification_answer",
    "strip_upload_blocks",
]

KeepHidden = Callable[[Message], bool]
"""A host's rule for hidden human messages: return True to keep one."""

_UPLOAD_TAGS: Final = ("uploaded_files", "current_uploads")
# A whole block, or an opening tag left unclosed (cut to the end: a half-closed
# block must not leak the paths it lists), or a stray closing tag.
_UPLOAD_BLOCK: Final = re.compile(
    r"<(?P<tag>" + "|".join(_UPLOAD_TAGS) + r")\b[^>]*>.*?(?:</(?P=tag)\s*>|\Z)"
    r"|</(?:" + "|".join(_UPLOAD_TAGS) + r")\s*>",
    re.IGNORECASE | re.DOTALL,
)
_CLARIFICATION_KEY: Final = "human_input_response"


def strip_upload_blocks(text: str) -> str:
    """``text`` without upload blocks, stripped; unchanged when it holds none."""
    if "<" not in text:
        return text
    stripped, count = _UPLOAD_BLOCK.subn("", text)
    return stripped.strip() if count else text


def is_clarification_answer(message: Message) -> bool:
    """Whether a hidden human message is the user's answer to a clarification question.

    The host stores the answer under ``additional_kwargs.human_input_response``;
    it counts when it is well formed (version 1)::

        {"version": 1, "kind": "human_input_response",
         "source": "...", "request_id": "...", "value": "...",
         "response_kind": "text"}                  # or "option", with a non-empty "option_id"

    Anything else — missing keys, empty strings, another version — is not an
    answer, so the hidden message stays dropped.
    """
    payload = message.metadata.get(_CLARIFICATION_KEY)
    if not isinstance(payload, Mapping):
        return False
    if payload.get("version") != 1 or payload.get("kind") != _CLARIFICATION_KEY:
        return False
    if not all(_filled(payload.get(key)) for key in ("source", "request_id", "value")):
        return False
    kind = payload.get("response_kind")
    if kind == "text":
        return True
    return kind == "option" and _filled(payload.get("option_id"))


def filter_messages(
    messages: Sequence[Message], *, keep_hidden: KeepHidden | None = None
) -> list[Message]:
    """The human turns and plain assistant replies memory may learn from (see the module doc).

    Args:
        messages: the conversation, oldest first.
        keep_hidden: decides about hidden human messages; by default only a
            well-formed clarification answer (:func:`is_clarification_answer`) is kept.
    """
    keep = keep_hidden or is_clarification_answer
    kept: list[Message] = []
    dropping_reply = False
    for message in messages:
        if message.role == "human":
            turn = _human_turn(message, keep)
            dropping_reply = turn is None
            if turn is not None:
                kept.append(turn)
        elif _is_reply(message) and not dropping_reply:
            kept.append(message)
    return kept


def filter_trivial(messages: Sequence[Message], patterns: PatternSet) -> list[Message]:
    """``messages`` without pure acknowledgements ("ok", "谢谢") and the replies to them.

    A human turn is trivial when its whole text, without trailing punctuation,
    matches a pattern of ``trivial.yaml``; a message that merely contains "ok"
    stays. With no trivial patterns, nothing is dropped.
    """
    kept: list[Message] = []
    dropping_reply = False
    for message in messages:
        if message.role == "human":
            dropping_reply = patterns.is_trivial(message.text)
            if not dropping_reply:
                kept.append(message)
        elif not (dropping_reply and message.role == "ai"):
            kept.append(message)
    return kept


def _human_turn(message: Message, keep_hidden: KeepHidden) -> Message | None:
    if message.hidden and not keep_hidden(message):
        return None
    text = strip_upload_blocks(message.text)
    if not text.strip():
        return None
    return message if text == message.text else message.with_text(text)


def _is_reply(message: Message) -> bool:
    return message.role == "ai" and not message.has_tool_calls and bool(message.text.strip())


def _filled(value: object) -> bool:
    return isinstance(value, str) and bool(value.strip())
