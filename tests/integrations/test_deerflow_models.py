"""The model deermem extracts with inside DeerFlow, and the host's callbacks around it.

DeerFlow's default model is a LangChain chat model. :class:`HttpChatModel`
below is one in the only sense deermem relies on — ``invoke(messages,
config=)`` returning a reply with ``content``, ``usage_metadata`` and
``response_metadata`` — and it makes a real HTTP call to a ScriptedChatServer.
"""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from deermem import LLMError
from deermem.integrations.deerflow.models import HostChatModel, ObservedModel
from deermem.llm import ChatMessage, ChatModel
from deermem.testing import Reply, ScriptedChatServer
from tests.integrations.deerflow_support import backend, deerflow_turn, model_section
from tests.wire_support import answer, new_fact

HELLO = [ChatMessage.system("You extract memory."), ChatMessage.user("Hello.")]


class HttpChatModel:
    """The part of a LangChain chat model deermem uses, over real HTTP."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.model_name = "host-default"
        self.configs: list[Any] = []

    def invoke(self, messages: list[dict[str, str]], config: Any = None) -> SimpleNamespace:
        self.configs.append(config)
        response = httpx.post(
            f"{self.url}/chat/completions",
            json={"model": self.model_name, "messages": messages},
            timeout=10,
        )
        response.raise_for_status()
        body = response.json()
        choice = body["choices"][0]
        usage = body.get("usage", {})
        return SimpleNamespace(
            type="ai",
            content=choice["message"]["content"],
            usage_metadata={
                "input_tokens": usage.get("prompt_tokens"),
                "output_tokens": usage.get("completion_tokens"),
                "total_tokens": usage.get("total_tokens"),
            },
            response_metadata={
                "finish_reason": choice["finish_reason"],
                "model_name": body["model"],
            },
        )


class RecordingCallbacks:
    """DeerFlow's MemoryCallbacks, recording; the call hook adds metadata as Langfuse's does."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any], dict[str, Any]]] = []

    def on_memory_llm_call(self, invoke_config: dict[str, Any], **details: Any) -> None:
        self.calls.append(("call", dict(invoke_config), details))
        invoke_config["metadata"] = {"trace": "t-1"}

    def on_memory_llm_result(self, invoke_config: dict[str, Any], **details: Any) -> None:
        self.calls.append(("result", dict(invoke_config), details))


def test_the_hosts_model_answers_as_a_deermem_chat_model(server: ScriptedChatServer) -> None:
    host = HostChatModel(HttpChatModel(server.url))
    assert isinstance(host, ChatModel)
    assert host.name == "host-default"
    server.enqueue(Reply.text([{"type": "text", "text": "Hi "}, {"type": "text", "text": "there"}]))
    response = host.complete(HELLO, json_schema={"type": "object"})
    assert response.text == "Hi \nthere"
    assert response.model == "scripted-model"
    assert response.finish_reason == "stop"
    assert response.usage.prompt_tokens is not None
    assert server.requests[0].messages == [m.to_dict() for m in HELLO]


def test_a_failing_host_model_is_an_llm_error_naming_the_type_only(
    server: ScriptedChatServer,
) -> None:
    host = HostChatModel(HttpChatModel(server.url))
    server.enqueue(Reply.error(500))
    with pytest.raises(LLMError) as caught:
        host.complete(HELLO)
    assert str(caught.value) == "the host's chat model failed (HTTPStatusError)"
    assert caught.value.model == "host-default"


def test_callbacks_see_every_call_and_shape_the_hosts_invoke_config(
    server: ScriptedChatServer,
) -> None:
    chat_model = HttpChatModel(server.url)
    callbacks = RecordingCallbacks()
    observed = ObservedModel(HostChatModel(chat_model), callbacks)
    server.enqueue("fine", Reply.error(503))
    assert observed.complete(HELLO).text == "fine"
    with pytest.raises(LLMError):
        observed.complete(HELLO)
    assert chat_model.configs == [{"metadata": {"trace": "t-1"}}] * 2
    kinds = [kind for kind, _, _ in callbacks.calls]
    assert kinds == ["call", "result", "call", "result"]
    _, before, call = callbacks.calls[0]
    assert before == {}
    assert call == {
        "thread_id": None,
        "user_id": None,
        "trace_id": None,
        "model_name": "host-default",
    }
    _, config, ok = callbacks.calls[1]
    assert config == {"metadata": {"trace": "t-1"}}
    assert ok["response"] == "fine"
    assert ok["error"] is None
    assert ok["prompt"] == [m.to_dict() for m in HELLO]
    assert ok["duration_ms"] >= 0.0
    failed = callbacks.calls[3][2]
    assert isinstance(failed["error"], LLMError)
    assert failed["response"] is None


def test_a_callback_that_raises_never_fails_the_call(
    server: ScriptedChatServer, caplog: pytest.LogCaptureFixture
) -> None:
    class Broken:
        def on_memory_llm_call(self, invoke_config: dict[str, Any], **details: Any) -> None:
            raise RuntimeError("observer down")

    observed = ObservedModel(HostChatModel(HttpChatModel(server.url)), Broken())
    server.enqueue("fine")
    assert observed.complete(HELLO).text == "fine"
    assert "on_memory_llm_call callback failed (RuntimeError)" in caplog.text


def test_without_a_model_of_its_own_deermem_extracts_with_the_hosts(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    callbacks = RecordingCallbacks()
    chat_model = HttpChatModel(server.url)
    hooks = {"host_llm_factory": lambda: chat_model, "callbacks": callbacks}
    manager = backend(tmp_path, host_hooks=hooks)
    server.enqueue(answer(newFacts=[new_fact("Uses uv.")]))
    manager.add("t", deerflow_turn("I always use uv.", "Noted."), user_id="alice")
    assert manager.shutdown_flush(10.0)
    assert [f["content"] for f in manager.get_memory(user_id="alice")["facts"]] == ["Uses uv."]
    assert [kind for kind, _, _ in callbacks.calls] == ["call", "result"]
    assert chat_model.configs == [{"metadata": {"trace": "t-1"}}]


def test_a_model_of_its_own_wins_and_the_host_factory_is_never_called(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    def host_factory() -> Any:
        raise AssertionError("the host's model was built")

    callbacks = RecordingCallbacks()
    hooks = {"host_llm_factory": host_factory, "callbacks": callbacks}
    manager = backend(tmp_path, server, host_hooks=hooks)
    server.enqueue(answer(newFacts=[new_fact("Uses uv.")]))
    manager.add("t", deerflow_turn("I always use uv.", "Noted."), user_id="alice")
    assert manager.shutdown_flush(10.0)
    assert len(server.requests) == 1
    assert [kind for kind, _, _ in callbacks.calls] == ["call", "result"]
    assert callbacks.calls[0][2]["model_name"] == "scripted"


def test_a_host_model_factory_that_fails_leaves_extraction_off(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def host_factory() -> Any:
        raise FileNotFoundError("config.yaml")

    with caplog.at_level(logging.WARNING):
        manager = backend(tmp_path, host_hooks={"host_llm_factory": host_factory})
        manager.add("t", deerflow_turn("I use uv.", "Noted."), user_id="alice")
    assert "host_llm_factory failed (FileNotFoundError)" in caplog.text
    assert "no model for memory extraction" in caplog.text
    assert manager.get_memory(user_id="alice")["facts"] == []


def test_a_host_model_slot_in_backend_config_wins_over_the_factory(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    chat_model = HttpChatModel(server.url)

    def host_factory() -> Any:
        raise AssertionError("the factory was called")

    manager = backend(tmp_path, host_hooks={"host_llm_factory": host_factory}, host_llm=chat_model)
    server.enqueue(answer())
    manager.add("t", deerflow_turn("I use uv.", "Noted."), user_id="alice")
    assert manager.shutdown_flush(10.0)
    assert len(chat_model.configs) == 1


def test_the_own_model_section_is_deermems_client_with_its_retries(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    section = model_section(server, max_retries=1, retry_backoff_seconds=0.0)
    manager = backend(tmp_path, model=section)
    server.enqueue(Reply.error(503), answer(newFacts=[new_fact("Uses uv.")]))
    manager.add("t", deerflow_turn("I always use uv.", "Noted."), user_id="alice")
    assert manager.shutdown_flush(10.0)
    assert len(server.requests) == 2
