"""The errors of the HTTP and MCP servers: one branch of deermem's exception tree.

Every refusal of ``deermem serve`` and ``deermem mcp`` to start or to serve as
configured is a :class:`ServerError`, itself a :class:`~deermem.DeerMemError`.
Errors that stand for bad input also derive from :class:`ValueError` (or
:class:`KeyError`)::

    DeerMemError
    └── ServerError                 the HTTP or MCP server cannot start or serve as configured
        ├── TokenFileError          (ValueError) the tokens file is unreadable or malformed
        ├── UnknownTokenError       (KeyError)   no token with that id in the tokens file
        ├── InsecureBindError                    a non-loopback address without tokens
        └── ListenError                          the address cannot be listened on (in use ...)

Their messages never hold a token or its digest.
"""

from __future__ import annotations

from deermem.errors import DeerMemError

__all__ = [
    "InsecureBindError",
    "ListenError",
    "ServerError",
    "TokenFileError",
    "UnknownTokenError",
]


class ServerError(DeerMemError):
    """The HTTP server cannot start, or cannot serve, as configured."""


class TokenFileError(ServerError, ValueError):
    """The tokens file cannot be read, or an entry in it is malformed.

    The server refuses to start rather than treat a damaged file as "no
    tokens", which would open every memory to anyone on the network.

    Attributes:
        path: the tokens file.
        problem: what is wrong, for people (never a token or a digest).
    """

    def __init__(self, path: object, problem: str) -> None:
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


class UnknownTokenError(ServerError, KeyError):
    """No token with this id is in the tokens file.

    Attributes:
        token_id: the id asked for.
        path: the tokens file.
    """

    def __init__(self, token_id: str, path: object) -> None:
        self.token_id = token_id
        self.path = str(path)
        super().__init__(token_id)

    def __str__(self) -> str:
        return f"{self.path}: no token with id {self.token_id!r} (see `deermem token list`)"


class InsecureBindError(ServerError):
    """The server was asked to listen beyond loopback with no token configured.

    Attributes:
        host: the address it was asked to bind.
    """

    def __init__(self, host: str) -> None:
        self.host = host
        super().__init__(
            f"refusing to listen on {host!r} without authentication: anyone who can reach "
            "it could read every memory. Add a token first (`deermem token add --user NAME`) "
            "or bind to 127.0.0.1"
        )


class ListenError(ServerError):
    """The server cannot listen on its address: the port is in use, or not ours to take.

    Attributes:
        host: the address it was asked to bind.
        port: the port.
        problem: what the system said, for people.
    """

    def __init__(self, host: str, port: int, problem: str) -> None:
        self.host = host
        self.port = port
        self.problem = problem
        shown = f"[{host}]" if ":" in host else host
        super().__init__(f"{shown}:{port} {problem}")
