"""The conversation's mark through Memory: each turn is learned from once.

A user's "yes, exactly" confirms a fact once, however the conversation is
handed over: twice at the same time from two threads, turn by turn with a
reply said twice. (Two workers on one store: tests/store_contract/test_learning_marks.py.)
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType

import pytest

from deermem import FactValidationError, Memory
from deermem.testing import RecordedRequest, ScriptedChatServer
from tests.wire_support import (
    answer,
    close_memories,  # noqa: F401 (autouse fixture)
    conversation,
    new_fact,
    open_memory,
    prompt_of,
    reinforce,
)

CONFIRMED = conversation("You remember I use uv?", "Yes.", "Yes, that's exactly right!", "Great.")


@pytest.fixture
def server() -> Iterator[ScriptedChatServer]:
    with ScriptedChatServer() as running:
        yield running


def with_fact(memory: Memory) -> str:
    fact_id = memory.create_fact("Uses uv, never pip.", confidence=0.9).fact_id
    assert fact_id is not None
    return fact_id


class Announcing:
    """A lock that counts the threads coming to take it, *before* they wait for it.

    Stands in for the learner's update lock, so a test knows — without a
    timeout — that a second update has reached it while the first holds it.
    """

    def __init__(self, lock: threading.Lock) -> None:
        self._lock = lock
        self.arrivals = threading.Semaphore(0)

    def __enter__(self) -> None:
        self.arrivals.release()
        self._lock.acquire()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._lock.release()


def test_two_threads_learning_one_conversation_ask_the_model_once(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    memory = open_memory(tmp_path, server)
    fact_id = with_fact(memory)
    confirming = answer(factsToReinforce=[reinforce(fact_id)])
    learner = memory._updates
    gate = Announcing(learner._running)
    learner._running = gate  # type: ignore[assignment]
    outcomes: list[str] = []
    second = threading.Thread(
        target=lambda: outcomes.append(memory.learn("t1", CONFIRMED).report.outcome)
    )

    def first_answer(_request: RecordedRequest) -> str:
        second.start()
        gate.arrivals.acquire()  # the first update's own arrival
        gate.arrivals.acquire()  # the second's: it waits for the lock the first one holds
        return confirming

    # A second answer is scripted so that, were the second update to ask, it would apply.
    server.enqueue(first_answer, confirming)
    report = memory.learn("t1", CONFIRMED).report
    second.join()
    assert report.outcome == "applied"
    assert report.confirmed == (fact_id,)
    # The second update read the mark under the lock, after the first one moved it.
    assert outcomes == ["nothing-new"]
    assert len(server.requests) == 1
    assert memory.get_fact(fact_id).confirmationCount == 1


def test_a_reply_said_twice_never_feeds_learned_turns_again(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    memory = open_memory(tmp_path, server)
    chat = conversation("I always use uv, never pip.", "Noted.")
    server.enqueue(answer(newFacts=[new_fact("Uses uv, never pip.", 0.95)]))
    fact_id = memory.learn("t", chat).report.added[0]

    def confirms_what_it_reads(request: RecordedRequest) -> str:
        said = str(request.messages[-1]["content"])
        return answer(factsToReinforce=[reinforce(fact_id)] if "exactly right" in said else [])

    server.enqueue(confirms_what_it_reads, confirms_what_it_reads)
    chat += conversation("Yes, that's exactly right!", "Noted.")
    assert memory.learn("t", chat).report.confirmed == (fact_id,)
    chat += conversation("Now let's write the release notes.", "Sure, here they are.")
    report = memory.learn("t", chat).report
    # The mark names the second "Noted.", not the first: only the new turns are sent.
    assert report.messages_sent == 2
    assert "exactly right" not in prompt_of(server)
    assert report.confirmed == ()
    assert memory.get_fact(fact_id).confirmationCount == 1


def test_turns_after_a_cut_front_are_sent_though_they_repeat_the_marked_reply(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    # The host summarised the learned turns away; a new "Done." is not the marked one.
    memory = open_memory(tmp_path, server)
    server.enqueue(answer(), answer(), answer())
    memory.learn("t", conversation("Let's fix the build.", "Done."))
    later = conversation(
        "I always indent with tabs, never spaces.", "Done.", "Now rename the module.", "Renamed."
    )
    report = memory.learn("t", later).report
    assert report.messages_sent == 4
    assert "tabs" in prompt_of(server)
    # Fed once more, the shortened conversation is now marked where it ends.
    assert memory.learn("t", later).report.outcome == "nothing-new"
    rewritten = conversation("Let's talk about tests.", "Renamed.")
    assert memory.learn("t", rewritten).report.messages_sent == 2
    assert len(server.requests) == 3


@pytest.mark.parametrize("messages", [None, 42, "I use uv.", {"role": "user", "content": "hi"}])
def test_messages_that_are_not_a_conversation_are_refused_naming_the_argument(
    tmp_path: Path, server: ScriptedChatServer, messages: object
) -> None:
    memory = open_memory(tmp_path, server)
    with pytest.raises(FactValidationError) as learning:
        memory.learn("t", messages)  # type: ignore[arg-type]
    assert learning.value.field == "messages"
    with pytest.raises(FactValidationError) as queueing:
        memory.queue_conversation("t", messages)  # type: ignore[arg-type]
    assert queueing.value.field == "messages"
    assert "I use uv" not in str(learning.value)  # a text is described, never quoted
    assert server.requests == []
