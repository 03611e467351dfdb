"""Whose memory an MCP request reaches: decided by the server, never by the model.

Over stdio the answer is the process's configuration (``--user``,
``--agent``): whoever can start the process already owns its files. Over
streamable HTTP every request passes :class:`McpAuthMiddleware`, which reads
the bearer token with the HTTP API's own check
(:func:`~deermem.service.tokens.principal_for_header`) and then applies
:func:`caller_for`:

* a server started with ``--user U`` serves U; a token may use it only if it
  may address U (bound to U, or an admin token);
* a server started without ``--user`` serves each token's own user, so it
  takes only tokens bound to exactly one user — an admin token or one bound
  to several users does not say which memory it means;
* a loopback server with no tokens at all serves its configured scope to
  anyone who can reach it, like ``deermem serve`` does.

The agent is always the server's ``--agent``. Tool arguments carry no user
or agent, so nothing a model writes can move a request to another memory.
A token that may not use this server gets a 403 problem before any MCP
message is read; it learns nothing of any memory.

Each MCP session lives in the server process until its client ends it or
it has been idle for the SDK's idle timeout (30 minutes), so a token could
open sessions until the server ran out of memory. :class:`SessionLimitMiddleware`
bounds the sessions one token holds open at once (``--max-sessions-per-token``):
beyond the bound a request that would open another gets a 429 problem, and
the token's open sessions, and every other token's, work on.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Container
from datetime import datetime
from typing import Final, NamedTuple

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.server.streamable_http_manager import (
    DEFAULT_SESSION_IDLE_TIMEOUT,
    StreamableHTTPSessionManager,
)
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from deermem.errors import DeerMemError
from deermem.service.middleware import HttpMiddleware, problem_response
from deermem.service.problems import Problem, ProblemError, problem_for
from deermem.service.tokens import Principal, TokenFile, principal_for_header

__all__ = [
    "CALLER_KEY",
    "Caller",
    "McpAuthMiddleware",
    "SessionLimitMiddleware",
    "caller_for",
    "open_sessions",
]

CALLER_KEY: Final = "deermem.caller"
"""The ASGI scope key under which the middleware leaves the request's :class:`Caller`."""

_log = logging.getLogger("deermem.service.mcp")


class Caller(NamedTuple):
    """Who an HTTP request acts for and whose memory it reaches.

    Attributes:
        token_id: the token's public id (``None`` on an open loopback server).
        user: the user id whose memory the request reaches (``None``: the
            single-user layout, for a server started without ``--user``
            and without tokens).
    """

    token_id: str | None
    user: str | None


def scope_not_allowed(reason: str) -> Problem:
    """The 403 of a valid token that this server's configuration does not serve."""
    details = {
        "user": "this token may not address the user this server serves",
        "ambiguous": "this token may address several users (or every user), and this server "
        "was started without --user; start it with --user, or use a token bound to one user",
    }
    return Problem(
        403,
        "scope-not-allowed",
        "Token not accepted by this server",
        details[reason],
        {"reason": reason},
    )


def caller_for(principal: Principal, configured_user: str | None) -> Caller:
    """The memory a principal reaches on a server configured for ``configured_user``.

    Raises:
        ProblemError: 403 — the principal may not use this server (see the module).
    """
    if principal.token_id is None:  # the open loopback server: its own scope
        return Caller(None, configured_user)
    if configured_user is not None:
        if not principal.may_address(configured_user):
            raise ProblemError(scope_not_allowed("user"))
        return Caller(principal.token_id, configured_user)
    if principal.admin or len(principal.users) != 1:
        raise ProblemError(scope_not_allowed("ambiguous"))
    (user,) = principal.users
    return Caller(principal.token_id, user)


class McpAuthMiddleware(HttpMiddleware):
    """Authenticate each HTTP request and fix its scope before the MCP app sees it.

    A refused request gets a problem+json answer (401 or 403) and never
    reaches the MCP session. An accepted one carries its :class:`Caller`
    under :data:`CALLER_KEY` in the ASGI scope, and — for a token — the
    SDK's authenticated user, so the SDK binds each MCP session to the
    token that opened it (another token presenting the session id is
    answered as if the session did not exist).

    Args:
        app: the MCP server's streamable-HTTP application.
        tokens: the tokens file (re-read when it changes).
        auth_required: fixed at start, as for ``deermem serve``: true when
            the server listens beyond loopback or tokens are in use.
        user: the user the server was started for (``--user``).
        clock: the current time, for token expiry (the memory's clock).
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        tokens: TokenFile,
        auth_required: bool,
        user: str | None,
        clock: Callable[[], datetime],
    ) -> None:
        super().__init__(app)
        self.tokens = tokens
        self.auth_required = auth_required
        self.user = user
        self.clock = clock

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        authorization = Headers(scope=scope).get("authorization")
        try:
            principal = principal_for_header(
                self.tokens, authorization, auth_required=self.auth_required, now=self.clock()
            )
            caller = caller_for(principal, self.user)
        except DeerMemError as error:  # 401, 403, or a tokens file that became unreadable
            problem = problem_for(error)
            if problem.status >= 500:
                _log.error("cannot authenticate: %s", error)
            await problem_response(problem)(scope, receive, send)
            return
        scope[CALLER_KEY] = caller
        if caller.token_id is not None and authorization is not None:
            # The SDK's session manager compares this identity on every request of a session.
            token = AccessToken(
                token=authorization.partition(" ")[2].strip(),
                client_id=caller.token_id,
                scopes=[],
                subject=caller.user,
            )
            scope["user"] = AuthenticatedUser(token)
        await self.app(scope, receive, send)


def too_many_sessions(limit: int) -> Problem:
    """The 429 of a token that holds ``limit`` open sessions and asks for another."""
    idle_minutes = round(DEFAULT_SESSION_IDLE_TIMEOUT / 60)
    return Problem(
        429,
        "too-many-sessions",
        "Too many open MCP sessions",
        f"this token already holds max_sessions_per_token = {limit} open sessions on this "
        f"server; end one (DELETE with its Mcp-Session-Id) or wait until an idle one "
        f"expires ({idle_minutes} minutes)",
        {"limit": limit, "limitName": "max_sessions_per_token"},
    )


def open_sessions(manager: StreamableHTTPSessionManager) -> Container[str]:
    """The ids of the sessions ``manager`` holds open now (a live view, not a copy).

    The SDK keeps its open sessions in a private table and forgets a session
    there however it ends (the client's DELETE, the idle timeout, a crash);
    no public call lists them. Reading that table is the one exact answer, so
    deermem reads it, and checks here, at start-up, that it is still there.

    Raises:
        RuntimeError: this version of the SDK keeps its sessions elsewhere.
    """
    table = getattr(manager, "_server_instances", None)
    if not isinstance(table, dict):
        raise RuntimeError(
            "this version of the MCP SDK does not keep its sessions where deermem looks "
            "(StreamableHTTPSessionManager._server_instances); deermem cannot bound the "
            "sessions of a token with it"
        )
    return table.keys()


class SessionLimitMiddleware:
    """Refuse a token a new MCP session while it holds ``limit`` open ones.

    Sits inside :class:`McpAuthMiddleware` (it reads the :class:`Caller`). A
    request *opens* a session when it is a POST without ``Mcp-Session-Id`` on
    the session protocol (no ``MCP-Protocol-Version``, or one of the
    handshake versions: requests of the newer, session-less protocol open
    none). The middleware remembers which session each successful opening
    answered with, and counts those of a token still open, plus the token's
    opening requests in flight (so concurrent requests cannot pass the bound
    together). A server without tokens is not bounded here: its one
    principal is whoever can reach loopback, and the SDK's own bound on all
    sessions applies.

    Args:
        app: the MCP server's streamable-HTTP application.
        limit: the open sessions one token may hold.
        sessions: the ids of the sessions open now (see :func:`open_sessions`).
    """

    def __init__(self, app: ASGIApp, *, limit: int, sessions: Container[str]) -> None:
        self.app = app
        self.limit = limit
        self._open = sessions
        # Invariants: _held[token] holds every open session that this middleware saw the
        # token open (and those closed since, until its next opening request drops them);
        # _opening[token] counts its opening requests not yet answered with a session.
        self._held: dict[str, set[str]] = {}
        self._opening: Counter[str] = Counter()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller = scope.get(CALLER_KEY) if scope["type"] == "http" else None
        if not isinstance(caller, Caller) or caller.token_id is None or not _opens(scope):
            await self.app(scope, receive, send)
            return
        token = caller.token_id
        held = self._held.setdefault(token, set())
        held.intersection_update([session for session in held if session in self._open])
        # From this check to the count below there is no await: no other request interleaves.
        if len(held) + self._opening[token] >= self.limit:
            _log.info("token %s refused a new MCP session: it holds %d", token, len(held))
            await problem_response(too_many_sessions(self.limit))(scope, receive, send)
            return
        self._opening[token] += 1
        counted = True

        async def watch(message: Message) -> None:
            nonlocal counted
            if message["type"] == "http.response.start" and counted:
                session = Headers(raw=message.get("headers", [])).get(MCP_SESSION_ID_HEADER)
                if session is not None and message["status"] < 400:
                    # No await between: the session moves from "opening" to "held" at once.
                    held.add(session)
                    self._opening[token] -= 1
                    counted = False
            await send(message)

        try:
            await self.app(scope, receive, watch)
        finally:
            if counted:
                self._opening[token] -= 1
            if self._opening[token] <= 0:
                self._opening.pop(token, None)  # another request may have dropped it


def _opens(scope: Scope) -> bool:
    """Whether the request may open a session (see :class:`SessionLimitMiddleware`)."""
    headers = Headers(scope=scope)
    if scope.get("method") != "POST" or headers.get(MCP_SESSION_ID_HEADER):
        return False
    version = headers.get(MCP_PROTOCOL_VERSION_HEADER)
    return version is None or version in HANDSHAKE_PROTOCOL_VERSIONS
