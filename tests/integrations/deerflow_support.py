"""Builders for the DeerFlow backend tests: backends on real files and a real HTTP model,
DeerFlow-shaped messages, and the document shape DeerFlow's gateway and settings page read.

The shape rules are the contract's (reference: deerflow-memory-manager-contract.md §8):
the gateway's ``MemoryResponse`` and the settings page's import type guard.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from deermem.integrations.deerflow import DeerFlowBackend, ErrorTypes, read_backend_config
from deermem.testing import ScriptedChatServer
from tests.wire_support import NOW

USER_SECTIONS = ("workContext", "personalContext", "topOfMind")
HISTORY_SECTIONS = ("recentMonths", "earlierContext", "longTermBackground")


OPENED: list[DeerFlowBackend] = []
"""Backends built by :func:`backend`; the conftest closes them after each test."""


def model_section(server: ScriptedChatServer, **overrides: Any) -> dict[str, Any]:
    """A ``backend_config.model`` that talks to ``server`` (no key, no waiting)."""
    section: dict[str, Any] = {
        "model": "scripted",
        "base_url": server.url,
        "api_key_env": None,
        "max_retries": 0,
        "timeout_seconds": 10.0,
    }
    section.update(overrides)
    return section


def backend(
    root: Path,
    server: ScriptedChatServer | None = None,
    *,
    clock: Callable[[], datetime] | None = None,
    mode: str = "middleware",
    error_types: ErrorTypes | None = None,
    host_hooks: dict[str, Any] | None = None,
    **settings: Any,
) -> DeerFlowBackend:
    """A backend on ``root``, extracting through ``server`` when given, built as
    ``from_config`` builds it but with a fixed clock."""
    config: dict[str, Any] = {"storage_path": str(root), "debounce_seconds": 30}
    if server is not None:
        config["model"] = model_section(server)
    config.update(settings)
    hooks = host_hooks or {}
    built = DeerFlowBackend(
        read_backend_config(config),
        mode=mode,  # type: ignore[arg-type]
        callbacks=hooks.get("callbacks"),
        host_llm_factory=hooks.get("host_llm_factory"),
        should_keep_hidden_message=hooks.get("should_keep_hidden_message"),
        error_types=error_types,
        clock=clock or (lambda: NOW),
    )
    OPENED.append(built)
    return built


@dataclass
class LCMessage:
    """A message as DeerFlow's graph state holds it: LangChain's attributes, nothing else."""

    type: str
    content: Any
    id: str | None = None
    additional_kwargs: dict[str, Any] = field(default_factory=dict)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)


def deerflow_turn(user_text: str, answer_text: str, *, memory_text: str = "") -> list[LCMessage]:
    """One agent run as DeerFlow passes it to ``add``: the injected reminders (hidden),
    the user's message re-emitted as ``{id}__user``, a tool round trip, the final answer."""
    reminder = {"hide_from_ui": True, "dynamic_context_reminder": True}
    date = "<system-reminder>Today is Monday.</system-reminder>"
    messages = [LCMessage("system", date, "r1", reminder)]
    if memory_text:
        messages.append(LCMessage("human", memory_text, "m1__memory", dict(reminder)))
    messages += [
        LCMessage("human", user_text, "m1__user"),
        LCMessage("ai", "", "a1", tool_calls=[{"name": "search", "args": {}, "id": "c1"}]),
        LCMessage("tool", "search results: TOOL-OUTPUT", "t1"),
        LCMessage("ai", answer_text, "a2"),
    ]
    return messages


def assert_deerflow_document(document: dict[str, Any]) -> None:
    """What DeerFlow's gateway validates and its settings page's import guard requires."""
    assert isinstance(document["version"], str)
    assert document.get("revision") is None or isinstance(document["revision"], int)
    assert isinstance(document["lastUpdated"], str)
    for group, names in (("user", USER_SECTIONS), ("history", HISTORY_SECTIONS)):
        for name in names:
            section = document[group][name]
            assert isinstance(section["summary"], str), (group, name)
            assert isinstance(section["updatedAt"], str), (group, name)
    assert isinstance(document["facts"], list)
    for fact in document["facts"]:
        assert_deerflow_fact(fact)
    json.dumps(document)  # the tools send it as JSON


def assert_deerflow_fact(fact: dict[str, Any]) -> None:
    for key in ("id", "content", "category", "createdAt", "source"):
        assert isinstance(fact[key], str), key
    confidence = fact["confidence"]
    assert isinstance(confidence, int | float)
    assert not isinstance(confidence, bool)
    assert math.isfinite(confidence)
    optional: dict[str, type | tuple[type, ...]] = {
        "categoryExtension": str,
        "sourceError": str,
        "schemaVersion": int,
        "status": str,
        "revision": int,
        "updatedAt": str,
        "consolidatedAt": str,
    }
    for key, kind in optional.items():
        assert fact.get(key) is None or isinstance(fact[key], kind), key
    for key in ("topics", "consolidatedFrom"):
        assert fact.get(key) is None or all(isinstance(item, str) for item in fact[key]), key
    scope = fact.get("scope")
    assert scope is None or all(v is None or isinstance(v, str) for v in scope.values())
