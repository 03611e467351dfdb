"""Memory.queue_conversation: the update queue with real threads, a real store and real HTTP.

(Catalogue: test_memory_queue.py, test_memory_queue_user_isolation.py and
test_updater_watermark.py, through the facade; the queue's own rules are
tested with hand-driven timers in test_update_queue.py.)
"""

from __future__ import annotations

import logging
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from deermem import QueueFullError
from deermem.errors import QueueClosedError
from deermem.testing import Reply, ScriptedChatServer
from tests.wire_support import (
    CHAT,
    answer,
    close_memories,  # noqa: F401 (autouse fixture)
    conversation,
    new_fact,
    open_memory,
    prompt_of,
)

SECRET = "my bank PIN is 4321"


@pytest.fixture
def server() -> Iterator[ScriptedChatServer]:
    with ScriptedChatServer() as running:
        yield running


def wait_for(condition: Callable[[], bool], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("the condition did not hold in time")
        time.sleep(0.02)


def test_a_queued_conversation_is_extracted_once_the_user_pauses(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    memory = open_memory(tmp_path, server, debounce_seconds=1.0)
    server.enqueue(answer(newFacts=[new_fact("Uses uv.")]))
    started = time.monotonic()
    assert memory.queue_conversation("t", CHAT) is True
    assert server.requests == []  # nothing before the debounce expires
    wait_for(lambda: bool(memory.list_facts()))
    assert time.monotonic() - started >= 1.0
    assert len(server.requests) == 1
    (fact,) = memory.list_facts()
    assert fact.source.threadId == "t"


def test_the_latest_conversation_of_a_thread_wins(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    memory = open_memory(tmp_path, server, debounce_seconds=30.0)
    server.enqueue(answer())
    first = conversation("I live in Lyon.", "Nice.")
    memory.queue_conversation("t", first)
    memory.queue_conversation("t", [*first, *conversation("I moved to Paris.", "Noted.")])
    report = memory.flush_queue(timeout=10)
    assert report.ok
    assert report.processed == 1
    assert len(server.requests) == 1
    assert "Paris" in prompt_of(server)
    assert "Lyon" in prompt_of(server)


def test_users_and_agents_get_separate_items(tmp_path: Path, server: ScriptedChatServer) -> None:
    memory = open_memory(tmp_path, server, debounce_seconds=30.0)
    server.enqueue(
        answer(newFacts=[new_fact("Fact one.")]),
        answer(newFacts=[new_fact("Fact two.")]),
        answer(newFacts=[new_fact("Fact three.")]),
    )
    memory.queue_conversation("t", CHAT)
    memory.scoped(user="bob", agent=None).queue_conversation("t", CHAT)
    memory.scoped(user="alice", agent="coder").queue_conversation("t", CHAT)
    assert memory.close(timeout=10).processed == 3
    assert len(server.requests) == 3
    counts = [
        len(memory.scoped(user=user, agent=agent).list_facts())
        for user, agent in (("alice", None), ("bob", None), ("alice", "coder"))
    ]
    assert counts == [1, 1, 1]


def test_the_queue_is_bounded_but_a_signal_always_gets_in(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    memory = open_memory(tmp_path, server, debounce_seconds=30.0, queue_max_depth=1)
    server.enqueue(answer(), answer())
    assert memory.queue_conversation("t1", CHAT)
    with pytest.raises(QueueFullError):
        memory.queue_conversation("t2", CHAT)
    correction = conversation("That's wrong, I use uv, not pip.", "Fixed.")
    assert memory.queue_conversation("t2", correction)  # a correction is always admitted
    assert memory.queue_conversation("t1", CHAT)  # a queued thread merges
    report = memory.close(timeout=10)
    assert (report.ok, report.processed) == (True, 2)
    assert len(server.requests) == 2


def test_close_flushes_what_is_queued_and_then_refuses(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    memory = open_memory(tmp_path, server, debounce_seconds=30.0)
    server.enqueue(answer(newFacts=[new_fact("Uses uv.")]))
    memory.queue_conversation("t", CHAT)
    report = memory.close()
    assert report.ok
    assert len(memory.list_facts()) == 1
    with pytest.raises(QueueClosedError):
        memory.queue_conversation("t", CHAT)


def test_leaving_a_with_block_flushes(tmp_path: Path, server: ScriptedChatServer) -> None:
    server.enqueue(answer(newFacts=[new_fact("Uses uv.")]))
    with open_memory(tmp_path, server, debounce_seconds=30.0) as memory:
        memory.queue_conversation("t", CHAT)
        assert memory.list_facts() == ()
    assert len(memory.list_facts()) == 1


def test_a_failed_update_is_reported_and_logged_without_content(
    tmp_path: Path, server: ScriptedChatServer, caplog: pytest.LogCaptureFixture
) -> None:
    memory = open_memory(tmp_path, server, debounce_seconds=30.0)
    server.enqueue(Reply.error(400, message="bad request"))
    memory.queue_conversation("thread-9", conversation(SECRET, "I will not store that."))
    with caplog.at_level(logging.INFO, logger="deermem"):
        report = memory.close(timeout=10)
    assert not report.ok
    assert [key.thread_id for key in report.failed] == ["thread-9"]
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "thread-9" in logged
    assert "LLMStatusError" in logged
    assert "4321" not in logged
    assert "alice" not in logged + caplog.text  # a log outlives an erased user


def test_an_erasure_drops_the_conversations_a_running_batch_has_taken(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    """The queue takes every waiting conversation into one run; an erasure during that run
    drops the erased user's, not only those still waiting, and the user stays erased."""
    unscoped = open_memory(tmp_path, server, user=None, debounce_seconds=1.0)
    ben, anna = (unscoped.scoped(user=u, agent=None) for u in ("ben", "anna"))
    anna.create_fact("Anna has a cat.")
    server.enqueue(
        Reply.text(answer(newFacts=[new_fact("Ben lives in Oslo.")]), delay=2.0),
        answer(newFacts=[new_fact("Anna lives in Lyon.")]),
    )
    ben.queue_conversation("tb", CHAT)
    anna.queue_conversation("ta", CHAT)
    wait_for(lambda: bool(server.requests))  # the run has both; ben's update is under way
    erased = unscoped.erase_user("anna")
    assert erased.counts["queued"] == 1
    assert unscoped.flush_queue(15).ok
    assert len(server.requests) == 1
    assert anna.list_facts() == ()
    assert not any("anna" in path.name for path in tmp_path.rglob("*"))
    assert [f.content for f in ben.list_facts()] == ["Ben lives in Oslo."]


def test_an_erasure_through_another_memory_drops_the_conversations_this_one_queued(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    """docs/privacy.md erases with a memory of its own (``Memory.open_unscoped(root)``):
    the app's memory on the same store, in the same process, loses the user's queued
    conversations too, and its queue does not bring the user back."""
    app = open_memory(tmp_path, server, user="anna", debounce_seconds=30.0)
    other_store = open_memory(tmp_path / "elsewhere", server, user="anna", debounce_seconds=30.0)
    app.create_fact("Anna has a cat.")
    server.enqueue(answer(newFacts=[new_fact("Anna lives in Lyon.")]))
    app.queue_conversation("ta", CHAT)
    other_store.queue_conversation("tb", CHAT)
    # Spelled otherwise, the same root: the erase finds the app's queue by the store.
    admin = open_memory(tmp_path / "elsewhere" / "..", server, user=None)
    erased = admin.erase_user("anna")
    assert erased.counts["queued"] == 1
    assert app.close(timeout=15).ok
    assert server.requests == []
    assert not any("anna" in path.name for path in tmp_path.glob("users/*"))
    assert app.list_facts() == ()
    # Another store's queue is not the erased one's.
    assert other_store.flush_queue(timeout=15).ok
    assert [f.content for f in other_store.list_facts()] == ["Anna lives in Lyon."]


def test_an_erasure_through_another_memory_waits_for_the_update_this_one_runs(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    """A conversation already past the queue (its model call under way) when another memory
    of the process erases the user: the erase waits for its commit, then erases it too."""
    app = open_memory(tmp_path, server, user="anna", debounce_seconds=1.0)
    server.enqueue(Reply.text(answer(newFacts=[new_fact("Anna lives in Lyon.")]), delay=2.0))
    app.queue_conversation("ta", CHAT)
    wait_for(lambda: bool(server.requests))  # the update is under way
    admin = open_memory(tmp_path, server, user=None)
    erased = admin.erase_user("anna")
    assert erased.counts["queued"] == 0  # nothing was waiting: the one taken had run
    assert erased.counts["facts"] == 1  # what it learned went with the rest
    assert app.close(timeout=15).ok
    assert app.list_facts() == ()
    assert not any("anna" in path.name for path in tmp_path.rglob("*"))


def test_close_reports_what_it_could_not_flush_in_time(
    tmp_path: Path, server: ScriptedChatServer, caplog: pytest.LogCaptureFixture
) -> None:
    memory = open_memory(tmp_path, server, debounce_seconds=30.0)
    server.enqueue(Reply.text(answer(), delay=5.0), answer())
    memory.queue_conversation("slow", CHAT)
    memory.queue_conversation("next", CHAT)
    with caplog.at_level(logging.ERROR, logger="deermem.memory"):
        report = memory.close(timeout=0.5)
    assert not report.completed
    assert {key.thread_id for key in report.unflushed} == {"slow", "next"}
    assert "not processed in time" in caplog.text
    assert "'slow'" in caplog.text


def test_nothing_is_applied_after_close_returns_and_the_model_goes_with_the_last_update(
    tmp_path: Path, server: ScriptedChatServer, caplog: pytest.LogCaptureFixture
) -> None:
    memory = open_memory(tmp_path, server, debounce_seconds=30.0)
    slow = answer(newFacts=[new_fact("Slow fact.")])
    server.enqueue(Reply.text(slow, delay=1.0), answer(newFacts=[new_fact("Next fact.")]))
    memory.queue_conversation("slow", CHAT)
    memory.queue_conversation("next", conversation("I also drink tea.", "Noted."))
    learner = memory._updates
    with caplog.at_level(logging.ERROR):
        report = memory.close(timeout=0.3)
        assert {key.thread_id for key in report.unflushed} == {"slow", "next"}
        # The update under way is not cut by the model's release: its call ends, then the
        # model is released. It commits nothing (the report said it was not processed),
        # and nothing else is started (nor a model built for it).
        wait_for(lambda: learner._parts is None, 5)
        time.sleep(0.3)
    assert memory.list_facts() == ()
    assert len(server.requests) == 1
    assert "memory update failed" not in caplog.text
    # Its mark did not move either: the conversation is asked about again (the server's
    # next answer, still queued for the update that never started, is applied).
    assert memory.learn("slow", CHAT).report.outcome == "applied"
    assert [f.content for f in memory.list_facts()] == ["Next fact."]


def test_queueing_after_close_is_refused_without_building_a_model(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    memory = open_memory(tmp_path, server, debounce_seconds=30.0)
    # Read (the model's parts built), but nothing to learn: no queue is made.
    assert memory.queue_conversation("t", conversation("thanks!", "You're welcome.")) is False
    assert memory.close().ok
    assert memory._updates._parts is None
    with pytest.raises(QueueClosedError):
        memory.queue_conversation("t", CHAT)
    assert memory._updates._parts is None


def test_the_queue_and_learn_share_the_watermark(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    memory = open_memory(tmp_path, server, debounce_seconds=30.0)
    server.enqueue(answer(), answer())
    memory.queue_conversation("t", CHAT)
    assert memory.flush_queue(timeout=10).ok
    assert memory.learn("t", CHAT).report.outcome == "nothing-new"
    grown = [*CHAT, *conversation("I also like Rust.", "Noted.")]
    memory.queue_conversation("t", grown)
    assert memory.flush_queue(timeout=10).ok
    assert len(server.requests) == 2
    prompt = prompt_of(server)
    assert "Rust" in prompt
    assert "I use uv for every Python project." not in prompt


def test_a_conversation_with_nothing_to_learn_is_not_queued(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    memory = open_memory(tmp_path, server, debounce_seconds=30.0)
    assert memory.queue_conversation("t", conversation("thanks!", "You're welcome.")) is False
    assert memory.close().processed == 0
    assert server.requests == []


def test_learn_still_works_after_close(tmp_path: Path, server: ScriptedChatServer) -> None:
    memory = open_memory(tmp_path, server, debounce_seconds=30.0)
    server.enqueue(answer(newFacts=[new_fact("Uses uv.")]), answer(newFacts=[new_fact("Tea.")]))
    memory.learn("t1", CHAT)
    assert memory.close().ok
    assert memory.learn("t2", CHAT).report.added == ("fact_00000002",)


def test_closing_a_memory_that_never_learned_loads_no_learning(tmp_path: Path) -> None:
    """Issue 23: ``deermem mcp`` closes its memory as the client leaves, and the client
    waits for that exit; a memory that learned nothing has nothing to flush."""
    script = f"""
import sys
from deermem import Memory

memory = Memory.open({str(tmp_path)!r})
memory.create_fact("Uses uv", category="preference")
print(memory.close(), "deermem.learning" in sys.modules)
print(memory.flush_queue().ok, "deermem.learning" in sys.modules)
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.splitlines() == [
        "FlushReport(completed=True, processed=0, failed=(), unflushed=()) False",
        "True True",  # the queue's first use loads the pipeline, as before
    ]
