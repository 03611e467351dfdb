"""``deermem mcp``: check the settings, open the memory, serve over stdio or HTTP.

Over stdio, standard output belongs to the protocol: every log line goes
to standard error (the client's log), in the HTTP server's format. Over HTTP
the start-up check is the HTTP API's own
(:func:`~deermem.service.settings.check_startup`): listening beyond loopback while
tokens are not in use (no tokens file) refuses to start, and a damaged tokens file
stops start-up instead of the first request; the server runs uvicorn with the
HTTP API's protocol (:class:`~deermem.service.http.run.ServerHTTPProtocol`:
Nagle off, a deadline for request headers).
"""

from __future__ import annotations

import logging.config
from typing import Any

import uvicorn

from deermem.memory import Memory
from deermem.service.http.run import ServerHTTPProtocol
from deermem.service.mcp.server import create_http_app, create_mcp_server
from deermem.service.settings import (
    McpSettings,
    check_startup,
    close_store,
    is_loopback,
    log_config,
)
from deermem.store import Scope

__all__ = ["configure_logging", "serve"]


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
        memory = Memory.open_unscoped(server_settings.root, config)
    configure_logging(server_settings.log_level)  # once nothing can refuse to start
    try:
        if tokens is None:
            create_mcp_server(memory, limits=settings.tools).run("stdio")
            return
        app = create_http_app(
            memory,
            settings,
            tokens=tokens,
            auth_required=not is_loopback(server_settings.host) or tokens.configured(),
        )
        uvicorn.Server(
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
        ).run()
    finally:
        try:
            memory.close()
        finally:
            close_store(memory.store)
