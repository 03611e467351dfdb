"""Conversation signals: what the user's recent words say about memory.

A signal is present when one of its patterns is found in a human message
(outside questions, for the patterns that ask so) among the **last six**
filtered messages (human and assistant counted together, so roughly the last
three exchanges). Older turns were already seen by an earlier extraction;
looking further back would let one "perfect" from last hour keep confirming
facts. Signals are hints and gates for extraction: ``correction`` asks for a
durable correction, ``reinforcement`` is the only way a fact can be
confirmed, the others point the extractor at what kind of fact to look for.
:func:`prepare_conversation` filters a conversation (see
:mod:`deermem.learning.messages`), drops pure acknowledgements
(:func:`filter_trivial`) and detects its signals — once per conversation.

The patterns are YAML files shipped with deermem, extensible by users. There
is one file per list: ``trivial.yaml`` and one per signal (``correction.yaml``,
``reinforcement.yaml``, ``preference.yaml``, ``identity.yaml``, ``goal.yaml``,
``decision.yaml``). A file is either a YAML list of patterns, or a mapping::

    mode: extend            # or "replace" (the default); only meaningful in a user directory
    questions: ignore       # or "count" (the default): see below
    patterns:
      - '\\bthat[''’]?s\\s+exactly\\s+right\\b'          # a plain string: no flags
      - pattern: '\\bperfect\\b'
        flags: [ignorecase]                 # ignorecase, multiline, dotall, verbose
        examples: ["Perfect!"]              # texts this pattern must match
        questions: count                    # overrides the file's setting for this pattern
    counterexamples: ["not perfect"]        # texts no pattern of the file may match

``questions: ignore`` makes a match count only outside questions ("is that
correct?" confirms nothing); what a question is, is one rule for every file
(:func:`deermem.learning.messages.in_question`). ``verbose`` is Python's
``re.VERBOSE``: whitespace is ignored and ``#`` starts a comment, so a long
pattern can be written over several lines of a YAML block (``|``) and
explained as it goes.

A user directory (``patterns_dir``) may hold any of the seven files: each one
it holds replaces the bundled list (``mode: replace``) or adds to it
(``mode: extend``); the lists it does not hold stay bundled. Everything is
checked when the files are loaded — YAML syntax, keys, flags, every regular
expression, every example and counterexample — and a problem is a
:class:`~deermem.PatternError` naming the file and the pattern, never a
pattern silently skipped. Detection is pure: the same messages and patterns
give the same signals.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from importlib import resources
from pathlib import Path
from typing import Final

import yaml

from deermem.errors import PatternError
from deermem.learning.messages import KeepHidden, Message, filter_messages, in_question
from deermem.model import YAML_LOADER, yaml_problem

__all__ = [
    "PATTERN_FILES",
    "SIGNAL_WINDOW",
    "TRIVIAL_PUNCTUATION",
    "Pattern",
    "PatternSet",
    "PreparedConversation",
    "Signal",
    "SignalMatch",
    "detect_signals",
    "explain_signals",
    "filter_trivial",
    "learnable",
    "load_patterns",
    "prepare_conversation",
    "strip_trailing_punctuation",
]

# --- patterns ---------------------------------------------------------------------------


class Signal(StrEnum):
    """What a human message can signal about memory. Values are the pattern file names."""

    CORRECTION = "correction"
    REINFORCEMENT = "reinforcement"
    PREFERENCE = "preference"
    IDENTITY = "identity"
    GOAL = "goal"
    DECISION = "decision"


TRIVIAL: Final = "trivial"
PATTERN_FILES: Final = (TRIVIAL, *(signal.value for signal in Signal))
"""The seven list names; each is read from ``<name>.yaml``."""

TRIVIAL_PUNCTUATION: Final = " \t\n\r.。,，!！;；~～…"
"""Stripped from the end of a message before the trivial patterns are tried.

Question marks are not among them: "ok?" and "好的？" ask something, so they
are never pure acknowledgements (the original DeerMem strips them)."""

_FLAGS: Final = {
    "ignorecase": re.IGNORECASE,
    "multiline": re.MULTILINE,
    "dotall": re.DOTALL,
    "verbose": re.VERBOSE,
}
_QUESTIONS: Final = {"count": False, "ignore": True}
_FILE_KEYS: Final = frozenset({"mode", "questions", "patterns", "counterexamples"})
_ENTRY_KEYS: Final = frozenset({"pattern", "flags", "examples", "questions", "note"})


def strip_trailing_punctuation(text: str) -> str:
    """``text`` without surrounding whitespace and trailing punctuation ("好的！" -> "好的")."""
    return text.strip().rstrip(TRIVIAL_PUNCTUATION)


@dataclass(frozen=True, slots=True)
class Pattern:
    """One compiled pattern and the file it came from (for explanations and errors).

    Attributes:
        regex: the compiled regular expression.
        source: the file it was read from.
        ignores_questions: a match inside a question does not count
            (``questions: ignore``).
    """

    regex: re.Pattern[str]
    source: str
    ignores_questions: bool = False

    @property
    def text(self) -> str:
        return self.regex.pattern

    def search(self, text: str) -> re.Match[str] | None:
        """The first match in ``text`` that counts (outside a question, when asked)."""
        match = self.regex.search(text)
        if not self.ignores_questions:
            return match
        # A pattern never matches empty text (checked when loading), so this ends.
        while match is not None and in_question(text, match.end()):
            match = self.regex.search(text, match.end())
        return match


@dataclass(frozen=True, slots=True)
class PatternSet:
    """The seven pattern lists, compiled and checked."""

    trivial: tuple[Pattern, ...]
    signals: Mapping[Signal, tuple[Pattern, ...]]

    def for_signal(self, signal: Signal) -> tuple[Pattern, ...]:
        return self.signals.get(signal, ())

    def is_trivial(self, text: str) -> bool:
        """Whether ``text`` is nothing but an acknowledgement (a full match, see trivial.yaml)."""
        core = strip_trailing_punctuation(text)
        return any(pattern.regex.fullmatch(core) for pattern in self.trivial)


@dataclass(frozen=True, slots=True)
class _PatternFile:
    mode: str
    patterns: tuple[Pattern, ...]


def load_patterns(patterns_dir: str | Path | None = None) -> PatternSet:
    """The bundled patterns, extended or replaced by the files in ``patterns_dir``.

    The bundled set is read once per process and cached; a user directory is
    read on every call (keep the returned set rather than calling again).

    Raises:
        PatternError: a file cannot be read or parsed, has an unknown key or
            file name, or holds an invalid pattern, flag, example or counterexample.
    """
    bundled = _bundled_patterns()
    if patterns_dir is None:
        return bundled
    directory = Path(patterns_dir)
    if not directory.is_dir():
        raise PatternError(str(directory), "patterns_dir is not a directory")
    known = {f"{name}.yaml" for name in PATTERN_FILES}
    for path in sorted(directory.glob("*.y*ml")):
        if path.name not in known:
            expected = ", ".join(sorted(known))
            raise PatternError(str(path), f"unknown pattern file; expected one of {expected}")
    lists: dict[str, tuple[Pattern, ...]] = {TRIVIAL: bundled.trivial}
    lists.update({signal.value: patterns for signal, patterns in bundled.signals.items()})
    for name in PATTERN_FILES:
        path = directory / f"{name}.yaml"
        if not path.exists():
            continue
        user = _read_file(path.read_bytes, str(path), name)
        lists[name] = user.patterns if user.mode == "replace" else lists[name] + user.patterns
    return _pattern_set(lists)


@functools.cache
def _bundled_patterns() -> PatternSet:
    folder = resources.files("deermem.learning").joinpath("patterns")
    lists = {}
    for name in PATTERN_FILES:
        resource = folder.joinpath(f"{name}.yaml")
        source = f"deermem/learning/patterns/{name}.yaml"
        lists[name] = _read_file(resource.read_bytes, source, name).patterns
    return _pattern_set(lists)


def _pattern_set(lists: Mapping[str, tuple[Pattern, ...]]) -> PatternSet:
    return PatternSet(
        trivial=lists[TRIVIAL],
        signals={signal: lists[signal.value] for signal in Signal},
    )


def _read_file(read: Callable[[], bytes], source: str, name: str) -> _PatternFile:
    """Parse and check one file; ``read`` returns its bytes."""
    try:
        text = read().decode("utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise PatternError(source, f"cannot read the file: {error}") from error
    try:
        document: object = yaml.load(text, Loader=YAML_LOADER)  # safe; a key given twice refused
    except yaml.YAMLError as error:
        raise PatternError(source, f"not valid YAML: {yaml_problem(error)}") from None
    if isinstance(document, list):
        document = {"patterns": document}
    if not isinstance(document, dict):
        raise PatternError(source, "expected a list of patterns or a mapping with 'patterns'")
    unknown = sorted(str(key) for key in document if key not in _FILE_KEYS)
    if unknown:
        raise PatternError(source, f"unknown key(s) {unknown}; allowed: {sorted(_FILE_KEYS)}")
    mode = document.get("mode", "replace")
    if mode not in ("replace", "extend"):
        raise PatternError(source, f"mode must be 'replace' or 'extend', not {mode!r}")
    entries = document.get("patterns")
    if not isinstance(entries, list):
        raise PatternError(source, "'patterns' must be a list")
    full_match = name == TRIVIAL
    if full_match and "questions" in document:
        raise PatternError(source, "'questions' applies to signal files, not to trivial.yaml")
    ignore_questions = _questions(document.get("questions", "count"), source, None, None)
    patterns = tuple(
        _compile(entry, index, source, full_match, ignore_questions)
        for index, entry in enumerate(entries)
    )
    _check_counterexamples(document.get("counterexamples", []), patterns, source, full_match)
    return _PatternFile(mode=str(mode), patterns=patterns)


def _compile(
    entry: object, index: int, source: str, full_match: bool, ignore_questions: bool
) -> Pattern:
    """Compile and check one entry; ``ignore_questions`` is the file's setting."""
    if isinstance(entry, str):
        entry = {"pattern": entry}
    if not isinstance(entry, dict):
        raise PatternError(source, "expected a string or a mapping with 'pattern'", index=index)
    text = entry.get("pattern")
    if not isinstance(text, str) or not text.strip():
        raise PatternError(source, "'pattern' must be a non-empty string", index=index)
    unknown = sorted(str(key) for key in entry if key not in _ENTRY_KEYS)
    if unknown:
        raise PatternError(source, f"unknown key(s) {unknown}", pattern=text, index=index)
    flags = _flags(entry.get("flags", []), source, text, index)
    if "questions" in entry:
        if full_match:
            raise PatternError(
                source, "'questions' applies to signal files only", pattern=text, index=index
            )
        ignore_questions = _questions(entry["questions"], source, text, index)
    try:
        regex = re.compile(text, flags)
    except re.error as error:
        raise PatternError(
            source, f"invalid regular expression: {error}", pattern=text, index=index
        ) from error
    if regex.search("") is not None:
        raise PatternError(
            source, "matches empty text, so it would fire on any message", pattern=text, index=index
        )
    pattern = Pattern(regex=regex, source=source, ignores_questions=ignore_questions)
    for example in _strings(entry.get("examples", []), "examples", source, text, index):
        if not _matches(pattern, example, full_match):
            raise PatternError(
                source, f"does not match its example {example!r}", pattern=text, index=index
            )
    return pattern


def _flags(value: object, source: str, text: str, index: int) -> int:
    names = _strings(value, "flags", source, text, index)
    flags = 0
    for name in names:
        flag = _FLAGS.get(name.lower())
        if flag is None:
            allowed = ", ".join(sorted(_FLAGS))
            raise PatternError(
                source, f"unknown flag {name!r}; allowed: {allowed}", pattern=text, index=index
            )
        flags |= flag
    return flags


def _questions(value: object, source: str, text: str | None, index: int | None) -> bool:
    """Whether ``questions`` says to ignore matches inside questions."""
    if not isinstance(value, str) or value not in _QUESTIONS:
        problem = f"questions must be 'count' or 'ignore', not {value!r}"
        raise PatternError(source, problem, pattern=text, index=index)
    return _QUESTIONS[value]


def _strings(
    value: object, key: str, source: str, text: str | None, index: int | None
) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise PatternError(source, f"'{key}' must be a list of strings", pattern=text, index=index)
    return list(value)


def _check_counterexamples(
    value: object, patterns: tuple[Pattern, ...], source: str, full_match: bool
) -> None:
    for text in _strings(value, "counterexamples", source, None, None):
        for index, pattern in enumerate(patterns):
            if _matches(pattern, text, full_match):
                raise PatternError(
                    source,
                    f"matches the counterexample {text!r}",
                    pattern=pattern.text,
                    index=index,
                )


def _matches(pattern: Pattern, text: str, full_match: bool) -> bool:
    if full_match:
        return pattern.regex.fullmatch(strip_trailing_punctuation(text)) is not None
    return pattern.search(text) is not None


# --- detection --------------------------------------------------------------------------

SIGNAL_WINDOW: Final = 6
"""How many of the last filtered messages are searched (only the human ones among them)."""


@dataclass(frozen=True, slots=True)
class SignalMatch:
    """Why a signal fired: which message, which pattern, from which file.

    Holds no message text, so it can be logged or shown without leaking what
    the user said.
    """

    signal: Signal
    message_index: int
    pattern: str
    source: str


def explain_signals(messages: Sequence[Message], patterns: PatternSet) -> tuple[SignalMatch, ...]:
    """Every (signal, message) pair that fired, with the first pattern that matched it.

    Args:
        messages: a filtered conversation (see :func:`filter_messages`), oldest first.
        patterns: the pattern lists to search with.

    Returns:
        Matches ordered by signal (in :class:`Signal` order), then message
        position; ``message_index`` indexes into ``messages``.
    """
    start = max(len(messages) - SIGNAL_WINDOW, 0)
    window = [
        (index, message)
        for index, message in enumerate(messages[start:], start)
        if message.role == "human"
    ]
    found: list[SignalMatch] = []
    for signal in Signal:
        for index, message in window:
            for pattern in patterns.for_signal(signal):
                if pattern.search(message.text):
                    found.append(SignalMatch(signal, index, pattern.text, pattern.source))
                    break
    return tuple(found)


def detect_signals(messages: Sequence[Message], patterns: PatternSet) -> frozenset[Signal]:
    """The signals present in the human messages among the last six of ``messages``."""
    return frozenset(match.signal for match in explain_signals(messages, patterns))


@dataclass(frozen=True, slots=True)
class PreparedConversation:
    """A conversation ready for extraction: what memory may read, and what it signals."""

    messages: tuple[Message, ...]
    signals: frozenset[Signal]


def learnable(
    messages: Sequence[Message],
    patterns: PatternSet,
    *,
    keep_hidden: KeepHidden | None = None,
) -> tuple[Message, ...] | None:
    """Filter and drop trivial turns; ``None`` when nothing is left to learn from.

    A conversation is worth an extraction only when, after filtering, it
    still holds at least one human turn and one assistant reply.
    """
    kept = filter_trivial(filter_messages(messages, keep_hidden=keep_hidden), patterns)
    roles = {message.role for message in kept}
    if "human" not in roles or "ai" not in roles:
        return None
    return tuple(kept)


def prepare_conversation(
    messages: Sequence[Message],
    patterns: PatternSet,
    *,
    keep_hidden: KeepHidden | None = None,
) -> PreparedConversation | None:
    """:func:`learnable`, and the signals of what it keeps; ``None`` when nothing is left."""
    kept = learnable(messages, patterns, keep_hidden=keep_hidden)
    return None if kept is None else PreparedConversation(kept, detect_signals(kept, patterns))


def filter_trivial(messages: Sequence[Message], patterns: PatternSet) -> list[Message]:
    """``messages`` without pure acknowledgements ("ok", "谢谢") and the replies to them.

    A human turn is trivial when its whole text, without trailing punctuation,
    matches a pattern of ``trivial.yaml``; a message that merely contains "ok"
    stays. With no trivial patterns, nothing is dropped.
    """
    kept: list[Message] = []
    dropping_reply = False
    for message in messages:
        if message.role == "human":
            dropping_reply = patterns.is_trivial(message.text)
            if not dropping_reply:
                kept.append(message)
        elif not (dropping_reply and message.role == "ai"):
            kept.append(message)
    return kept
