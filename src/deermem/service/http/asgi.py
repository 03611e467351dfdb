"""The ASGI types the server's plain middleware is written against.

Spelled out here (as the ASGI specification defines them) so the middleware
needs no web framework, and the MCP server's HTTP app can be wrapped by it
too.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, TypeAlias

__all__ = ["ASGIApp", "Message", "Receive", "Scope", "Send", "header"]

Scope: TypeAlias = MutableMapping[str, Any]
Message: TypeAlias = MutableMapping[str, Any]
Receive: TypeAlias = Callable[[], Awaitable[Message]]
Send: TypeAlias = Callable[[Message], Awaitable[None]]
ASGIApp: TypeAlias = Callable[[Scope, Receive, Send], Awaitable[None]]


def header(scope: Scope, name: bytes) -> str | None:
    """The first value of a request header (``name`` in lower case, as ASGI gives
    names), ``None`` when the request has none."""
    for key, value in scope.get("headers", ()):
        if key == name:
            return str(value.decode("latin-1"))
    return None
