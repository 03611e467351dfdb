"""The FastAPI side of the server's edges: responses, problems, dependencies.

* :func:`json_response` / :func:`problem_response` render what the routes
  return — the library's ``to_dict()`` data, serialised once with
  :mod:`json` (the response models describe it for the OpenAPI document;
  they do not re-validate it on the way out).
* :func:`problems` declares the problem responses of a route for the
  OpenAPI document.
* :class:`Dependencies` turns :class:`~deermem.service.http.context.ServerContext`'s
  checks into FastAPI dependencies: the principal of the bearer token, and
  the memory of the user and agent in the path.
"""

# No `from __future__ import annotations`: FastAPI reads the parameter annotations,
# which name dependencies bound inside the router functions.

from collections.abc import Mapping, Sequence
from typing import Annotated, Any, TypeVar

from fastapi import Depends, Path, Request
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from deermem.memory import Memory
from deermem.model import MAX_AGENT_NAME_LENGTH, USER_ID_PATTERN
from deermem.service.http.context import ServerContext
from deermem.service.http.pages import InvalidCursor, Key, Page, paginate
from deermem.service.http.problems import PROBLEM_CONTENT_TYPE, Problem, ProblemError
from deermem.service.http.request_ids import current_request_id
from deermem.service.http.schemas import ProblemOut
from deermem.service.http.tokens import Principal

__all__ = [
    "AgentPath",
    "Dependencies",
    "UserPath",
    "json_response",
    "paged",
    "problem_response",
    "problems",
]

T = TypeVar("T")

UserPath = Annotated[
    str,
    Path(
        min_length=1,
        max_length=256,
        # Documented, not enforced here: the library refuses such an id (422 invalid-identifier).
        json_schema_extra={"pattern": USER_ID_PATTERN},
        description="The user id (no control or bidirectional control characters).",
    ),
]
AgentPath = Annotated[
    str,
    Path(
        min_length=1,
        max_length=MAX_AGENT_NAME_LENGTH,
        pattern=r"^(__default__|[A-Za-z0-9-]+)$",
        description="The agent name (letters, digits, '-'; case-insensitive), or `__default__`.",
    ),
]

_DESCRIPTIONS: dict[int | str, str] = {
    400: "Bad request",
    401: "No valid bearer token",
    404: "Not found — also for a user the token may not address",
    409: "Conflict: a duplicate fact, or a revision that changed",
    413: "Body larger than max_body_bytes",
    422: "Invalid input; the problem names the field or limit",
    429: "Too many conversations waiting for extraction",
    501: "No model configured: extraction is off",
    "default": "Any other problem (RFC 9457 problem details)",
}


def json_response(
    data: object, status: int = 200, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    return JSONResponse(data, status_code=status, headers=dict(headers or {}))


def problem_response(problem: Problem) -> JSONResponse:
    return JSONResponse(
        problem.to_dict(request_id=current_request_id()),
        status_code=problem.status,
        headers=dict(problem.headers),
        media_type=PROBLEM_CONTENT_TYPE,
    )


def problems(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for these problem statuses, plus ``default``."""
    declared: dict[int | str, dict[str, Any]] = {}
    keys: list[int | str] = [*statuses, "default"]
    for status in keys:
        declared[status] = {"model": ProblemOut, "description": _DESCRIPTIONS[status]}
    return declared


def paged(
    items: Sequence[T],
    key: Any,
    *,
    limit: int,
    cursor: str | None,
    descending: bool = False,
) -> Page[T]:
    """:func:`~deermem.service.http.pages.paginate`, with a bad cursor as a 422 problem."""
    try:
        return paginate(items, key, limit=limit, cursor=cursor, descending=descending)
    except InvalidCursor:
        raise ProblemError(
            Problem(
                422,
                "invalid-cursor",
                "Invalid cursor",
                "the cursor is not one this server issued; start again without it",
                {"parameter": "cursor"},
            )
        ) from None


def cursor_key(*parts: str | None) -> Key:
    return tuple(part or "" for part in parts)


class Dependencies:
    """FastAPI dependencies bound to one server context."""

    def __init__(self, context: ServerContext) -> None:
        self.context = context
        self.bearer = HTTPBearer(
            auto_error=False,
            description="A token made by `deermem token add` (not needed on a loopback "
            "server without tokens).",
        )

        def principal(
            request: Request,
            _: Annotated[HTTPAuthorizationCredentials | None, Depends(self.bearer)],
        ) -> Principal:
            # The header as sent: FastAPI's HTTPBearer (here for the OpenAPI
            # document's security scheme) reads a malformed one as absent, and
            # the client is owed the difference (401 `malformed`, not `missing`).
            return context.principal_for(request.headers.get("authorization"))

        def scoped(
            user: UserPath,
            agent: AgentPath,
            who: Annotated[Principal, Depends(principal)],
        ) -> Memory:
            return context.memory_for(who, user, agent)

        self.principal = principal
        self.scoped = scoped
