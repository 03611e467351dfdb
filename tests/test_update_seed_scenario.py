"""The seed's scenario, end to end through extraction, with an injected clock.

A user says "对，就是这样" about a 0.7 fact: under ``hybrid-v1`` the
confirmation is recorded. A week later the library is at its cap and a new
fact arrives: the confirmed 0.7 fact survives and the 0.9 fact nobody has
mentioned in 180 days goes — under ``confidence`` the 0.7 fact goes instead
(its confirmation was never recorded, as nothing would read it).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from deermem import Memory
from deermem.learning.report import UpdateReport
from deermem.testing import ScriptedChatServer
from tests.wire_support import (
    NOW,
    Clock,
    answer,
    close_memories,  # noqa: F401 (autouse fixture)
    conversation,
    facts_by_id,
    new_fact,
    open_memory,
    reinforce,
    seed,
    stored_fact,
)


@pytest.fixture
def server() -> Iterator[ScriptedChatServer]:
    with ScriptedChatServer() as running:
        yield running


def run_scenario(
    root: Path, server: ScriptedChatServer, policy: str
) -> tuple[Memory, UpdateReport, UpdateReport]:
    clock = Clock(NOW)
    memory = open_memory(root, server, clock=clock, max_facts=10, fact_eviction_policy=policy)
    seed(
        memory,
        stored_fact("fact_confirm", "Prefers answers with a code example first",
                    category="preference", confidence=0.7, age_days=30),
        stored_fact("fact_stale90", "Was evaluating Kafka for the event bus",
                    category="context", confidence=0.9, age_days=173),
        *(stored_fact(f"fact_fill{i}", f"Background fact {i}", confidence=0.95)
          for i in range(8)),
    )  # fmt: skip
    server.enqueue(
        answer(factsToReinforce=[reinforce("fact_confirm", "the user confirmed the format")])
    )
    confirmed = memory.learn(
        "thread-1",
        conversation(
            "Show me how to read a CSV in Go.",
            "Here is a code example first, then the explanation: ...",
            "对，就是这样",
            "Great, I will keep answering that way.",
        ),
    ).report
    clock.advance(days=7)  # fact_stale90 is now 180 days old, untouched
    server.enqueue(answer(newFacts=[new_fact("Moved the team to Go 1.23.", confidence=0.9)]))
    at_cap = memory.learn(
        "thread-2", conversation("We moved the team to Go 1.23 this week.", "Noted.")
    ).report
    return memory, confirmed, at_cap


def test_under_hybrid_v1_the_confirmed_fact_survives_the_stale_one(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    memory, confirmed, at_cap = run_scenario(tmp_path, server, "hybrid-v1")
    assert "reinforcement" in confirmed.signals
    assert confirmed.confirmed == ("fact_confirm",)
    facts = facts_by_id(memory)
    assert facts["fact_confirm"].lastConfirmedAt == "2026-08-13T12:00:00Z"
    assert facts["fact_confirm"].confirmationCount == 1
    (evicted,) = at_cap.evicted
    assert (evicted.fact_id, evicted.reason) == ("fact_stale90", "capacity")
    assert at_cap.added == ("fact_00000001",)
    receipt = memory.audit()[-1]
    assert (receipt.receipt_id, receipt.trigger, receipt.policy_version) == (
        evicted.receipt_id,
        "extraction",
        "hybrid-v1",
    )
    line = receipt.entry_for("fact_stale90")
    assert line is not None
    assert line.rank == 11
    assert line.components["confidence"] == 0.9
    explanation = memory.why("fact_stale90")
    assert explanation.status == "archived"


def test_under_confidence_the_confirmed_fact_loses(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    memory, confirmed, at_cap = run_scenario(tmp_path, server, "confidence")
    assert "reinforcement" in confirmed.signals
    assert confirmed.confirmed == ("fact_confirm",)  # recorded under every policy ...
    (evicted,) = at_cap.evicted
    assert evicted.fact_id == "fact_confirm"  # ... but confidence does not rank by it
    facts = facts_by_id(memory)
    assert "fact_stale90" in facts
    assert memory.get_archived("fact_confirm").fact.lastConfirmedAt == "2026-08-13T12:00:00Z"
