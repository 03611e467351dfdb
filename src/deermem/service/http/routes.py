"""The HTTP API's routes, and what they stand on: one worker's state, its checks, its pages.

Every route authorises, calls one :class:`~deermem.memory.Memory` method and
answers with the result's one description (:mod:`deermem.results`): the
``response_model`` documents it, and :func:`~deermem.results.to_json` writes
it (once, with the result's own serializer; FastAPI does not validate it a
second time on the way out).

**What one worker holds.** :class:`ServerContext` binds the memory, the tokens
file and the job runner of one worker process. Its two checks are the whole
of authorisation, kept free of FastAPI so the MCP server's HTTP transport
makes the same decisions:

* :meth:`ServerContext.principal_for` — who is asking (a bearer token, or
  nobody on a loopback server that has no tokens): the one bearer check,
  :func:`~deermem.service.tokens.principal_for_header`;
* :meth:`ServerContext.memory_for` — the memory of the user and agent a
  request names, if the principal may address that user; otherwise the same
  404 an unknown path gets, so a token never learns whether another user's
  memory exists.

:class:`Dependencies` turns those checks into FastAPI dependencies.

**Pages.** Lists come a page at a time with keyset cursors (:func:`paginate`):
a cursor is the sort key of the last item a page held, encoded (URL-safe
base64 of a JSON list), and the next page holds the items whose keys come
after it. Unlike an offset, the key survives changes between two requests: a
fact deleted or evicted meanwhile shifts nothing, and a new fact shows up where
its key puts it.

**Bodies.** A fact's body is :class:`~deermem.results.NewFact` or
:class:`~deermem.results.FactPatch`, the memory's own input models: unknown
keys are refused, so a typo is a 422, not a silently ignored field; types are
strict, so ``"confidence": "0.5"`` or ``true`` is a 422 too, never a number
made up from a string or a boolean.
"""

# No `from __future__ import annotations`: FastAPI reads the parameter annotations,
# which name dependencies bound inside the router functions.

import base64
import binascii
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Final, Generic, Literal, TypeVar
from urllib.parse import quote, unquote, unquote_to_bytes

from fastapi import APIRouter, Body, Depends, Path, Query, Request, Response
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from fastapi.security import HTTPBearer
from pydantic import AfterValidator, AliasChoices, BaseModel, ConfigDict, Field, WithJsonSchema
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError
from pydantic_core import to_json as json_bytes
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Receive, Scope, Send

from deermem import __version__
from deermem.errors import FactValidationError
from deermem.learning.messages import parse_messages
from deermem.memory import Memory
from deermem.model import (
    MAX_AGENT_NAME_LENGTH,
    MAX_FACT_ID_LENGTH,
    MAX_LINE_CHARS,
    MAX_USER_ID_BYTES,
    USER_ID_PATTERN,
    check_thread_id,
    refuse_json_constant,
)
from deermem.results import (
    MAX_QUERY_CHARS,
    NOT_BLANK,
    ONE_LINE,
    SOMETHING_TO_FIND,
    ArchiveEntryJson,
    CreateResult,
    ErasureResult,
    Explanation,
    FactJson,
    FactPatch,
    Forgotten,
    ImportResult,
    NewFact,
    PromptContext,
    Purged,
    ReceiptJson,
    RestoreResult,
    SearchResults,
    to_json,
)
from deermem.service.http.jobs import Job, JobRunner
from deermem.service.problems import (
    Problem,
    ProblemBody,
    ProblemError,
    admin_required,
    extraction_off,
    not_found,
)
from deermem.service.settings import ServerLimits, ServerSettings, close_store
from deermem.service.tokens import BEARER_SCHEMES, Principal, TokenFile, principal_for_header

__all__ = [
    "USER_PATH_PREFIXES",
    "InvalidCursor",
    "JsonRoute",
    "ServerContext",
    "UserPath",
    "UserSegmentMiddleware",
    "paginate",
    "routers",
]

T = TypeVar("T")
Key = tuple[str, ...]
_log = logging.getLogger("deermem.service.http")

# The range max_injection_tokens accepts in the configuration.
_MAX_PROMPT_TOKENS: Final = 8000
_DESCRIPTIONS: Final[dict[int | str, str]] = {
    400: "Bad request",
    401: "No valid bearer token",
    403: "An admin token is required",
    404: "Not found — also for a user the token may not address",
    409: "Conflict: a duplicate fact, a fact in the archive, or a revision that changed",
    413: "Body larger than max_body_bytes",
    422: "Invalid input; the problem names the field or limit",
    429: "Too many conversations waiting for extraction",
    501: "No model configured: extraction is off",
    "default": "Any other problem (RFC 9457 problem details)",
}

# --- the bodies only the HTTP API has ------------------------------------------------------

_PAGE = ConfigDict(
    frozen=True, alias_generator=to_camel, validate_by_name=True, serialize_by_alias=True
)

# The roles deermem.learning.signals reads: OpenAI's (role) and LangChain's (type).
_ROLES: Final = ["user", "human", "assistant", "ai", "system", "developer", "tool", "function"]
ChatMessage = Annotated[
    dict[str, Any],
    WithJsonSchema(
        {
            "type": "object",
            "description": "A chat message: `role` (OpenAI) or `type` (LangChain) and `content`.",
            "properties": {
                "content": {"anyOf": [{"type": "string"}, {"type": "array"}, {"type": "null"}]},
                "additional_kwargs": {"anyOf": [{"type": "object"}, {"type": "null"}]},
            },
            "anyOf": [
                {"required": ["role"], "properties": {"role": {"enum": _ROLES}}},
                {
                    "required": ["type"],
                    "properties": {"role": {"type": "null"}, "type": {"enum": _ROLES}},
                },
            ],
        }
    ),
]


def _thread_id_at_the_door(value: str) -> str:
    """:func:`~deermem.model.check_thread_id`, its refusal an error of the request's field.

    The id names the conversation; it is no field of a fact. Refused, it is
    an ``invalid-request`` at ``body.threadId`` (rule ``thread_id``, the rule's
    own words), as a ``threadId`` of the wrong JSON type is — not the
    ``invalid-fact`` that the rule's error stands for where a fact is written.
    """
    try:
        return check_thread_id(value)
    except FactValidationError as error:
        raise PydanticCustomError("thread_id", "{allowed}", {"allowed": error.allowed}) from None


class ConversationIn(BaseModel):
    """A conversation to learn from: the whole thread so far, oldest message first.

    Messages are objects in the OpenAI chat shape (``role``, ``content``) or
    the LangChain/DeerFlow shape (``type``, ``content``).
    """

    model_config = ConfigDict(extra="forbid", strict=True)

    threadId: Annotated[
        str,
        Field(
            # What the schema says only tells clients (from the rule's own limit); the
            # rule itself is check_thread_id, below, and nothing else.
            json_schema_extra={
                "pattern": NOT_BLANK,
                "allOf": [{"pattern": ONE_LINE}],
                "maxLength": MAX_LINE_CHARS,
            },
            # examples/conversation.json and `deermem ingest` spell it thread_id; the schema
            # can show one name, so its description gives the other
            validation_alias=AliasChoices("threadId", "thread_id"),
            description="The conversation's thread id; `thread_id` is taken too (give one "
            "of the two).",
        ),
        # The rule Memory.learn applies, at the door: an id the job would refuse is a 422
        # now, never a failed job.
        AfterValidator(_thread_id_at_the_door),
    ]
    messages: Annotated[list[ChatMessage], Field(min_length=1, max_length=2000)]


class FactPage(BaseModel):
    model_config = _PAGE

    facts: tuple[FactJson, ...]
    next_cursor: str | None


class ReceiptPage(BaseModel):
    model_config = _PAGE

    receipts: tuple[ReceiptJson, ...]
    next_cursor: str | None


class ArchivePage(BaseModel):
    model_config = _PAGE

    entries: tuple[ArchiveEntryJson, ...]
    next_cursor: str | None


class Health(BaseModel):
    model_config = _PAGE

    status: Literal["ok"]
    version: str


# --- pages -----------------------------------------------------------------------------------


class InvalidCursor(ValueError):
    """The ``cursor`` parameter is not one this server issued."""


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    """One page of items and the cursor of the next (``None``: this is the last)."""

    items: tuple[T, ...]
    next_cursor: str | None


def paginate(
    items: Sequence[T],
    key: Callable[[T], Key],
    *,
    limit: int,
    cursor: str | None,
    descending: bool = False,
) -> Page[T]:
    """The page of ``items`` after ``cursor``, sorted by ``key``.

    Args:
        items: every item, in any order.
        key: the sort key; it must be unique per item (end it with an id).
        limit: the page size (at least 1).
        cursor: the previous page's ``next_cursor``, ``None`` for the first.
        descending: newest first, for keys that start with a timestamp.

    Raises:
        InvalidCursor: the cursor cannot be decoded.
    """
    ordered = sorted(items, key=key, reverse=descending)
    if cursor is not None:
        after = _decode(cursor)
        if descending:
            ordered = [item for item in ordered if key(item) < after]
        else:
            ordered = [item for item in ordered if key(item) > after]
    page = tuple(ordered[:limit])
    more = len(ordered) > limit
    return Page(page, _encode(key(page[-1])) if more and page else None)


def _encode(key: Key) -> str:
    raw = json.dumps(list(key), ensure_ascii=True, separators=(",", ":")).encode("ascii")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def _decode(cursor: str) -> Key:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        value = json.loads(raw)
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise InvalidCursor(cursor) from None
    if not isinstance(value, list) or not all(isinstance(part, str) for part in value):
        raise InvalidCursor(cursor)
    return tuple(value)


def _paged(
    items: Sequence[T],
    key: Callable[[T], Key],
    *,
    limit: int,
    cursor: str | None,
    descending: bool = False,
) -> Page[T]:
    """:func:`paginate`, with a bad cursor as a 422 problem."""
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


def _key(*parts: str | None) -> Key:
    return tuple(part or "" for part in parts)


# --- one worker's state and its checks --------------------------------------------------------


@dataclass
class ServerContext:
    """One worker process's memory, tokens and jobs.

    Attributes:
        settings: what ``deermem serve`` was given.
        memory: the root memory; requests work on :meth:`Memory.scoped` views.
        tokens: the tokens file.
        jobs: this process's extraction queue.
        auth_required: fixed at start: true when the server listens beyond
            loopback or tokens are in use (the tokens file exists). A token
            added later turns it on too; revoking every token never turns it
            off, as the tokens file stays (:meth:`TokenFile.configured`).
        owns_store: the server opened the memory's store, so it closes it
            on :meth:`close` (a memory handed in is its owner's to close).
    """

    settings: ServerSettings
    memory: Memory
    tokens: TokenFile
    jobs: JobRunner
    auth_required: bool
    owns_store: bool = False

    @property
    def limits(self) -> ServerLimits:
        return self.settings.limits

    def principal_for(
        self, authorization: str | None, *, schemes: frozenset[str] = BEARER_SCHEMES
    ) -> Principal:
        """Who sends a request with this ``Authorization`` header value (``schemes``: see
        :func:`~deermem.service.tokens.principal_for_header`).

        Raises:
            ProblemError: 401 — a token is required and none, or no valid one, was sent.
            TokenFileError: the tokens file became unreadable.
        """
        return principal_for_header(
            self.tokens,
            authorization,
            auth_required=self.auth_required,
            now=self.memory.now(),
            schemes=schemes,
        )

    def memory_for(self, principal: Principal, user: str, agent: str | None) -> Memory:
        """The memory of ``user`` and ``agent``, if ``principal`` may address the user.

        Raises:
            ProblemError: 404 — the principal may not address this user.
            UnsafeIdentifierError: the user id or agent name is unusable.
        """
        if not principal.may_address(user):
            _log.info("token %s asked for a user it may not address", principal.token_id)
            raise ProblemError(not_found())
        return self.memory.scoped(user=user, agent=agent)

    def job_for(self, principal: Principal, job_id: str) -> Job:
        """A job of a user the principal may address.

        Raises:
            ProblemError: 404 — no such job, or one of another user's.
        """
        job = self.jobs.get(job_id)
        if job is None or not principal.may_address(job.user):
            raise ProblemError(not_found())
        return job

    def erase_user(self, user: str) -> ErasureResult:
        """Erase a user from the store and from this server: its queued jobs and their
        records, and its tokens (revoked when bound to it alone). Other worker
        processes serve the store as it is now: their caches follow its version."""
        jobs = self.jobs.forget_user(user)
        result = self.memory.erase_user(user)
        tokens = self.tokens.forget_user(user)
        return result.model_copy(
            update={"counts": {**result.counts, "jobs": jobs, "tokensRevoked": tokens}}
        )

    def close(self) -> None:
        """Finish or abandon the queued jobs, then close the memory (and the store, if owned)."""
        try:
            self.jobs.close(self.memory.config.shutdown_flush_timeout_seconds)
            self.memory.close()
        finally:
            if self.owns_store:
                close_store(self.memory.store)


USER_PATH_PREFIXES: Final = ("/v1/users/", "/ui/users/")
"""The paths whose next segment is a user id (the HTTP API's and the inspector's)."""


class UserSegmentMiddleware:
    """Route a user id that holds ``/`` as the one path segment it was sent as.

    A client writes a user id into a path percent-encoded (``org%2Falice``),
    but the server decodes the path before routing, and the id's ``/`` would
    split it: the id could not be read, changed or erased over HTTP. Under
    :data:`USER_PATH_PREFIXES`, this puts the user's segment back into the
    path encoded — read from the path as sent (``raw_path``), or from the
    decoded segment when that is missing or does not match — and
    :data:`UserPath` decodes it. Every id takes that one way, so no two
    spellings meet: ``org%252Falice`` is the id ``org%2Falice``, not ``org/alice``.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            path = scope["path"]
            for prefix in USER_PATH_PREFIXES:
                if path.startswith(prefix):
                    # In place: the layers outside read the route the router sets on it.
                    scope["path"] = prefix + _encoded_user(scope, prefix)
                    break
        await self.app(scope, receive, send)


def _encoded_user(scope: Scope, prefix: str) -> str:
    """The rest of the path after ``prefix``: the user's segment encoded, the rest decoded."""
    path: str = scope["path"]
    raw = scope.get("raw_path")
    if isinstance(raw, bytes):
        sent = raw.decode("latin-1")
        if sent.startswith(prefix) and unquote(sent) == path:
            segment, slash, rest = sent[len(prefix) :].partition("/")
            # The segment's bytes as sent: a byte that is no UTF-8 stays one (the id is
            # refused), never a U+FFFD several spellings would share.
            return quote(unquote_to_bytes(segment), safe="") + slash + unquote(rest)
    segment, slash, rest = path[len(prefix) :].partition("/")
    return quote(segment, safe="") + slash + rest


async def _user_id(
    user: Annotated[
        str,
        Path(
            min_length=1,
            # Percent-encoded: at most three characters for each byte of the id, which
            # the library bounds (422 invalid-identifier).
            max_length=3 * MAX_USER_ID_BYTES,
            json_schema_extra={"pattern": USER_ID_PATTERN},
            description="The user id, percent-encoded as one segment ('/' as %2F; no control "
            "or bidirectional control characters).",
        ),
    ],
) -> str:
    # Async: a plain function would be a hop to the thread pool (see Dependencies).
    # UserSegmentMiddleware encoded it. A byte that is no UTF-8 becomes a lone surrogate,
    # which the library refuses as it refuses one from the command line (422).
    return unquote(user, errors="surrogateescape")


UserPath = Annotated[str, Depends(_user_id)]
"""The user id of a path under :data:`USER_PATH_PREFIXES`, as the client wrote it."""
AgentPath = Annotated[
    str,
    Path(
        min_length=1,
        max_length=MAX_AGENT_NAME_LENGTH,
        pattern=r"^(__default__|[A-Za-z0-9-]+)$",
        description="The agent name (letters, digits, '-'; case-insensitive), or `__default__`.",
    ),
]
FactId = Annotated[str, Path(min_length=1, max_length=MAX_FACT_ID_LENGTH, description="A fact id.")]


class _BearerCheck(HTTPBearer):
    """The bearer check as a FastAPI dependency: the request's principal.

    An :class:`HTTPBearer`, so the OpenAPI document declares the security
    scheme (``HTTPBearer``) on every route that depends on it, but one
    dependency, not HTTPBearer's beside the check: it reads the header as
    sent — HTTPBearer's own reading takes a malformed one as absent, and the
    client is owed the difference (401 ``malformed``, not ``missing``) — and
    answers with :meth:`ServerContext.principal_for`.
    """

    def __init__(self, context: ServerContext, schemes: frozenset[str]) -> None:
        super().__init__(
            auto_error=False,
            scheme_name="HTTPBearer",
            description="A token made by `deermem token add` (not needed on a loopback "
            "server without tokens).",
        )
        self.context = context
        self.schemes = schemes

    # HTTPBearer's __call__ returns the credentials; this one, what they grant.
    async def __call__(self, request: Request) -> Principal:  # type: ignore[override]
        authorization = request.headers.get("authorization")
        return self.context.principal_for(authorization, schemes=self.schemes)


class Dependencies:
    """FastAPI dependencies bound to one server context.

    Both checks run on every request, on the event loop, as the MCP server's
    bearer check does (:mod:`deermem.service.mcp.auth`): the principal is a
    ``stat`` of the tokens file (a changed file, a few hundred bytes, is read
    again) and a digest, the scope a copy of the root memory, and a hop to a
    worker thread and back costs more CPU than either. Only the route's own
    work, which reads and writes the store, goes to the thread pool.
    ``schemes``: the ``Authorization`` schemes the routes accept — ``Bearer``;
    the mem0-compatible routes also mem0's ``Token``.
    """

    def __init__(self, context: ServerContext, *, schemes: frozenset[str] = BEARER_SCHEMES) -> None:
        self.context = context
        principal = _BearerCheck(context, schemes)

        async def scoped(
            user: UserPath,
            agent: AgentPath,
            who: Annotated[Principal, Depends(principal)],
        ) -> Memory:
            return context.memory_for(who, user, agent)

        self.principal = principal
        self.scoped = scoped


# --- bodies and answers: JSON as RFC 8259 has it -----------------------------------------------


class _JsonBodyRequest(Request):
    """A request whose JSON body is read as JSON is written: no ``NaN`` or infinities."""

    async def json(self) -> Any:
        # FastAPI reads a route's body through this, once per request.
        return json.loads(await self.body(), parse_constant=refuse_json_constant)


class JsonRoute(APIRoute):
    """A route that reads its JSON body strictly (:class:`NotJsonNumber`): the route class
    of every router whose routes take JSON bodies."""

    def get_route_handler(self) -> Callable[[Request], Any]:
        handler = super().get_route_handler()

        async def strict(request: Request) -> Response:
            return await handler(_JsonBodyRequest(request.scope, request.receive))

        return strict


class _Answer(JSONResponse):
    """A JSON answer; a value no JSON number can hold becomes ``null``.

    A fact's unknown keys and a summary section keep what their writer gave
    them, and a file written by hand, by ``deermem import`` or by the
    original may hold a ``NaN`` there. :func:`~deermem.results.to_json`
    writes it as ``null`` (the lists, the search); an answer of plain data
    (one fact, the document, the summaries, the export) does the same rather
    than fail the request.
    """

    def render(self, content: Any) -> bytes:
        try:
            return super().render(content)
        except ValueError:  # json.dumps refuses non-finite floats (allow_nan=False)
            return json_bytes(content, inf_nan_mode="null")


def _answer(
    data: object, status: int = 200, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    """An answer holding ``data``, which :func:`~deermem.results.to_json` has written."""
    return _Answer(data, status_code=status, headers=dict(headers or {}))


def _problems(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for these problem statuses, plus ``default``."""
    declared: dict[int | str, dict[str, Any]] = {}
    keys: list[int | str] = [*statuses, "default"]
    for status in keys:
        declared[status] = {"model": ProblemBody, "description": _DESCRIPTIONS[status]}
    return declared


def routers(context: ServerContext) -> list[APIRouter]:
    """Every route of one server, by area: server, facts, recall, learning, records."""
    deps = Dependencies(context)
    return [
        _server(context, deps),
        _facts(context, deps),
        _recall(context, deps),
        _learning(context, deps),
        _records(context, deps),
    ]


# --- /v1/health and /v1/config ----------------------------------------------------------------


def _server(context: ServerContext, deps: Dependencies) -> APIRouter:
    api = APIRouter(prefix="/v1", tags=["server"], route_class=JsonRoute)
    Who = Annotated[Principal, Depends(deps.principal)]

    @api.get("/health", response_model=Health, responses=_problems())
    async def health() -> JSONResponse:
        """Whether the server answers (no token needed).

        A coroutine that touches nothing: it needs no worker thread, so it
        answers even while every thread is busy.
        """
        return _answer(to_json(Health(status="ok", version=__version__)))

    @api.get("/config", response_model=dict[str, Any], responses=_problems(401))
    def config(who: Who) -> JSONResponse:
        """The effective memory configuration and the server's limits (no secret).

        The model's API key is never part of the configuration (only the name
        of the variable that holds it); a password, key or token in a URL is
        replaced by ``***``.
        """
        memory = context.memory.config.model_dump(mode="json")
        server = {
            "authRequired": context.auth_required or context.tokens.configured(),
            "workers": context.settings.workers,
            "limits": to_json(context.limits, ServerLimits),
        }
        return _answer({"memory": memory, "server": server})

    return api


# --- /v1/users/{user}/agents/{agent}/facts ------------------------------------------------------


def _facts(context: ServerContext, deps: Dependencies) -> APIRouter:
    api = APIRouter(
        prefix="/v1/users/{user}/agents/{agent}/facts", tags=["facts"], route_class=JsonRoute
    )
    Scoped = Annotated[Memory, Depends(deps.scoped)]
    limits = context.limits
    Limit = Annotated[
        int, Query(ge=1, le=limits.max_page_size, description="Page size (max_page_size).")
    ]
    Cursor = Annotated[str | None, Query(max_length=1024, description="From `nextCursor`.")]
    Category = Annotated[str | None, Query(min_length=1, max_length=64)]

    @api.get("", response_model=FactPage, responses=_problems(401, 404, 422))
    def list_facts(
        memory: Scoped,
        limit: Limit = limits.default_page_size,
        cursor: Cursor = None,
        category: Category = None,
    ) -> JSONResponse:
        """Active facts, oldest first, one page at a time."""
        page = _paged(
            memory.list_facts(category=category),
            lambda fact: _key(fact.createdAt, fact.id),
            limit=limit,
            cursor=cursor,
        )
        return _answer(to_json(FactPage(facts=page.items, next_cursor=page.next_cursor)))

    @api.post(
        "",
        status_code=201,
        response_model=CreateResult,
        responses=_problems(401, 404, 409, 413, 422),
    )
    def create_fact(memory: Scoped, body: NewFact) -> JSONResponse:
        """Add a fact through the capacity gate; the answer says what the gate did.

        `kept` is false when the gate evicted the new fact itself (it is then in
        the archive, restorable); `evicted` and `receipts` name every fact that
        left to make room. Never a silent drop.
        """
        result = memory.create_fact(
            body.content,
            category=body.category,
            confidence=body.confidence,
            topics=body.topics,
            source_error=body.source_error,
            expected_valid_days=body.expected_valid_days,
        )
        where = "facts" if result.kept else "archive"
        return _answer(
            to_json(result),
            status=201,
            headers={"Location": f"{_base(memory)}/{where}/{result.fact.id}"},
        )

    @api.get("/{fact_id}", response_model=FactJson, responses=_problems(401, 404, 422))
    def get_fact(memory: Scoped, fact_id: FactId) -> JSONResponse:
        """One active fact with every field."""
        return _answer(memory.get_fact(fact_id).to_dict())

    @api.patch("/{fact_id}", response_model=FactJson, responses=_problems(401, 404, 409, 413, 422))
    def update_fact(memory: Scoped, fact_id: FactId, body: FactPatch) -> JSONResponse:
        """Change fields of a fact; `expectedRevision` refuses a change made meanwhile (409)."""
        fact = memory.update_fact(
            fact_id,
            content=body.content,
            category=body.category,
            confidence=body.confidence,
            expected_revision=body.expected_revision,
        )
        return _answer(fact.to_dict())

    @api.delete("/{fact_id}", response_model=Forgotten, responses=_problems(401, 404, 409, 422))
    def delete_fact(
        memory: Scoped,
        fact_id: FactId,
        expected_revision: Annotated[int | None, Query(alias="expectedRevision", ge=1)] = None,
    ) -> JSONResponse:
        """Remove a fact: to the archive (restorable), or for good with `eviction_mode: delete`."""
        memory.delete_fact(fact_id, expected_revision=expected_revision)
        archived = memory.config.eviction_mode == "archive"
        return _answer(to_json(Forgotten(fact_id=fact_id, archived=archived)))

    @api.get("/{fact_id}/why", response_model=Explanation, responses=_problems(401, 404, 422))
    def why(memory: Scoped, fact_id: FactId) -> JSONResponse:
        """Why a fact is active (its rank), archived or gone (its receipts)."""
        return _answer(to_json(memory.why(fact_id)))

    return api


def _base(memory: Memory) -> str:
    scope = memory.scope
    return f"/v1/users/{quote(scope.user_id or '', safe='')}/agents/{scope.agent}"


# --- …/context and …/search ---------------------------------------------------------------------


def _recall(context: ServerContext, deps: Dependencies) -> APIRouter:
    api = APIRouter(
        prefix="/v1/users/{user}/agents/{agent}", tags=["recall"], route_class=JsonRoute
    )
    Scoped = Annotated[Memory, Depends(deps.scoped)]
    limits = context.limits

    @api.get("/context", response_model=PromptContext, responses=_problems(401, 404, 422))
    def memory_context(
        memory: Scoped,
        max_tokens: Annotated[
            int | None,
            Query(ge=1, le=_MAX_PROMPT_TOKENS, description="Budget for this prompt."),
        ] = None,
        explain: Annotated[bool, Query(description="Add the injection manifest.")] = False,
        query: Annotated[
            str | None,
            Query(
                min_length=1,
                max_length=MAX_QUERY_CHARS,
                description="The agent's question: facts relevant to it are preferred "
                "when not every fact fits.",
                json_schema_extra={"pattern": NOT_BLANK},
            ),
            SOMETHING_TO_FIND,
        ] = None,
    ) -> JSONResponse:
        """The `<memory>` block for an agent's prompt, within the token budget.

        Protected categories (`correction` by default) come first within their
        guaranteed budget, the rest in the capacity policy's order. With
        `query`, facts relevant to the question go first within each section
        when not every fact fits; without it the block is the same as always.
        With `explain=true` the manifest says which facts went in, at what token
        cost, and which were left out and why (ids only). Reading the context
        counts as neither a recall nor a confirmation.
        """
        injection = memory.injection(max_tokens=max_tokens, query=query)
        return _answer(to_json(PromptContext.of(injection, explain=explain)))

    @api.get("/search", response_model=SearchResults, responses=_problems(401, 404, 422))
    def search(
        memory: Scoped,
        q: Annotated[
            str,
            Query(
                min_length=1,
                max_length=MAX_QUERY_CHARS,
                description="What to look for.",
                json_schema_extra={"pattern": NOT_BLANK},
            ),
            SOMETHING_TO_FIND,
        ],
        top_k: Annotated[
            int, Query(ge=1, le=limits.max_top_k, description="At most this many (max_top_k).")
        ] = 5,
        category: Annotated[str | None, Query(min_length=1, max_length=64)] = None,
        record: Annotated[
            bool, Query(description="Count the hits as recalls (hybrid-v1 reads them).")
        ] = True,
    ) -> JSONResponse:
        """The facts that best match `q`, best first (by keyword and meaning, then substrings)."""
        results = memory.search(q, top_k=top_k, category=category, record=record)
        return _answer(to_json(SearchResults(results=results)))

    return api


# --- …/conversations and /v1/jobs/{id} ----------------------------------------------------


def _learning(context: ServerContext, deps: Dependencies) -> APIRouter:
    api = APIRouter(tags=["learning"], route_class=JsonRoute)
    Scoped = Annotated[Memory, Depends(deps.scoped)]
    Who = Annotated[Principal, Depends(deps.principal)]
    limits = context.limits

    def accept(memory: Memory, body: ConversationIn) -> Job:
        """Check the conversation and queue it (in a worker thread: it parses and writes)."""
        if not memory.config.model.configured:
            raise ProblemError(extraction_off())
        parse_messages(body.messages)  # a malformed message is a 422 now, not a failed job
        scope = memory.scope
        return context.jobs.submit(
            scope.user_id or "", scope.agent, body.threadId, list(body.messages)
        )

    @api.post(
        "/v1/users/{user}/agents/{agent}/conversations",
        status_code=202,
        response_model=Job,
        responses={
            200: {"model": Job, "description": "With `wait=true`: the finished job"},
            **_problems(401, 404, 413, 422, 429, 501),
        },
    )
    async def post_conversation(
        memory: Scoped,
        who: Who,
        body: ConversationIn,
        wait: Annotated[
            bool, Query(description="Answer when the job is done (up to max_wait_seconds).")
        ] = False,
    ) -> JSONResponse:
        """Queue a conversation for extraction; 202 at once with the job's URL.

        Send the whole thread each time: only what was not learned from before
        goes to the model. `GET /v1/jobs/{jobId}` gives the update report (what
        was added, confirmed, removed and evicted, with receipt ids) once the job
        is done. With `wait=true` the answer waits for the report (200) — or,
        after `max_wait_seconds`, is the 202 of a job still running. A token may
        have `max_waits_per_token` such requests waiting at once (429
        `too-many-waits` beyond, before anything is queued); a user may hold
        `max_pending_jobs_per_user` queued conversations (429 `queue-full`).
        """
        if not wait:
            job = await run_in_threadpool(accept, memory, body)
            return _job_answer(job, accepted=not job.finished)
        # The wait is a coroutine woken by the job's end: it holds no worker thread.
        with context.jobs.wait_slot(who.token_id):
            job = await run_in_threadpool(accept, memory, body)
            latest = await context.jobs.wait(job.job_id, limits.max_wait_seconds)
        if latest is None:  # it ended before the wait began: read its record
            latest = await run_in_threadpool(context.jobs.get, job.job_id)
        job = latest or job
        return _job_answer(job, accepted=not job.finished)

    @api.get("/v1/jobs/{job_id}", response_model=Job, responses=_problems(401, 404, 422))
    def get_job(
        who: Who,
        job_id: Annotated[str, Path(min_length=1, max_length=64, description="A job id.")],
    ) -> JSONResponse:
        """An extraction job: queued, running, done (with its report), failed or abandoned."""
        return _job_answer(context.job_for(who, job_id), accepted=False)

    return api


def _job_answer(job: Job, *, accepted: bool) -> JSONResponse:
    headers = {"Location": f"/v1/jobs/{job.job_id}"}
    return _answer(to_json(job, Job), status=202 if accepted else 200, headers=headers)


# --- receipts, the archive, the whole document and the user's summaries -------------------------


def _records(context: ServerContext, deps: Dependencies) -> APIRouter:
    api = APIRouter(tags=["records"], route_class=JsonRoute)
    Scoped = Annotated[Memory, Depends(deps.scoped)]
    Who = Annotated[Principal, Depends(deps.principal)]
    limits = context.limits
    Limit = Annotated[
        int, Query(ge=1, le=limits.max_page_size, description="Page size (max_page_size).")
    ]
    Cursor = Annotated[str | None, Query(max_length=1024, description="From `nextCursor`.")]
    scope_path = "/v1/users/{user}/agents/{agent}"

    @api.get(f"{scope_path}/audit", response_model=ReceiptPage, responses=_problems(401, 404, 422))
    def audit(
        memory: Scoped, limit: Limit = limits.default_page_size, cursor: Cursor = None
    ) -> JSONResponse:
        """Eviction receipts, newest first: what left the library, when and why (no content)."""
        page = _paged(
            memory.audit(),
            lambda receipt: _key(receipt.occurred_at, receipt.receipt_id),
            limit=limit,
            cursor=cursor,
            descending=True,
        )
        return _answer(to_json(ReceiptPage(receipts=page.items, next_cursor=page.next_cursor)))

    @api.get(
        f"{scope_path}/archive", response_model=ArchivePage, responses=_problems(401, 404, 422)
    )
    def archive(
        memory: Scoped, limit: Limit = limits.default_page_size, cursor: Cursor = None
    ) -> JSONResponse:
        """Archived facts, newest first, each with why it left."""
        page = _paged(
            memory.list_archived(),
            lambda entry: _key(entry.archived_at, entry.fact_id),
            limit=limit,
            cursor=cursor,
            descending=True,
        )
        return _answer(to_json(ArchivePage(entries=page.items, next_cursor=page.next_cursor)))

    @api.get(
        f"{scope_path}/archive/{{fact_id}}",
        response_model=ArchiveEntryJson,
        responses=_problems(401, 404, 422),
    )
    def archived(memory: Scoped, fact_id: FactId) -> JSONResponse:
        """One archived fact with why it left, as the archive's pages list it.

        A fact the capacity gate evicted on arrival is here: the `Location` of
        its `201` points at it.
        """
        return _answer(to_json(memory.get_archived(fact_id), ArchiveEntryJson))

    @api.post(
        f"{scope_path}/archive/{{fact_id}}/restore",
        response_model=RestoreResult,
        responses=_problems(401, 404, 409, 422),
    )
    def restore(memory: Scoped, fact_id: FactId) -> JSONResponse:
        """Send an archived fact back through the capacity gate; the answer says what it did."""
        return _answer(to_json(memory.restore(fact_id)))

    @api.delete(
        f"{scope_path}/archive/{{fact_id}}",
        response_model=Purged,
        responses=_problems(401, 404, 422),
    )
    def purge(memory: Scoped, fact_id: FactId) -> JSONResponse:
        """Delete an archived fact for good; its receipts (no content) stay."""
        memory.purge(fact_id)
        return _answer(to_json(Purged(fact_id=fact_id, purged=True)))

    @api.get(
        f"{scope_path}/document",
        response_model=dict[str, Any],
        responses=_problems(401, 404, 422),
    )
    def export(memory: Scoped) -> JSONResponse:
        """The lossless export: summaries and every fact with every field."""
        return _answer(memory.export_document())

    @api.put(
        f"{scope_path}/document",
        response_model=ImportResult,
        responses=_problems(401, 404, 409, 413, 422),
    )
    def import_document(
        memory: Scoped,
        document: Annotated[
            dict[str, Any],
            Body(
                description="A document as `GET …/document` returns it; `facts` is required.",
                json_schema_extra={
                    "required": ["facts"],
                    "properties": {"facts": {"type": "array", "items": {"type": "object"}}},
                },
            ),
        ],
    ) -> JSONResponse:
        """Replace this scope's facts and summaries with a document's, through the capacity gate."""
        return _answer(to_json(memory.import_document(document)))

    @api.get(
        "/v1/users/{user}/summaries",
        response_model=dict[str, Any],
        responses=_problems(401, 404, 422),
    )
    def summaries(user: UserPath, who: Who) -> JSONResponse:
        """The user's summaries (user context and history), shared by all their agents."""
        memory = context.memory_for(who, user, None)
        return _answer(memory.summaries().to_dict())

    @api.get(
        "/v1/users/{user}/export",
        response_model=dict[str, Any],
        responses=_problems(401, 404, 422),
    )
    def export_user(user: UserPath, who: Who) -> JSONResponse:
        """Everything held for the user, as one versioned document (docs/privacy.md):
        every agent's facts, the summaries, the archive with its receipts, usage,
        regret events and marks. The user's own token or an admin token."""
        memory = context.memory_for(who, user, None)
        return _answer(memory.export_user(user))

    @api.delete(
        "/v1/users/{user}",
        response_model=ErasureResult,
        responses=_problems(401, 403, 404, 422),
    )
    def erase_user(user: UserPath, who: Who) -> JSONResponse:
        """Erase the user everywhere, for good (an admin token only; the user's own gets 403).

        Every agent, the summaries, the archive, receipts, usage, regret
        events, marks, the search index rows, queued jobs and their records;
        tokens bound only to the user are revoked, other tokens no longer
        name them. The answer holds counts only; an unknown user is erased of
        nothing (200, counts 0).
        """
        context.memory_for(who, user, None)  # 404 for a token that may not address the user
        if not who.admin:
            raise ProblemError(admin_required())
        return _answer(to_json(context.erase_user(user)))

    return api
