"""Conversation messages: their shapes, which of them memory may learn from, and upload text.

**Shapes.** deermem reads conversations in two shapes:

* the OpenAI chat format — ``{"role": "user" | "assistant" | "system" |
  "tool", "content": str | [blocks] | null, "tool_calls": [...]}``;
* the LangChain/DeerFlow shape — ``{"type": "human" | "ai" | "system" |
  "tool", "content": ..., "additional_kwargs": {"hide_from_ui": ...},
  "tool_calls": [...], "id": ...}`` — as dicts, or as the message objects
  themselves (anything with ``type`` and ``content`` attributes).

Both become :class:`Message`, the one shape filtering and detection work on.
Only text survives the conversion: image and audio blocks cannot become
memory text. A message that cannot be read is an error naming its position
and field, never a message skipped in silence.

**Filtering.** Memory learns from what the user said and what the assistant
answered, and from nothing else. :func:`filter_messages` keeps human turns
and the assistant's plain replies, and drops:

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
The signals' :func:`~deermem.learning.signals.filter_trivial` applies the same rule to
pure acknowledgements.

**Questions.** "Is that correct?" confirms nothing, "这完全正确吗？" neither,
and "should we go with option B?" decides nothing: a question asks, it does
not state. A pattern file (or one of its patterns) can therefore say that its
matches do not count inside questions (``questions: ignore``, see
:mod:`deermem.learning.signals`). What a question is, is decided here, once
(:func:`in_question`), so every such pattern — bundled or a user's — follows
the same rule. It works on *clauses*: a clause runs up to the next clause mark
(``, ， ; ； 、``) or sentence end (``. 。 ! ！ ? ？ …`` or a line break; a dot
between digits, as in "3.11", ends nothing). The clause a match ends in is a
question when its rest ends with a question mark (``?`` or ``？``) or with one
of the question particles 吗, 么, 呢 ("对，就是这样吗？", "完全正确吗"); or when the
clause after it in the same sentence is a tag question: one that asks by
itself ("isn't it", "don't you think", "对吧", "是不是" …), or a short word
followed by a question mark ("right?", "correct?", "ok?"). A question in
*another* clause does not make the match one: in "Perfect, can you also add
tests?" the user confirms, then asks for more. A clause is read at most
:data:`CLAUSE_WINDOW` characters far: one that runs on longer is no short
question, and the bound keeps a long message with many matches linear to scan.

**Uploads.** Two rules, both here: an upload *block* is cut from what a user
said before anything reads it (:func:`strip_upload_blocks`, used by the
filter and again by the prompt); an upload *event* — a text saying that an
upload happened (``uploaded``, ``uploading a ...``, ``... was uploaded``,
``上传了 ... 文件``), an upload path or an upload tag — is not memory
(:func:`mentions_upload`, :func:`strip_upload_sentences`; the plan's upload
clean-up applies them to facts and summaries). What counts as an event is
deliberately narrow: a fact about file *types* ("works with CSV files",
"prefers PDF export") or a plan ("wants to upload backups to S3 nightly")
stays.

Everything here is pure and linear-time: every pattern is bounded.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final, Literal

from deermem.errors import FactValidationError, MessageFormatError

__all__ = [
    "CLAUSE_WINDOW",
    "KeepHidden",
    "Message",
    "MessageRole",
    "filter_messages",
    "in_question",
    "is_clarification_answer",
    "mentions_upload",
    "parse_message",
    "parse_messages",
    "strip_upload_blocks",
    "strip_upload_sentences",
]

# --- shapes -----------------------------------------------------------------------------

MessageRole = Literal["human", "ai", "system", "tool"]

# Both vocabularies, mapped onto ours. "developer" is OpenAI's newer name for system.
_ROLES: Final[Mapping[str, MessageRole]] = {
    "user": "human",
    "human": "human",
    "assistant": "ai",
    "ai": "ai",
    "system": "system",
    "developer": "system",
    "tool": "tool",
    "function": "tool",
}
_TEXT_BLOCKS: Final = frozenset({"text", "input_text", "output_text"})


@dataclass(frozen=True, slots=True)
class Message:
    """A conversation message, reduced to what memory needs.

    Attributes:
        role: ``human``, ``ai``, ``system`` or ``tool``.
        text: the text content; content blocks are joined with newlines and
            non-text blocks dropped.
        id: the message's id when the source gave one (used to remember how
            far a conversation has been read).
        hidden: the host marked it hidden from the user
            (``additional_kwargs.hide_from_ui``).
        has_tool_calls: an assistant message that calls tools.
        metadata: the source's ``additional_kwargs``, read-only, for hooks
            that decide about hidden messages.
    """

    role: MessageRole
    text: str
    id: str | None = None
    hidden: bool = False
    has_tool_calls: bool = False
    metadata: Mapping[str, object] = field(default_factory=lambda: MappingProxyType({}))

    def with_text(self, text: str) -> Message:
        """The same message with other text (what upload stripping produces)."""
        return Message(self.role, text, self.id, self.hidden, self.has_tool_calls, self.metadata)


def parse_messages(messages: Iterable[object]) -> list[Message]:
    """Read a conversation in either shape (the shapes may even be mixed).

    Raises:
        FactValidationError: the field ``messages`` is not a sequence of
            messages (``None``, one message on its own, a text) — named as the
            thread id is, rather than a bare ``TypeError`` from iterating it.
        MessageFormatError: a message has no role/type, an unknown one, or
            content that is neither text, a list of blocks, nor null.
    """
    # A text or a mapping is iterable too, but as characters or keys: never a conversation.
    if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Iterable):
        raise FactValidationError("messages", messages, "expected a list of messages, oldest first")
    return [parse_message(raw, index) for index, raw in enumerate(messages)]


def parse_message(raw: object, index: int = 0) -> Message:
    """Read one message; ``index`` is its position, for error messages."""
    if isinstance(raw, Message):
        return raw
    fields = _Fields(raw, index)
    role = _role(fields, index)
    text = _text(fields.get("content"), index)
    metadata = fields.get("additional_kwargs")
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, Mapping):
        raise MessageFormatError(index, "additional_kwargs", metadata, "expected a mapping")
    identifier = fields.get("id")
    return Message(
        role=role,
        text=text,
        id=identifier if isinstance(identifier, str) and identifier else None,
        hidden=metadata.get("hide_from_ui") is True,
        has_tool_calls=role == "ai" and _calls_tools(fields, metadata),
        metadata=MappingProxyType(dict(metadata)),
    )


class _Fields:
    """Uniform read access to a dict-shaped or an object-shaped message."""

    def __init__(self, raw: object, index: int) -> None:
        if raw is None or isinstance(raw, str | bytes | int | float | Sequence):
            raise MessageFormatError(
                index, "message", raw, "expected a mapping or a message object"
            )
        self._raw = raw

    def get(self, name: str) -> object:
        if isinstance(self._raw, Mapping):
            return self._raw.get(name)
        return getattr(self._raw, name, None)


def _role(fields: _Fields, index: int) -> MessageRole:
    # OpenAI's "role" wins: LangChain's own ChatMessage carries both, with type "chat".
    name, value = "role", fields.get("role")
    if value is None:
        name, value = "type", fields.get("type")
    if value is None:
        raise MessageFormatError(index, "role", None, "a message needs a 'role' or a 'type'")
    role = _ROLES.get(value) if isinstance(value, str) else None
    if role is None:
        allowed = ", ".join(sorted(_ROLES))
        raise MessageFormatError(index, name, value, f"expected one of {allowed}")
    return role


def _text(content: object, index: int) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence) and not isinstance(content, bytes | bytearray):
        parts: list[str] = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, Mapping) and block.get("type", "text") in _TEXT_BLOCKS:
                text = block.get("text")
                if isinstance(text, str):
                    parts.append(text)
        return "\n".join(parts)
    raise MessageFormatError(
        index, "content", content, "expected text, a list of content blocks, or null"
    )


def _calls_tools(fields: _Fields, metadata: Mapping[str, object]) -> bool:
    """Tool calls, wherever the shape keeps them (OpenAI, LangChain, legacy functions)."""
    for value in (
        fields.get("tool_calls"),
        fields.get("invalid_tool_calls"),
        fields.get("function_call"),
        metadata.get("tool_calls"),
        metadata.get("function_call"),
    ):
        if value:
            return True
    return False


# --- filtering ------------------------------------------------------------------------

KeepHidden = Callable[[Message], bool]
"""A host's rule for hidden human messages: return True to keep one."""

_CLARIFICATION_KEY: Final = "human_input_response"


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


# --- questions ------------------------------------------------------------------------

CLAUSE_WINDOW: Final = 200
"""How far past a match its clause (and a tag after it) is read."""

_CLAUSE_MARKS: Final = ",，;；、"
_QUESTION_MARKS: Final = "?？"
# A dot followed by a digit ("3.11") is part of a number, not the end of a sentence.
_CLAUSE_END: Final = re.compile(r"[,，;；、。!！?？…\n]|\.(?!\d)")
_QUESTION_PARTICLE: Final = re.compile(r"[吗么呢][\s~～]*$")
# English tags that ask by themselves ("That is right, isn't it"), question mark or not.
_ENGLISH_TAGS: Final = re.compile(
    r"(?:isn['’]?t\s+(?:it|that|this)|wasn['’]?t\s+(?:it|that)|aren['’]?t\s+you"
    r"|don['’]?t\s+you\s+think|am\s+i\s+right|innit)",
    re.IGNORECASE,
)
# Short words that make the clause before them a question only when a question mark follows
# ("That's correct, right?"; but "Perfect, right." is no question).
_ASKING_WORDS: Final = re.compile(
    r"(?:is\s+(?:it|that)|right|correct|yes|no|yeah|ok(?:ay)?|eh|huh|true)", re.IGNORECASE
)
# Chinese tags that ask by themselves, question mark or not.
_CHINESE_TAGS: Final = re.compile(
    r"(?:对吧|是吧|对不对|是不是|对吗|是吗|没错吧|没错吗|好吗|行吗|可以吗|对么|是么|好不好|行不行)"
)


def in_question(text: str, position: int) -> bool:
    """Whether the clause of ``text`` that ``position`` falls in is a question.

    Args:
        text: the whole message.
        position: where a match ended (``match.end()``): the clause is read
            from there to its end.

    Returns:
        ``True`` when the rest of that clause ends as a question, or the
        next clause of the same sentence is a tag question (module docstring).
    """
    window = min(len(text), position + CLAUSE_WINDOW)
    end = _CLAUSE_END.search(text, position, window)
    if end is None and window < len(text):
        return False  # a clause that long is no short question
    rest = text[position : end.start() if end else window]
    if _QUESTION_PARTICLE.search(rest):
        return True
    if end is None:
        return False
    mark = end.group()
    if mark in _QUESTION_MARKS:
        return True
    if mark not in _CLAUSE_MARKS:
        return False
    window = min(len(text), end.end() + CLAUSE_WINDOW)
    after = _CLAUSE_END.search(text, end.end(), window)
    tag = text[end.end() : after.start() if after else window].strip()
    if _CHINESE_TAGS.fullmatch(tag) or _ENGLISH_TAGS.fullmatch(tag):
        return True
    asked = after is not None and after.group() in _QUESTION_MARKS
    return asked and _ASKING_WORDS.fullmatch(tag) is not None


# --- uploads ----------------------------------------------------------------------------

_UPLOAD_TAGS: Final = "uploaded_files|current_uploads"
# A whole block, or an opening tag left unclosed (cut to the end: a half-closed
# block must not leak the paths it lists), or a stray closing tag. Linear on any
# text: a tag's attributes cannot hold "<", so each opening that never closes is
# read only up to the next "<" (an unclosed "<uploaded_files" repeated 50,000
# times is read once, not 50,000 times to the end).
_UPLOAD_BLOCK: Final = re.compile(
    rf"<(?P<tag>{_UPLOAD_TAGS})\b[^<>]*>.*?(?:</(?P=tag)\s*>|\Z)|</(?:{_UPLOAD_TAGS})\s*>",
    re.IGNORECASE | re.DOTALL,
)


def strip_upload_blocks(text: str) -> str:
    """``text`` without upload blocks, stripped; unchanged when it holds none."""
    if "<" not in text:
        return text
    stripped, count = _UPLOAD_BLOCK.subn("", text)
    return stripped.strip() if count else text


_FILE_WORD: Final = (
    r"(?:files?|documents?|docs?|attachments?|pdfs?|csvs?|spreadsheets?|images?|photos?|"
    r"pictures?|screenshots?|archives?|datasets?|slides?|logs?|reports?|videos?|recordings?|"
    r"[\w-]{1,64}\.(?:pdf|csv|tsv|xlsx?|docx?|pptx?|txt|md|json|ya?ml|png|jpe?g|gif|zip|gz))"
)
_DETERMINER: Final = (
    r"(?:a|an|the|this|that|these|those|some|several|two|three|\d{1,4}|"
    r"my|our|your|his|her|their|its)"
)
_GAP: Final = r"(?:[^\S\n]+[^\s.!?。！？]{1,40}){0,5}?[^\S\n]+"  # up to five words between
_UPLOAD_EVENT: Final = re.compile(
    "|".join(
        (
            # "uploaded a test file", "uploads the quarterly report.pdf"
            rf"\b(?:uploaded|uploads)\b{_GAP}{_FILE_WORD}\b",
            rf"\b(?:uploaded|uploads)[^\S\n]+{_FILE_WORD}\b",
            # "is uploading a test file" (but not "prefers uploading files via the CLI")
            rf"\buploading[^\S\n]+{_DETERMINER}\b(?:{_GAP}|[^\S\n]+){_FILE_WORD}\b",
            # "the file was uploaded", "two images have been uploaded"
            rf"\b{_FILE_WORD}[^\S\n]+(?:was|were|is|are|has been|have been|got|just)"
            r"[^\S\n]+(?:just[^\S\n]+)?uploaded\b",
            # "an upload of the logs"
            rf"\bupload[^\S\n]+of[^\S\n]+(?:{_DETERMINER}[^\S\n]+)?(?:[\w-]{{1,40}}[^\S\n]+)?"
            rf"{_FILE_WORD}\b",
            # Chinese: "上传了一个文件", "文件已上传"
            r"上传(?:了|过)?[^。！？\n]{0,20}?(?:文件|文档|附件|图片|表格|截图|照片|数据集)",
            r"(?:文件|文档|附件|图片|表格|截图|照片|数据集)[^。！？\n]{0,10}?(?:已|被)?上传",
            # Upload paths and the host's upload tags
            r"/mnt/user-data/uploads\b",
            r"/uploads/[^\s/]{1,255}",
            r"</?(?:uploaded_files|current_uploads)\b",
        )
    ),
    re.IGNORECASE,
)
# A sentence: text up to and including its end — ".", "!" or "?" before a space or the
# end (so "report.pdf" and "3.5" stay inside), a full-width stop, or a line break.
_SENTENCE: Final = re.compile(
    r"(?:[^.!?。！？\n]|[.!?]+(?=[^\s.!?。！？]))*"
    r"(?:[.!?]+(?=\s|$)[^\S\n]*|[。！？]+[^\S\n]*|\n|$)"
)


def mentions_upload(text: str) -> bool:
    """Whether ``text`` mentions an upload event (see the module docstring)."""
    # Every pattern holds "upload" or "上传": a substring test spares the full
    # scan for almost every fact (the clean-up runs over the whole library).
    if "上传" not in text and "upload" not in text.lower():
        return False
    return _UPLOAD_EVENT.search(text) is not None


def strip_upload_sentences(text: str) -> tuple[str, int]:
    """``text`` without the sentences that mention an upload event, and how many were cut.

    Sentences end at ``.``, ``!``, ``?`` (and their full-width forms) or a line
    break; the rest of the text is kept as written. Unchanged text is returned
    as it is (not even stripped).
    """
    if not mentions_upload(text):
        return text, 0
    kept: list[str] = []
    cut = 0
    for match in _SENTENCE.finditer(text):
        sentence = match.group(0)
        if not sentence:
            continue
        if mentions_upload(sentence):
            cut += 1
        else:
            kept.append(sentence)
    return "".join(kept).strip(), cut
