"""The embedded SmolLM2-135M model, end to end through Memory.learn.

This checks plumbing, never quality: the 135M model is weak and, decoding
greedily, tends to repeat itself until the token limit. What must hold is
that the whole path runs for real — prompt, grammar-constrained decoding,
parsing, the gates, the store — and ends in a commit or a clean outcome
without an update, never in a crash or a half-written store.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from deermem import Memory, MemoryConfig
from deermem.learning.answer import response_json_schema
from deermem.llm import grammar_schema
from tests.wire_support import NOW, stored_fact, tree

needs_llama = pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None,
    reason="llama_cpp is not importable: install the extra with `uv sync --extra local`",
)

# A prompt budget the 135M model can read in seconds on a CPU: a short system
# message (an override, as any user can write one) instead of the full one.
SHORT_SYSTEM = """\
system: |
  You keep long-term memory about a user. Reply with one JSON object: "user": {},
  "history": {}, "newFacts": a list of facts about the user (content, category,
  confidence from 0 to 1, scope "user", durability "durable", authority "descriptive"),
  and empty lists for the other keys.
"""


def test_the_grammar_schema_drops_only_length_bounds() -> None:
    schema = response_json_schema()
    stripped = grammar_schema(schema)
    assert "maxLength" not in repr(stripped)
    assert "maxItems" in repr(stripped)
    fact = stripped["properties"]["newFacts"]["items"]
    assert fact["properties"]["content"] == {"type": "string", "minLength": 1}
    assert fact["required"] == schema["properties"]["newFacts"]["items"]["required"]
    assert schema == response_json_schema()  # the input is left alone


@pytest.mark.local_model
@pytest.mark.slow
@needs_llama
def test_the_local_model_runs_the_whole_update_path(tmp_path: Path) -> None:
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    (prompts / "memory_update.yaml").write_text(SHORT_SYSTEM)
    config = MemoryConfig(
        model={"provider": "local", "max_tokens": 256, "context_tokens": 1024},
        max_facts=10,
        prompts_dir=str(prompts),
    )
    root = tmp_path / "store"
    with Memory.open(root, config, user="alice", clock=lambda: NOW) as memory:
        memory.import_document({"facts": [stored_fact("fact_tea", "Drinks green tea")]})
        before = tree(root)
        report = memory.learn(
            "local-1",
            [
                {"role": "user", "content": "I always use uv instead of pip."},
                {"role": "assistant", "content": "Noted, uv it is."},
            ],
        ).report
        assert report.model_call is not None
        assert report.model_call.model == "SmolLM2-135M-Instruct.Q4_1"
        assert (report.model_call.prompt_tokens or 0) > 100
        assert report.signals == ("preference",)
        assert report.outcome in ("applied", "unchanged", "no-update", "rejected")
        facts = {fact.id: fact for fact in memory.list_facts()}
        if report.committed:
            assert report.commit_attempts == 1
            assert set(report.added) <= set(facts)
            assert all(facts[i].source.threadId == "local-1" for i in report.added)
        else:
            assert tree(root) == before
            assert set(facts) == {"fact_tea"}
        if report.outcome == "no-update":
            assert report.detail in ("no-update-object", "empty")
            assert report.model_call.truncated or report.detail == "empty"
