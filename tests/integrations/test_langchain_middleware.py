"""DeerMemMiddleware inside LangChain's real ``create_agent``: a scripted chat model from
langchain_core plays the agent, deermem's ScriptedChatServer (real HTTP on 127.0.0.1)
plays the learning model."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field

from deermem import Memory, MemoryConfig, UnsafeIdentifierError
from deermem.errors import LLMNotConfigured
from deermem.integrations.langchain import DeerMemMiddleware, MissingThreadIdError
from deermem.testing import ScriptedChatServer
from tests.wire_support import (
    NOW,
    answer,
    close_memories,  # noqa: F401 (autouse fixture)
    new_fact,
    open_memory,
    prompt_of,
    seed,
    stored_fact,
)

STORED = "Prefers dark mode in every editor"


class ScriptedAgentModel(GenericFakeChatModel):
    """The fake model answers from its script and records what each call was sent.

    ``create_agent`` binds tools whenever the agent has any, and langchain_core's fake
    models do not implement ``bind_tools``: this one accepts and ignores them."""

    calls: list[list[BaseMessage]] = Field(default_factory=list)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.calls.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def agent_model(*replies: str) -> ScriptedAgentModel:
    return ScriptedAgentModel(messages=iter([AIMessage(content=r) for r in replies]))


@pytest.fixture
def memory(tmp_path: Path, server: ScriptedChatServer) -> Memory:
    memory = open_memory(tmp_path, server)
    seed(memory, stored_fact("fact_dark", STORED, category="preference"))
    return memory


def run(agent: Any, text: str, config: Any, *, sync: bool) -> dict[str, Any]:
    state = {"messages": [{"role": "user", "content": text}]}
    if sync:
        return dict(agent.invoke(state, config))
    return dict(asyncio.run(agent.ainvoke(state, config)))


@pytest.mark.parametrize("sync", [True, False], ids=["invoke", "ainvoke"])
def test_the_block_reaches_each_model_call_and_never_the_state(
    memory: Memory, server: ScriptedChatServer, sync: bool
) -> None:
    model = agent_model("Noted: uv.", "Sure, uv again.")
    saver = InMemorySaver()
    agent = create_agent(
        model,
        system_prompt="You are helpful.",
        middleware=[DeerMemMiddleware(memory)],
        checkpointer=saver,
    )
    config: RunnableConfig = {"configurable": {"thread_id": "t-42"}}
    server.enqueue(answer(newFacts=[new_fact("Uses uv for every Python project")]))
    run(agent, "I use uv for every Python project.", config, sync=sync)

    system = model.calls[0][0]
    assert system.type == "system"
    assert system.text.startswith("You are helpful.\n\n<memory>")
    assert STORED in system.text
    checkpointed = agent.get_state(config).values["messages"]
    assert [m.type for m in checkpointed] == ["human", "ai"]
    assert not any("<memory>" in m.text or STORED in m.text for m in checkpointed)

    # learning: the queued thread reaches the model as the conversation, without the block
    report = memory.flush_queue(timeout=10)
    assert not report.failed
    prompt = prompt_of(server)
    assert "I use uv for every Python project." in prompt
    assert "<memory>" not in prompt
    assert any(f.content == "Uses uv for every Python project" for f in memory.list_facts())
    assert {f.source.threadId for f in memory.list_facts() if f.id != "fact_dark"} == {"t-42"}

    # the next turn of the thread sees the new fact, and only its new messages are learned
    server.enqueue(answer())
    run(agent, "And for scripts too.", config, sync=sync)
    assert "Uses uv for every Python project" in model.calls[1][0].text
    memory.flush_queue(timeout=10)
    second = prompt_of(server)
    assert "And for scripts too." in second
    assert len(server.requests) == 2


def test_without_a_system_prompt_the_block_is_the_system_message(memory: Memory) -> None:
    model = agent_model("Hello.")
    agent = create_agent(model, middleware=[DeerMemMiddleware(memory, learn=False)])
    run(agent, "hi", {}, sync=True)
    assert model.calls[0][0].type == "system"
    assert model.calls[0][0].text.startswith("<memory>")


@pytest.mark.parametrize("sync", [True, False], ids=["invoke", "ainvoke"])
def test_the_block_extends_the_system_message_and_keeps_its_blocks_and_fields(
    memory: Memory, sync: bool
) -> None:
    cached = {"type": "text", "text": "You are helpful.", "cache_control": {"type": "ephemeral"}}
    system = SystemMessage(content=[cached], additional_kwargs={"tag": "keep"}, id="system-1")
    model = agent_model("Hello.")
    agent = create_agent(
        model, system_prompt=system, middleware=[DeerMemMiddleware(memory, learn=False)]
    )
    run(agent, "hi", {}, sync=sync)
    sent = model.calls[0][0]
    assert isinstance(sent, SystemMessage)
    assert isinstance(sent.content, list)
    first, added = sent.content
    assert first == cached  # the prompt before the block is cached as before
    assert isinstance(added, dict)
    assert added["type"] == "text"
    assert added["text"].startswith("\n\n<memory>")
    assert STORED in added["text"]
    assert (sent.additional_kwargs, sent.id) == ({"tag": "keep"}, "system-1")
    assert system.content == [cached]  # the agent's own message is left as it was


def test_an_empty_memory_adds_no_system_message(tmp_path: Path) -> None:
    empty = Memory.open(tmp_path, MemoryConfig(), user="bob", clock=lambda: NOW)
    model = agent_model("Hello.")
    agent = create_agent(model, middleware=[DeerMemMiddleware(empty, learn=False)])
    run(agent, "hi", {}, sync=True)
    assert [m.type for m in model.calls[0]] == ["human"]


@pytest.mark.parametrize("sync", [True, False], ids=["invoke", "ainvoke"])
@pytest.mark.parametrize(
    ("rule", "config", "expected"),
    [
        # a fixed thread for every run
        ("support-chat", {}, "support-chat"),
        # a rule reading the run's config
        (lambda c: c["configurable"]["session"], {"configurable": {"session": "s-7"}}, "s-7"),
    ],
    ids=["fixed", "rule"],
)
def test_the_thread_id_can_be_given_or_read_by_a_rule(
    memory: Memory,
    server: ScriptedChatServer,
    rule: Any,
    config: dict[str, Any],
    expected: str,
    sync: bool,
) -> None:
    agent = create_agent(
        agent_model("Noted."), middleware=[DeerMemMiddleware(memory, thread_id=rule)]
    )
    server.enqueue(answer(newFacts=[new_fact("Works on the billing service")]))
    run(agent, "I work on the billing service.", config, sync=sync)
    memory.flush_queue(timeout=10)
    sources = {f.source.threadId for f in memory.list_facts() if f.id != "fact_dark"}
    assert sources == {expected}


@pytest.mark.parametrize("sync", [True, False], ids=["invoke", "ainvoke"])
@pytest.mark.parametrize(
    "rule",
    [
        None,  # LangGraph's thread_id
        lambda c: c["configurable"].get("session"),  # a rule that finds none
        lambda c: c["configurable"]["session"],  # docs/integrations.md's rule: a KeyError
        lambda c: c["configurable"]["sessions"][0],  # an IndexError, or a KeyError first
    ],
    ids=["default", "none", "key-error", "lookup-error"],
)
def test_a_run_without_a_thread_id_is_refused_not_dropped(
    memory: Memory, sync: bool, rule: Any
) -> None:
    middleware = DeerMemMiddleware(memory, thread_id=rule)
    agent = create_agent(agent_model("Noted.", "Noted."), middleware=[middleware])
    with pytest.raises(MissingThreadIdError, match="thread_id"):
        run(agent, "I work on the billing service.", {}, sync=sync)
    config: dict[str, Any] = {"configurable": {"sessions": []}}
    if rule is not None:
        with pytest.raises(MissingThreadIdError):
            run(agent, "I work on the billing service.", config, sync=sync)
    else:  # a blank thread id names no thread: refused by name, not as an invalid field
        for blank in ("", "   "):
            agent = create_agent(agent_model("Noted."), middleware=[middleware])
            with pytest.raises(MissingThreadIdError):
                run(agent, "I use uv.", {"configurable": {"thread_id": blank}}, sync=sync)


def test_learning_without_a_model_says_so(tmp_path: Path) -> None:
    plain = Memory.open(tmp_path, MemoryConfig(), user="bob", clock=lambda: NOW)
    agent = create_agent(agent_model("Noted."), middleware=[DeerMemMiddleware(plain)])
    with pytest.raises(LLMNotConfigured):
        run(agent, "I use uv.", {"configurable": {"thread_id": "t"}}, sync=True)


def test_an_unscoped_memory_is_refused_at_construction(tmp_path: Path) -> None:
    with pytest.raises(UnsafeIdentifierError, match="scoped"):
        DeerMemMiddleware(Memory.open_unscoped(tmp_path, MemoryConfig()))


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"thread_id": ""}, "threadId"),
        ({"thread_id": "   "}, "threadId"),
        ({"thread_id": "line\nbreak"}, "threadId"),
        ({"thread_id": "t" * 257}, "threadId"),
        ({"max_tokens": -1}, "max_tokens"),
        ({"max_tokens": 2.5}, "max_tokens"),
        ({"max_tokens": True}, "max_tokens"),
    ],
)
def test_settings_every_run_would_refuse_are_refused_at_construction(
    memory: Memory, settings: dict[str, Any], named: str
) -> None:
    """Not after each run's model call has answered (a fixed thread id is queued when the run
    ends; the budget is read at each model call)."""
    with pytest.raises(ValueError, match=named):
        DeerMemMiddleware(memory, **settings)
