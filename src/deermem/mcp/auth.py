"""Whose memory an MCP request reaches: decided by the server, never by the model.

Over stdio the answer is the process's configuration (``--user``,
``--agent``): whoever can start the process already owns its files. Over
streamable HTTP every request passes :class:`McpAuthMiddleware`, which reads
the bearer token with the HTTP API's own check
(:func:`~deermem.server.context.principal_for_header`) and then applies
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
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from starlette.responses import JSONResponse

from deermem._exceptions import DeerMemError
from deermem.server.asgi import ASGIApp, Receive, Scope, Send, header
from deermem.server.context import principal_for_header
from deermem.server.problems import PROBLEM_CONTENT_TYPE, Problem, ProblemError, problem_for
from deermem.server.request_ids import current_request_id
from deermem.server.tokens import Principal, TokenFile

__all__ = ["CALLER_KEY", "Caller", "McpAuthMiddleware", "caller_for", "scope_not_allowed"]

CALLER_KEY: Final = "deermem.caller"
"""The ASGI scope key under which the middleware leaves the request's :class:`Caller`."""

_log = logging.getLogger("deermem.mcp")


@dataclass(frozen=True, slots=True)
class Caller:
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


class McpAuthMiddleware:
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
        self.app = app
        self.tokens = tokens
        self.auth_required = auth_required
        self.user = user
        self.clock = clock

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        authorization = header(scope, b"authorization")
        try:
            principal = principal_for_header(
                self.tokens, authorization, auth_required=self.auth_required, now=self.clock()
            )
            caller = caller_for(principal, self.user)
        except DeerMemError as error:  # 401, 403, or a tokens file that became unreadable
            problem = problem_for(error)
            if problem.status >= 500:
                _log.error("cannot authenticate: %s", error)
            await _problem_response(problem)(scope, receive, send)
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


def _problem_response(problem: Problem) -> JSONResponse:
    return JSONResponse(
        problem.to_dict(request_id=current_request_id()),
        status_code=problem.status,
        headers=dict(problem.headers),
        media_type=PROBLEM_CONTENT_TYPE,
    )
