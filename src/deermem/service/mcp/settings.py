"""What ``deermem mcp`` was asked for: transport, scope, and the bounds of tool inputs.

The HTTP side — address, store, configuration, state directory, tokens
file, body size, log level — is the HTTP API's own
:class:`~deermem.service.http.settings.ServerSettings`, so both servers find the
same tokens file and refuse the same unsafe binds.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Final, Literal

from deermem.service.http.settings import ServerSettings

__all__ = ["DEFAULT_PORT", "McpSettings", "ToolLimits", "Transport"]

Transport = Literal["stdio", "http"]
DEFAULT_PORT: Final = 8766  # beside `deermem serve`'s 8765, so both can run at once


@dataclass(frozen=True, slots=True)
class ToolLimits:
    """Bounds on tool arguments, published in each tool's input schema.

    Attributes:
        max_content_chars: the longest fact ``memory_add`` and
            ``memory_update`` take. A fact is a sentence or two; a model
            that tries to store a document is told so instead of filling
            the library (and every later prompt) with it.
        max_query_chars: the longest search query.
        max_top_k: the most results one search may ask for.
        max_prompt_tokens: the largest ``max_tokens`` for ``memory_context``
            (the range ``max_injection_tokens`` accepts in the configuration).
    """

    max_content_chars: int = 2000
    max_query_chars: int = 1000
    max_top_k: int = 50
    max_prompt_tokens: int = 8000

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(
                    f"tool limit {name} must be a positive whole number, got {value!r}"
                )


@dataclass(frozen=True, slots=True)
class McpSettings:
    """Everything ``deermem mcp`` takes.

    Attributes:
        transport: ``stdio`` (the client starts the process) or ``http``
            (streamable HTTP at ``/mcp``).
        server: address, store, configuration, tokens and log level, as
            for ``deermem serve`` (its ``workers`` is not used: MCP sessions
            live in one process).
        user: the user whose memory the server serves (``--user``); over
            HTTP without it, each token's own user.
        agent: the agent whose memory it serves (``--agent``).
        tools: bounds on tool arguments.
        max_sessions_per_token: the MCP sessions one token may hold open at
            once over HTTP (429 ``too-many-sessions`` beyond). A client needs
            one per connection; a session ends when the client ends it or
            after 30 idle minutes, so the bound leaves room for clients that
            reconnect without ending theirs.
    """

    transport: Transport = "stdio"
    server: ServerSettings = field(default_factory=lambda: ServerSettings(port=DEFAULT_PORT))
    user: str | None = None
    agent: str | None = None
    tools: ToolLimits = field(default_factory=ToolLimits)
    max_sessions_per_token: int = 32

    def __post_init__(self) -> None:
        limit: object = self.max_sessions_per_token  # a caller's value, whatever its type
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(
                f"max_sessions_per_token must be a positive whole number, got {limit!r}"
            )
