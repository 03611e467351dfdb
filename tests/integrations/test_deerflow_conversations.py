"""Conversations from DeerFlow: add, aadd, add_nowait, hidden messages, and a bounded shutdown.

The model is a ScriptedChatServer over real HTTP on 127.0.0.1; messages have
the attributes DeerFlow's graph state gives them (LangChain's), or are dicts.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from deermem.testing import Reply, ScriptedChatServer
from tests.integrations.deerflow_support import (
    LCMessage,
    backend,
    deerflow_turn,
)
from tests.wire_support import answer, new_fact, prompt_of

MEMORY_ECHO = "<memory>Facts:\n- [preference | 0.90] Uses pip.</memory>"


def facts_of(manager: Any, user: str = "alice", agent: str | None = None) -> list[str]:
    return [f["content"] for f in manager.get_memory(user_id=user, agent_name=agent)["facts"]]


def test_a_deerflow_turn_is_learned_from_its_user_message_and_final_answer_only(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    manager = backend(tmp_path, server)
    server.enqueue(answer(newFacts=[new_fact("Uses uv.")]))
    turn = deerflow_turn("I always use uv.", "Noted: uv.", memory_text=MEMORY_ECHO)
    manager.add("thread-1", turn, user_id="alice", agent_name="Coder", trace_id="trace-1")
    assert server.requests == []  # queued until the user pauses
    assert manager.shutdown_flush(10.0) is True
    prompt = prompt_of(server)
    assert "I always use uv." in prompt
    assert "Noted: uv." in prompt
    for leaked in ("Uses pip", "Today is Monday", "TOOL-OUTPUT"):
        assert leaked not in prompt
    assert facts_of(manager, agent="coder") == ["Uses uv."]
    fact = manager.get_memory(user_id="alice", agent_name="coder")["facts"][0]
    assert fact["source"] == "thread-1"


def test_the_whole_conversation_each_turn_is_read_once(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    manager = backend(tmp_path, server)
    server.enqueue(answer(newFacts=[new_fact("Uses uv.")]), answer())
    first = deerflow_turn("I always use uv.", "Noted.")
    manager.add("t", first, user_id="alice")
    assert manager.shutdown_flush(10.0)
    second = [*first, LCMessage("human", "I live in Lyon.", "m2"), LCMessage("ai", "Nice.", "a3")]
    manager.add("t", second, user_id="alice")
    assert manager.shutdown_flush(10.0)
    assert "Lyon" in prompt_of(server)
    assert "I always use uv." not in prompt_of(server)


def test_openai_style_dict_messages_are_read_too(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    manager = backend(tmp_path, server)
    server.enqueue(answer(newFacts=[new_fact("Uses uv.")]))
    chat = [{"role": "user", "content": "I use uv."}, {"role": "assistant", "content": "Noted."}]
    manager.add("t", chat, user_id="alice")
    assert manager.shutdown_flush(10.0)
    assert facts_of(manager) == ["Uses uv."]


def test_the_hosts_rule_keeps_a_hidden_answer_but_never_the_injected_memory(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    asked: list[dict[str, Any]] = []

    def keep_every_hidden_message(additional_kwargs: dict[str, Any]) -> bool:
        asked.append(additional_kwargs)
        return True

    manager = backend(
        tmp_path, server, host_hooks={"should_keep_hidden_message": keep_every_hidden_message}
    )
    server.enqueue(answer())
    turn = deerflow_turn("Which day do we deploy?", "Fridays, then.", memory_text=MEMORY_ECHO)
    clarification = LCMessage("human", "My answer: Fridays.", "h1", {"hide_from_ui": True})
    manager.add("t", [*turn[:-1], clarification, turn[-1]], user_id="alice")
    assert manager.shutdown_flush(10.0)
    prompt = prompt_of(server)
    assert "My answer: Fridays." in prompt
    assert "Uses pip" not in prompt
    assert asked == [{"hide_from_ui": True}]  # reminders never reach the host's rule


def test_by_default_only_a_clarification_answer_among_hidden_messages_is_learned(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    manager = backend(tmp_path, server)
    answer_payload = {
        "version": 1,
        "kind": "human_input_response",
        "source": "ask_human",
        "request_id": "r-1",
        "value": "Fridays",
        "response_kind": "text",
    }
    server.enqueue(answer())
    messages = [
        LCMessage("human", "Hidden instruction.", "h0", {"hide_from_ui": True}),
        LCMessage("ai", "Reply to the instruction.", "a0"),
        LCMessage(
            "human",
            "We deploy on Fridays.",
            "h1",
            {"hide_from_ui": True, "human_input_response": answer_payload},
        ),
        LCMessage("ai", "Fridays it is.", "a1"),
    ]
    manager.add("t", messages, user_id="alice")
    assert manager.shutdown_flush(10.0)
    prompt = prompt_of(server)
    assert "We deploy on Fridays." in prompt
    assert "Hidden instruction" not in prompt
    assert "Reply to the instruction" not in prompt


def test_add_nowait_is_extracted_without_waiting_for_the_pause(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    manager = backend(tmp_path, server, debounce_seconds=300)
    server.enqueue(answer(newFacts=[new_fact("Uses uv.")]))
    manager.add_nowait("t", deerflow_turn("I always use uv.", "Noted."), user_id="alice")
    deadline = time.monotonic() + 15
    while not facts_of(manager):
        assert time.monotonic() < deadline, "add_nowait was not processed"
        time.sleep(0.02)
    assert facts_of(manager) == ["Uses uv."]


def test_aadd_does_its_work_off_the_event_loop(tmp_path: Path, server: ScriptedChatServer) -> None:
    threads: list[int] = []

    def note_thread(additional_kwargs: dict[str, Any]) -> bool:
        threads.append(threading.get_ident())
        return False

    manager = backend(tmp_path, server, host_hooks={"should_keep_hidden_message": note_thread})
    server.enqueue(answer(newFacts=[new_fact("Uses uv.")]))
    hidden = LCMessage("human", "hidden", "h", {"hide_from_ui": True})

    async def run() -> int:
        await manager.aadd("t", [hidden, *deerflow_turn("I use uv.", "Noted.")], user_id="alice")
        return threading.get_ident()

    loop_thread = asyncio.run(run())
    assert threads
    assert loop_thread not in threads
    assert manager.shutdown_flush(10.0)
    assert facts_of(manager) == ["Uses uv."]


# --- nothing escapes add -------------------------------------------------------------


def test_without_any_model_add_logs_once_and_returns(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    manager = backend(tmp_path)
    with caplog.at_level(logging.WARNING):
        manager.add("t", deerflow_turn("I use uv.", "Noted."), user_id="alice")
        manager.add_nowait("t", deerflow_turn("I use uv.", "Noted."), user_id="alice")
    assert caplog.text.count("no model for memory extraction") == 1
    assert manager.shutdown_flush(1.0) is True
    assert facts_of(manager) == []


def test_a_full_queue_unreadable_messages_and_a_closed_memory_are_logged_not_raised(
    tmp_path: Path, server: ScriptedChatServer, caplog: pytest.LogCaptureFixture
) -> None:
    manager = backend(tmp_path, server, queue_max_depth=1)
    server.enqueue(answer())
    with caplog.at_level(logging.WARNING):
        manager.add("t1", deerflow_turn("Hello there.", "Hi."), user_id="alice")
        manager.add("t2", deerflow_turn("Hello again.", "Hi."), user_id="alice")
        manager.add("t3", [{"type": "mystery", "content": "SECRET-TEXT"}], user_id="alice")
        assert manager.shutdown_flush(10.0) is True  # t1, the one admitted
        manager.close()
        manager.add("t4", deerflow_turn("Hello.", "Hi."), user_id="alice")
    assert "queue full; conversation of thread 't2'" in caplog.text
    assert "thread 't3' not queued for memory: MessageFormatError" in caplog.text
    assert "memory is closed; conversation of thread 't4'" in caplog.text
    assert "SECRET-TEXT" not in caplog.text


def test_a_failing_model_never_reaches_the_agent_run(
    tmp_path: Path, server: ScriptedChatServer, caplog: pytest.LogCaptureFixture
) -> None:
    manager = backend(tmp_path, server)
    server.enqueue(Reply.error(500), Reply.drop_connection())
    manager.add("t1", deerflow_turn("I always use uv.", "Noted."), user_id="alice")
    manager.add_nowait("t2", deerflow_turn("I always use ruff.", "Noted."), user_id="alice")
    assert manager.shutdown_flush(10.0) is False
    assert facts_of(manager) == []
    assert "uv" not in caplog.text
    assert "ruff" not in caplog.text


# --- shutdown ---------------------------------------------------------------------------


def test_shutdown_flush_is_a_hard_bound_and_says_what_it_achieved(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    manager = backend(tmp_path, server)
    server.enqueue(Reply.text(answer(newFacts=[new_fact("Uses uv.")]), delay=2.0))
    manager.add("t", deerflow_turn("I always use uv.", "Noted."), user_id="alice")
    started = time.monotonic()
    assert manager.shutdown_flush(0.3) is False
    assert time.monotonic() - started < 0.8
    assert manager.shutdown_flush(10.0) is True  # the drain in flight finishes the item
    assert facts_of(manager) == ["Uses uv."]


def test_close_after_a_timed_out_flush_does_not_wait_again(
    tmp_path: Path, server: ScriptedChatServer, caplog: pytest.LogCaptureFixture
) -> None:
    manager = backend(tmp_path, server)
    server.enqueue(Reply.text(answer(), delay=5.0))
    manager.add("t", deerflow_turn("I always use uv.", "Noted."), user_id="alice")
    assert manager.shutdown_flush(0.2) is False
    started = time.monotonic()
    manager.close()
    assert time.monotonic() - started < 0.5
    assert "not processed in time" in caplog.text
    assert "thread 't'" in caplog.text
