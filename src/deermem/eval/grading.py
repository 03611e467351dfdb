"""Judging answers: the frozen grader ``deterministic-overlap-v1`` and the paired statistics.

**The grader.** An answer run is only comparable across policies, models and
years if the grader never changes under it. This one is a pure function of two
strings — the model's prediction and the reference answer — with no model, no
clock and no knowledge of which policy produced the prediction (grading is
blind).

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

**The statistics.** Each case gives one *pair*: was the first policy
(``confidence``) right, was the second (``hybrid-v1``) right. Two questions are
asked of the pairs:

* **Is the difference more than luck?** The exact two-sided McNemar test looks
  only at the discordant cases — ``b`` where only the first policy was right,
  ``c`` where only the second was — and asks how likely a split at least as
  lopsided as ``b`` vs ``c`` would be if each discordant case were a fair coin
  toss. ``p = min(1, 2 · Σ_{k=0}^{min(b,c)} C(n, k) / 2^n)`` with ``n = b + c``;
  ``p = 1`` when there are no discordant cases.
* **How large is it?** The paired bootstrap resamples whole cases with
  replacement and records ``accuracy(second) − accuracy(first)`` each time; the
  percentile interval of those differences brackets the improvement.

Everything is reproducible to the last bit, because published figures are
compared byte for byte: the binomial sum is exact integer arithmetic, and the
bootstrap draws each index with ``random.Random(seed).randrange(n)`` (CPython's
Mersenne Twister, rejection sampling over ``getrandbits(n.bit_length())``, as the
protocol prescribes), with the sums, the division and the subtraction done in a
fixed order. NumPy, or ``Random.choices`` (which scales ``random()`` instead of
rejecting), would give other numbers; the tests re-derive the published intervals,
so a Python release that drew differently would fail them, not go unnoticed.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, NamedTuple, TypeAlias

from deermem.eval.errors import GradingError, StatisticsError

__all__ = [
    "DEFAULT_PARAMETERS",
    "GRADER_VERSION",
    "StatisticsParameters",
    "grade_answer",
]

# --- the grader -----------------------------------------------------------------------------------

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


_Integer: TypeAlias = tuple[int, str]
"""An integer token as an exact, ordered key: (digit count, digits) without leading zeros."""


def _integer(digits: str) -> _Integer:
    """``digits`` as a key that compares as ``int(digits)`` does, at any length.

    ``int()`` refuses more than 4,300 digits (``sys.get_int_max_str_digits``),
    and a model's answer can hold such a run (a degenerate answer repeating a
    digit up to its token limit); without leading zeros, the shorter run is
    the smaller number and runs of one length compare as text.
    """
    significant = digits.lstrip("0") or "0"
    return len(significant), significant


def _integers(tokens: list[str]) -> list[_Integer]:
    """The tokens made only of digits, as integers (``200mm`` is not one)."""
    return [_integer(token) for token in tokens if token.isdigit()]


def _range_bounds(reference_tokens: list[str]) -> tuple[_Integer, _Integer] | None:
    """The (low, high) of a "ranging from A ... to B" reference, or ``None``."""
    match = _RANGE.search(" ".join(reference_tokens))
    if match is None:
        return None
    first, second = _integer(match.group(1)), _integer(match.group(2))
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


# --- the paired statistics ------------------------------------------------------------------------

Pair = tuple[bool, bool]
"""(first policy correct, second policy correct) for one case."""


@dataclass(frozen=True, slots=True)
class StatisticsParameters:
    """The bootstrap's fixed inputs, pinned by the evaluation protocol.

    Attributes:
        seed: seed of ``random.Random``.
        iterations: number of bootstrap resamples.
        alpha: two-sided error level; the interval covers ``1 − alpha``.

    Raises:
        StatisticsError: ``iterations`` is below 1 or ``alpha`` is not strictly
            between 0 and 1.
    """

    seed: int = 4789
    iterations: int = 10_000
    alpha: float = 0.05

    def __post_init__(self) -> None:
        if type(self.seed) is not int:
            raise StatisticsError("seed", self.seed, "must be an integer")
        if type(self.iterations) is not int or self.iterations < 1:
            raise StatisticsError("iterations", self.iterations, "must be an integer of at least 1")
        if not 0.0 < self.alpha < 1.0:
            raise StatisticsError("alpha", self.alpha, "must lie strictly between 0 and 1")


DEFAULT_PARAMETERS = StatisticsParameters()
"""Seed 4789, 10,000 resamples, alpha 0.05: the values of the reproduction protocol."""


@dataclass(frozen=True, slots=True)
class McNemarTest:
    """The 2×2 table of a paired comparison and its exact two-sided p value.

    Its fields are the keys of a suite's ``mcnemar`` object in ``qa.stats.json``.
    """

    both_correct: int
    both_wrong: int
    only_first_correct: int
    only_second_correct: int
    p_value: float


@dataclass(frozen=True, slots=True)
class BootstrapInterval:
    """The observed accuracy difference (second − first) and its percentile interval.

    Its fields are the keys of a suite's ``bootstrap`` object in ``qa.stats.json``.
    """

    mean_difference: float
    lower: float
    upper: float
    seed: int
    iterations: int
    alpha: float


@dataclass(frozen=True, slots=True)
class PairedComparison:
    """Both statistics for one suite of cases (``asdict``: a suite of ``qa.stats.json``)."""

    cases: int
    mcnemar: McNemarTest
    bootstrap: BootstrapInterval

    @property
    def first_correct(self) -> int:
        """Cases the first policy answered correctly."""
        return self.mcnemar.both_correct + self.mcnemar.only_first_correct

    @property
    def second_correct(self) -> int:
        """Cases the second policy answered correctly."""
        return self.mcnemar.both_correct + self.mcnemar.only_second_correct


def mcnemar_p_value(only_first: int, only_second: int) -> float:
    """Exact two-sided McNemar p value for ``b`` and ``c`` discordant cases.

    The binomial tail is summed exactly as integers and divided by ``2^n`` with
    Python's correctly rounded integer division. For ``n ≤ 1023`` that is the
    same float as ``2 · Σ · 0.5**n`` (scaling by powers of two is exact); beyond,
    it stays right where ``0.5**n`` would underflow.
    """
    if only_first < 0 or only_second < 0:
        raise StatisticsError(
            "discordant counts", (only_first, only_second), "must not be negative"
        )
    total = only_first + only_second
    if total == 0:
        return 1.0
    tail = sum(math.comb(total, k) for k in range(min(only_first, only_second) + 1))
    return min(1.0, (2 * tail) / (1 << total))


def mcnemar_exact(pairs: Sequence[Pair]) -> McNemarTest:
    """Tabulate the pairs and test them with the exact two-sided McNemar test.

    Raises:
        StatisticsError: there are no pairs.
    """
    if not pairs:
        raise StatisticsError("pairs", 0, "McNemar's test needs at least one pair")
    counts = {(True, True): 0, (False, False): 0, (True, False): 0, (False, True): 0}
    for first, second in pairs:
        counts[bool(first), bool(second)] += 1
    only_first, only_second = counts[True, False], counts[False, True]
    return McNemarTest(
        both_correct=counts[True, True],
        both_wrong=counts[False, False],
        only_first_correct=only_first,
        only_second_correct=only_second,
        p_value=mcnemar_p_value(only_first, only_second),
    )


def percentile_indices(iterations: int, alpha: float) -> tuple[int, int]:
    """Positions of the interval bounds in the sorted resampled differences.

    ``floor(alpha/2 · iterations)`` and ``floor((1 − alpha/2) · iterations) − 1``,
    each clamped to ``[0, iterations − 1]``: 250 and 9,749 for 10,000 at 0.05.
    """
    last = iterations - 1
    lower = math.floor(alpha / 2 * iterations)
    upper = math.floor((1 - alpha / 2) * iterations) - 1
    return min(max(lower, 0), last), min(max(upper, 0), last)


def paired_bootstrap(
    pairs: Sequence[Pair], parameters: StatisticsParameters = DEFAULT_PARAMETERS
) -> BootstrapInterval:
    """Percentile bootstrap of ``accuracy(second) − accuracy(first)`` over whole cases.

    Raises:
        StatisticsError: there are no pairs.
    """
    size = len(pairs)
    if size == 0:
        raise StatisticsError("pairs", 0, "the paired bootstrap needs at least one pair")
    first = [int(bool(pair[0])) for pair in pairs]
    second = [int(bool(pair[1])) for pair in pairs]
    differences = _resampled_differences(first, second, parameters)
    differences.sort()
    low, high = percentile_indices(parameters.iterations, parameters.alpha)
    return BootstrapInterval(
        mean_difference=sum(second) / size - sum(first) / size,
        lower=differences[low],
        upper=differences[high],
        seed=parameters.seed,
        iterations=parameters.iterations,
        alpha=parameters.alpha,
    )


def _resampled_differences(
    first: list[int], second: list[int], parameters: StatisticsParameters
) -> list[float]:
    """One difference per resample, in the order the generator produces them.

    Each resample draws ``size`` indices one at a time with ``randrange(size)``;
    the draw order is part of the published intervals.
    """
    size = len(first)
    randrange = random.Random(parameters.seed).randrange
    differences: list[float] = []
    for _ in range(parameters.iterations):
        first_total = second_total = 0
        for _ in range(size):
            index = randrange(size)
            first_total += first[index]
            second_total += second[index]
        differences.append(second_total / size - first_total / size)
    return differences


def compare_pairs(
    pairs: Sequence[Pair], parameters: StatisticsParameters = DEFAULT_PARAMETERS
) -> PairedComparison:
    """McNemar and the bootstrap for one suite of pairs (in case-id order).

    Raises:
        StatisticsError: there are no pairs.
    """
    return PairedComparison(
        cases=len(pairs),
        mcnemar=mcnemar_exact(pairs),
        bootstrap=paired_bootstrap(pairs, parameters),
    )
