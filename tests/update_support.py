"""Builders shared by the update tests: facts, responses, a counting id factory."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from deermem.learning.answer import NormalizedResponse, normalize_response
from deermem.learning.plan import (
    ContradictionOutcome,
    MemoryState,
    UpdatePlan,
    UpdateSettings,
    plan_update,
    resolve_contradiction_removals,
)
from deermem.model import Fact, format_timestamp
from deermem.policy import select_facts_for_capacity

NOW = datetime(2026, 8, 13, 12, 0, tzinfo=UTC)

LABELS: dict[str, str] = {"scope": "user", "durability": "durable", "authority": "descriptive"}


def days_ago(days: float) -> str:
    return format_timestamp(NOW - timedelta(days=days))


def fact(
    fact_id: str,
    content: str | None = None,
    *,
    category: str = "context",
    confidence: float = 0.8,
    age_days: float = 1,
    **extra: Any,
) -> Fact:
    data: dict[str, Any] = {
        "id": fact_id,
        "content": content if content is not None else f"content of {fact_id}",
        "category": category,
        "confidence": confidence,
        "createdAt": days_ago(age_days),
        "source": "thread-0",
    }
    data.update(extra)
    return Fact.from_dict(data)


def state(*facts: Fact) -> MemoryState:
    return MemoryState(facts=tuple(facts))


def new_fact(content: str, confidence: float = 0.9, **fields: Any) -> dict[str, Any]:
    """A labelled, well-formed newFacts entry."""
    entry: dict[str, Any] = {"content": content, "category": "preference", "confidence": confidence}
    entry.update(LABELS)
    entry.update(fields)
    return entry


def payload(**keys: Any) -> dict[str, Any]:
    """A memory update object with the three required keys."""
    data: dict[str, Any] = {"user": {}, "history": {}, "newFacts": []}
    data.update(keys)
    return data


def normalized(**keys: Any) -> NormalizedResponse:
    result = normalize_response(payload(**keys))
    assert isinstance(result, NormalizedResponse), result
    return result


def counting_ids(prefix: str = "fact_") -> Callable[[], str]:
    """Deterministic ids: fact_00000001, fact_00000002, ..."""
    counter: Iterator[int] = iter(range(1, 1 << 32))
    return lambda: f"{prefix}{next(counter):08x}"


def apply_through_capacity(
    plan: UpdatePlan, *, max_facts: int = 100, policy: str = "confidence"
) -> tuple[list[Fact], ContradictionOutcome]:
    """What the wiring does after planning: the one capacity gate, then the
    contradiction removals. Returns the final library (rank order) and the outcome."""
    decision = select_facts_for_capacity(plan.facts, max_facts=max_facts, policy=policy, now=NOW)
    outcome = resolve_contradiction_removals(plan, decision)
    removed = set(outcome.removed)
    return [f for f in decision.kept if f.id not in removed], outcome


def plan(
    memory: MemoryState,
    response: NormalizedResponse,
    *,
    signals: frozenset[str] = frozenset(),
    settings: UpdateSettings | None = None,
    thread_id: str | None = "thread-1",
) -> UpdatePlan:
    return plan_update(
        memory,
        response,
        signals=signals,
        settings=settings or UpdateSettings(),
        now=NOW,
        thread_id=thread_id,
        new_id=counting_ids(),
    )
