"""Builders for the wired update tests: a memory talking to a ScriptedChatServer over
real HTTP, model answers, conversations, and byte snapshots of a store."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from deermem import Fact, Memory, MemoryConfig
from deermem.model import format_timestamp
from deermem.testing import ScriptedChatServer

NOW = datetime(2026, 8, 13, 12, 0, tzinfo=UTC)
LABELS: dict[str, str] = {"scope": "user", "durability": "durable", "authority": "descriptive"}


def model_settings(server: ScriptedChatServer, **overrides: Any) -> dict[str, Any]:
    """The ``model:`` section of a config that talks to ``server`` (no key, no waiting)."""
    settings: dict[str, Any] = {
        "model": "scripted",
        "base_url": server.url,
        "api_key_env": None,
        "max_retries": 2,
        "retry_backoff_seconds": 0.0,
        "timeout_seconds": 10.0,
    }
    settings.update(overrides)
    return settings


class Clock:
    """A clock the test moves by hand."""

    def __init__(self, now: datetime = NOW) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now = self.now + timedelta(**delta)


def counting_ids(prefix: str = "fact_") -> Callable[[], str]:
    numbers: Iterator[int] = iter(range(1, 1 << 32))
    return lambda: f"{prefix}{next(numbers):08x}"


_OPENED: list[Memory] = []


@pytest.fixture(autouse=True)
def close_memories() -> Iterator[None]:
    """Close every memory a test opened (its HTTP client holds a connection).

    Import it into a test module to use it there."""
    yield
    while _OPENED:
        _OPENED.pop().close(timeout=5)


def open_memory(
    root: Path,
    server: ScriptedChatServer,
    *,
    clock: Callable[[], datetime] | None = None,
    user: str | None = "alice",
    agent: str | None = None,
    id_factory: Callable[[], str] | None = None,
    model: dict[str, Any] | None = None,
    **settings: Any,
) -> Memory:
    # These tests hold the keyword ranking (what a search and its regret find
    # by words); search by meaning has its own tests.
    settings.setdefault("search_mode", "keyword")
    config = MemoryConfig(model=model_settings(server, **(model or {})), **settings)
    memory = Memory.open(
        root,
        config,
        user=user,
        agent=agent,
        clock=clock or (lambda: NOW),
        id_factory=id_factory or counting_ids(),
    )
    _OPENED.append(memory)
    return memory


def new_fact(content: str, confidence: float = 0.9, **fields: Any) -> dict[str, Any]:
    """A labelled, well-formed ``newFacts`` entry."""
    entry: dict[str, Any] = {"content": content, "category": "preference", "confidence": confidence}
    entry.update(LABELS)
    entry.update(fields)
    return entry


def reinforce(fact_id: str, reason: str = "the user said so") -> dict[str, Any]:
    return {"id": fact_id, "scope": "user", "reason": reason}


def removal(fact_id: str, replacement: int | None = None, **fields: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"id": fact_id, "scope": "user", "reason": "contradicted"}
    if replacement is not None:
        entry["replacementFactIndex"] = replacement
    entry.update(fields)
    return entry


def answer(**keys: Any) -> str:
    """A model answer holding a memory update with the three required keys."""
    data: dict[str, Any] = {"user": {}, "history": {}, "newFacts": []}
    data.update(keys)
    return json.dumps(data, ensure_ascii=False)


def conversation(*texts: str) -> list[dict[str, str]]:
    """Alternating user / assistant messages in OpenAI chat format."""
    return [
        {"role": "user" if index % 2 == 0 else "assistant", "content": text}
        for index, text in enumerate(texts)
    ]


CHAT = conversation("I use uv for every Python project.", "Noted: uv it is.")


def stored_fact(
    fact_id: str,
    content: str | None = None,
    *,
    category: str = "context",
    confidence: float = 0.8,
    age_days: float = 1,
    now: datetime = NOW,
    **extra: Any,
) -> dict[str, Any]:
    """A fact for ``Memory.import_document``."""
    data: dict[str, Any] = {
        "id": fact_id,
        "content": content if content is not None else f"content of {fact_id}",
        "category": category,
        "confidence": confidence,
        "createdAt": format_timestamp(now - timedelta(days=age_days)),
        "source": "thread-0",
    }
    data.update(extra)
    return data


def seed(memory: Memory, *facts: dict[str, Any], **summaries: str) -> None:
    """Store ``facts`` (and user summary sections) as an import would."""
    document: dict[str, Any] = {"facts": list(facts)}
    if summaries:
        document["user"] = {
            name: {"summary": text, "updatedAt": format_timestamp(NOW)}
            for name, text in summaries.items()
        }
    memory.import_document(document)


def tree(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` with its bytes: two equal trees are byte-identical stores."""
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def memory_tree(root: Path) -> dict[str, bytes]:
    """:func:`tree` without the conversations' marks: the memory itself."""
    return {name: data for name, data in tree(root).items() if "/.metadata/threads/" not in name}


def marks(root: Path) -> list[str]:
    """The conversations' mark files under ``root``."""
    return [name for name in tree(root) if "/.metadata/threads/" in name]


def facts_by_id(memory: Memory) -> dict[str, Fact]:
    return {fact.id: fact for fact in memory.list_facts()}


def prompt_of(server: ScriptedChatServer, index: int = -1) -> str:
    """The user message of a recorded request (the rendered update prompt)."""
    messages = server.requests[index].messages
    assert [m["role"] for m in messages] == ["system", "user"]
    return str(messages[1]["content"])
