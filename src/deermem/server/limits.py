"""The server's bounds, and the middleware that enforces the body size.

Every input that costs the server memory or time has a bound, named so a
client that hits it reads which one: the body size (413 before the body is
read when ``Content-Length`` says so, or as soon as the stream passes the
bound), ``top_k`` and list page sizes (422, from the OpenAPI schema's
maxima), a prompt's ``max_tokens``, the conversations waiting for
extraction, in all and per user, and the requests of one token waiting for
their jobs (429).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Final

from deermem.server.asgi import ASGIApp, Message, Receive, Scope, Send
from deermem.server.problems import PROBLEM_CONTENT_TYPE, Problem
from deermem.server.request_ids import current_request_id

__all__ = ["BodyLimitMiddleware", "ServerLimits", "body_too_large"]

_MIB: Final = 1024 * 1024


@dataclass(frozen=True, slots=True)
class ServerLimits:
    """Bounds on what one request may ask of the server.

    Attributes:
        max_body_bytes: the largest request body accepted.
        max_top_k: the most search results one request may ask for.
        max_page_size: the most items one list page may hold.
        default_page_size: a page's size when the client names none.
        max_pending_jobs: conversations a worker holds for extraction
            (queued or running) before it answers 429.
        max_pending_jobs_per_user: a user's share of ``max_pending_jobs``
            (at most all of it): a user who holds this many is answered 429
            while other users' conversations are still taken.
        max_wait_seconds: how long ``?wait=true`` waits for its job before
            answering 202 with the job still running.
        max_waits_per_token: ``?wait=true`` requests of one token that a
            worker lets wait at once (429 beyond); a waiting request holds
            no worker thread, but each holds a connection.
        job_retention_seconds: how long finished job records are kept.
    """

    max_body_bytes: int = 2 * _MIB
    max_top_k: int = 50
    max_page_size: int = 200
    default_page_size: int = 50
    max_pending_jobs: int = 64
    max_pending_jobs_per_user: int = 8
    max_wait_seconds: float = 60.0
    max_waits_per_token: int = 16
    job_retention_seconds: float = 24 * 3600.0

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise ValueError(f"server limit {name} must be a positive number, got {value!r}")
        if self.default_page_size > self.max_page_size:
            raise ValueError(
                f"default_page_size ({self.default_page_size}) exceeds max_page_size "
                f"({self.max_page_size})"
            )

    def to_dict(self) -> dict[str, object]:
        return {
            "maxBodyBytes": self.max_body_bytes,
            "maxTopK": self.max_top_k,
            "maxPageSize": self.max_page_size,
            "defaultPageSize": self.default_page_size,
            "maxPendingJobs": self.max_pending_jobs,
            "maxPendingJobsPerUser": self.max_pending_jobs_per_user,
            "maxWaitSeconds": self.max_wait_seconds,
            "maxWaitsPerToken": self.max_waits_per_token,
            "jobRetentionSeconds": self.job_retention_seconds,
        }


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


class BodyLimitMiddleware:
    """Refuse request bodies larger than ``limit`` bytes with a 413 problem.

    A declared ``Content-Length`` over the bound is refused before anything
    is read; a body streamed without one (chunked) is counted as it arrives
    and refused at the first chunk that passes the bound.
    """

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
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
        problem = body_too_large(self.limit)
        body = json.dumps(problem.to_dict(request_id=current_request_id())).encode()
        await send(
            {
                "type": "http.response.start",
                "status": problem.status,
                "headers": [
                    (b"content-type", PROBLEM_CONTENT_TYPE.encode()),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None
