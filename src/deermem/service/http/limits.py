"""The server's bounds, and the plain-ASGI middleware at its door.

Every input that costs the server memory or time has a bound, named so a
client that hits it reads which one: the body size (413 before the body is
read when ``Content-Length`` says so, or as soon as the stream passes the
bound), ``top_k`` and list page sizes (422, from the OpenAPI schema's
maxima), a prompt's ``max_tokens``, the conversations waiting for
extraction, in all and per user, and the requests of one token waiting for
their jobs (429), and the time a client may take to send a request's
headers (:mod:`deermem.service.http.tcp` closes the connection).

:class:`HostRule` is the servers' one idea of *which host names a request
may use* — the defence against DNS rebinding, where a web page on
``attacker.example`` makes its name resolve to 127.0.0.1 and so reaches a
loopback server from the user's browser — and :class:`HostGuardMiddleware`
applies it: 421 for another ``Host``, 403 for a browser's request from
another ``Origin``. The HTTP API and the MCP server's HTTP transport both
run it (the rule comes from :meth:`ServerSettings.host_rule
<deermem.service.http.settings.ServerSettings.host_rule>`).
Both middleware are plain ASGI, so they wrap the HTTP API and the MCP
server's HTTP app alike.
"""

from __future__ import annotations

import ipaddress
import json
import re
from dataclasses import asdict, dataclass
from typing import Final

from deermem.service.http.asgi import ASGIApp, Message, Receive, Scope, Send, header
from deermem.service.http.problems import (
    PROBLEM_CONTENT_TYPE,
    Problem,
    host_not_allowed,
    origin_not_allowed,
)
from deermem.service.http.request_ids import current_request_id

__all__ = [
    "BodyLimitMiddleware",
    "HostGuardMiddleware",
    "HostRule",
    "ServerLimits",
    "body_too_large",
    "is_loopback",
    "send_problem",
    "split_host",
]

_MIB: Final = 1024 * 1024
# A Host header value, or an allowed-host entry: a name or an IP address (IPv6 in
# brackets), and an optional port.
_HOST: Final = re.compile(
    r"(?P<host>\[[0-9a-f:.]+\]|[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?)(?::(?P<port>[0-9]{1,5}))?",
    re.IGNORECASE | re.ASCII,
)
_ORIGIN: Final = re.compile(r"https?://(?P<authority>[^/?#]*)", re.IGNORECASE | re.ASCII)


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
        header_timeout_seconds: how long a connection may take to send a
            request's headers — from when it opens, or from the previous
            answer on a kept-alive connection — before it is closed, so
            clients that trickle headers (slowloris) cannot hold the
            server's connections.
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
    header_timeout_seconds: float = 10.0

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
            "headerTimeoutSeconds": self.header_timeout_seconds,
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
        await send_problem(send, body_too_large(self.limit))


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable from this machine only (``localhost``, 127/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


def split_host(value: str) -> tuple[str, int | None] | None:
    """A ``Host`` value as (lower-case name, port or ``None``); ``None`` when malformed."""
    match = _HOST.fullmatch(value.strip())
    if match is None:
        return None
    port = match.group("port")
    if port is not None and int(port) > 65535:
        return None
    return match.group("host").lower(), None if port is None else int(port)


@dataclass(frozen=True, slots=True)
class HostRule:
    """Which ``Host`` (and ``Origin``) a request may name.

    On a loopback bind a request must name a loopback host — ``localhost``
    or a loopback address (``127.0.0.1``, ``[::1]``), with any port — or one
    of the configured names. A page's own name never passes, so DNS
    rebinding reaches nothing. Beyond loopback, every request needs a token
    anyway (browsers never send one on their own), and the rule applies
    only when names are configured (it is then the list of names a reverse
    proxy may forward).

    Attributes:
        loopback: the server listens on a loopback address.
        names: the configured names, as (name, port); a port of ``None``
            accepts any port.
    """

    loopback: bool
    names: tuple[tuple[str, int | None], ...] = ()

    @property
    def active(self) -> bool:
        """Whether the rule refuses anything (off beyond loopback without names)."""
        return self.loopback or bool(self.names)

    def allows_host(self, value: str | None) -> bool:
        """Whether a request with this ``Host`` header (``None``: none) is answered."""
        if not self.active:
            return True
        if value is None:
            return False
        parsed = split_host(value)
        if parsed is None:
            return False
        name, port = parsed
        if self.loopback and is_loopback(name):
            return True
        return any(
            name == allowed and (allowed_port is None or port == allowed_port)
            for allowed, allowed_port in self.names
        )

    def allows_origin(self, value: str) -> bool:
        """Whether a request a browser sent from this ``Origin`` is answered.

        The origin must be an ``http``/``https`` origin whose host the rule
        allows; ``null`` (a sandboxed page, a local file) never is.
        """
        if not self.active:
            return True
        match = _ORIGIN.fullmatch(value.strip())
        return match is not None and self.allows_host(match.group("authority"))


class HostGuardMiddleware:
    """Answer only requests for the server's own hosts: 421 for another ``Host``,
    403 for a browser request from another ``Origin``.

    Every request is checked, health included: a page that rebinds its name
    to 127.0.0.1 learns nothing, not even that a server listens. ``Origin``
    is checked whenever a browser sends one — on every state-changing
    request, and on a cross-origin read.

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
        if not self.rule.allows_host(header(scope, b"host")):
            await send_problem(send, host_not_allowed())
            return
        origin = header(scope, b"origin")
        if origin is not None and not self.rule.allows_origin(origin):
            await send_problem(send, origin_not_allowed())
            return
        await self.app(scope, receive, send)


async def send_problem(send: Send, problem: Problem) -> None:
    """Answer with ``problem`` from plain ASGI middleware, and close the connection
    (whatever the client sent after the refused request is not read)."""
    body = json.dumps(problem.to_dict(request_id=current_request_id())).encode()
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
    value = header(scope, b"content-length")
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None
