"""What the scripted chat server records and what it answers.

:class:`RecordedRequest` is a request as it arrived; :class:`Reply` is one
scripted answer: a completion, any JSON body, an error status (with
``Retry-After`` when asked), raw bytes, a slow answer, or a dropped connection.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeAlias

__all__ = ["JSON_CONTENT_TYPE", "RecordedRequest", "Reply", "ScriptItem", "as_reply"]

JSON_CONTENT_TYPE: Final = "application/json"
_JSON: Final = JSON_CONTENT_TYPE


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One request the server received, as it arrived.

    Attributes:
        method: ``"POST"``, ``"GET"`` ...
        path: the request path, e.g. ``"/v1/chat/completions"``.
        headers: header names lower-cased; values as sent.
        body: the raw body.
    """

    method: str
    path: str
    headers: Mapping[str, str]
    body: bytes

    def json(self) -> dict[str, Any]:
        """The body decoded as a JSON object.

        Raises:
            ValueError: the body is not a JSON object.
        """
        decoded = json.loads(self.body)
        if not isinstance(decoded, dict):
            raise ValueError(f"the request body is a {type(decoded).__name__}, not an object")
        return decoded

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The ``messages`` of a chat-completion request."""
        messages = self.json().get("messages")
        return list(messages) if isinstance(messages, list) else []


@dataclass(frozen=True, slots=True)
class Reply:
    """One scripted answer. Build it with the class methods rather than the constructor.

    Attributes:
        status: the HTTP status.
        body: the body, sent as is (a completion built by :meth:`text` is rendered
            per request instead, so its usage can count the request's words).
        headers: extra response headers.
        delay: seconds to wait before answering (makes a client time out).
        hang_up: close the connection instead of answering.
        partial: with ``hang_up``, first send the headers and these bytes of a
            longer body, then close (a connection lost mid-answer).
    """

    status: int = 200
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = ()
    delay: float = 0.0
    hang_up: bool = False
    partial: bytes | None = None
    completion: _Completion | None = field(default=None, repr=False)

    @classmethod
    def text(
        cls,
        content: str | Sequence[Mapping[str, object]],
        *,
        model: str = "scripted-model",
        usage: Mapping[str, object] | bool | None = True,
        finish_reason: str = "stop",
        delay: float = 0.0,
    ) -> Reply:
        """A chat completion whose message content is ``content``.

        Args:
            content: the text, or a list of content blocks
                (``[{"type": "text", "text": ...}]``) as some servers send.
            model: the ``model`` the completion reports.
            usage: ``True`` counts whitespace-separated words of the request's
                messages and of ``content``; a mapping is sent as given;
                ``False`` or ``None`` leaves ``usage`` out.
            finish_reason: ``"stop"``, or ``"length"`` for a truncated answer.
            delay: seconds to wait before answering.
        """
        spec = _Completion(content, model, usage, finish_reason)
        return cls(delay=delay, completion=spec)

    @classmethod
    def json(
        cls,
        body: object,
        *,
        status: int = 200,
        headers: Mapping[str, str] | None = None,
        delay: float = 0.0,
    ) -> Reply:
        """Any JSON body, e.g. a completion with fields of your own or without ``choices``."""
        encoded = json.dumps(body, ensure_ascii=False).encode("utf-8")
        return cls(status, encoded, _header_items(headers, _JSON), delay)

    @classmethod
    def error(
        cls,
        status: int,
        *,
        message: str | None = None,
        retry_after: float | str | None = None,
        headers: Mapping[str, str] | None = None,
        delay: float = 0.0,
    ) -> Reply:
        """An error status with an OpenAI-style body ``{"error": {"message": ...}}``.

        Args:
            status: e.g. 429, 500, 401.
            message: the error text; a default naming the status otherwise.
            retry_after: sent as the ``Retry-After`` header (seconds, or an HTTP date string).
        """
        text = message if message is not None else f"scripted HTTP {status}"
        extra = dict(headers or {})
        if retry_after is not None:
            extra["Retry-After"] = (
                retry_after if isinstance(retry_after, str) else f"{retry_after:g}"
            )
        body = json.dumps({"error": {"message": text, "type": "scripted"}}).encode("utf-8")
        return cls(status, body, _header_items(extra, _JSON), delay)

    @classmethod
    def raw(
        cls,
        body: bytes | str,
        *,
        status: int = 200,
        content_type: str = _JSON,
        delay: float = 0.0,
    ) -> Reply:
        """Bytes sent as they are, e.g. a malformed JSON body with a JSON content type."""
        data = body.encode("utf-8") if isinstance(body, str) else body
        return cls(status, data, (("Content-Type", content_type),), delay)

    @classmethod
    def drop_connection(cls, *, partial: bytes | None = None, delay: float = 0.0) -> Reply:
        """Close the connection without an answer, or, with ``partial``, in the middle of one."""
        return cls(delay=delay, hang_up=True, partial=partial)

    def render(self, request: RecordedRequest) -> tuple[int, tuple[tuple[str, str], ...], bytes]:
        """Status, headers and body for ``request``."""
        if self.completion is None:
            return self.status, self.headers, self.body
        body = self.completion.body(request)
        return self.status, (("Content-Type", _JSON), *self.headers), body


@dataclass(frozen=True, slots=True)
class _Completion:
    content: str | Sequence[Mapping[str, object]]
    model: str
    usage: Mapping[str, object] | bool | None
    finish_reason: str

    def body(self, request: RecordedRequest) -> bytes:
        completion: dict[str, object] = {
            "id": "chatcmpl-scripted",
            "object": "chat.completion",
            "created": 0,
            "model": self.model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": self.content},
                    "finish_reason": self.finish_reason,
                }
            ],
        }
        if self.usage is True:
            completion["usage"] = self._counted_usage(request)
        elif isinstance(self.usage, Mapping):
            completion["usage"] = dict(self.usage)
        return json.dumps(completion, ensure_ascii=False).encode("utf-8")

    def _counted_usage(self, request: RecordedRequest) -> dict[str, int]:
        try:
            messages = request.messages
        except ValueError:
            messages = []
        prompt = 0
        for message in messages:
            content = message.get("content")
            if isinstance(content, str):
                prompt += len(content.split())
        if isinstance(self.content, str):
            answer = len(self.content.split())
        else:
            answer = sum(len(str(block.get("text", "")).split()) for block in self.content)
        return {
            "prompt_tokens": prompt,
            "completion_tokens": answer,
            "total_tokens": prompt + answer,
        }


ScriptItem: TypeAlias = (
    Reply | str | Mapping[str, object] | Callable[[RecordedRequest], "ScriptItem"]
)
"""What :meth:`ScriptedChatServer.enqueue` accepts: a :class:`Reply`; a string (a
completion with that content); a mapping (a JSON body, status 200); or a
function of the request returning one of those, for answers that depend on
what was asked."""


def as_reply(item: ScriptItem, request: RecordedRequest) -> Reply:
    while callable(item) and not isinstance(item, Reply):
        item = item(request)
    if isinstance(item, Reply):
        return item
    if isinstance(item, str):
        return Reply.text(item)
    return Reply.json(item)


def _header_items(
    headers: Mapping[str, str] | None, content_type: str
) -> tuple[tuple[str, str], ...]:
    items = dict(headers or {})
    if not any(name.lower() == "content-type" for name in items):
        items["Content-Type"] = content_type
    return tuple(items.items())
