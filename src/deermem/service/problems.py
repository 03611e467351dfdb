"""Errors as RFC 9457 problem details: one mapping from deermem's exceptions.

Every error a client sees is an ``application/problem+json`` object with
``type``, ``title``, ``status`` and ``detail``, plus the error's typed
context as extension members (``field``, ``factId``, ``expected`` ...), so a
client branches on data, never on prose. :func:`problem_for` maps each
branch of deermem's exception tree once; the HTTP server, the job records and
the MCP server's HTTP transport all use it.

Problems never echo a rejected *value*: a fact's content or a message's text
would otherwise travel into job records and anything that logs responses.
Details are built from the typed fields (which field, what is allowed), not
from the exception's message, which quotes values for people at a terminal.

Types are ``urn:deermem:problem:<slug>`` — stable identifiers that need no
web site; docs/server.md lists them. :class:`ProblemBody` describes the
answer once, for the answers themselves and for the OpenAPI document.

Nothing here imports a web framework: the job records and ``deermem token``'s
errors use it too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from pydantic import BaseModel, ConfigDict

from deermem.errors import (
    ArchivedFactError,
    ConfigError,
    CorruptMemoryFile,
    DatabaseUnavailable,
    DeerMemError,
    DuplicateFactError,
    FactNotFoundError,
    FactRevisionConflict,
    FactValidationError,
    LLMError,
    LLMNotConfigured,
    LLMStatusError,
    LLMTransportError,
    MessageFormatError,
    OwnerConflictError,
    PatternError,
    PromptTemplateError,
    QueueClosedError,
    QueueFullError,
    RevisionConflict,
    SearchIndexError,
    StorageError,
    StoreLockTimeout,
    UnsafeIdentifierError,
)
from deermem.service.errors import ServerError, TokenFileError

__all__ = [
    "PROBLEM_CONTENT_TYPE",
    "Problem",
    "ProblemBody",
    "ProblemError",
    "extraction_off",
    "host_not_allowed",
    "internal_problem",
    "not_found",
    "operator_note",
    "origin_not_allowed",
    "problem_for",
    "unauthorized",
]

PROBLEM_CONTENT_TYPE: Final = "application/problem+json"
PROBLEM_TYPE_PREFIX: Final = "urn:deermem:problem:"


class ProblemBody(BaseModel):
    """An RFC 9457 problem as clients read it; typed members of the error come beside these."""

    model_config = ConfigDict(extra="allow")

    type: str
    title: str
    status: int
    detail: str
    requestId: str | None = None


@dataclass(frozen=True, slots=True)
class Problem:
    """One problem-details object.

    Attributes:
        status: the HTTP status.
        slug: the last part of the type URI (``fact-not-found``).
        title: a short summary that is the same for every problem of this type.
        detail: this occurrence, for people (no rejected values).
        extensions: typed context, JSON-ready (camelCase keys).
        headers: response headers that belong to it (``Retry-After``,
            ``WWW-Authenticate``).
    """

    status: int
    slug: str
    title: str
    detail: str
    extensions: Mapping[str, object] = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict)

    @property
    def type(self) -> str:
        return PROBLEM_TYPE_PREFIX + self.slug

    def body(self, *, request_id: str | None = None) -> dict[str, object]:
        """The problem+json body; ``requestId`` ties it to the server's log lines."""
        given = {"requestId": request_id} if request_id is not None else {}
        described = ProblemBody.model_validate(
            {
                "type": self.type,
                "title": self.title,
                "status": self.status,
                "detail": self.detail,
                **self.extensions,
                **given,
            }
        )
        return described.model_dump(exclude_unset=True)


class ProblemError(ServerError):
    """A request ends in this problem (raised by the server's own checks: auth, bounds)."""

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        super().__init__(problem.detail)


def problem_for(error: DeerMemError) -> Problem:
    """The problem a deermem error stands for (a 500 for errors a client cannot fix)."""
    if isinstance(error, ProblemError):
        return error.problem
    for kind, build in _BUILDERS:
        if isinstance(error, kind):
            return build(error)
    return internal_problem()


def operator_note(error: DeerMemError, problem: Problem) -> str | None:
    """What the server's log says about an error the operator must look at, or ``None``.

    Failures a client cannot fix, and a directory another id owns, are logged
    (a corrupt memory file, an invalid pattern or prompt override and a
    tokens file that became unreadable with the file and the problem); the
    client's answer names neither.
    """
    if not isinstance(error, CorruptMemoryFile) and (
        problem.status < 500 or isinstance(error, ProblemError)
    ):
        return None
    # The operator's own files (pattern and prompt overrides, the tokens file) hold no
    # fact content, and a TokenFileError's problem never quotes a token or a digest: the
    # message, naming the file and what is wrong in it, is what the operator must fix.
    if isinstance(error, CorruptMemoryFile):
        where = f" ({error.path}: {error.problem})"
    elif isinstance(error, PatternError | PromptTemplateError | TokenFileError):
        where = f" ({error})"
    else:
        where = ""
    return f"{problem.slug}: {type(error).__name__}{where}"


def internal_problem() -> Problem:
    """The problem of an unexpected failure; the log has the details, the client the id."""
    return Problem(
        500,
        "internal-error",
        "Internal error",
        "the server failed to handle this request; its log has the details under the request id",
    )


def not_found() -> Problem:
    """Nothing at this path — also what a token gets for a user it may not address,
    so the answer never tells whether that user has a memory."""
    return Problem(404, "not-found", "Not found", "nothing is at this path")


def admin_required() -> Problem:
    """A token that may address the user, but not do this: erasing a user takes an admin."""
    return Problem(
        403,
        "admin-required",
        "Admin token required",
        "only an admin token (deermem token add --admin) may erase a user",
    )


def host_not_allowed() -> Problem:
    """A ``Host`` this server does not answer for (DNS rebinding, or a misrouted request)."""
    return Problem(
        421,
        "host-not-allowed",
        "Misdirected request",
        "this server answers only for its own host names: localhost, 127.0.0.1 and [::1] on a "
        "loopback address, and the names given with --allowed-host",
    )


def origin_not_allowed() -> Problem:
    """A request a browser sent from a page of another site."""
    return Problem(
        403,
        "origin-not-allowed",
        "Origin not allowed",
        "a web page of another origin may not use this server (its Origin is not one of the "
        "server's host names)",
    )


_UNAUTHORIZED: Final = {
    "missing": "send Authorization: Bearer <token>",
    "malformed": "the Authorization header is not 'Bearer <token>'",
    "invalid": "the bearer token is not valid (unknown or revoked)",
    "expired": "the bearer token has expired; make a new one with `deermem token add`",
}


def unauthorized(reason: str, *, token_scheme: bool = False) -> Problem:
    """No usable bearer token; ``reason`` (``missing``, ``malformed``, ``invalid``,
    ``expired``) says which; ``token_scheme``: mem0's ``Token <token>`` was accepted too
    (the mem0-compatible routes). Never echoes the header or the token."""
    challenge = 'Bearer realm="deermem"'
    if reason != "missing":
        challenge += ', error="invalid_token"'
    detail = _UNAUTHORIZED[reason]
    if reason in ("missing", "malformed") and token_scheme:
        detail += " (or mem0's 'Token <token>')"
    return Problem(
        401,
        "unauthorized",
        "Authentication required",
        detail,
        {"reason": reason},
        {"WWW-Authenticate": challenge},
    )


def _invalid_fact(error: FactValidationError) -> Problem:
    return Problem(
        422,
        "invalid-fact",
        "Invalid fact",
        f"field {error.field!r}: {error.allowed}",
        {"field": error.field, "allowed": error.allowed, "factId": error.fact_id},
    )


def _invalid_message(error: MessageFormatError) -> Problem:
    return Problem(
        422,
        "invalid-message",
        "Invalid conversation message",
        f"message {error.index}, field {error.field!r}: {error.allowed}",
        {"index": error.index, "field": error.field, "allowed": error.allowed},
    )


def _invalid_identifier(error: UnsafeIdentifierError) -> Problem:
    return Problem(
        422,
        "invalid-identifier",
        "Invalid user id or agent name",
        f"{error.kind}: {error.reason}",
        {"kind": error.kind, "reason": error.reason},
    )


def _duplicate(error: DuplicateFactError) -> Problem:
    return Problem(
        409,
        "duplicate-fact",
        "Duplicate fact",
        str(error),
        {"existingId": error.existing_id},
    )


def _archived(error: ArchivedFactError) -> Problem:
    # Transport-neutral advice (the CLI's message names its own command): HTTP restores
    # with POST …/archive/{id}/restore and purges with DELETE, MCP with its tools.
    return Problem(
        409,
        "archived-fact",
        "Fact is in the archive",
        f"fact {error.fact_id!r} is in the archive; restore it or purge it instead of adding "
        "it again. Nothing was changed",
        {"factId": error.fact_id},
    )


def _not_found(error: FactNotFoundError) -> Problem:
    return Problem(
        404,
        "fact-not-found",
        "Fact not found",
        str(error),
        {"factId": error.fact_id, "where": error.where},
    )


def _revision_conflict(error: RevisionConflict) -> Problem:
    extensions: dict[str, object] = {"expected": error.expected, "actual": error.actual}
    if isinstance(error, FactRevisionConflict):
        extensions["factId"] = error.fact_id
    return Problem(409, "revision-conflict", "Revision conflict", str(error), extensions)


def _lock_timeout(error: StoreLockTimeout) -> Problem:
    return Problem(
        503,
        "store-busy",
        "Memory busy",
        f"another writer held this memory for more than {error.timeout:g} s; retry",
        {"timeoutSeconds": error.timeout},
        {"Retry-After": "1"},
    )


def _owner_conflict(error: OwnerConflictError) -> Problem:
    # Neither the directory nor the other owner reaches the client: the id asked for
    # may be the one that does not own the directory. The server's log names it.
    return Problem(
        409,
        "owner-conflict",
        "Memory claimed by another user id",
        "the directory of this memory belongs to another user id (or to several); nothing "
        "was read or changed. The operator must resolve it (`deermem scopes` names it)",
    )


def _corrupt(error: CorruptMemoryFile) -> Problem:
    # The path and the problem go to the server's log, not to the client.
    return Problem(
        500,
        "corrupt-memory",
        "Stored memory is corrupt",
        "a file of this memory cannot be read; nothing was changed. The operator must "
        "repair it (the server's log names the file)",
    )


def _unavailable(error: DatabaseUnavailable) -> Problem:
    # The database's address and the driver's words go to the server's log only.
    return Problem(
        503,
        "store-unavailable",
        "Store unavailable",
        "the database could not be reached or did not answer in time; nothing was changed. "
        "Retry later",
        {},
        {"Retry-After": "5"},
    )


def _storage(error: StorageError) -> Problem:
    return Problem(
        500, "storage-error", "Storage error", "the store could not carry out the operation"
    )


def _search_index(error: SearchIndexError) -> Problem:
    return Problem(500, "search-index-error", "Search index error", "the search index failed")


def extraction_off(
    detail: str = "this server has no model configured, so it cannot learn from conversations "
    "(configure model.model and model.base_url)",
) -> Problem:
    """501: learning needs a model and the server has none (``detail`` says what to do)."""
    return Problem(501, "extraction-off", "Extraction is off", detail)


def _extraction_off(error: LLMNotConfigured) -> Problem:
    return extraction_off()


def _model_failed(error: LLMError) -> Problem:
    extensions: dict[str, object] = {"model": error.model, "attempts": error.attempts}
    if isinstance(error, LLMStatusError):
        extensions["modelStatus"] = error.status_code
    if isinstance(error, LLMTransportError):
        extensions["cause"] = error.cause
    return Problem(
        502,
        "model-failed",
        "The model call failed",
        f"the extraction model gave no usable answer after {error.attempts} attempt(s)",
        extensions,
    )


def _queue_full(error: QueueFullError) -> Problem:
    return Problem(
        429,
        "queue-full",
        "Too many queued conversations",
        f"{error.max_depth} conversations are waiting; retry later",
        {"limit": error.max_depth, "limitName": "queue_max_depth"},
        {"Retry-After": "5"},
    )


def _queue_closed(error: QueueClosedError) -> Problem:
    return Problem(503, "shutting-down", "Shutting down", "the server is stopping; retry later")


def _config(error: ConfigError | TokenFileError | PatternError | PromptTemplateError) -> Problem:
    return Problem(
        500,
        "server-misconfigured",
        "Server misconfigured",
        "the server's configuration does not allow this operation; its log has the details",
    )


# Most specific first: the first class an error is an instance of decides.
_BUILDERS: Final[tuple[tuple[type[DeerMemError], Callable[[Any], Problem]], ...]] = (
    (FactValidationError, _invalid_fact),
    (MessageFormatError, _invalid_message),
    (UnsafeIdentifierError, _invalid_identifier),
    (DuplicateFactError, _duplicate),
    (ArchivedFactError, _archived),
    (FactNotFoundError, _not_found),
    (RevisionConflict, _revision_conflict),
    (StoreLockTimeout, _lock_timeout),
    (OwnerConflictError, _owner_conflict),
    (CorruptMemoryFile, _corrupt),
    (DatabaseUnavailable, _unavailable),
    (StorageError, _storage),
    (SearchIndexError, _search_index),
    (LLMNotConfigured, _extraction_off),
    (LLMError, _model_failed),
    (QueueFullError, _queue_full),
    (QueueClosedError, _queue_closed),
    (ConfigError, _config),
    (TokenFileError, _config),
    (PatternError, _config),
    (PromptTemplateError, _config),
)
