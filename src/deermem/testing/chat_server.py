"""A scripted OpenAI-compatible chat server on 127.0.0.1, for tests.

Start it, queue the answers a test needs, point a client at :attr:`url`, and
read back what the client sent::

    from deermem.llm import ChatMessage, OpenAICompatibleModel
    from deermem.testing import Reply, ScriptedChatServer

    with ScriptedChatServer() as server:
        server.enqueue(Reply.error(429, retry_after=0), "hello")
        model = OpenAICompatibleModel("any", base_url=server.url, api_key_env=None)
        assert model.complete([ChatMessage.user("hi")]).text == "hello"
        assert len(server.requests) == 2

Every request to ``POST {url}/chat/completions`` takes the next queued reply,
in order. The server speaks real HTTP/1.1 over a real socket, so a client's
connection handling, timeouts, retries and parsing all run as they would
against a remote endpoint. It needs nothing beyond the standard library.

What it records and answers: :class:`RecordedRequest` is a request as it
arrived; :class:`Reply` is one scripted answer: a completion, any JSON body, an
error status (with ``Retry-After`` when asked), raw bytes, a slow answer, or a
dropped connection.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Final, TypeAlias

__all__ = ["EMPTY_QUEUE_STATUS", "RecordedRequest", "Reply", "ScriptItem", "ScriptedChatServer"]

JSON_CONTENT_TYPE: Final = "application/json"
_JSON: Final = JSON_CONTENT_TYPE


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One request the server received, as it arrived.

    Attributes:
        method: ``"POST"``, ``"GET"`` ...
        path: the request path with its query, as it arrived, e.g.
            ``"/v1/chat/completions"``; requests are routed by the part before ``?``.
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


EMPTY_QUEUE_STATUS: Final = 418
"""The status answered when the script has run out: no real server sends it and
deermem's client does not retry it, so a test sees at once that it queued too few."""


class ScriptedChatServer:
    """An OpenAI-compatible chat server on 127.0.0.1 that answers from a script.

    Use it as a context manager (or call :meth:`start` and :meth:`close`). It
    binds a free port; :attr:`url` is the API root to give a client as its
    ``base_url``. Requests to ``POST {url}/chat/completions`` take the queued
    replies in order; any other path answers 404; when the queue is empty the
    answer is :data:`EMPTY_QUEUE_STATUS`. Every request is recorded, in arrival
    order, in :attr:`requests`.

    Args:
        base_path: the API root path, ``"/v1"`` as on OpenAI.
    """

    def __init__(self, *, base_path: str = "/v1") -> None:
        self.base_path = "/" + base_path.strip("/") if base_path.strip("/") else ""
        self._queue: deque[ScriptItem] = deque()
        self._requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # --- life cycle ----------------------------------------------------------------

    def start(self) -> ScriptedChatServer:
        """Bind a free port on 127.0.0.1 and serve in a background thread."""
        if self._server is not None:
            raise RuntimeError("the server is already running")
        self._stopping.clear()
        self._server = _Server(self)
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="deermem-scripted-chat-server",
            daemon=True,
        )
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving, end delayed replies early, and close every connection."""
        server, self._server = self._server, None
        if server is None:
            return
        self._stopping.set()
        server.shutdown()
        server.close_connections()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> ScriptedChatServer:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def url(self) -> str:
        """The API root, e.g. ``http://127.0.0.1:54321/v1``; pass it as ``base_url``."""
        if self._server is None:
            raise RuntimeError("the server is not running; use it as a context manager")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}{self.base_path}"

    # --- the script ----------------------------------------------------------------

    def enqueue(self, *items: ScriptItem) -> None:
        """Queue replies for the next requests, in order (see :data:`ScriptItem`)."""
        with self._lock:
            self._queue.extend(items)

    @property
    def remaining(self) -> int:
        """How many queued replies no request has taken yet."""
        with self._lock:
            return len(self._queue)

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, oldest first (a copy)."""
        with self._lock:
            return list(self._requests)

    def clear(self) -> None:
        """Forget the queue and the recorded requests."""
        with self._lock:
            self._queue.clear()
            self._requests.clear()

    # --- called by the handler -------------------------------------------------------

    def _reply_for(self, request: RecordedRequest) -> Reply:
        with self._lock:
            self._requests.append(request)
            received = len(self._requests)
            item: ScriptItem | None = None
            # Routed by the path alone, as real servers do: a query (``?api-key=``) is
            # part of some endpoints' address, not of the route.
            route = request.path.partition("?")[0]
            endpoint = request.method == "POST" and route == (self.base_path + "/chat/completions")
            if endpoint and self._queue:
                item = self._queue.popleft()
        if not endpoint:
            return Reply.error(404, message=f"no such endpoint: {request.method} {request.path}")
        if item is None:
            return Reply.error(
                EMPTY_QUEUE_STATUS,
                message=f"deermem.testing: no scripted reply left for request {received}",
            )
        return as_reply(item, request)

    def _wait(self, seconds: float) -> bool:
        """Sleep for a delayed reply; ``False`` when the server is closing meanwhile."""
        return not self._stopping.wait(seconds) if seconds > 0 else True


class _Server(ThreadingHTTPServer):
    """The socket server, which also keeps track of open connections to close them."""

    daemon_threads = True
    block_on_close = False

    def __init__(self, owner: ScriptedChatServer) -> None:
        self.owner = owner
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _Handler)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        with self._connections_lock:
            self._connections.add(request)
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._connections_lock:
                self._connections.discard(request)

    def close_connections(self) -> None:
        """Wake every handler blocked on a kept-alive connection, so it ends."""
        with self._connections_lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):  # already closed by the client
                connection.shutdown(socket.SHUT_RDWR)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server
    # Send headers and body in one segment, at once: with Nagle's algorithm and
    # delayed ACKs, the second of two small writes waits for the client's ACK.
    wbufsize = 64 * 1024
    disable_nagle_algorithm = True
    # An idle kept-alive connection is dropped after this long, as real servers do.
    timeout = 30

    def do_POST(self) -> None:
        self._serve()

    def do_GET(self) -> None:
        self._serve()

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the per-request log line ``http.server`` writes to stderr."""

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length > 0 else b""
        request = RecordedRequest(
            method=self.command,
            path=self.path,
            headers={name.lower(): value for name, value in self.headers.items()},
            body=body,
        )
        owner = self.server.owner
        reply = owner._reply_for(request)
        if not owner._wait(reply.delay):
            self.close_connection = True
            return
        if reply.hang_up:
            self._hang_up(reply.partial)
            return
        status, headers, payload = reply.render(request)
        self.send_response(status, _phrase(status))
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _hang_up(self, partial: bytes | None) -> None:
        self.close_connection = True
        if partial is None:
            return
        self.send_response(200)
        self.send_header("Content-Type", JSON_CONTENT_TYPE)
        self.send_header("Content-Length", str(len(partial) + 1024))
        self.end_headers()
        self.wfile.write(partial)
        self.wfile.flush()


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Scripted"
