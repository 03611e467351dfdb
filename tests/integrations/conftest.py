"""Fixtures of the integration tests: a scripted model server, closing what a test built,
and no network but 127.0.0.1 (the host packages would phone home otherwise)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest

from deermem.testing import ScriptedChatServer
from tests.integrations.deerflow_support import OPENED


@pytest.fixture
def server() -> Iterator[ScriptedChatServer]:
    with ScriptedChatServer() as running:
        yield running


@pytest.fixture(autouse=True)
def close_backends() -> Iterator[None]:
    """Close every backend a test built (its HTTP client and index connection)."""
    yield
    while OPENED:
        OPENED.pop().close()


_LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Refuse any connection but to 127.0.0.1: a host package reaching out fails the test."""
    connect = socket.socket.connect
    resolve = socket.getaddrinfo

    def guarded_connect(self: socket.socket, address: Any) -> None:
        if self.family in (socket.AF_INET, socket.AF_INET6) and address[0] not in _LOOPBACK:
            raise AssertionError(f"a test tried to reach {address!r}: only 127.0.0.1 is allowed")
        connect(self, address)

    def guarded_resolve(host: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else host
        if name is not None and name not in _LOOPBACK:
            raise AssertionError(f"a test tried to resolve {name!r}: only 127.0.0.1 is allowed")
        return resolve(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", guarded_connect)
    monkeypatch.setattr(socket, "getaddrinfo", guarded_resolve)
