"""A real uvicorn server on 127.0.0.1 (a free port), driven by httpx.

``store_kind`` names the store the server runs on; every server test runs
once per kind. Only the Markdown store exists today — a new store adds its
name to ``STORE_KINDS`` and a branch to :func:`open_store_memory`.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from deermem import Memory, MemoryConfig
from deermem.server.app import create_app
from deermem.server.limits import ServerLimits
from deermem.server.settings import ServerSettings
from deermem.server.tokens import TokenFile
from deermem.testing import ScriptedChatServer

from ..wire_support import model_settings

STORE_KINDS = ["markdown"]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def open_store_memory(kind: str, root: Path, config: MemoryConfig) -> Memory:
    if kind == "markdown":
        return Memory.open(root / "store", config)
    raise AssertionError(f"unknown store kind {kind!r}")


@dataclass
class LiveServer:
    """One running server; ``client(token)`` talks to it."""

    url: str
    root: Path
    memory: Memory
    tokens: TokenFile
    _server: uvicorn.Server = field(repr=False)
    _thread: threading.Thread = field(repr=False)
    _clients: list[httpx.Client] = field(default_factory=list, repr=False)

    def client(self, token: str | None = None) -> httpx.Client:
        headers = {} if token is None else {"Authorization": f"Bearer {token}"}
        client = httpx.Client(base_url=self.url, headers=headers, timeout=30)
        self._clients.append(client)
        return client

    def stop(self) -> None:
        for client in self._clients:
            client.close()
        self._server.should_exit = True
        self._thread.join(timeout=30)


def start_server(
    kind: str,
    root: Path,
    *,
    limits: ServerLimits | None = None,
    tokens: dict[str, Any] | None = None,
    **config: Any,
) -> tuple[LiveServer, dict[str, str]]:
    """Start a server; ``tokens`` maps a name to ``TokenFile.add`` arguments (made first)."""
    settings = ServerSettings(
        port=free_port(),
        state_dir=str(root / "state"),
        limits=limits or ServerLimits(),
    )
    memory = open_store_memory(kind, root, MemoryConfig(**config))
    token_file = TokenFile(settings.tokens_path(memory.config))
    issued = {
        name: token_file.add(now=memory.now(), **grants).token
        for name, grants in (tokens or {}).items()
    }
    app = create_app(settings, memory=memory)
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=settings.port, log_config=None, access_log=False)
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the server did not start")
        time.sleep(0.02)
    live = LiveServer(f"http://127.0.0.1:{settings.port}", root, memory, token_file, server, thread)
    return live, issued


@pytest.fixture(params=STORE_KINDS)
def store_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def chat() -> Iterator[ScriptedChatServer]:
    with ScriptedChatServer() as server:
        yield server


@pytest.fixture
def live(store_kind: str, tmp_path: Path) -> Iterator[LiveServer]:
    """An open loopback server (no tokens), cap 10."""
    server, _ = start_server(store_kind, tmp_path, max_facts=10)
    yield server
    server.stop()


@pytest.fixture
def learning(store_kind: str, tmp_path: Path, chat: ScriptedChatServer) -> Iterator[LiveServer]:
    """A server whose extraction model is the scripted chat server."""
    server, _ = start_server(
        store_kind,
        tmp_path,
        model=model_settings(chat, max_retries=0),
        max_facts=10,
        fact_confidence_threshold=0.5,
    )
    yield server
    server.stop()
