"""The plain-ASGI layers at the door of both servers: request ids, ``Host``/``Origin``, body size.

They need no web framework beyond the ASGI types (Starlette's, which both
servers' frameworks build on), so they wrap the HTTP API and the MCP server's
streamable-HTTP app alike, outermost first:

* :class:`RequestIdMiddleware` — one id per request, on every log line it
  causes and in its response. It takes the client's ``X-Request-ID`` when
  that is a short token of safe characters (so a caller can follow its own id
  through the logs), else makes one; it sets it for the request's context,
  returns it in the response's ``X-Request-ID``, writes one access line per
  request, and has the last word on a crash (a problem+json 500 and one
  content-free log line). :class:`RequestIdFilter` copies the current id onto
  every log record as ``request_id`` (``-`` outside a request: start-up,
  shutdown), so a formatter can print it on every line — deermem's own
  loggers, uvicorn's and the job runner's, whose threads run in a copy of the
  request's context. The access line names the *route template*
  (``/v1/users/{user}/agents/{agent}/search``), the status and the duration:
  never the raw path or the query string, which carry user ids and search
  text, and never a header, which carries the token.
* :class:`HostGuardMiddleware` — 421 for a ``Host`` the server does not answer
  for, 403 for a browser's request from another ``Origin``: the defence
  against DNS rebinding, where a web page on ``attacker.example`` makes its
  name resolve to 127.0.0.1 and so reaches a loopback server from the user's
  browser (the rule is :class:`~deermem.service.settings.HostRule`).
* :class:`BodyLimitMiddleware` — 413 before the body is read when
  ``Content-Length`` says it is over the bound, or as soon as the stream
  passes it.
"""

from __future__ import annotations

import json
import logging
import re
import time
import traceback
import uuid
from contextvars import ContextVar
from typing import Any, Final

from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from deermem.service.problems import (
    PROBLEM_CONTENT_TYPE,
    Problem,
    host_not_allowed,
    internal_problem,
    origin_not_allowed,
)
from deermem.service.settings import HostRule

__all__ = [
    "BodyLimitMiddleware",
    "HostGuardMiddleware",
    "HttpMiddleware",
    "RequestIdFilter",
    "RequestIdMiddleware",
    "current_request_id",
    "problem_response",
]

REQUEST_ID_HEADER: Final = "X-Request-ID"
ACCESS_LOGGER: Final = "deermem.service.http.access"
_NO_REQUEST: Final = "-"
_ACCEPTED: Final = re.compile(r"[A-Za-z0-9._-]{8,64}")
_current: ContextVar[str] = ContextVar("deermem_request_id", default=_NO_REQUEST)
_access = logging.getLogger(ACCESS_LOGGER)
_log = logging.getLogger("deermem.service.http")


def current_request_id() -> str:
    """The id of the request being handled, ``-`` outside a request."""
    return _current.get()


class RequestIdFilter(logging.Filter):
    """Adds ``request_id`` to every record that passes the handler it is attached to."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            record.request_id = _current.get()
        return True


class HttpMiddleware:
    """A middleware that acts on HTTP requests (:meth:`http`) and passes anything else, the
    server's lifespan events, to the application untouched.

    Args:
        app: the ASGI application to wrap.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        await self.http(scope, receive, send)

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Handle one HTTP request."""
        raise NotImplementedError


class RequestIdMiddleware(HttpMiddleware):
    """Give each HTTP request an id, expose it, log one access line, contain crashes.

    Args:
        app: the ASGI application to wrap.
    """

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        request_id = _incoming_id(scope) or uuid.uuid4().hex
        token = _current.set(request_id)
        started = time.perf_counter()
        status = 500  # if the application fails before it answers
        answered = False

        async def send_with_id(message: Message) -> None:
            nonlocal status, answered
            if message["type"] == "http.response.start":
                answered = True
                status = int(message["status"])
                headers = list(message.get("headers", []))
                headers.append((REQUEST_ID_HEADER.lower().encode(), request_id.encode()))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        except Exception as error:
            # The last word on a crash: one log line with the exception's type and
            # stack (its message may quote data, so it stays out), and a problem
            # 500 if nothing was sent yet. Not re-raised, so the server does not
            # log the message with a traceback of its own.
            frames = "".join(traceback.format_tb(error.__traceback__))
            _log.error("unhandled %s in the application\n%s", type(error).__name__, frames)
            if not answered:
                status = 500
                await _send_internal_error(send_with_id)
        finally:
            elapsed = (time.perf_counter() - started) * 1000
            _access.info(
                "%s %s %d %.1fms", scope.get("method", "?"), _route_of(scope), status, elapsed
            )
            _current.reset(token)


async def _send_internal_error(send: Send) -> None:
    body = json.dumps(internal_problem().body(request_id=_current.get())).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 500,
            "headers": [
                (b"content-type", PROBLEM_CONTENT_TYPE.encode()),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def _incoming_id(scope: Scope) -> str | None:
    text = Headers(scope=scope).get(REQUEST_ID_HEADER)
    return text if text is not None and _ACCEPTED.fullmatch(text) else None


def _route_of(scope: Scope) -> str:
    """The matched route's template; never the raw path (it holds user ids and queries)."""
    route: Any = scope.get("route")
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else "(no route)"


# --- the body's size, and the host it names --------------------------------------------


def body_too_large(limit: int) -> Problem:
    return Problem(
        413,
        "body-too-large",
        "Request body too large",
        f"the body exceeds max_body_bytes = {limit} bytes",
        {"limit": limit, "limitName": "max_body_bytes"},
    )


class _BodyTooLarge(Exception):
    """Raised into the application when the body stream passes the bound."""


class BodyLimitMiddleware(HttpMiddleware):
    """Refuse request bodies larger than ``limit`` bytes with a 413 problem.

    A declared ``Content-Length`` over the bound is refused before anything
    is read; a body streamed without one (chunked) is counted as it arrives
    and refused at the first chunk that passes the bound.
    """

    def __init__(self, app: ASGIApp, limit: int) -> None:
        super().__init__(app)
        self.limit = limit

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        declared = _content_length(scope)
        if declared is not None and declared > self.limit:
            await self._refuse(send)
            return
        received = 0
        exceeded = False
        started = False

        async def counting_receive() -> Message:
            nonlocal received, exceeded
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    exceeded = True
                    raise _BodyTooLarge
            return message

        async def guarded_send(message: Message) -> None:
            # The framework may turn the exception raised into the body read into
            # an answer of its own (a 400); once the bound was passed, the answer
            # is the 413 instead, and the framework's is dropped.
            nonlocal started
            if exceeded:
                if message["type"] == "http.response.start" and not started:
                    started = True
                    await self._refuse(send)
                return
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counting_receive, guarded_send)
        except _BodyTooLarge:
            if not started:
                started = True
                await self._refuse(send)

    async def _refuse(self, send: Send) -> None:
        await send_problem(send, body_too_large(self.limit))


class HostGuardMiddleware:
    """Answer only requests for the server's own hosts: 421 for another ``Host``,
    403 for a browser request from another ``Origin``.

    Every request is checked, health included: a page that rebinds its name
    to 127.0.0.1 learns nothing, not even that a server listens. ``Origin``
    is checked whenever a browser sends one — on every state-changing
    request, and on a cross-origin read. A browser sends none with an image
    or a script another site's page loads (a "no-cors" read, which can still
    count a search's results as recalls), but it says where the request
    comes from in ``Sec-Fetch-Site``: another site's (``cross-site``; a page
    on this machine is ``same-site``, as its ``Origin`` would be allowed) is
    refused too, but for a person following a link (a top-level navigation).

    Args:
        app: the ASGI application to wrap.
        rule: the host names the server answers for.
    """

    def __init__(self, app: ASGIApp, rule: HostRule) -> None:
        self.app = app
        self.rule = rule

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.rule.active:
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        if not self.rule.allows_host(headers.get("host")):
            await send_problem(send, host_not_allowed())
            return
        origin = headers.get("origin")
        if origin is not None and not self.rule.allows_origin(origin):
            await send_problem(send, origin_not_allowed())
            return
        if (
            origin is None
            and headers.get("sec-fetch-site") == "cross-site"
            and headers.get("sec-fetch-mode") != "navigate"
        ):
            await send_problem(send, origin_not_allowed())
            return
        await self.app(scope, receive, send)


def problem_response(problem: Problem) -> JSONResponse:
    """A problem+json answer for an application (FastAPI's handlers, the MCP server's
    middleware); its ``requestId`` ties it to the server's log lines."""
    return JSONResponse(
        problem.body(request_id=current_request_id()),
        status_code=problem.status,
        headers=dict(problem.headers),
        media_type=PROBLEM_CONTENT_TYPE,
    )


async def send_problem(send: Send, problem: Problem) -> None:
    """Answer with ``problem`` from plain ASGI middleware, and close the connection
    (whatever the client sent after the refused request is not read)."""
    body = json.dumps(problem.body(request_id=current_request_id())).encode()
    headers = [
        (b"content-type", PROBLEM_CONTENT_TYPE.encode()),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
    ]
    headers.extend(
        (name.lower().encode(), value.encode()) for name, value in problem.headers.items()
    )
    await send({"type": "http.response.start", "status": problem.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _content_length(scope: Scope) -> int | None:
    value = Headers(scope=scope).get("content-length")
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None
