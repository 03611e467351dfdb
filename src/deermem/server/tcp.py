"""The HTTP protocol ``deermem serve`` runs: uvicorn's own, with Nagle's algorithm off.

With more than one worker, uvicorn binds the listening socket itself and
hands it to the workers, and that socket does not say it is TCP; the event
loop turns Nagle's algorithm off only on connections it can tell are TCP,
so every connection those workers accepted kept it on (uvicorn issue
#3149). uvicorn writes a response's head and body separately, so on a
keep-alive connection the body then waited for the client's delayed
acknowledgement of the head: a fixed stall on every request after a
connection's first, whatever the request did. Each accepted connection is
set as the event loop sets the TCP connections it recognises.

Imported by the worker processes only (uvicorn is the ``server`` extra).
"""

from __future__ import annotations

import asyncio
import socket

from uvicorn.protocols.http.auto import AutoHTTPProtocol

__all__ = ["NoDelayHTTPProtocol"]


# AutoHTTPProtocol is the class uvicorn's default `--http auto` picks (httptools when
# installed, else h11); mypy sees only its declared type, type[asyncio.Protocol].
class NoDelayHTTPProtocol(AutoHTTPProtocol):  # type: ignore[misc,valid-type]
    """uvicorn's HTTP protocol with ``TCP_NODELAY`` on every TCP connection it serves."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        connection = transport.get_extra_info("socket")
        if connection is not None and connection.family in (socket.AF_INET, socket.AF_INET6):
            connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().connection_made(transport)
