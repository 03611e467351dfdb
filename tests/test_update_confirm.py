"""Confirmation: the rule (catalogue: reinforcement tests of test_memory_updater.py), and the
wired path under every policy — a confirmation is a fact about what the user said."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from deermem.learning.answer import ReinforceEntry
from deermem.learning.plan import confirm_facts
from deermem.model import format_timestamp, next_confirmation_count
from deermem.testing import ScriptedChatServer
from tests.update_support import NOW, fact
from tests.wire_support import (
    Clock,
    answer,
    close_memories,  # noqa: F401 (autouse fixture)
    conversation,
    facts_by_id,
    open_memory,
    reinforce,
    seed,
    stored_fact,
)

REINFORCED = frozenset({"reinforcement"})
OK = ReinforceEntry(id="fact_a", scope="user", reason="the user said this is exactly right")
STAMP = "2026-08-13T12:00:00Z"
POLICIES: dict[str, dict[str, Any]] = {
    "confidence": {"fact_eviction_policy": "confidence"},
    "hybrid-v1": {"fact_eviction_policy": "hybrid-v1"},
    "shadow": {"fact_eviction_policy": "confidence", "fact_eviction_shadow_enabled": True},
}


# --- the rule ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prior", "count"),
    [(3, 4), (0, 1), (1, 2), (None, 1), (True, 1), (False, 1), (-1, 1), ("3", 1), (2.0, 1)],
)
def test_next_confirmation_count(prior: object, count: int) -> None:
    assert next_confirmation_count(prior) == count


def test_a_confirmed_fact_gets_the_time_and_its_first_count() -> None:
    facts = (fact("fact_a"), fact("fact_b"))
    outcome = confirm_facts(facts, [OK], signals=REINFORCED, now=NOW)
    confirmed, other = outcome.facts
    assert confirmed.lastConfirmedAt == format_timestamp(NOW)
    assert confirmed.lastConfirmedAt.endswith("Z")
    assert confirmed.confirmationCount == 1
    assert other is facts[1]
    assert outcome.confirmed == ("fact_a",)
    assert outcome.refused == 0
    assert facts[0].lastConfirmedAt is None  # the input is not changed


def test_a_prior_count_grows() -> None:
    facts = (fact("fact_a", confirmationCount=3, lastConfirmedAt="2026-01-01T00:00:00Z"),)
    (confirmed,) = confirm_facts(facts, [OK], signals=REINFORCED, now=NOW).facts
    assert confirmed.confirmationCount == 4


@pytest.mark.parametrize(
    ("signals", "entry"),
    [
        (frozenset(), OK),  # no reinforcement detected
        (frozenset({"correction", "preference"}), OK),  # other signals do not count
        (REINFORCED, ReinforceEntry(id="fact_a", scope="thread", reason="yes")),  # not user scope
        (REINFORCED, ReinforceEntry(id="fact_a", scope=None, reason="yes")),  # unlabelled
        (REINFORCED, ReinforceEntry(id="fact_a", scope="user", reason="")),  # no reason
        (REINFORCED, ReinforceEntry(id="fact_zz", scope="user", reason="yes")),  # unknown id
    ],
)
def test_nothing_is_confirmed_unless_every_condition_holds(
    signals: frozenset[str], entry: ReinforceEntry
) -> None:
    facts = (fact("fact_a"),)
    outcome = confirm_facts(facts, [entry], signals=signals, now=NOW)
    assert outcome.facts == facts
    assert outcome.confirmed == ()
    assert outcome.refused == 1


def test_an_id_listed_twice_is_confirmed_once() -> None:
    outcome = confirm_facts((fact("fact_a"),), [OK, OK], signals=REINFORCED, now=NOW)
    assert outcome.facts[0].confirmationCount == 1
    assert outcome.confirmed == ("fact_a",)
    assert outcome.refused == 1


# --- wired: every policy records what the user said ------------------------------------


@pytest.fixture
def server() -> Iterator[ScriptedChatServer]:
    with ScriptedChatServer() as running:
        yield running


def confirming(user_says: str) -> list[dict[str, str]]:
    return conversation(
        "Answer with a code example first, please.",
        "Here is the example first, then the explanation: ...",
        user_says,
        "Noted.",
    )


@pytest.mark.parametrize("policy", POLICIES)
def test_a_confirmation_is_recorded_under_every_policy(
    tmp_path: Path, server: ScriptedChatServer, policy: str
) -> None:
    memory = open_memory(tmp_path, server, **POLICIES[policy])
    seed(memory, stored_fact("fact_a", confirmationCount=2), stored_fact("fact_b"))
    server.enqueue(answer(factsToReinforce=[reinforce("fact_a"), reinforce("fact_zz")]))
    report = memory.learn("thread-1", confirming("对，就是这样")).report
    assert "reinforcement" in report.signals
    assert report.confirmed == ("fact_a",)
    assert (report.metrics.confirmations, report.metrics.confirmations_refused) == (1, 1)
    # What a fresh process reads from the files.
    again = open_memory(tmp_path, server, **POLICIES[policy])
    stored = facts_by_id(again)
    assert (stored["fact_a"].lastConfirmedAt, stored["fact_a"].confirmationCount) == (STAMP, 3)
    assert (stored["fact_b"].lastConfirmedAt, stored["fact_b"].confirmationCount) == (None, None)


@pytest.mark.parametrize("policy", ["confidence", "hybrid-v1"])
@pytest.mark.parametrize(
    ("user_says", "recorded"),
    [
        ("That's perfect!", True),
        ("Perfect！", True),
        ("完全正确", True),
        ("That's not exactly right.", False),
        ("并非完全正确", False),
        ("未必完全正确", False),
        ("对，就是这样吗？", False),
        ("这完全正确吗？", False),
        ("你说得对", False),
    ],
)
def test_what_the_user_said_decides_not_the_model(
    tmp_path: Path, server: ScriptedChatServer, policy: str, user_says: str, recorded: bool
) -> None:
    memory = open_memory(tmp_path, server, fact_eviction_policy=policy)
    seed(memory, stored_fact("fact_a"))
    server.enqueue(answer(factsToReinforce=[reinforce("fact_a")]))  # the model always asks
    report = memory.learn("thread-1", confirming(user_says)).report
    fact_a = memory.get_fact("fact_a")
    assert ("reinforcement" in report.signals) is recorded
    assert (fact_a.lastConfirmedAt is not None) is recorded
    assert report.confirmed == (("fact_a",) if recorded else ())


def build_history(root: Path, server: ScriptedChatServer, user_says: str) -> Clock:
    """A store run under ``confidence`` at a cap of 10, in which the user says ``user_says``
    about a 0.7 fact; a 0.9 fact nobody mentions is 180 days old a week later."""
    clock = Clock()
    memory = open_memory(root, server, clock=clock, max_facts=10)
    seed(
        memory,
        stored_fact("fact_format", "Wants a code example first", confidence=0.7, age_days=30),
        stored_fact("fact_kafka", "Was evaluating Kafka", confidence=0.9, age_days=173),
        *(stored_fact(f"fact_fill{i}", f"Background {i}", confidence=0.95) for i in range(8)),
    )
    server.enqueue(answer(factsToReinforce=[reinforce("fact_format")]))
    memory.learn("thread-1", confirming(user_says))
    clock.advance(days=7)
    return clock


@pytest.mark.parametrize(
    ("user_says", "evicted"),
    [
        ("That's exactly what I wanted.", "fact_kafka"),  # the confirmation counts
        ("That's not exactly what I wanted.", "fact_format"),  # no confirmation to count
    ],
)
def test_a_deployment_switches_to_hybrid_v1_with_its_history(
    tmp_path: Path, server: ScriptedChatServer, user_says: str, evicted: str
) -> None:
    clock = build_history(tmp_path, server, user_says)
    switched = open_memory(
        tmp_path, server, clock=clock, max_facts=10, fact_eviction_policy="hybrid-v1"
    )
    result = switched.create_fact("Moved the team to Go 1.23", category="context", confidence=0.9)
    assert result.kept
    assert result.evicted == (evicted,)
    (receipt,) = result.receipts
    assert receipt.policy_version == "hybrid-v1"
