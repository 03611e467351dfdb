"""``deermem mcp`` over stdio: the SDK's transport, with an answer for what it cannot read.

The SDK's stdio reader turns a line it cannot read as a JSON-RPC message (a
lone surrogate escape, a number of more digits than its JSON parser takes,
nesting past its limit, a message of the wrong shape) into an exception on
its read stream, and its dispatcher drops that exception at debug level
unless an ``on_stream_exception`` observer is set — which the stdio runner
of :class:`~mcp.server.mcpserver.MCPServer` offers no way to do. The client
would wait for an answer until its own timeout, and the operator would see
nothing. :func:`run_stdio` runs the server as that runner does, over a read
stream (:class:`AnsweringReadStream`) that takes such an exception out of
the stream, logs one line without content (the exception's type and the
rule it broke) and answers the request with a JSON-RPC error, as the SDK's
streamable-HTTP transport answers the same bodies: ``-32700`` (parse error)
for a line that is not JSON it can read, ``-32602`` for JSON that is not a
JSON-RPC message. The id is the request's when it can be read from the
line, else ``null`` (JSON-RPC 2.0: the id could not be detected); a
notification, or a response of the client's, gets no answer.
"""

from __future__ import annotations

import json
import logging
from contextvars import Context
from types import TracebackType
from typing import Any, Final, Self

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server
from mcp.shared._stream_protocols import ReadStream, WriteStream
from mcp.shared.message import SessionMessage
from mcp.types import INVALID_PARAMS, PARSE_ERROR, ErrorData, JSONRPCError, RequestId
from pydantic import ValidationError

__all__ = ["AnsweringReadStream", "run_stdio"]

_log = logging.getLogger("deermem.service.mcp")

_NOT_READ: Final = object()
"""What a number stands for while the id is looked for when Python cannot convert it."""


async def run_stdio(server: MCPServer) -> None:
    """Serve ``server`` over this process's stdin and stdout until the client closes stdin.

    :meth:`MCPServer.run_stdio_async`, but over an :class:`AnsweringReadStream`.
    The SDK exposes no public way to reach its low-level server, whose
    ``run`` takes the streams; its stdio runner uses the same attribute.
    """
    lowlevel = server._lowlevel_server
    async with stdio_server() as (read_stream, write_stream):
        await lowlevel.run(
            AnsweringReadStream(read_stream, write_stream),
            write_stream,
            lowlevel.create_initialization_options(),
        )


class AnsweringReadStream:
    """The SDK's read stream without its exceptions: each is logged and answered instead.

    Only :class:`~mcp.shared.message.SessionMessage` items come out of it;
    ``last_context`` is the transport's (the dispatcher runs each handler in
    its sender's context).
    """

    def __init__(
        self,
        inner: ReadStream[SessionMessage | Exception],
        answers: WriteStream[SessionMessage],
    ) -> None:
        self._inner = inner
        self._answers = answers

    @property
    def last_context(self) -> Context | None:
        context: Context | None = getattr(self._inner, "last_context", None)
        return context

    async def receive(self) -> SessionMessage:
        while True:
            item = await self._inner.receive()
            if isinstance(item, SessionMessage):
                return item
            await self._refuse(item)

    async def _refuse(self, error: Exception) -> None:
        code, message, request_id, answered = _refusal(error)
        rule = _rule(error)
        if not answered:
            _log.warning(
                "stdin: the MCP SDK could not read a message (%s, %s); it was not a request, "
                "so nothing was answered",
                type(error).__name__,
                rule,
            )
            return
        _log.warning(
            "stdin: the MCP SDK could not read a message (%s, %s); answered with JSON-RPC "
            "error %d%s",
            type(error).__name__,
            rule,
            code,
            "" if request_id is not None else " (id null: the request's id could not be read)",
        )
        refusal = JSONRPCError(
            jsonrpc="2.0", id=request_id, error=ErrorData(code=code, message=message)
        )
        await self._answers.send(SessionMessage(refusal))

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> SessionMessage:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None:
        await self.aclose()
        return None


def _rule(error: Exception) -> str:
    """The rule a line broke, as pydantic names it (``json_invalid``): never its text."""
    if isinstance(error, ValidationError) and error.errors():
        return str(error.errors()[0]["type"])
    return "unreadable"


def _refusal(error: Exception) -> tuple[int, str, RequestId | None, bool]:
    """The JSON-RPC error for a line the SDK could not read: code, message, id, and whether
    to answer at all (not a notification's, nor a response's)."""
    if not isinstance(error, ValidationError):
        return PARSE_ERROR, "Parse error: the message could not be read", None, True
    details = error.errors(include_url=False)
    parse = details[0]
    if parse["type"] == "json_invalid":
        # pydantic's message says what and where (line, column), never the text.
        message = _message_of(parse["input"])
        return PARSE_ERROR, f"Parse error: {parse['msg']}", *_answer_to(message)
    # Valid JSON of another shape: a required member is missing from the message itself
    # for at least one kind of message (a request has no `result`), so that error's
    # input is the whole message.
    whole = next(
        (d["input"] for d in details if len(d["loc"]) <= 2 and isinstance(d["input"], dict)),
        None,
    )
    return (
        INVALID_PARAMS,
        "Validation error: the message is not a JSON-RPC request, notification or response",
        *_answer_to(whole),
    )


def _message_of(line: object) -> object:
    """``line`` read with Python's JSON reader (which takes lone surrogates), numbers
    past its digit limit read as a placeholder; ``None`` when it cannot be read either."""
    if not isinstance(line, str):
        return None
    try:
        return json.loads(line, parse_int=_whole_number)
    except (ValueError, RecursionError):
        return None


def _whole_number(digits: str) -> object:
    try:
        return int(digits)
    except ValueError:  # past sys.get_int_max_str_digits
        return _NOT_READ


def _answer_to(message: object) -> tuple[RequestId | None, bool]:
    """The id to answer ``message`` with, and whether to answer: a request with an id it
    can be written with (an int, or text without lone surrogates) is answered with it;
    what cannot be read as an object is answered with ``null``; a notification or a
    response is not answered."""
    if not isinstance(message, dict):
        return None, True
    if "method" not in message or "id" not in message:
        return None, False
    request_id: Any = message["id"]
    if isinstance(request_id, int) and not isinstance(request_id, bool):
        return request_id, True
    if isinstance(request_id, str) and _writable(request_id):
        return request_id, True
    return None, True


def _writable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
