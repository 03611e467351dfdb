"""Signal and trivial-turn patterns: YAML files shipped with deermem, extensible by users.

There is one file per list: ``trivial.yaml`` and one per signal
(``correction.yaml``, ``reinforcement.yaml``, ``preference.yaml``,
``identity.yaml``, ``goal.yaml``, ``decision.yaml``). A file is either a YAML
list of patterns, or a mapping::

    mode: extend            # or "replace" (the default); only meaningful in a user directory
    patterns:
      - '\\bthat[''’]?s\\s+exactly\\s+right\\b'          # a plain string: no flags
      - pattern: '\\bperfect\\b'
        flags: [ignorecase]                           # ignorecase, multiline, dotall
        examples: ["Perfect!"]                        # texts this pattern must match
    counterexamples: ["not perfect"]                  # texts no pattern of the file may match

A user directory (``patterns_dir``) may hold any of the seven files: each one
it holds replaces the bundled list (``mode: replace``) or adds to it
(``mode: extend``); the lists it does not hold stay bundled. Everything is
checked when the files are loaded — YAML syntax, keys, flags, every regular
expression, every example and counterexample — and a problem is a
:class:`~deermem.PatternError` naming the file and the pattern, never a
pattern silently skipped.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from importlib import resources
from pathlib import Path
from typing import Final

import yaml

from deermem._exceptions import PatternError

__all__ = [
    "PATTERN_FILES",
    "TRIVIAL_PUNCTUATION",
    "Pattern",
    "PatternSet",
    "Signal",
    "load_patterns",
    "strip_trailing_punctuation",
]


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

TRIVIAL_PUNCTUATION: Final = " \t\n\r.。,，!！?？;；~～…"
"""Stripped from the end of a message before the trivial patterns are tried."""

_FLAGS: Final = {
    "ignorecase": re.IGNORECASE,
    "multiline": re.MULTILINE,
    "dotall": re.DOTALL,
}
_FILE_KEYS: Final = frozenset({"mode", "patterns", "counterexamples"})
_ENTRY_KEYS: Final = frozenset({"pattern", "flags", "examples", "note"})
_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def strip_trailing_punctuation(text: str) -> str:
    """``text`` without surrounding whitespace and trailing punctuation ("好的！" -> "好的")."""
    return text.strip().rstrip(TRIVIAL_PUNCTUATION)


@dataclass(frozen=True, slots=True)
class Pattern:
    """One compiled pattern and the file it came from (for explanations and errors)."""

    regex: re.Pattern[str]
    source: str

    @property
    def text(self) -> str:
        return self.regex.pattern


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
    folder = resources.files("deermem.signals").joinpath("patterns")
    lists = {}
    for name in PATTERN_FILES:
        resource = folder.joinpath(f"{name}.yaml")
        source = f"deermem/signals/patterns/{name}.yaml"
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
        document: object = yaml.load(text, Loader=_Loader)  # a safe loader (C when available)
    except yaml.YAMLError as error:
        raise PatternError(source, f"not valid YAML: {error}") from error
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
    patterns = tuple(
        _compile(entry, index, source, full_match) for index, entry in enumerate(entries)
    )
    _check_counterexamples(document.get("counterexamples", []), patterns, source, full_match)
    return _PatternFile(mode=str(mode), patterns=patterns)


def _compile(entry: object, index: int, source: str, full_match: bool) -> Pattern:
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
    pattern = Pattern(regex=regex, source=source)
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
    return pattern.regex.search(text) is not None
