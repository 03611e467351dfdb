"""One typed conversation message, and adapters from the shapes agents hand us.

deermem reads conversations in two shapes:

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
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final, Literal

from deermem.errors import MessageFormatError

__all__ = ["Message", "MessageRole", "parse_message", "parse_messages"]

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
        MessageFormatError: a message has no role/type, an unknown one, or
            content that is neither text, a list of blocks, nor null.
    """
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
