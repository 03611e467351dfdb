"""``deermem serve``: check the settings, then hand the application to uvicorn.

The checks that matter run before a socket is opened
(:func:`~deermem.service.settings.check_startup`,
:func:`~deermem.service.settings.check_store`). uvicorn starts each worker as
a fresh process that imports the application factory, so the settings
travel in one environment variable. uvicorn's own access log is off,
because its line holds the raw path and query (user ids, search text);
:class:`~deermem.service.middleware.RequestIdMiddleware` writes a route
template instead.

Both servers (``deermem serve`` and ``deermem mcp --transport http``) run
uvicorn's own HTTP protocol with two changes (:class:`ServerHTTPProtocol`):

**Nagle's algorithm off.** With more than one worker, uvicorn binds the
listening socket itself and hands it to the workers, and that socket does
not say it is TCP; the event loop turns Nagle's algorithm off only on
connections it can tell are TCP, so every connection those workers accepted
kept it on (uvicorn issue #3149). uvicorn writes a response's head and body
separately, so on a keep-alive connection the body then waited for the
client's delayed acknowledgement of the head: a fixed stall on every
request after a connection's first, whatever the request did. Each accepted
connection is set as the event loop sets the TCP connections it recognises.

**A deadline for a request's headers.** uvicorn waits for headers as long
as a client cares to send them: its keep-alive timeout starts only after an
answer and stops at the first byte, so a client that opens connections and
trickles a header byte now and then (slowloris) holds each of them for
ever, until the workers run out. Here a connection must deliver a request's
complete headers within ``header_timeout_seconds``
(:class:`~deermem.service.settings.ServerLimits`) of opening, or of the
previous answer on a kept-alive connection; otherwise it is closed. The
clock stops when the application is called, so a slow body or a long
answer (``?wait=true``) is not cut off; bounding those, and the number of
connections one client may open, is a reverse proxy's part (docs/server.md).

**A TLS proxy on the same machine is believed.** ``deermem serve`` has no TLS of its
own; docs/server.md puts a reverse proxy that ends TLS in front of any server beyond one
machine. uvicorn takes ``X-Forwarded-Proto`` (and ``X-Forwarded-For``) from a peer in
:data:`TRUSTED_PROXIES` — loopback only — so a request that came over TLS reads as
``https``: the inspector's cookies are ``Secure`` and redirects keep the scheme. The same
headers from any other peer are ignored.

The deadline comes from the settings ``deermem serve`` leaves for its
workers (:data:`~deermem.service.settings.SETTINGS_VARIABLE`); a process
without them (``deermem mcp``) uses the default.
"""

from __future__ import annotations

import asyncio
import logging
import logging.config
import os
import socket
from collections.abc import Callable
from typing import Any, Final

import uvicorn
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.config import STARTUP_FAILURE
from uvicorn.protocols.http.auto import AutoHTTPProtocol

from deermem.service.errors import ListenError
from deermem.service.settings import (
    SETTINGS_VARIABLE,
    ServerSettings,
    check_listen,
    check_startup,
    check_store,
    log_config,
    startup_line,
)

__all__ = ["TRUSTED_PROXIES", "ServerHTTPProtocol", "serve", "started"]

_FACTORY: Final = "deermem.service.http.app:app_from_environment"
# The peers whose forwarding headers are believed: a reverse proxy on this machine.
TRUSTED_PROXIES: Final = "127.0.0.1,::1"


# AutoHTTPProtocol is the class uvicorn's default `--http auto` picks (httptools when
# installed, else h11); mypy sees only its declared type, type[asyncio.Protocol]. Both
# have the attributes used here: app, loop, transport and on_response_complete.
class ServerHTTPProtocol(AutoHTTPProtocol):  # type: ignore[misc,valid-type]
    """uvicorn's HTTP protocol with ``TCP_NODELAY`` on every TCP connection it
    serves, and a deadline for each request's headers."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_timeout = ServerSettings.from_environment().limits.header_timeout_seconds
        self._header_deadline: asyncio.TimerHandle | None = None
        served: ASGIApp = self.app  # type: ignore[has-type]  # set by uvicorn's __init__

        async def app(scope: Scope, receive: Receive, send: Send) -> None:
            # The headers are in: the request takes as long as it takes.
            self._stop_header_clock()
            await served(scope, receive, send)

        self.app = app

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        connection = transport.get_extra_info("socket")
        if connection is not None and connection.family in (socket.AF_INET, socket.AF_INET6):
            connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().connection_made(transport)
        self._start_header_clock()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._start_header_clock()  # the next request's headers get the same time

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_header_clock()
        super().connection_lost(exc)

    def _start_header_clock(self) -> None:
        self._stop_header_clock()
        if not self.transport.is_closing():
            self._header_deadline = self.loop.call_later(
                self._header_timeout, self._headers_too_slow
            )

    def _stop_header_clock(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _headers_too_slow(self) -> None:
        self._header_deadline = None
        if not self.transport.is_closing():
            self.transport.close()


def serve(settings: ServerSettings) -> None:
    """Run the server until interrupted (blocks).

    Raises:
        InsecureBindError / TokenFileError / ConfigError: see :func:`check_startup`.
        PatternError / PromptTemplateError: ``patterns_dir`` or ``prompts_dir``
            is missing or holds an invalid file (every conversation job would fail
            on it: the server learns, the MCP server does not).
        DatabaseError / DatabaseSchemaError: see :func:`check_store`.
        ListenError: the port is in use, or the address cannot be bound.
    """
    # Loaded here, not with the module: the MCP server imports this module's protocol,
    # and a stdio MCP server never loads the learning pipeline (tests/mcp/test_stdio.py).
    from deermem.learning import check_override_files

    check_startup(settings)
    config = settings.load_config()
    check_override_files(config)
    check_store(settings, config)
    check_listen(settings.host, settings.port)
    # The operator sees what is served (no secret), in the server log's format; uvicorn
    # applies the same configuration again as it starts.
    logging.config.dictConfig(log_config(settings.log_level))
    logging.getLogger("deermem.service.http").info("%s", startup_line(settings, config))
    # Workers are fresh processes: they read the settings from the environment.
    os.environ[SETTINGS_VARIABLE] = settings.to_json()
    started(
        lambda: uvicorn.run(
            _FACTORY,
            factory=True,
            host=settings.host,
            port=settings.port,
            workers=settings.workers,
            http=ServerHTTPProtocol,
            log_config=log_config(settings.log_level),
            log_level=settings.log_level,
            access_log=False,
            server_header=False,
            proxy_headers=True,
            forwarded_allow_ips=TRUSTED_PROXIES,
        ),
        settings.host,
        settings.port,
    )


def started(run: Callable[[], object], host: str, port: int) -> None:
    """Run uvicorn (``run``); a start-up it gave up on is a :class:`ListenError`, not exit 3.

    :func:`check_listen` catches a port in use before the start; this catches the
    same failure should another process take the port in between.
    """
    try:
        run()
    except SystemExit as stop:
        if stop.code == STARTUP_FAILURE:
            raise ListenError(
                host, port, "could not be listened on (see the lines above)"
            ) from None
        raise
