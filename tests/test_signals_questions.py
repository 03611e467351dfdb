"""When a match sits in a question (deermem.learning.messages.in_question), as pattern files say."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deermem.errors import PatternError
from deermem.learning.messages import Message, in_question
from deermem.learning.signals import Signal, detect_signals, load_patterns


def asked(text: str, phrase: str) -> bool:
    """Whether ``phrase``, found in ``text``, sits in a question."""
    return in_question(text, text.index(phrase) + len(phrase))


@pytest.mark.parametrize(
    ("text", "phrase", "question"),
    [
        ("Is that correct?", "correct", True),  # the clause ends with a question mark
        ("That's right？", "right", True),  # full width
        ("That's right?!", "right", True),
        ("这完全正确吗", "完全正确", True),  # a question particle, no mark
        ("对，就是这样吗？", "就是这样", True),
        ("就是这样呢", "就是这样", True),
        ("That's right, isn't it?", "right", True),  # a tag question in the next clause
        ("That is right, isn't it", "right", True),  # this tag asks without a mark
        ("That's correct, right?", "correct", True),
        ("完全正确，对吧", "完全正确", True),
        ("完全正确，是不是？", "完全正确", True),
        ("That's right.", "right", False),
        ("That's right", "right", False),  # the end of the message
        ("Perfect, can you also add tests?", "Perfect", False),  # the question is another clause
        ("Perfect. Can you add tests?", "Perfect", False),  # ... or another sentence
        ("Perfect, right.", "Perfect", False),  # "right" asks only with a question mark
        ("完全正确，接下来写测试吧", "完全正确", False),  # 吧 suggests, it does not ask
        ("Should we use Python 3.11?", "use", True),  # a dot in a number ends nothing
        ("We use Python 3.11. Why?", "use", False),
        ("That's right\nWhat next?", "right", False),  # a line break ends the sentence
        # A clause running on past the window is no short question.
        ("That's right" + " and so on" * 25 + "?", "right", False),
        ("That's right" + " and so on" * 15 + "?", "right", True),
    ],
)
def test_what_is_a_question(text: str, phrase: str, question: bool) -> None:
    assert asked(text, phrase) is question


_PLAIN = st.text(
    alphabet=st.characters(
        exclude_characters=",，;；、.。!！?？…\n吗么呢", exclude_categories=["Cs"]
    ),
    max_size=30,
)


@given(_PLAIN, _PLAIN, st.sampled_from(["?", "？"]))
def test_a_clause_ending_in_a_question_mark_is_a_question(head: str, tail: str, mark: str) -> None:
    text = head + tail + mark
    assert in_question(text, len(head))


@given(_PLAIN, _PLAIN, st.sampled_from([".", "。", "!", "！", ""]), _PLAIN)
def test_a_stated_clause_is_no_question_whatever_follows_in_another_sentence(
    head: str, tail: str, end: str, later: str
) -> None:
    text = head + tail + end + ("" if not end else " " + later + "?")
    assert not in_question(text, len(head))


# --- pattern files: the `questions` key and the `verbose` flag ------------------------


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / f"{name}.yaml"
    path.write_text(text, "utf-8")
    return path


def said(text: str) -> list[Message]:
    return [Message("human", text), Message("ai", "Understood.")]


def test_a_file_can_ignore_matches_in_questions(tmp_path: Path) -> None:
    write(
        tmp_path,
        "reinforcement",
        "questions: ignore\n"
        "patterns:\n"
        "  - pattern: '\\blgtm\\b'\n"
        "    flags: [ignorecase]\n"
        "counterexamples: ['LGTM?']\n",
    )
    patterns = load_patterns(tmp_path)
    assert detect_signals(said("LGTM, ship it"), patterns) == {Signal.REINFORCEMENT}
    assert detect_signals(said("lgtm?"), patterns) == frozenset()
    # A later match outside a question still counts.
    assert detect_signals(said("LGTM? Yes: LGTM."), patterns) == {Signal.REINFORCEMENT}


def test_a_pattern_can_override_its_file(tmp_path: Path) -> None:
    write(
        tmp_path,
        "correction",
        "questions: ignore\n"
        "patterns:\n"
        "  - '\\bwrong\\b'\n"
        "  - pattern: '\\bagain\\b'\n"
        "    questions: count\n"
        "    examples: ['Can you do it again?']\n",
    )
    patterns = load_patterns(tmp_path)
    assert detect_signals(said("Is it wrong?"), patterns) == frozenset()
    assert detect_signals(said("Can you do it again?"), patterns) == {Signal.CORRECTION}
    assert [p.ignores_questions for p in patterns.for_signal(Signal.CORRECTION)] == [True, False]


def test_questions_count_by_default(tmp_path: Path) -> None:
    write(tmp_path, "goal", "- '\\bplan\\b'\n")
    assert detect_signals(said("Do I have a plan?"), load_patterns(tmp_path)) == {Signal.GOAL}


def test_a_verbose_pattern_may_span_lines_with_comments(tmp_path: Path) -> None:
    write(
        tmp_path,
        "decision",
        "patterns:\n"
        "  - pattern: |\n"
        "      \\bship        # the verb\n"
        "      \\s+ it \\b    # spaces in the pattern are ignored\n"
        "    flags: [verbose, ignorecase]\n"
        "    examples: ['Ship it!']\n",
    )
    (pattern,) = load_patterns(tmp_path).for_signal(Signal.DECISION)
    assert pattern.search("ok, ship   it") is not None
    assert pattern.search("shipit") is None


@pytest.mark.parametrize(
    ("name", "text", "problem"),
    [
        ("goal", "questions: sometimes\npatterns: ['x']\n", "must be 'count' or 'ignore'"),
        ("goal", "- pattern: 'x'\n  questions: true\n", "must be 'count' or 'ignore'"),
        ("trivial", "questions: ignore\npatterns: ['x']\n", "'questions' applies to signal"),
        ("trivial", "- pattern: 'x'\n  questions: ignore\n", "'questions' applies to signal"),
    ],
)
def test_a_bad_questions_setting_names_the_file(
    tmp_path: Path, name: str, text: str, problem: str
) -> None:
    path = write(tmp_path, name, text)
    with pytest.raises(PatternError) as caught:
        load_patterns(tmp_path)
    assert caught.value.path == str(path)
    assert problem in str(caught.value)


def test_counterexamples_are_checked_the_way_messages_are(tmp_path: Path) -> None:
    head = "questions: ignore\npatterns: ['\\bgo\\b']\n"
    # Inside a question the pattern does not fire, so this counterexample holds ...
    write(tmp_path, "decision", head + "counterexamples: ['go?']\n")
    load_patterns(tmp_path)
    # ... and a statement is caught.
    write(tmp_path, "decision", head + "counterexamples: ['go.']\n")
    with pytest.raises(PatternError, match=r"counterexample 'go\.'"):
        load_patterns(tmp_path)
