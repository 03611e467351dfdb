"""A real uvicorn server on 127.0.0.1 (a free port), driven by httpx, on either store.

``store`` is the store the server runs on (:class:`~tests.served_store.ServedStore`):
Markdown unless a test asks for both with ``on_both_stores``. The
behaviour the API promises does not depend on the store — endpoints, what
the capacity gate did, isolation, conversations and jobs — so those tests
run on both; checks of the HTTP layer alone (limits, request ids, tokens)
run once.
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
from fastapi import FastAPI

from deermem import Memory
from deermem.service.http.app import create_app
from deermem.service.http.run import TRUSTED_PROXIES
from deermem.service.settings import ServerLimits, ServerSettings
from deermem.service.tokens import TokenFile
from deermem.testing import ScriptedChatServer

from ..served_store import ServedStore
from ..wire_support import model_settings


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class LiveServer:
    """One running server; ``client(token)`` talks to it."""

    url: str
    store: ServedStore
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
        self.store.close()


def start_server(
    store: ServedStore,
    *,
    limits: ServerLimits | None = None,
    tokens: dict[str, Any] | None = None,
    **config: Any,
) -> tuple[LiveServer, dict[str, str]]:
    """Start a server; ``tokens`` maps a name to ``TokenFile.add`` arguments (made first)."""
    settings = ServerSettings(
        port=free_port(),
        state_dir=str(store.state_dir),
        limits=limits or ServerLimits(),
    )
    memory = store.unscoped(store.config(**config))
    token_file = TokenFile(settings.tokens_path(memory.config))
    issued = {
        name: token_file.add(now=memory.now(), **grants).token
        for name, grants in (tokens or {}).items()
    }
    server, thread = run_in_thread(create_app(settings, memory=memory), settings.port)
    live = LiveServer(
        f"http://127.0.0.1:{settings.port}", store, memory, token_file, server, thread
    )
    return live, issued


def run_in_thread(app: FastAPI, port: int) -> tuple[uvicorn.Server, threading.Thread]:
    """Serve ``app`` on 127.0.0.1:``port`` from a thread; stop it with ``should_exit``."""
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host="127.0.0.1",
            port=port,
            log_config=None,
            access_log=False,
            proxy_headers=True,  # as `deermem serve` runs it (deermem.service.http.run)
            forwarded_allow_ips=TRUSTED_PROXIES,
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the server did not start")
        time.sleep(0.02)
    return server, thread


@pytest.fixture
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ServedStore]:
    with ServedStore.of_fixture(request, tmp_path) as served:
        yield served


@pytest.fixture
def chat() -> Iterator[ScriptedChatServer]:
    with ScriptedChatServer() as server:
        yield server


@pytest.fixture
def live(store: ServedStore) -> Iterator[LiveServer]:
    """An open loopback server (no tokens), cap 10."""
    server, _ = start_server(store, max_facts=10)
    yield server
    server.stop()


@pytest.fixture
def learning(store: ServedStore, chat: ScriptedChatServer) -> Iterator[LiveServer]:
    """A server whose extraction model is the scripted chat server."""
    server, _ = start_server(
        store,
        model=model_settings(chat, max_retries=0),
        max_facts=10,
        fact_confidence_threshold=0.5,
    )
    yield server
    server.stop()
