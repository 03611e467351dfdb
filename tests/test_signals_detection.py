"""Signal detection over the last six messages, and the pattern files behind it."""

from __future__ import annotations

from pathlib import Path

import pytest

from deermem import MemoryConfig
from deermem.errors import PatternError
from deermem.learning.messages import Message, parse_messages
from deermem.learning.signals import (
    PATTERN_FILES,
    SIGNAL_WINDOW,
    Signal,
    detect_signals,
    explain_signals,
    load_patterns,
)

PATTERNS = load_patterns()


def said(*texts: str) -> list[Message]:
    """A conversation in which the user says each text and the assistant answers."""
    conversation: list[Message] = []
    for text in texts:
        conversation += [Message("human", text), Message("ai", "Understood.")]
    return conversation


def signals_in(text: str) -> frozenset[Signal]:
    return detect_signals(said(text), PATTERNS)


# --- what each signal catches ----------------------------------------------------


@pytest.mark.parametrize(
    ("text", "signal"),
    [
        ("That's wrong, try again.", Signal.CORRECTION),
        ("you misunderstood me, I meant the other file", Signal.CORRECTION),
        ("don't use pip, use uv", Signal.CORRECTION),
        ("不对，应该用 uv", Signal.CORRECTION),
        ("你理解错了", Signal.CORRECTION),
        ("重新来", Signal.CORRECTION),
        ("perfect, exactly right", Signal.REINFORCEMENT),
        ("I prefer uv over pip", Signal.PREFERENCE),
        ("我更喜欢简短的回答", Signal.PREFERENCE),
        ("I am an engineer", Signal.IDENTITY),
        ("我是一名数据分析师", Signal.IDENTITY),
        ("I plan to migrate to uv", Signal.GOAL),
        ("我打算年底前迁移到 uv", Signal.GOAL),
        ("let's go with uv", Signal.DECISION),
        ("那就用这个吧", Signal.DECISION),
    ],
)
def test_each_signal_is_detected(text: str, signal: Signal) -> None:
    assert signal in signals_in(text)


@pytest.mark.parametrize(
    "text",
    [
        "对，就是这样",
        "对，就是这样。",
        "完全正确",
        "that's exactly right",
        "That's exactly right!",
        "Perfect!",
        "perfect",
        "这就是我需要的",
        "很好，以后都保持这样。",
        "yes, exactly like that",
    ],
)
def test_explicit_confirmations_are_reinforcement(text: str) -> None:
    assert Signal.REINFORCEMENT in signals_in(text)


@pytest.mark.parametrize(
    "text",
    [
        "对",
        "对。",
        "没错",
        "没错！",
        "是的",
        "yes",
        "ok",
        "That's wrong, try again.",
        "that's not right",
        "not perfect yet",
        "不完全正确",
        "这样对不对？",
        "It's not exactly what I wanted.",
    ],
)
def test_bare_agreement_and_negations_are_not_reinforcement(text: str) -> None:
    assert Signal.REINFORCEMENT not in signals_in(text)


def test_correction_is_not_reinforcement() -> None:
    assert signals_in("That's wrong, try again.") == {Signal.CORRECTION}


def test_a_neutral_substantive_turn_signals_nothing() -> None:
    text = "Can you summarise how uv resolves dependencies compared with pip-tools?"
    assert signals_in(text) == frozenset()


def test_several_signals_in_one_turn() -> None:
    text = "That's wrong: I'm a data engineer, I prefer uv, and let's go with uv for this repo."
    assert signals_in(text) == {
        Signal.CORRECTION,
        Signal.IDENTITY,
        Signal.PREFERENCE,
        Signal.DECISION,
    }


def test_assistant_text_never_signals() -> None:
    conversation = [Message("human", "what now?"), Message("ai", "That's wrong, I prefer uv")]
    assert detect_signals(conversation, PATTERNS) == frozenset()


def test_list_content_is_searched() -> None:
    conversation = parse_messages(
        [
            {"role": "user", "content": [{"type": "text", "text": "That's incorrect"}]},
            {"role": "assistant", "content": "Sorry."},
        ]
    )
    assert detect_signals(conversation, PATTERNS) == {Signal.CORRECTION}


# --- the window -----------------------------------------------------------------


@pytest.mark.parametrize("from_end", range(1, 10))
def test_only_the_last_six_messages_are_searched(from_end: int) -> None:
    correction = Message("human", "That's wrong, try again.")
    later = [
        Message("ai", "Done.") if index % 2 == 0 else Message("human", "List the open issues.")
        for index in range(from_end - 1)
    ]
    conversation = [Message("human", "hello"), Message("ai", "hi"), correction, *later]
    expected = {Signal.CORRECTION} if from_end <= SIGNAL_WINDOW else set()
    assert detect_signals(conversation, PATTERNS) == expected


def test_the_window_counts_assistant_messages_too() -> None:
    confirmation = [Message("human", "perfect")]
    chatter = [Message("ai", f"reply {index}") for index in range(SIGNAL_WINDOW)]
    assert detect_signals(confirmation + chatter[:5], PATTERNS) == {Signal.REINFORCEMENT}
    assert detect_signals(confirmation + chatter, PATTERNS) == frozenset()


def test_explain_names_message_pattern_and_file_but_no_text() -> None:
    conversation = said("I'm a nurse", "That's wrong")
    matches = explain_signals(conversation, PATTERNS)
    assert [(match.signal, match.message_index) for match in matches] == [
        (Signal.CORRECTION, 2),
        (Signal.IDENTITY, 0),
    ]
    assert matches[0].source == "deermem/learning/patterns/correction.yaml"
    assert "wrong" in matches[0].pattern
    assert all("nurse" not in repr(match) for match in matches)
    assert frozenset(match.signal for match in matches) == detect_signals(conversation, PATTERNS)


# --- pattern files ------------------------------------------------------------------


def test_bundled_lists_are_present_and_cached() -> None:
    assert all(PATTERNS.for_signal(signal) for signal in Signal)
    assert PATTERNS.trivial
    assert load_patterns() is PATTERNS
    assert load_patterns(None) is PATTERNS
    assert PATTERN_FILES == (
        "trivial",
        "correction",
        "reinforcement",
        "preference",
        "identity",
        "goal",
        "decision",
    )


def test_patterns_dir_defaults_to_none() -> None:
    assert MemoryConfig().patterns_dir is None


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / f"{name}.yaml"
    path.write_text(text, "utf-8")
    return path


def test_a_user_file_replaces_the_bundled_list(tmp_path: Path) -> None:
    write(tmp_path, "correction", "- '\\bnope\\b'\n")
    custom = load_patterns(tmp_path)
    assert [pattern.text for pattern in custom.for_signal(Signal.CORRECTION)] == ["\\bnope\\b"]
    assert detect_signals(said("nope"), custom) == {Signal.CORRECTION}
    assert Signal.CORRECTION not in detect_signals(said("That's wrong"), custom)
    # Lists the directory does not hold stay bundled, and the bundled cache is untouched.
    assert custom.for_signal(Signal.GOAL) == PATTERNS.for_signal(Signal.GOAL)
    assert load_patterns() is PATTERNS
    assert Signal.CORRECTION in detect_signals(said("That's wrong"), load_patterns())


def test_a_user_file_can_extend_the_bundled_list(tmp_path: Path) -> None:
    write(
        tmp_path,
        "reinforcement",
        "mode: extend\n"
        "patterns:\n"
        "  - pattern: '\\bsuperb\\b'\n"
        "    flags: [ignorecase]\n"
        "    examples: ['Superb work']\n",
    )
    custom = load_patterns(tmp_path)
    bundled = PATTERNS.for_signal(Signal.REINFORCEMENT)
    assert custom.for_signal(Signal.REINFORCEMENT)[: len(bundled)] == bundled
    assert Signal.REINFORCEMENT in detect_signals(said("SUPERB"), custom)
    assert Signal.REINFORCEMENT in detect_signals(said("完全正确"), custom)
    assert custom.for_signal(Signal.REINFORCEMENT)[-1].source == str(
        tmp_path / "reinforcement.yaml"
    )


def test_a_user_trivial_list(tmp_path: Path) -> None:
    write(tmp_path, "trivial", "- 'roger'\n")
    custom = load_patterns(tmp_path)
    assert custom.is_trivial("Roger.") is False  # no ignorecase asked for
    assert custom.is_trivial("roger!")
    assert not custom.is_trivial("ok")  # replaced, not extended


@pytest.mark.parametrize(
    ("text", "problem", "pattern"),
    [
        ("- '(unclosed'\n", "invalid regular expression", "(unclosed"),
        ("- pattern: 'a'\n  flags: [shout]\n", "unknown flag 'shout'", "a"),
        ("- pattern: 'a'\n  colour: red\n", "unknown key(s) ['colour']", "a"),
        ("- pattern: '\\bx\\b'\n  examples: ['y']\n", "does not match its example 'y'", "\\bx\\b"),
        ("- 'a*'\n", "matches empty text", "a*"),
        ("patterns: ['\\bok\\b']\ncounterexamples: ['ok then']\n", "counterexample", "\\bok\\b"),
        ("- pattern: 'a'\n  examples: 'abc'\n", "'examples' must be a list of strings", "a"),
    ],
)
def test_invalid_patterns_name_the_file_and_the_pattern(
    tmp_path: Path, text: str, problem: str, pattern: str
) -> None:
    path = write(tmp_path, "goal", text)
    with pytest.raises(PatternError) as caught:
        load_patterns(tmp_path)
    error = caught.value
    assert error.path == str(path)
    assert error.pattern == pattern
    assert problem in str(error)
    assert str(error).startswith(f"{path}: pattern ")
    assert f"`{pattern}`" in str(error)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("patterns: [\n", "not valid YAML"),
        ("just a string\n", "expected a list of patterns or a mapping"),
        ("patterns: 'x'\n", "'patterns' must be a list"),
        ("mode: merge\npatterns: []\n", "mode must be 'replace' or 'extend'"),
        ("pattern: []\n", "unknown key(s) ['pattern']"),
        ("- 3\n", "expected a string or a mapping"),
        ("- pattern: ''\n", "'pattern' must be a non-empty string"),
    ],
)
def test_invalid_files_name_the_file(tmp_path: Path, text: str, problem: str) -> None:
    path = write(tmp_path, "decision", text)
    with pytest.raises(PatternError, match=r"decision\.yaml") as caught:
        load_patterns(tmp_path)
    assert caught.value.path == str(path)
    assert problem in str(caught.value)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("patterns: [\n", "not valid YAML: line 2, column 1: did not find expected node content"),
        (
            "mode: extend\npatterns: []\nmode: replace\n",
            "not valid YAML: the key 'mode' appears twice (again on line 3)",
        ),
    ],
)
def test_a_yaml_problem_is_one_line_with_its_place(tmp_path: Path, text: str, problem: str) -> None:
    path = write(tmp_path, "goal", text)
    with pytest.raises(PatternError) as caught:
        load_patterns(tmp_path)
    assert str(caught.value).startswith(f"{path}: {problem}")
    assert "\n" not in str(caught.value)


def test_undecodable_file(tmp_path: Path) -> None:
    (tmp_path / "goal.yaml").write_bytes(b"- '\xff\xfe'\n")
    with pytest.raises(PatternError, match="cannot read"):
        load_patterns(tmp_path)


def test_an_unknown_file_name_is_an_error(tmp_path: Path) -> None:
    write(tmp_path, "corection", "- 'x'\n")
    with pytest.raises(PatternError, match=r"corection\.yaml: unknown pattern file"):
        load_patterns(tmp_path)


def test_patterns_dir_must_be_a_directory(tmp_path: Path) -> None:
    with pytest.raises(PatternError, match="not a directory"):
        load_patterns(tmp_path / "missing")


def test_an_empty_directory_gives_the_bundled_lists(tmp_path: Path) -> None:
    custom = load_patterns(tmp_path)
    assert custom == PATTERNS
