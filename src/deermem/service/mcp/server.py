"""deermem's MCP server: the seven memory tools, and the server that offers them.

Each tool parses, calls one :class:`~deermem.memory.Memory` method and
answers with the result's one description (:mod:`deermem.results`), which
the SDK publishes as the tool's ``outputSchema`` and sends as
``structuredContent``. Arguments take the bounds of the memory's own input
models (:class:`~deermem.results.NewFact`: content, category, confidence,
topics); the one bound MCP sets tighter — the content of ``memory_add`` and
``memory_update`` (:attr:`~deermem.service.settings.ToolLimits.max_content_chars`,
2,000 characters by default, where the memory takes 4,000) — is stated where
the argument is declared.

:func:`memory_tools` builds ``memory_search``, ``memory_context``,
``memory_add``, ``memory_update``, ``memory_forget``, ``memory_restore`` and
``memory_why`` for an :class:`~mcp.server.mcpserver.MCPServer`. The memory a
call works on comes from ``memory_of`` (the server's configuration, or the
request's token — see :mod:`deermem.service.mcp.auth`); no tool takes a user or an
agent, and an argument a tool does not name is refused (its input schema
says ``additionalProperties: false``): a model that passes ``user: "bob"``
gets a tool error naming ``user``, not a call that quietly ignores it.

Annotations tell clients what a tool does to the memory, truthfully:

* reading the context or a fact's history changes nothing;
* a search changes nothing under the ``confidence`` policy, but under
  ``hybrid-v1`` and shadow mode its hits count as recalls (the usage
  sidecar the policy ranks by), so there it is not read-only;
* adding or restoring a fact can evict another one at the cap (to the
  archive, or for good with ``eviction_mode: delete``), so both are
  destructive; so are changing and forgetting a fact.

Failures reach the client as tool errors (``isError``) with a short,
content-free message — the same words and typed fields the HTTP API puts
in its problems — never a traceback. The log gets one line per call (tool,
outcome, time) and, for a failure nobody planned for, the exception's type
and stack without its message, which may quote stored text.

:func:`create_mcp_server` is the transport-free part: an
:class:`~mcp.server.mcpserver.MCPServer` named ``deermem`` with the memory
tools. :func:`create_http_app` puts it behind the HTTP API's own layers,
from the outside in: :class:`~deermem.service.middleware.RequestIdMiddleware`
(request ids, one access line, the last word on a crash),
:class:`~deermem.service.middleware.HostGuardMiddleware` (421/403: the HTTP
API's own ``Host`` and ``Origin`` rule, in place of the SDK's),
:class:`~deermem.service.middleware.BodyLimitMiddleware` (413),
:class:`~deermem.service.mcp.auth.McpAuthMiddleware` (401/403, the caller's
scope) and :class:`~deermem.service.mcp.auth.SessionLimitMiddleware` (429: the
sessions of one token). :func:`serve` runs it (``deermem mcp``).

Over stdio, standard output belongs to the protocol: every log line goes
to standard error (the client's log), in the HTTP server's format; a line
the SDK cannot read as a message is answered and logged
(:func:`~deermem.service.mcp.stdio.run_stdio`). Over HTTP
the start-up check is the HTTP API's own
(:func:`~deermem.service.settings.check_startup`): listening beyond loopback while
tokens are not in use (no tokens file) refuses to start, and a damaged tokens file
stops start-up instead of the first request; the server runs uvicorn with the
HTTP API's protocol (:class:`~deermem.service.http.run.ServerHTTPProtocol`:
Nagle off, a deadline for request headers).
"""

# No `from __future__ import annotations`: the SDK reads the tool signatures at
# registration, and their annotations name bounds computed inside the factory.

import functools
import logging
import logging.config
import time
import traceback
from collections.abc import Callable
from typing import Annotated, Any, Final, Literal, ParamSpec, TypeVar

import anyio
import uvicorn
from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.types import ASGIApp

from deermem import __version__
from deermem.errors import (
    DeerMemError,
    DuplicateFactError,
    FactNotFoundError,
)
from deermem.memory import Memory
from deermem.model import Scope
from deermem.results import (
    NOT_BLANK,
    SOMETHING_TO_FIND,
    WHOLE_NUMBER,
    Category,
    Confidence,
    Content,
    Explanation,
    FactOut,
    Forgotten,
    PromptContext,
    ReceiptJson,
    Redacted,
    RestoreResult,
    Revision,
    SearchResults,
    Topics,
    error_location,
    field_names,
)
from deermem.service.http.run import ServerHTTPProtocol, started
from deermem.service.mcp.auth import (
    CALLER_KEY,
    Caller,
    McpAuthMiddleware,
    SessionLimitMiddleware,
    open_sessions,
)
from deermem.service.mcp.stdio import run_stdio
from deermem.service.middleware import BodyLimitMiddleware, HostGuardMiddleware, RequestIdMiddleware
from deermem.service.problems import operator_note, problem_for
from deermem.service.settings import (
    McpSettings,
    ToolLimits,
    check_listen,
    check_startup,
    close_store,
    is_loopback,
    log_config,
)
from deermem.service.tokens import TokenFile
from deermem.service.warmup import WarmUp

__all__ = ["INSTRUCTIONS", "TOOL_NAMES", "create_mcp_server", "request_memory", "serve"]

MemoryOf = Callable[[Context[Any, Any]], Memory]
"""Gives the memory a tool call works on, from the call's context."""

MCP_PATH: Final = "/mcp"
TOOL_NAMES: Final = (
    "memory_search",
    "memory_context",
    "memory_add",
    "memory_update",
    "memory_forget",
    "memory_restore",
    "memory_why",
)

INSTRUCTIONS: Final = (
    "deermem is this agent's long-term memory of the user. Call memory_context at the start "
    "of a conversation and read its text. When the user states something lasting about "
    "themselves or their work (a preference, a goal, a decision) call memory_add; when they "
    "correct you, store the correction with category `correction`. Use memory_search to look "
    "something up, memory_update or memory_forget when something changed or was withdrawn, "
    "memory_why to explain what is remembered and why, memory_restore to bring back a "
    "forgotten or evicted fact. Memory has a cap: the answer of every write says what was kept."
)

AddOutcome = Literal["stored", "duplicate", "evicted"]


class AddResult(BaseModel):
    """What ``memory_add`` did: the capacity gate's decision, never a silent drop."""

    outcome: AddOutcome = Field(
        description=(
            "stored: the fact is in memory; duplicate: an equal fact was already stored "
            "(nothing changed); evicted: the library was full and the new fact ranked "
            "lowest, so it went straight to the archive (memory_restore can bring it back)"
        )
    )
    factId: str = Field(
        description="the new fact (stored, evicted) or the equal fact already stored (duplicate)"
    )
    evicted: list[str] = Field(description="ids the capacity gate evicted in this change")
    receipts: list[ReceiptJson]
    # The field of every write's result (CreateResult, RestoreResult ...), described once:
    # a model must hear that the text it stored is not the text it sent.
    redacted: Redacted = ()
    message: str = Field(description="what happened, in plain words (ids only)")


# --- the tools -------------------------------------------------------------------------------

_log = logging.getLogger("deermem.service.mcp")
_P = ParamSpec("_P")
_R = TypeVar("_R")

FactId = Annotated[
    str, Field(min_length=1, max_length=128, description="A fact id, e.g. `fact_1a2b3c4d`.")
]

_READ = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)


def _writes(*, idempotent: bool) -> ToolAnnotations:
    return ToolAnnotations(
        read_only_hint=False,
        destructive_hint=True,
        idempotent_hint=idempotent,
        open_world_hint=False,
    )


def memory_tools(memory_of: MemoryOf, *, memory: Memory, limits: ToolLimits) -> list[Tool]:
    """The seven memory tools, for ``MCPServer(tools=...)``.

    Args:
        memory_of: the memory of one call (see :mod:`deermem.service.mcp.auth`).
        memory: the server's memory, for what its configuration decides:
            whether search records recalls, where forgotten facts go.
        limits: bounds on tool arguments (in the input schemas).
    """
    tools: list[Tool] = []

    def tool(
        *, name: str, title: str, description: str, annotations: ToolAnnotations
    ) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]:
        def add(function: Callable[_P, _R]) -> Callable[_P, _R]:
            built = Tool.from_function(
                function, name=name, title=title, description=description, annotations=annotations
            )
            tools.append(_closed(built))
            return function

        return add

    records_recalls = memory.gate.policy.uses_usage
    archives = memory.config.eviction_mode == "archive"
    gone_to = (
        "to the archive, from which memory_restore brings it back"
        if archives
        else "for good (this server runs with eviction_mode: delete)"
    )

    @tool(
        name="memory_search",
        title="Search memory",
        description=(
            "Find stored facts about the user that match a query, best first "
            "(by its words and by its meaning, then substrings)."
            + (
                " Each hit counts as a recall, which helps the fact stay when memory is full."
                if records_recalls
                else ""
            )
        ),
        annotations=(
            ToolAnnotations(
                read_only_hint=False,
                destructive_hint=False,
                idempotent_hint=False,
                open_world_hint=False,
            )
            if records_recalls
            else _READ
        ),
    )
    @_contained("memory_search")
    def memory_search(
        ctx: Context[Any, Any],
        query: Annotated[
            str,
            Field(
                min_length=1,
                max_length=limits.max_query_chars,
                description="What to look for.",
                json_schema_extra={"pattern": NOT_BLANK},
            ),
            SOMETHING_TO_FIND,
        ],
        top_k: Annotated[
            int,
            Field(
                ge=1, le=limits.max_top_k, strict=False, description="At most this many results."
            ),
            WHOLE_NUMBER,
        ] = 5,
        category: Annotated[
            str | None, Field(min_length=1, max_length=64, description="Only this category.")
        ] = None,
    ) -> SearchResults:
        return SearchResults(results=memory_of(ctx).search(query, top_k=top_k, category=category))

    @tool(
        name="memory_context",
        title="Memory for the prompt",
        description=(
            "The user's memory as a <memory> block to read before answering: corrections "
            "first, then the facts the capacity policy ranks highest, within a token budget. "
            "The manifest says why each fact is in it (pool, rank, score, tokens) and which "
            "were left out and why."
        ),
        annotations=_READ,
    )
    @_contained("memory_context")
    def memory_context(
        ctx: Context[Any, Any],
        max_tokens: Annotated[
            int | None,
            Field(
                ge=1,
                le=limits.max_prompt_tokens,
                strict=False,
                description="Token budget for the block (default: the server's "
                "max_injection_tokens).",
            ),
            WHOLE_NUMBER,
        ] = None,
        query: Annotated[
            str | None,
            Field(
                min_length=1,
                max_length=limits.max_query_chars,
                description="The user's question, when there is one: facts relevant to it "
                "are preferred when not every fact fits the budget.",
                json_schema_extra={"pattern": NOT_BLANK},
            ),
            SOMETHING_TO_FIND,
        ] = None,
    ) -> PromptContext:
        return PromptContext.of(memory_of(ctx).injection(max_tokens=max_tokens, query=query))

    @tool(
        name="memory_add",
        title="Remember a fact",
        description=(
            "Store one durable fact about the user (a preference, a correction, a goal ...), "
            "in one or two sentences. The answer says what happened: stored; duplicate (an "
            "equal fact is already stored); or evicted (memory is full and the new fact "
            "ranked lowest). When memory is full, the lowest-ranked fact leaves "
            + gone_to
            + "; the receipts say which and why."
        ),
        annotations=_writes(idempotent=False),
    )
    @_contained("memory_add")
    def memory_add(
        ctx: Context[Any, Any],
        # MCP's own, tighter bound (ToolLimits.max_content_chars): a fact is a
        # sentence or two, and a model that tries to store a document is told so.
        content: Annotated[Content, Field(max_length=limits.max_content_chars)],
        category: Category = "context",
        confidence: Confidence = 0.5,
        topics: Topics = [],  # noqa: B006 (never mutated: the SDK validates a copy)
    ) -> AddResult:
        memory = memory_of(ctx)
        try:
            result = memory.create_fact(
                content, category=category, confidence=confidence, topics=topics
            )
        except DuplicateFactError as duplicate:
            return AddResult(
                outcome="duplicate",
                factId=duplicate.existing_id,
                evicted=[],
                receipts=[],
                message=f"an equal fact is already stored as {duplicate.existing_id}; "
                "nothing changed",
            )
        return AddResult(
            outcome="stored" if result.kept else "evicted",
            factId=result.fact.id,
            evicted=list(result.evicted),
            receipts=list(result.receipts),
            redacted=result.redacted,
            message=result.message,
        )

    @tool(
        name="memory_update",
        title="Change a fact",
        description=(
            "Change the content, category or confidence of a stored fact (give at least "
            "one); the rest is kept. Use it when a fact became outdated or was wrong."
        ),
        annotations=_writes(idempotent=True),
    )
    @_contained("memory_update")
    def memory_update(
        ctx: Context[Any, Any],
        fact_id: FactId,
        # MCP's own, tighter bound, as for memory_add.
        content: Annotated[Content, Field(max_length=limits.max_content_chars)] | None = None,
        category: Category | None = None,
        confidence: Confidence | None = None,
        expected_revision: Revision | None = None,
    ) -> FactOut:
        if content is None and category is None and confidence is None:
            raise ToolError("give at least one of content, category, confidence")
        fact = memory_of(ctx).update_fact(
            fact_id,
            content=content,
            category=category,
            confidence=confidence,
            expected_revision=expected_revision,
        )
        return FactOut.of(fact)

    @tool(
        name="memory_forget",
        title="Forget a fact",
        description=f"Remove a stored fact {gone_to}.",
        annotations=_writes(idempotent=True),
    )
    @_contained("memory_forget")
    def memory_forget(
        ctx: Context[Any, Any], fact_id: FactId, expected_revision: Revision | None = None
    ) -> Forgotten:
        memory = memory_of(ctx)
        memory.delete_fact(fact_id, expected_revision=expected_revision)
        return Forgotten(fact_id=fact_id, archived=archives)

    @tool(
        name="memory_restore",
        title="Restore a forgotten fact",
        description=(
            "Bring a fact back from the archive (forgotten, or evicted when memory was full). "
            "It goes through the capacity policy again: when memory is full, the "
            "lowest-ranked fact leaves (possibly the restored one); the answer says which."
        ),
        annotations=_writes(idempotent=False),
    )
    @_contained("memory_restore")
    def memory_restore(ctx: Context[Any, Any], fact_id: FactId) -> RestoreResult:
        return memory_of(ctx).restore(fact_id)

    @tool(
        name="memory_why",
        title="Why is this fact (not) in memory",
        description=(
            "Explain a fact: active (its rank and score under the capacity policy), archived "
            "(why and when it left, restorable) or gone (only its receipts remain)."
        ),
        annotations=_READ,
    )
    @_contained("memory_why")
    def memory_why(ctx: Context[Any, Any], fact_id: FactId) -> Explanation:
        return memory_of(ctx).why(fact_id)

    return tools


# The names a model may try to choose whose memory a call reaches by. No tool takes them, and
# a refusal names them, so that the model learns it cannot (docs/mcp.md).
_SCOPE_ARGUMENTS: Final = frozenset({"user", "agent", "user_id", "agent_id"})


def _argument_problems(error: ValidationError, arguments: type[BaseModel]) -> str:
    """Each refused argument and the rule it broke, on one line; never what was given, nor
    the name of another argument the tool does not take (it is described by its length)."""
    declared = field_names(arguments) | _SCOPE_ARGUMENTS
    problems = []
    for item in error.errors(include_input=False, include_url=False):
        where = error_location(item["loc"], declared) or "arguments"
        problems.append(f"{where}: {item['msg']}")
    return "invalid arguments: " + "; ".join(problems)


class _OneLineTool(Tool):
    """A tool whose refused arguments are one line naming each argument and its rule.

    The SDK reports an argument the schema refuses with pydantic's whole
    dump — several lines, each echoing the value given (a fact's text may be
    private). The docs promise one line: the SDK's own prefix, then
    :func:`_argument_problems`.
    """

    async def run(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return await super().run(*args, **kwargs)
        except ToolError as error:
            cause = error.__cause__
            if isinstance(cause, ValidationError):
                raise ToolError(
                    f"Error executing tool {self.name}: "
                    f"{_argument_problems(cause, self.fn_metadata.arg_model)}"
                ) from None
            raise


def _closed(tool: Tool) -> Tool:
    """``tool`` with arguments it does not name refused, in its schema and in its validation;
    a refusal is one line naming each argument and its rule, never echoing the input."""
    named = tool.fn_metadata.arg_model
    closed = type(
        named.__name__,
        (named,),
        {"__module__": named.__module__, "model_config": ConfigDict(extra="forbid")},
    )
    assert issubclass(closed, ArgModelBase)
    tool.fn_metadata.arg_model = closed
    # The SDK's schema of the same fields, closed: what pydantic writes for `closed` (it
    # sorts the keys, and `additionalProperties` comes first), without writing it again.
    tool.parameters = {"additionalProperties": False, **tool.parameters}
    return _OneLineTool.model_construct(**dict(tool))


def _contained(name: str) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]:
    """Turn every failure of a tool into a content-free tool error, and log the call."""

    def wrap(tool: Callable[_P, _R]) -> Callable[_P, _R]:
        @functools.wraps(tool)
        def run(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            started = time.perf_counter()
            outcome = "error"
            try:
                result = tool(*args, **kwargs)
                outcome = "ok"
                return result
            except ToolError:
                raise
            except DeerMemError as error:
                raise ToolError(_message(name, error)) from None
            except Exception as error:
                # Type and stack only: an exception's message may quote stored text.
                frames = "".join(traceback.format_tb(error.__traceback__))
                _log.error("tool %s: unhandled %s\n%s", name, type(error).__name__, frames)
                outcome = "failed"
                raise ToolError(
                    "internal error: the server could not carry out this call; "
                    "its log has the details"
                ) from None
            finally:
                elapsed = (time.perf_counter() - started) * 1000
                _log.info("tool %s %s %.1fms", name, outcome, elapsed)

        return run

    return wrap


def _message(tool: str, error: DeerMemError) -> str:
    """The problem the HTTP API would answer, as one line: title, detail, typed fields."""
    if isinstance(error, FactNotFoundError):
        place = "the archive" if error.where == "archive" else "memory"
        return f"Fact not found: no fact {error.fact_id!r} in {place}"
    problem = problem_for(error)
    note = operator_note(error, problem)
    if note is not None:
        _log.error("tool %s: %s", tool, note)
    fields = ", ".join(f"{key}={value!r}" for key, value in problem.extensions.items())
    return f"{problem.title}: {problem.detail}" + (f" ({fields})" if fields else "")


# --- the server -------------------------------------------------------------------------------


def create_mcp_server(
    memory: Memory,
    *,
    memory_of: MemoryOf | None = None,
    limits: ToolLimits | None = None,
    warm_up: WarmUp | None = None,
) -> MCPServer:
    """The MCP server with the memory tools.

    Args:
        memory: the memory to serve; its configuration decides what the
            tool descriptions and annotations say (see :func:`memory_tools`).
        memory_of: the memory of one call; by default ``memory`` itself (the
            stdio server's fixed scope).
        limits: bounds on tool arguments.
        warm_up: started once the first client's session is ready.
    """
    tools = memory_tools(
        memory_of or (lambda ctx: memory), memory=memory, limits=limits or ToolLimits()
    )
    return MCPServer(
        "deermem",
        title="deermem",
        description="Long-term memory for LLM agents that forgets the right things and can "
        "say why.",
        instructions=INSTRUCTIONS,
        version=__version__,
        tools=tools,
        middleware=[] if warm_up is None else [_warm_up_when_initialized(warm_up)],
    )


def _warm_up_when_initialized(warm_up: WarmUp) -> ServerMiddleware[Any]:
    """Start ``warm_up`` once a client's session is ready.

    That is at the first message after the handshake: the client's
    ``notifications/initialized`` after ``initialize`` (the protocol versions
    of 2025), or the first request of a version without a handshake
    (``server/discover``). Not before: the process's start-up and the
    handshake never share the CPU with the loads.
    """

    async def middleware(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        result = await call_next(ctx)
        if ctx.method != "initialize":
            warm_up.start()
        return result

    return middleware


def request_memory(memory: Memory, agent: str | None) -> MemoryOf:
    """The memory of an HTTP tool call: its caller's user, the server's agent.

    Fails closed: a call without the caller the authentication layer leaves
    on the request is a bug, and gets an internal error rather than any memory.
    """

    def memory_of(ctx: Context[Any, Any]) -> Memory:
        request = ctx.request_context.request
        caller = getattr(request, "scope", {}).get(CALLER_KEY)
        if not isinstance(caller, Caller):
            raise RuntimeError("a tool call reached the server without an authenticated caller")
        return memory.scoped(user=caller.user, agent=agent)

    return memory_of


def create_http_app(
    memory: Memory,
    settings: McpSettings,
    *,
    tokens: TokenFile,
    auth_required: bool,
    warm_up: WarmUp | None = None,
) -> ASGIApp:
    """The streamable-HTTP application at :data:`MCP_PATH`, with authentication.

    Args:
        memory: the memory to serve (any scope: each call is re-scoped to its caller).
        settings: host and allowed hosts (DNS-rebinding protection), limits,
            user, agent, the sessions one token may hold.
        tokens: the tokens file.
        auth_required: whether every request needs a token even while
            tokens are not in use (the server listens beyond loopback).
        warm_up: started once the first client's session is ready.
    """
    server = create_mcp_server(
        memory,
        memory_of=request_memory(memory, settings.agent),
        limits=settings.tools,
        warm_up=warm_up,
    )
    body_limit = settings.server.limits.max_body_bytes
    app: ASGIApp = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        host=settings.server.host,
        max_request_body_size=body_limit,
        # Host and Origin are checked outside, by the rule `deermem serve` applies too
        # (the SDK's would refuse the names given with --allowed-host).
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    app = SessionLimitMiddleware(
        app,
        limit=settings.max_sessions_per_token,
        sessions=open_sessions(server.session_manager),
    )
    app = McpAuthMiddleware(
        app, tokens=tokens, auth_required=auth_required, user=settings.user, clock=memory.now
    )
    app = BodyLimitMiddleware(app, limit=body_limit)
    app = HostGuardMiddleware(app, settings.server.host_rule())
    return RequestIdMiddleware(app)


# --- running it (`deermem mcp`) ---------------------------------------------------------------


def configure_logging(level: str) -> None:
    """All logging to standard error, one format, request ids (``-`` over stdio).

    The root logger gets the handler too (at ``warning``), so the SDK's own
    loggers never fall back to a handler of their choosing.
    """
    config: dict[str, Any] = log_config(level)
    config["root"] = {"handlers": ["stderr"], "level": "WARNING"}
    logging.config.dictConfig(config)


def serve(settings: McpSettings) -> None:
    """Run the MCP server until the client disconnects (stdio) or it is interrupted (HTTP).

    Raises:
        InsecureBindError: HTTP on a non-loopback host and no token.
        TokenFileError: the tokens file cannot be read (HTTP).
        ConfigError: the configuration is invalid.
        UnsafeIdentifierError: an unusable ``--user`` or ``--agent``, or
            (stdio) no ``--user`` while ``strict_user_scope`` is on.
        ListenError: the port is in use, or the address cannot be bound (HTTP).
    """
    server_settings = settings.server
    config = server_settings.load_config()
    tokens = check_startup(server_settings) if settings.transport == "http" else None
    if tokens is None:  # stdio: the process serves one scope
        memory = Memory.open(server_settings.root, config, user=settings.user, agent=settings.agent)
    else:
        # Each HTTP call is re-scoped to its caller (--user, or the token's user), so the
        # server's memory has no scope of its own; a bad --user or --agent still stops start-up.
        Scope.of(settings.user, settings.agent)
        check_listen(server_settings.host, server_settings.port)
        memory = Memory.open_unscoped(server_settings.root, config)
    configure_logging(server_settings.log_level)  # once nothing can refuse to start
    warm_up = WarmUp(memory)
    try:
        if tokens is None:
            tools = create_mcp_server(memory, limits=settings.tools, warm_up=warm_up)
            anyio.run(run_stdio, tools)  # the SDK's runner, answering what it cannot read
            return
        app = create_http_app(
            memory,
            settings,
            tokens=tokens,
            auth_required=not is_loopback(server_settings.host) or tokens.configured(),
            warm_up=warm_up,
        )
        server = uvicorn.Server(
            uvicorn.Config(
                app,
                host=server_settings.host,
                port=server_settings.port,
                http=ServerHTTPProtocol,  # Nagle off, a deadline for request headers
                log_config=None,  # configured above
                log_level=server_settings.log_level,
                access_log=False,  # its line holds the raw path; RequestIdMiddleware writes one
                server_header=False,
                proxy_headers=False,
            )
        )
        started(server.run, server_settings.host, server_settings.port)
    finally:
        try:
            warm_up.join()
            memory.close()
        finally:
            close_store(memory.store)
