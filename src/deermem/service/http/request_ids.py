"""Request ids: one per request, on every log line it causes and in its response.

:class:`RequestIdMiddleware` is plain ASGI (no web framework), so it wraps the
HTTP API and the MCP server's streamable-HTTP app alike. It takes the
client's ``X-Request-ID`` when that is a short token of safe characters
(so a caller can follow its own id through the logs), else makes one; it
sets it for the request's context, returns it in the response's
``X-Request-ID``, and writes one access line per request.

:class:`RequestIdFilter` copies the current id onto every log record as
``request_id`` (``-`` outside a request: start-up, shutdown), so a formatter
can print it on every line — deermem's own loggers, uvicorn's and the job
runner's, whose threads run in a copy of the request's context.

The access line names the *route template*
(``/v1/users/{user}/agents/{agent}/search``), the status and the duration:
never the raw path or the query string, which carry user ids and search
text, and never a header, which carries the token.
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

from deermem.service.http.asgi import ASGIApp, Message, Receive, Scope, Send
from deermem.service.http.problems import PROBLEM_CONTENT_TYPE, internal_problem

__all__ = [
    "ACCESS_LOGGER",
    "REQUEST_ID_HEADER",
    "RequestIdFilter",
    "RequestIdMiddleware",
    "current_request_id",
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


class RequestIdMiddleware:
    """Give each HTTP request an id, expose it, log one access line, contain crashes.

    Args:
        app: the ASGI application to wrap.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
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
    body = json.dumps(internal_problem().to_dict(request_id=_current.get())).encode()
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
    wanted = REQUEST_ID_HEADER.lower().encode()
    for name, value in scope.get("headers", ()):
        if name == wanted:
            text = value.decode("latin-1")
            return text if _ACCEPTED.fullmatch(text) else None
    return None


def _route_of(scope: Scope) -> str:
    """The matched route's template; never the raw path (it holds user ids and queries)."""
    route: Any = scope.get("route")
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else "(no route)"
