"""Helpers shared by the Memory.context / Memory.search tests and their CLI tests."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from deermem import Memory, MemoryConfig
from deermem.cli.demo import seed_scenarios

NOW = datetime(2026, 8, 13, tzinfo=UTC)
# The tightest budgets the configuration allows.
TIGHT: dict[str, Any] = {"max_injection_tokens": 100, "guaranteed_token_budget": 50}


def open_memory(
    root: Path, *, user: str | None = "alice", agent: str | None = "coder", **settings: Any
) -> Memory:
    # The tests built on these libraries hold the keyword ranking (exact scores,
    # the clock's decay, FTS5's fallbacks); search by meaning has its own tests.
    settings.setdefault("search_mode", "keyword")
    return Memory.open(root, MemoryConfig(**settings), user=user, agent=agent, clock=lambda: NOW)


def seed_document(name: str = "correction-vs-preferences") -> dict[str, Any]:
    """One of the seed's two libraries as an import document (ids and times fixed)."""
    scenario = {s.name: s for s in seed_scenarios(NOW)}[name]
    return {"facts": [dict(fact) for fact in scenario.facts]}


def files_state(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file of the store except the derived index: content and modification time."""
    return {
        str(path.relative_to(root)): (path.read_bytes(), path.stat().st_mtime_ns)
        for path in sorted(root.rglob("*"))
        if path.is_file() and ".retrieval" not in path.parts
    }


def fact_files(root: Path) -> dict[str, tuple[bytes, int]]:
    return {name: state for name, state in files_state(root).items() if name.endswith(".md")}


def usage_file(root: Path, user: str = "alice", agent: str = "coder") -> Path:
    return root / "users" / user / "agents" / agent / ".metadata" / "fact-usage.json"
