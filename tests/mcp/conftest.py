"""Real ``deermem mcp`` processes and MCP client sessions against them.

:func:`stdio_session` starts ``python -m deermem ... mcp`` as the client's
child process (as Claude Desktop does); :class:`HttpServer` starts
``deermem mcp --transport http`` on a free 127.0.0.1 port and
:func:`http_session` connects to it with a bearer token. Each server's
standard error goes to a file, so tests can read its log.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult

__all__ = [
    "HttpServer",
    "call",
    "deermem_args",
    "free_port",
    "http_server",
    "http_session",
    "stdio_session",
    "text_of",
]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def deermem_args(root: Path, *args: str) -> list[str]:
    return ["-m", "deermem", "--root", str(root), *args]


@asynccontextmanager
async def stdio_session(
    root: Path, *args: str, log: Path, mode: str = "auto"
) -> AsyncIterator[Client]:
    """A client session with ``deermem --root ROOT ARGS...`` (ending in ``mcp``) over stdio.

    ``mode="legacy"`` speaks the initialize handshake of the 2025 protocol
    versions, as the chat applications of today do; ``auto`` negotiates the newest.
    """
    params = StdioServerParameters(command=sys.executable, args=deermem_args(root, *args))
    with log.open("w") as stderr:
        async with Client(stdio_client(params, errlog=stderr), mode=mode) as client:
            yield client


@dataclass
class HttpServer:
    """A running ``deermem mcp --transport http`` process."""

    url: str
    root: Path
    log: Path
    process: subprocess.Popen[bytes]

    def log_text(self) -> str:
        return self.log.read_text(encoding="utf-8")


@contextmanager
def http_server(
    root: Path, *args: str, log: Path, mcp_args: tuple[str, ...] = ()
) -> Iterator[HttpServer]:
    """Start ``deermem --root ROOT ARGS... mcp --transport http`` and wait until it listens."""
    port = free_port()
    command = [
        sys.executable,
        *deermem_args(root, *args),
        "mcp",
        "--transport",
        "http",
        "--port",
        str(port),
        *mcp_args,
    ]
    with log.open("wb") as stderr:
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=stderr)
    server = HttpServer(f"http://127.0.0.1:{port}/mcp", root, log, process)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"the server did not start:\n{server.log_text()}")
            time.sleep(0.1)
        yield server
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@asynccontextmanager
async def http_session(
    url: str, token: str | None = None, *, mode: str = "auto"
) -> AsyncIterator[Client]:
    """A client session with an HTTP server, sending ``token`` as the bearer token."""
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode) as client,
    ):
        yield client


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    """Call a tool that must succeed; its structured content."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, text_of(result)
    assert result.structured_content is not None
    # The text content is the same value, for clients that read text only.
    assert json.loads(text_of(result)) == result.structured_content
    return dict(result.structured_content)


def text_of(result: CallToolResult) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


def files_under(directory: Path) -> Mapping[str, bytes]:
    """Every file below ``directory`` and its bytes (to prove nothing changed)."""
    return {
        str(path.relative_to(directory)): path.read_bytes()
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    }
