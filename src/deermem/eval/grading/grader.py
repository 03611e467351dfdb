"""The frozen answer grader ``deterministic-overlap-v1``.

An answer run is only comparable across policies, models and years if the
grader never changes under it. This one is a pure function of two strings — the
model's prediction and the reference answer — with no model, no clock and no
knowledge of which policy produced the prediction (grading is blind).

Both strings are reduced to tokens first: lower-cased, cut at every run of
characters outside ``[0-9a-z]`` (so accented letters and punctuation separate
tokens), empty pieces dropped, and eleven number words (``one`` … ``ten`` and
``fifteen``) replaced by their digits. The first of six rules that applies
decides:

1. ``empty-prediction`` / ``insufficient`` — no prediction tokens, or exactly
   the one token ``insufficient``: wrong.
2. ``exact`` — equal token lists: right.
3. ``substring`` — one token list occurs contiguously inside the other: right.
   Matching is per token, so ``5`` is not found in ``25``.
4. ``numeric-range`` — the reference says "ranging from A … to B" and every
   integer token of the prediction lies in [min(A, B), max(A, B)]: right.
5. ``numeric-conflict`` — both sides hold integer tokens and the sets of
   integers differ: wrong.
6. ``overlap-accept`` / ``overlap-reject`` — after dropping a fixed list of
   function words, the shared unique tokens must make up at least 60 % of the
   prediction's unique tokens *and* at least 60 % of the reference's.

**The version is a promise.** Every published grade names
:data:`GRADER_VERSION`; changing any rule, the number words, the function-word
list or the threshold changes grades, so such a change must ship under a new
version string (and a protocol that pins the new version), never under this one.
"""

from __future__ import annotations

import re
from typing import Final, NamedTuple

from deermem.eval.errors import GradingError

__all__ = [
    "CORRECT_RULES",
    "FUNCTION_WORDS",
    "GRADER_VERSION",
    "NUMBER_WORDS",
    "OVERLAP_THRESHOLD",
    "RULES",
    "RULE_EMPTY_PREDICTION",
    "RULE_EXACT",
    "RULE_INSUFFICIENT",
    "RULE_NUMERIC_CONFLICT",
    "RULE_NUMERIC_RANGE",
    "RULE_OVERLAP_ACCEPT",
    "RULE_OVERLAP_REJECT",
    "RULE_SUBSTRING",
    "Grade",
    "grade_answer",
    "possible_rules",
    "tokenize",
]

GRADER_VERSION: Final = "deterministic-overlap-v1"
"""The version every graded row carries; see the module docstring before changing anything."""

RULE_EMPTY_PREDICTION: Final = "empty-prediction"
RULE_INSUFFICIENT: Final = "insufficient"
RULE_EXACT: Final = "exact"
RULE_SUBSTRING: Final = "substring"
RULE_NUMERIC_RANGE: Final = "numeric-range"
RULE_NUMERIC_CONFLICT: Final = "numeric-conflict"
RULE_OVERLAP_ACCEPT: Final = "overlap-accept"
RULE_OVERLAP_REJECT: Final = "overlap-reject"

RULES: Final = (
    RULE_EMPTY_PREDICTION,
    RULE_INSUFFICIENT,
    RULE_EXACT,
    RULE_SUBSTRING,
    RULE_NUMERIC_RANGE,
    RULE_NUMERIC_CONFLICT,
    RULE_OVERLAP_ACCEPT,
    RULE_OVERLAP_REJECT,
)
"""Every label the grader can return, in the order its rules are tried."""

CORRECT_RULES: Final = frozenset(
    {RULE_EXACT, RULE_SUBSTRING, RULE_NUMERIC_RANGE, RULE_OVERLAP_ACCEPT}
)
"""The labels that mean "correct"; every other label means "wrong"."""

OVERLAP_THRESHOLD: Final = 0.6

NUMBER_WORDS: Final = {
    "one": "1",
    "two": "2",
    "three": "3",
    "four": "4",
    "five": "5",
    "six": "6",
    "seven": "7",
    "eight": "8",
    "nine": "9",
    "ten": "10",
    "fifteen": "15",
}
"""The only spelled-out numbers the grader reads as digits (``eleven`` is not one)."""

# 126 function words, frozen with the version. "yes", "no" and "not" are left
# out on purpose: they carry the answer to yes/no questions.
_FUNCTION_WORDS_TEXT = """
    a about above after again against all also although am an and any are at
    be because been before being below between both but by
    can could did do does doing down during each few for from further
    had has have having he her here hers him his how
    i if in into is it its just may me might mine more most must my
    nor of off on once only or other our ours out over own
    same shall she should so some such
    than that the their theirs them then there these they this those though through to too
    under until up us very
    was we were what when where whether which while who whom whose why will with would
    yet you your yours
"""
FUNCTION_WORDS: Final = frozenset(_FUNCTION_WORDS_TEXT.split())
"""Words that carry no answer; rule 6 ignores them on both sides."""

_SEPARATORS = re.compile(r"[^0-9a-z]+")
_RANGE = re.compile(r"\branging from (\d+)(?:\s\S+)*?\sto (\d+)\b")


class Grade(NamedTuple):
    """A verdict and the rule that gave it; unpacks as ``(correct, rule)``."""

    correct: bool
    rule: str


def tokenize(text: str) -> list[str]:
    """Reduce a string to the grader's tokens (see the module docstring)."""
    return [NUMBER_WORDS.get(token, token) for token in _SEPARATORS.split(text.lower()) if token]


def grade_answer(prediction: str, reference: str) -> Grade:
    """Grade a prediction against the reference answer with ``deterministic-overlap-v1``.

    Args:
        prediction: the model's answer, verbatim.
        reference: the reference answer of the question, verbatim.

    Returns:
        ``Grade(correct, rule)``; ``rule`` is one of :data:`RULES`.

    Raises:
        GradingError: the reference has no tokens, so nothing could ever match it.
    """
    reference_tokens = tokenize(reference)
    if not reference_tokens:
        raise GradingError(reference)
    tokens = tokenize(prediction)
    if not tokens:
        return Grade(False, RULE_EMPTY_PREDICTION)
    if tokens == ["insufficient"]:
        return Grade(False, RULE_INSUFFICIENT)
    if tokens == reference_tokens:
        return Grade(True, RULE_EXACT)
    if _contains(tokens, reference_tokens) or _contains(reference_tokens, tokens):
        return Grade(True, RULE_SUBSTRING)
    numbers = _integers(tokens)
    reference_numbers = _integers(reference_tokens)
    if numbers:
        bounds = _range_bounds(reference_tokens)
        if bounds is not None and all(bounds[0] <= n <= bounds[1] for n in numbers):
            return Grade(True, RULE_NUMERIC_RANGE)
        if reference_numbers and set(numbers) != set(reference_numbers):
            return Grade(False, RULE_NUMERIC_CONFLICT)
    return _overlap(tokens, reference_tokens)


def possible_rules(prediction: str) -> frozenset[str]:
    """The labels :func:`grade_answer` can give this prediction, over all references.

    Verification uses it to check published grades without the references (which
    are private): a prediction with no tokens can only be ``empty-prediction``;
    the numeric rules need an integer token in the prediction; ``overlap-accept``
    needs a token that is not a function word.
    """
    tokens = tokenize(prediction)
    if not tokens:
        return frozenset({RULE_EMPTY_PREDICTION})
    if tokens == ["insufficient"]:
        return frozenset({RULE_INSUFFICIENT})
    rules = {RULE_EXACT, RULE_SUBSTRING, RULE_OVERLAP_REJECT}
    if _integers(tokens):
        rules |= {RULE_NUMERIC_RANGE, RULE_NUMERIC_CONFLICT}
    if set(tokens) - FUNCTION_WORDS:
        rules.add(RULE_OVERLAP_ACCEPT)
    return frozenset(rules)


def _contains(haystack: list[str], needle: list[str]) -> bool:
    """Whether ``needle`` occurs as a contiguous run of whole tokens in ``haystack``."""
    width = len(needle)
    if width > len(haystack):
        return False
    return any(
        haystack[start : start + width] == needle for start in range(len(haystack) - width + 1)
    )


def _integers(tokens: list[str]) -> list[int]:
    """The tokens made only of digits, as integers (``200mm`` is not one)."""
    return [int(token) for token in tokens if token.isdigit()]


def _range_bounds(reference_tokens: list[str]) -> tuple[int, int] | None:
    """The (low, high) of a "ranging from A ... to B" reference, or ``None``."""
    match = _RANGE.search(" ".join(reference_tokens))
    if match is None:
        return None
    first, second = int(match.group(1)), int(match.group(2))
    return (first, second) if first <= second else (second, first)


def _overlap(tokens: list[str], reference_tokens: list[str]) -> Grade:
    """Rule 6: enough shared content words, measured from both sides."""
    predicted = set(tokens) - FUNCTION_WORDS
    expected = set(reference_tokens) - FUNCTION_WORDS
    if not predicted or not expected:
        return Grade(False, RULE_OVERLAP_REJECT)
    shared = len(predicted & expected)
    if shared / len(predicted) >= OVERLAP_THRESHOLD and shared / len(expected) >= OVERLAP_THRESHOLD:
        return Grade(True, RULE_OVERLAP_ACCEPT)
    return Grade(False, RULE_OVERLAP_REJECT)
