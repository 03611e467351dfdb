"""What the load attacks share: a model reply held back by a gate, and patient polling.

The model is a :class:`~deermem.testing.ScriptedChatServer`; a reply built by
:func:`gated` comes only once the test opens the gate, so the server's queue
and its waiting requests hold exactly what the test put there while it looks.
Nothing here asserts on speed: :data:`PATIENCE` is how long a request may take
on a busy test machine before it counts as stalled.

The fixtures ``store`` and ``chat`` are those of the server tests
(tests/server/conftest.py); a test module imports :func:`served_store` and
:func:`chat_server` to have them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from deermem.testing import RecordedRequest, ScriptedChatServer

from ..served_store import ServedStore
from ..wire_support import answer

PATIENCE = 20.0


def gated(gate: threading.Event) -> Callable[[RecordedRequest], str]:
    """A model reply (an empty update) that comes only once the test opens ``gate``."""

    def reply(request: RecordedRequest) -> str:
        gate.wait(120)
        return answer()

    return reply


def eventually(condition: Callable[[], bool], timeout: float = PATIENCE) -> bool:
    """Whether ``condition`` holds within ``timeout`` seconds (polled)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def accepted_jobs(store: ServedStore) -> int:
    """How many conversations the server has accepted (one job record each)."""
    return len(list((store.state_dir / "jobs").glob("job_*.json")))


@pytest.fixture(name="store")
def served_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ServedStore]:
    """The store the server runs on: Markdown, or each kind with ``on_both_stores``."""
    with ServedStore.of_fixture(request, tmp_path) as served:
        yield served


@pytest.fixture(name="chat")
def chat_server() -> Iterator[ScriptedChatServer]:
    """The model: a scripted chat server on 127.0.0.1."""
    with ScriptedChatServer() as server:
        yield server
