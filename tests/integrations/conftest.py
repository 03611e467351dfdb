"""Fixtures of the integration tests: a scripted model server, and closing what a test built."""

from __future__ import annotations

from collections.abc import Iterator

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
