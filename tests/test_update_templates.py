"""Prompt templates and their overrides (catalogue: test_prompt_external.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from deermem.errors import PromptNotFoundError, PromptTemplateError
from deermem.learning.plan import UpdateSettings
from deermem.learning.prompt import (
    ConversationTurn,
    PromptLoader,
    build_update_prompt,
    fit_conversation,
)
from tests.update_support import NOW, state

USER_TEMPLATE = (
    "MEMORY {{ current_memory }}\nTALK {{ conversation }}\n"
    "{{ signal_hints }}{{ staleness_review }}END"
)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_the_bundled_template_loads_complete() -> None:
    template = PromptLoader().load("memory_update")
    assert template.sources == ("bundled memory_update.yaml",)
    assert set(template.texts) == {
        "system",
        "user",
        "signal_hints_header",
        "manual_facts_note",
        "staleness_review",
    }
    assert set(template.tables["signal_hints"]) == {
        "correction",
        "reinforcement",
        "preference",
        "identity",
        "goal",
        "decision",
    }


def test_an_unknown_template_is_not_found() -> None:
    with pytest.raises(PromptNotFoundError) as caught:
        PromptLoader().load("consolidation")
    assert isinstance(caught.value, FileNotFoundError)
    assert caught.value.name == "consolidation"


def test_a_global_override_replaces_only_the_keys_it_defines(tmp_path: Path) -> None:
    write(tmp_path / "memory_update.yaml", "system: Be brief.\nsignal_hints:\n  goal: Aim noted.\n")
    template = PromptLoader(tmp_path).load("memory_update")
    bundled = PromptLoader().load("memory_update")
    assert template.text("system") == "Be brief."
    assert template.tables["signal_hints"]["goal"] == "Aim noted."
    assert (
        template.tables["signal_hints"]["correction"]
        == bundled.tables["signal_hints"]["correction"]
    )
    assert template.text("user") == bundled.text("user")
    assert template.sources[-1] == str(tmp_path / "memory_update.yaml")


def test_an_agent_override_applies_to_that_agent_only(tmp_path: Path) -> None:
    write(tmp_path / "memory_update.yaml", "system: Everyone.\n")
    write(tmp_path / "coder" / "memory_update.yaml", yaml.safe_dump({"user": USER_TEMPLATE}))
    loader = PromptLoader(tmp_path)
    coder = loader.load("memory_update", agent="Coder")  # agent directories are lower case
    other = loader.load("memory_update", agent="writer")
    assert coder.text("system") == other.text("system") == "Everyone."
    assert coder.text("user").startswith("MEMORY")
    assert not other.text("user").startswith("MEMORY")
    assert loader.load("memory_update", agent="coder") is coder  # loaded once
    prompt = build_update_prompt(
        state(),
        fit_conversation([ConversationTurn("human", "hello")]),
        signals=(),
        settings=UpdateSettings(),
        now=NOW,
        template=coder,
    )
    assert prompt is not None
    assert prompt.user.startswith("MEMORY {")
    assert "TALK User: hello" in prompt.user


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("system: Hello {{ conversation }}\n", "'system' uses unknown placeholder(s) conversation"),
        (
            "user: '{{ current_memory }} {{ conversation }} {{ signal_hints }}'\n",
            "'user' must contain {{ staleness_review }}",
        ),
        (
            "user: '{{ current_memory }} {{ conversation }} {{ signal_hints }} "
            "{{ staleness_review }} {{ convresation }}'\n",
            "unknown placeholder(s) convresation",
        ),
        ("staleness_review: no list here\n", "must contain {{ candidates }}"),
        ("sytem: typo\n", "unknown key 'sytem'"),
        ("signal_hints:\n  corection: x\n", "unknown entry 'corection'"),
        ("signal_hints: just text\n", "'signal_hints' must be a mapping"),
        ("system: ''\n", "'system' must be a non-empty text"),
        ("system: [1, 2]\n", "'system' must be a non-empty text"),
        ("- a list\n", "expected a mapping"),
        ("system: 'unclosed\n", "is not valid YAML"),
    ],
)
def test_an_invalid_global_override_stops_the_loader(
    tmp_path: Path, text: str, problem: str
) -> None:
    path = write(tmp_path / "memory_update.yaml", text)
    with pytest.raises(PromptTemplateError) as caught:
        PromptLoader(tmp_path)
    assert caught.value.path == str(path)
    assert problem in str(caught.value)


def test_an_invalid_agent_override_fails_when_that_agent_loads(tmp_path: Path) -> None:
    write(tmp_path / "coder" / "memory_update.yaml", "system: '{{ oops }}'\n")
    loader = PromptLoader(tmp_path)  # global templates are fine
    loader.load("memory_update", agent="writer")
    with pytest.raises(PromptTemplateError, match="oops"):
        loader.load("memory_update", agent="coder")


@pytest.mark.parametrize("agent", ["../etc", "a/b", "", ".", "x y"])
def test_agent_names_cannot_leave_the_prompts_dir(tmp_path: Path, agent: str) -> None:
    with pytest.raises(PromptTemplateError, match="agent name"):
        PromptLoader(tmp_path).load("memory_update", agent=agent)


def test_the_prompts_dir_must_be_a_directory(tmp_path: Path) -> None:
    with pytest.raises(PromptTemplateError, match="not a directory"):
        PromptLoader(tmp_path / "missing")
    with pytest.raises(PromptTemplateError, match="not a directory"):
        PromptLoader(write(tmp_path / "file.yaml", "system: x\n"))


def test_an_unreadable_override_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "memory_update.yaml").write_bytes(b"system: \xff\xfe\n")
    with pytest.raises(PromptTemplateError, match="cannot be read"):
        PromptLoader(tmp_path)


def test_a_missing_global_override_falls_back_to_the_bundled_template(tmp_path: Path) -> None:
    assert PromptLoader(tmp_path).load("memory_update") == PromptLoader().load("memory_update")
