"""Reading a chat-completion body, whoever wrote it.

OpenAI, DeepSeek, vLLM, Ollama, llama.cpp's server and llama-cpp-python all
answer with the same outline (``choices[0].message.content``, ``usage``) and
differ in the details: content as a string or as a list of blocks, ``usage``
present or not, extra fields of their own. This module accepts all of those
and rejects, with a reason, what is not a completion at all.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from deermem.llm.types import TokenUsage

__all__ = ["Completion", "InvalidCompletion", "error_detail", "parse_completion", "redact"]

_DETAIL_LIMIT: Final = 300
REDACTED: Final = "[redacted]"


class InvalidCompletion(ValueError):
    """The body is not a usable completion; ``reason`` says what is wrong."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


@dataclass(frozen=True, slots=True)
class Completion:
    """The parts of a completion deermem uses."""

    text: str
    usage: TokenUsage
    model: str | None
    finish_reason: str | None


def parse_completion(body: object) -> Completion:
    """Take the first choice's text, the usage and the reported model from a decoded body.

    Raises:
        InvalidCompletion: no first choice, no message, or no text in it.
    """
    if not isinstance(body, Mapping):
        raise InvalidCompletion(f"expected a JSON object, got {_kind(body)}")
    choices = body.get("choices")
    if not isinstance(choices, Sequence) or isinstance(choices, str) or not choices:
        raise InvalidCompletion("'choices' is missing or empty")
    choice = choices[0]
    if not isinstance(choice, Mapping):
        raise InvalidCompletion(f"choices[0] is {_kind(choice)}, not an object")
    message = choice.get("message")
    if not isinstance(message, Mapping):
        raise InvalidCompletion("choices[0].message is missing")
    text = _text(message.get("content"))
    if text is None:
        refusal = message.get("refusal")
        if isinstance(refusal, str) and refusal:
            raise InvalidCompletion("the model refused to answer (choices[0].message.refusal)")
        raise InvalidCompletion(
            "choices[0].message.content is "
            f"{_kind(message.get('content'))}, not text or a list of text blocks"
        )
    model = body.get("model")
    finish = choice.get("finish_reason")
    return Completion(
        text=text,
        usage=TokenUsage.from_mapping(body.get("usage")),
        model=model if isinstance(model, str) else None,
        finish_reason=finish if isinstance(finish, str) else None,
    )


def _text(content: object) -> str | None:
    """A string as is; a list of blocks joined (text blocks only); anything else ``None``."""
    if isinstance(content, str):
        return content
    if not isinstance(content, Sequence) or isinstance(content, bytes | bytearray):
        return None
    parts: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, Mapping) and block.get("type", "text") in ("text", "output_text"):
            text = block.get("text")
            if isinstance(text, str):
                parts.append(text)
    if content and not parts:
        return None
    return "".join(parts)


def error_detail(body: bytes, secret: str | None) -> str:
    """The server's own explanation of an error status, short and without the key.

    OpenAI-style servers send ``{"error": {"message": ...}}``; others send
    ``{"error": "..."}``, ``{"detail": ...}`` or plain text.
    """
    text = body.decode("utf-8", errors="replace").strip()
    try:
        decoded: object = json.loads(text)
    except ValueError:
        decoded = None
    if isinstance(decoded, Mapping):
        error = decoded.get("error", decoded.get("detail", decoded.get("message")))
        if isinstance(error, Mapping):
            error = error.get("message", error)
        if error is not None:
            text = error if isinstance(error, str) else json.dumps(error, ensure_ascii=False)
    text = " ".join(redact(text, secret).split())
    return text if len(text) <= _DETAIL_LIMIT else text[: _DETAIL_LIMIT - 3] + "..."


def redact(text: str, secret: str | None) -> str:
    """``text`` with every occurrence of ``secret`` replaced by ``[redacted]``."""
    if not secret:
        return text
    return text.replace(secret, REDACTED)


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Sequence):
        return "a list"
    return type(value).__name__
