"""One conversation learned by two workers at once, on both stores: applied once.

Two memories on one store stand for two server workers (two processes, or two
replicas of a database): each has its own learner and update lock, so only the
store can order them. The race is forced, not timed: the first worker's model
call runs the second worker's whole update before it answers — the second
commits while the first is waiting for its model, which is exactly when the
first one's view of the conversation's mark goes stale.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from deermem import Memory, MemoryConfig
from deermem.model import Scope
from deermem.testing import RecordedRequest, ScriptedChatServer
from tests.store_contract.conftest import Stores
from tests.wire_support import NOW, answer, conversation, model_settings, reinforce

ASKED = conversation("You remember I use uv?", "Yes: uv, never pip.")
CONFIRMED = [*ASKED, *conversation("Yes, that's exactly right!", "Great.")]


@pytest.fixture
def server() -> Iterator[ScriptedChatServer]:
    with ScriptedChatServer() as running:
        yield running


def worker(stores: Stores, server: ScriptedChatServer) -> Memory:
    """A memory with its own learner on the shared store: one server worker."""
    config = MemoryConfig(model=model_settings(server), search_mode="keyword")
    return Memory(stores(config), config, Scope.of("alice", None), clock=lambda: NOW)


def confirming(fact_id: str) -> str:
    """The model's answer whenever it reads the conversation: the user confirmed the fact."""
    return answer(factsToReinforce=[reinforce(fact_id)])


def while_asked(then: Callable[[], object], reply: str) -> Callable[[RecordedRequest], str]:
    """A scripted reply that runs ``then`` (another worker's update) before it answers."""

    def respond(_request: RecordedRequest) -> str:
        then()
        return reply

    return respond


def prompts(server: ScriptedChatServer) -> list[str]:
    return [str(request.messages[-1]["content"]) for request in server.requests]


def test_a_conversation_two_workers_learn_at_once_is_applied_once(
    stores: Stores, server: ScriptedChatServer
) -> None:
    first, second = worker(stores, server), worker(stores, server)
    fact_id = first.create_fact("Uses uv, never pip.", confidence=0.9).fact_id
    assert fact_id is not None
    seconds: list[str] = []
    server.enqueue(
        while_asked(
            lambda: seconds.append(second.learn("t1", CONFIRMED).report.outcome),
            confirming(fact_id),
        ),
        confirming(fact_id),  # the second worker's call, made inside the first one's
    )
    report = first.learn("t1", CONFIRMED).report
    assert seconds == ["applied"]
    # The first worker's answer came back after the second worker had applied the same
    # turns: it is dropped (a model call wasted in the race), never applied a second time.
    assert report.outcome == "nothing-new"
    assert report.confirmed == ()
    assert len(server.requests) == 2
    assert first.get_fact(fact_id).confirmationCount == 1
    assert first.learn("t1", CONFIRMED).report.outcome == "nothing-new"
    first.close()
    second.close()


def test_a_worker_whose_conversation_was_partly_applied_meanwhile_sends_only_the_rest(
    stores: Stores, server: ScriptedChatServer
) -> None:
    first, second = worker(stores, server), worker(stores, server)
    fact_id = first.create_fact("Uses uv, never pip.", confidence=0.9).fact_id
    assert fact_id is not None
    confirmed_at_once = [*conversation("Yes, that's exactly right!", "Great."), *ASKED]
    grown = [*confirmed_at_once, *conversation("Let's write the release notes.", "Sure.")]
    server.enqueue(
        while_asked(lambda: second.learn("t1", confirmed_at_once), confirming(fact_id)),
        confirming(fact_id),  # the second worker: the confirmation, applied
        answer(),  # the first worker, starting over from the moved mark
    )
    report = first.learn("t1", grown).report
    # The first answer read the confirmation the second worker had applied meanwhile: it
    # was dropped, and the model asked again about the turns that followed the new mark.
    assert report.outcome == "unchanged"
    assert report.confirmed == ()
    assert len(server.requests) == 3
    assert "exactly right" not in prompts(server)[-1]
    assert "release notes" in prompts(server)[-1]
    assert first.get_fact(fact_id).confirmationCount == 1
    first.close()
    second.close()


def test_a_conversation_one_worker_learned_is_not_sent_to_the_model_by_another(
    stores: Stores, server: ScriptedChatServer
) -> None:
    """The mark is in the store, shared by every worker (docs/server.md, "Several
    workers"): the same messages posted to another worker later cost no model call."""
    first, second = worker(stores, server), worker(stores, server)
    fact_id = first.create_fact("Uses uv, never pip.", confidence=0.9).fact_id
    assert fact_id is not None
    server.enqueue(confirming(fact_id))
    assert first.learn("t1", CONFIRMED).report.outcome == "applied"
    assert second.learn("t1", CONFIRMED).report.outcome == "nothing-new"
    assert len(server.requests) == 1
    first.close()
    second.close()
