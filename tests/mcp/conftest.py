"""Real ``deermem mcp`` processes and MCP client sessions against them, on either store.

:func:`stdio_session` starts ``python -m deermem ... mcp`` as the client's
child process (as Claude Desktop does); :class:`HttpServer` starts
``deermem mcp --transport http`` on a free 127.0.0.1 port and
:func:`http_session` connects to it with a bearer token. Each server's
standard error goes to a file, so tests can read its log. The store is a
:class:`~tests.served_store.ServedStore` — Markdown unless a test asks for
both with ``on_both_stores`` — that the process reaches as a user's would:
``--root`` for a directory, ``DEERMEM_DATABASE_URL`` and ``--state-dir`` for
a database.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult

from ..served_store import ServedStore

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


@pytest.fixture
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ServedStore]:
    with ServedStore.of_fixture(request, tmp_path) as served:
        yield served


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def deermem_args(store: ServedStore, *args: str) -> list[str]:
    return ["-m", "deermem", *store.global_args(), *args]


@asynccontextmanager
async def stdio_session(
    store: ServedStore, *args: str, log: Path, mode: str = "auto"
) -> AsyncIterator[Client]:
    """A client session with ``deermem [STORE] ARGS...`` (ending in ``mcp``) over stdio.

    ``mode="legacy"`` speaks the initialize handshake of the 2025 protocol
    versions, as the chat applications of today do; ``auto`` negotiates the newest.
    """
    params = StdioServerParameters(
        command=sys.executable, args=deermem_args(store, *args), env=store.environ({})
    )
    with log.open("w") as stderr:
        async with Client(stdio_client(params, errlog=stderr), mode=mode) as client:
            yield client


@dataclass
class HttpServer:
    """A running ``deermem mcp --transport http`` process."""

    url: str
    store: ServedStore
    log: Path
    process: subprocess.Popen[bytes]

    def log_text(self) -> str:
        return self.log.read_text(encoding="utf-8")


@contextmanager
def http_server(
    store: ServedStore, *args: str, log: Path, mcp_args: tuple[str, ...] = ()
) -> Iterator[HttpServer]:
    """Start ``deermem [STORE] ARGS... mcp --transport http`` and wait until it listens."""
    port = free_port()
    command = [
        sys.executable,
        *deermem_args(store, *args),
        "mcp",
        "--transport",
        "http",
        "--port",
        str(port),
        *store.server_args(),
        *mcp_args,
    ]
    with log.open("wb") as stderr:
        process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=stderr, env=store.environ(os.environ)
        )
    server = HttpServer(f"http://127.0.0.1:{port}/mcp", store, log, process)
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
