"""The seven memory tools: each parses, calls one ``Memory`` method, renders a view.

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
"""

# No `from __future__ import annotations`: the SDK reads the tool signatures at
# registration, and their annotations name bounds computed inside the factory.

import functools
import logging
import time
import traceback
from collections.abc import Callable
from typing import Annotated, Any, ParamSpec, TypeVar

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase
from mcp.types import ToolAnnotations
from pydantic import ConfigDict, Field

from deermem.errors import (
    CorruptMemoryFile,
    DeerMemError,
    DuplicateFactError,
    FactNotFoundError,
)
from deermem.memory import Memory
from deermem.model import CORE_CATEGORIES
from deermem.service.http.problems import problem_for
from deermem.service.mcp.settings import ToolLimits
from deermem.service.mcp.views import (
    AddResult,
    ContextResult,
    FactView,
    ForgetResult,
    ManifestView,
    RestoreView,
    SearchHitView,
    SearchResults,
    WhyResult,
    receipts_of,
)

__all__ = ["TOOL_NAMES", "MemoryOf", "memory_tools"]

MemoryOf = Callable[[Context[Any, Any]], Memory]
"""Gives the memory a tool call works on, from the call's context."""

TOOL_NAMES = (
    "memory_search",
    "memory_context",
    "memory_add",
    "memory_update",
    "memory_forget",
    "memory_restore",
    "memory_why",
)

_log = logging.getLogger("deermem.service.mcp")
_P = ParamSpec("_P")
_R = TypeVar("_R")

FactId = Annotated[
    str, Field(min_length=1, max_length=128, description="A fact id, e.g. `fact_1a2b3c4d`.")
]
Revision = Annotated[
    int | None,
    Field(
        ge=1,
        description="Refuse the change if the fact's revision is no longer this one "
        "(someone changed it since you read it).",
    ),
]
Category = Annotated[
    str,
    Field(
        min_length=1,
        max_length=64,
        description="One of: " + ", ".join(CORE_CATEGORIES) + ". Another label is kept "
        "as an `other` fact with that label. Use `correction` when the user corrects you: "
        "corrections go first into the prompt, and the hybrid-v1 policy reserves room for "
        "them when memory is full.",
    ),
]
Confidence = Annotated[
    float,
    Field(
        ge=0.0,
        le=1.0,
        allow_inf_nan=False,
        strict=True,  # a number, as over HTTP: never one made from "0.5" or true
        description="How sure the fact is, 0 to 1 (e.g. 0.9 for what the user said "
        "explicitly). The capacity policy keeps surer facts longer.",
    ),
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
            "(full-text search, then substrings)."
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
            Field(min_length=1, max_length=limits.max_query_chars, description="What to look for."),
        ],
        top_k: Annotated[
            int, Field(ge=1, le=limits.max_top_k, description="At most this many results.")
        ] = 5,
        category: Annotated[
            str | None, Field(min_length=1, max_length=64, description="Only this category.")
        ] = None,
    ) -> SearchResults:
        hits = memory_of(ctx).search(query, top_k=top_k, category=category)
        return SearchResults(results=[SearchHitView.of(hit) for hit in hits])

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
                description="Token budget for the block (default: the server's "
                "max_injection_tokens).",
            ),
        ] = None,
    ) -> ContextResult:
        injection = memory_of(ctx).injection(max_tokens=max_tokens)
        return ContextResult(text=injection.block, manifest=ManifestView.of(injection.manifest))

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
        content: Annotated[
            str,
            Field(
                min_length=1,
                max_length=limits.max_content_chars,
                description="The fact, as a short statement.",
            ),
        ],
        category: Category = "context",
        confidence: Confidence = 0.5,
        topics: Annotated[
            tuple[Annotated[str, Field(min_length=1, max_length=64)], ...],
            Field(max_length=32, description="Keywords for search."),
        ] = (),
    ) -> AddResult:
        memory = memory_of(ctx)
        try:
            result = memory.create_fact(
                content, category=category, confidence=confidence, topics=topics
            )
        except DuplicateFactError as duplicate:
            return AddResult(
                outcome="duplicate", factId=duplicate.existing_id, evicted=[], receipts=[]
            )
        return AddResult(
            outcome="stored" if result.kept else "evicted",
            factId=result.fact.id,
            evicted=list(result.evicted),
            receipts=receipts_of(result.receipts),
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
        content: Annotated[
            str | None,
            Field(
                min_length=1,
                max_length=limits.max_content_chars,
                description="The new statement.",
            ),
        ] = None,
        category: Category | None = None,
        confidence: Confidence | None = None,
        expected_revision: Revision = None,
    ) -> FactView:
        if content is None and category is None and confidence is None:
            raise ToolError("give at least one of content, category, confidence")
        fact = memory_of(ctx).update_fact(
            fact_id,
            content=content,
            category=category,
            confidence=confidence,
            expected_revision=expected_revision,
        )
        return FactView.of(fact)

    @tool(
        name="memory_forget",
        title="Forget a fact",
        description=f"Remove a stored fact {gone_to}.",
        annotations=_writes(idempotent=True),
    )
    @_contained("memory_forget")
    def memory_forget(
        ctx: Context[Any, Any], fact_id: FactId, expected_revision: Revision = None
    ) -> ForgetResult:
        memory = memory_of(ctx)
        memory.delete_fact(fact_id, expected_revision=expected_revision)
        return ForgetResult(factId=fact_id, archived=archives)

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
    def memory_restore(ctx: Context[Any, Any], fact_id: FactId) -> RestoreView:
        return RestoreView.of(memory_of(ctx).restore(fact_id))

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
    def memory_why(ctx: Context[Any, Any], fact_id: FactId) -> WhyResult:
        return WhyResult.of(memory_of(ctx).why(fact_id))

    return tools


def _closed(tool: Tool) -> Tool:
    """``tool`` with arguments it does not name refused, in its schema and in its validation."""
    named = tool.fn_metadata.arg_model
    closed = type(
        named.__name__,
        (named,),
        {"__module__": named.__module__, "model_config": ConfigDict(extra="forbid")},
    )
    assert issubclass(closed, ArgModelBase)
    tool.fn_metadata.arg_model = closed
    tool.parameters = closed.model_json_schema(by_alias=True)
    return tool


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
    if problem.status >= 500:
        where = f" ({error.path}: {error.problem})" if isinstance(error, CorruptMemoryFile) else ""
        _log.error("tool %s: %s: %s%s", tool, problem.slug, type(error).__name__, where)
    fields = ", ".join(f"{key}={value!r}" for key, value in problem.extensions.items())
    return f"{problem.title}: {problem.detail}" + (f" ({fields})" if fields else "")
