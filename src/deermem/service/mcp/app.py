"""Build the MCP server over one memory, and its streamable-HTTP application.

:func:`create_mcp_server` is the transport-free part: an
:class:`~mcp.server.mcpserver.MCPServer` named ``deermem`` with the memory
tools. :func:`create_http_app` puts it behind the HTTP API's own layers,
from the outside in: :class:`~deermem.service.http.request_ids.RequestIdMiddleware`
(request ids, one access line, the last word on a crash),
:class:`~deermem.service.http.limits.HostGuardMiddleware` (421/403: the HTTP API's
own ``Host`` and ``Origin`` rule, in place of the SDK's),
:class:`~deermem.service.http.limits.BodyLimitMiddleware` (413),
:class:`~deermem.service.mcp.auth.McpAuthMiddleware` (401/403, the caller's scope) and
:class:`~deermem.service.mcp.auth.SessionLimitMiddleware` (429: the sessions of one token).
"""

from __future__ import annotations

from typing import Any, Final

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.transport_security import TransportSecuritySettings

from deermem import __version__
from deermem.memory import Memory
from deermem.service.http.asgi import ASGIApp
from deermem.service.http.limits import BodyLimitMiddleware, HostGuardMiddleware
from deermem.service.http.request_ids import RequestIdMiddleware
from deermem.service.http.tokens import TokenFile
from deermem.service.mcp.auth import (
    CALLER_KEY,
    Caller,
    McpAuthMiddleware,
    SessionLimitMiddleware,
    open_sessions,
)
from deermem.service.mcp.settings import McpSettings, ToolLimits
from deermem.service.mcp.tools import MemoryOf, memory_tools

__all__ = ["INSTRUCTIONS", "MCP_PATH", "create_http_app", "create_mcp_server", "request_memory"]

MCP_PATH: Final = "/mcp"

INSTRUCTIONS: Final = (
    "deermem is this agent's long-term memory of the user. Call memory_context at the start "
    "of a conversation and read its text. When the user states something lasting about "
    "themselves or their work (a preference, a goal, a decision) call memory_add; when they "
    "correct you, store the correction with category `correction`. Use memory_search to look "
    "something up, memory_update or memory_forget when something changed or was withdrawn, "
    "memory_why to explain what is remembered and why, memory_restore to bring back a "
    "forgotten or evicted fact. Memory has a cap: the answer of every write says what was kept."
)


def create_mcp_server(
    memory: Memory, *, memory_of: MemoryOf | None = None, limits: ToolLimits | None = None
) -> MCPServer:
    """The MCP server with the memory tools.

    Args:
        memory: the memory to serve; its configuration decides what the
            tool descriptions and annotations say (see :mod:`deermem.service.mcp.tools`).
        memory_of: the memory of one call; by default ``memory`` itself (the
            stdio server's fixed scope).
        limits: bounds on tool arguments.
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
    )


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
    memory: Memory, settings: McpSettings, *, tokens: TokenFile, auth_required: bool
) -> ASGIApp:
    """The streamable-HTTP application at :data:`MCP_PATH`, with authentication.

    Args:
        memory: the memory to serve (any scope: each call is re-scoped to its caller).
        settings: host and allowed hosts (DNS-rebinding protection), limits,
            user, agent, the sessions one token may hold.
        tokens: the tokens file.
        auth_required: whether every request needs a token even while
            tokens are not in use (the server listens beyond loopback).
    """
    server = create_mcp_server(
        memory, memory_of=request_memory(memory, settings.agent), limits=settings.tools
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
