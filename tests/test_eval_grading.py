"""The frozen grader deterministic-overlap-v1: normalisation, every rule, its edges."""

from __future__ import annotations

import inspect

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deermem.eval import grading
from deermem.eval.errors import GradingError
from deermem.eval.grading import (
    CORRECT_RULES,
    FUNCTION_WORDS,
    GRADER_VERSION,
    NUMBER_WORDS,
    OVERLAP_THRESHOLD,
    RULES,
    Grade,
    grade_answer,
    possible_rules,
    tokenize,
)

# --- the contract surface ------------------------------------------------------------


def test_version_and_signature_are_pinned() -> None:
    assert GRADER_VERSION == "deterministic-overlap-v1"
    # The grader sees the two strings and nothing else (no policy, no question).
    assert list(inspect.signature(grade_answer).parameters) == ["prediction", "reference"]
    assert "new version" in (grading.__doc__ or "")


def test_rule_labels_and_threshold() -> None:
    assert RULES == (
        "empty-prediction",
        "insufficient",
        "exact",
        "substring",
        "numeric-range",
        "numeric-conflict",
        "overlap-accept",
        "overlap-reject",
    )
    assert {"exact", "substring", "numeric-range", "overlap-accept"} == CORRECT_RULES
    assert OVERLAP_THRESHOLD == 0.6


def test_grade_unpacks_as_correct_and_rule() -> None:
    correct, rule = grade_answer("Under my bed.", "under my bed")
    assert (correct, rule) == (True, "exact")
    assert grade_answer("x", "x") == Grade(correct=True, rule="exact")


def test_function_word_list_is_the_fixed_126() -> None:
    assert len(FUNCTION_WORDS) == 126
    # Answers to yes/no questions must never be thrown away as function words.
    assert {"yes", "no", "not"}.isdisjoint(FUNCTION_WORDS)
    assert {"the", "of", "whose", "further", "also", "must", "whether"} <= FUNCTION_WORDS


# --- normalisation ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("Seven WEEKS!", ["7", "weeks"]),  # number word, case, punctuation
        ("70-200mm zoom lens", ["70", "200mm", "zoom", "lens"]),  # 200mm is not an integer
        ("café au lait", ["caf", "au", "lait"]),  # accented letters separate tokens
        ("one two three four five", ["1", "2", "3", "4", "5"]),
        ("six seven eight nine ten fifteen", ["6", "7", "8", "9", "10", "15"]),
        ("eleven twenty someone", ["eleven", "twenty", "someone"]),  # only the 11 words map
        ("  ...!!  ", []),
        ("", []),
        ("INSUFFICIENT.", ["insufficient"]),
        ("2023/05/20 (Sat)", ["2023", "05", "20", "sat"]),
    ],
)
def test_tokenize(text: str, tokens: list[str]) -> None:
    assert tokenize(text) == tokens


def test_number_words_are_exactly_eleven() -> None:
    assert sorted(NUMBER_WORDS.values(), key=int) == [str(n) for n in (*range(1, 11), 15)]


# --- the rules, in order ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("prediction", "reference", "expected"),
    [
        # 1. no tokens, or exactly "insufficient"
        ("", "Paris", (False, "empty-prediction")),
        ("?!", "Paris", (False, "empty-prediction")),
        ("INSUFFICIENT", "NO", (False, "insufficient")),
        ("insufficient", "NO", (False, "insufficient")),
        ("INSUFFICIENT.", "NO", (False, "insufficient")),
        ("insufficient evidence", "Paris", (False, "overlap-reject")),  # two tokens: not rule 1
        # 2. equal token lists
        ("Under my bed.", "under my bed", (True, "exact")),
        ("seven", "7", (True, "exact")),
        ("3 months.", "3 months", (True, "exact")),
        # 3. contiguous token runs, either way round
        ("132", "132 points", (True, "substring")),
        ("3 months ago", "3 months", (True, "substring")),
        ("zoom lens", "70-200mm zoom lens", (True, "substring")),
        ("5", "25", (False, "numeric-conflict")),  # token level: 5 is not inside 25
        ("lens zoom", "zoom lens", (True, "overlap-accept")),  # same words, not contiguous
        # 4. "ranging from A ... to B", bounds inclusive, either order
        ("7", "ranging from 5 dollars to 10 dollars", (True, "numeric-range")),
        ("5 hours total", "ranging from 5 to 10 hours", (True, "numeric-range")),  # low bound
        ("about 10", "ranging from 5 to 10 hours", (True, "numeric-range")),  # high bound
        ("5", "ranging from 5 to 10 hours", (True, "substring")),  # rule 3 comes first
        ("7", "ranging from 10 to 5", (True, "numeric-range")),
        ("seven", "ranging from five to ten", (True, "numeric-range")),
        ("6 or 8", "ranging from 5 to 10", (True, "numeric-range")),
        ("4", "ranging from 5 to 10 hours", (False, "numeric-conflict")),
        ("11", "ranging from 5 to 10 hours", (False, "numeric-conflict")),
        ("6 or 12", "ranging from 5 to 10", (False, "numeric-conflict")),
        ("a week", "ranging from 5 to 10 days", (False, "overlap-reject")),  # no integer: skip 4/5
        # 5. integer sets differ
        ("12 weeks", "8 weeks", (False, "numeric-conflict")),
        ("About one week.", "2 weeks", (False, "numeric-conflict")),
        ("200mm", "70 200mm", (True, "substring")),
        ("50mm prime lens", "70-200mm zoom lens", (False, "overlap-reject")),  # 50mm: no integer
        ("days: 7", "7 days", (True, "overlap-accept")),  # same integer set: rule 6 decides
        # 6. content-word overlap, both ways
        ("under my bed", "under the bed", (True, "overlap-accept")),
        ("red kite", "red balloon ribbon string flag", (False, "overlap-reject")),
        ("YES", "NO", (False, "overlap-reject")),
        ("no", "north", (False, "overlap-reject")),
        ("of the", "3 weeks", (False, "overlap-reject")),  # only function words
        ("3 weeks", "of the", (False, "overlap-reject")),  # reference only function words
    ],
)
def test_rules(prediction: str, reference: str, expected: tuple[bool, str]) -> None:
    assert grade_answer(prediction, reference) == expected


@pytest.mark.parametrize(
    ("prediction", "reference", "correct"),
    [
        # 3 of 5 prediction words shared (0.6) and all 3 reference words: accepted.
        ("alpha beta gamma delta epsilon", "gamma alpha beta", True),
        # 3 of 3 prediction words, 3 of 5 reference words (0.6): accepted.
        ("gamma alpha beta", "alpha beta gamma delta epsilon", True),
        # 2 of 4 prediction words (0.5): rejected although the reference is covered.
        ("alpha beta delta epsilon", "beta alpha", False),
        # all prediction words, 2 of 4 reference words (0.5): rejected.
        ("beta alpha", "alpha beta delta epsilon", False),
        # unique tokens count once: {bed} vs {bed, table} covers half the reference.
        ("bed bed bed bed", "table bed", False),
        # function words do not count on either side: {bed, chair} vs {bed, chair}.
        ("the chair and bed", "bed with a chair", True),
    ],
)
def test_overlap_threshold_applies_both_ways(
    prediction: str, reference: str, correct: bool
) -> None:
    rule = "overlap-accept" if correct else "overlap-reject"
    assert grade_answer(prediction, reference) == (correct, rule)


@pytest.mark.parametrize("reference", ["", "   ", "?!", "—"])
def test_reference_without_tokens_is_a_contract_error(reference: str) -> None:
    with pytest.raises(GradingError, match="no letters or digits") as caught:
        grade_answer("Paris", reference)
    assert isinstance(caught.value, ValueError)
    # Checked before anything else, even when the prediction is empty too.
    with pytest.raises(GradingError):
        grade_answer("", reference)


# --- possible_rules: what verification may expect without the reference --------------


@pytest.mark.parametrize(
    ("prediction", "rules"),
    [
        ("", {"empty-prediction"}),
        ("INSUFFICIENT.", {"insufficient"}),
        ("of the", {"exact", "substring", "overlap-reject"}),
        ("Paris", {"exact", "substring", "overlap-accept", "overlap-reject"}),
        ("200mm lens", {"exact", "substring", "overlap-accept", "overlap-reject"}),
        ("seven", set(RULES) - {"empty-prediction", "insufficient"}),
    ],
)
def test_possible_rules(prediction: str, rules: set[str]) -> None:
    assert possible_rules(prediction) == rules


_WORDS = st.sampled_from(
    [
        "7", "5", "10", "25", "seven", "ten", "ranging", "from", "to", "the", "of", "bed",
        "under", "my", "insufficient", "weeks", "200mm", "Zoom", "-", "!", "é",
    ]
)  # fmt: skip
_TEXTS = st.lists(_WORDS, max_size=8).map(" ".join)


@given(prediction=_TEXTS, reference=_TEXTS)
def test_grade_is_consistent_with_its_rule_and_possible_rules(
    prediction: str, reference: str
) -> None:
    if not tokenize(reference):
        with pytest.raises(GradingError):
            grade_answer(prediction, reference)
        return
    correct, rule = grade_answer(prediction, reference)
    assert rule in RULES
    assert correct is (rule in CORRECT_RULES)
    assert rule in possible_rules(prediction)
    assert grade_answer(prediction, reference) == (correct, rule)  # deterministic


@given(text=_TEXTS)
def test_a_prediction_equal_to_the_reference_is_exact(text: str) -> None:
    tokens = tokenize(text)
    if not tokens:
        return
    expected = (False, "insufficient") if tokens == ["insufficient"] else (True, "exact")
    assert grade_answer(text, text.upper()) == expected


@pytest.mark.parametrize(
    ("prediction", "reference", "expected"),
    [
        ("…", "Oslo", (False, "empty-prediction")),
        ("Insufficient.", "Oslo", (False, "insufficient")),
        ("Nine days.", "9 days", (True, "exact")),
        ("12", "12 books", (True, "substring")),
        ("12 books in total", "12 books", (True, "substring")),
        ("4 hours", "ranging from 3 to 6 hours", (True, "numeric-range")),
        ("14 days", "15 days", (False, "numeric-conflict")),
        ("the blue notebook", "a notebook that is blue", (True, "overlap-accept")),
        ("green tea", "jasmine tea with honey", (False, "overlap-reject")),
        ("Days: 7", "7 days", (True, "overlap-accept")),
        ("a fortnight", "14 days", (False, "overlap-reject")),
    ],
)
def test_examples_in_the_documentation(
    prediction: str, reference: str, expected: tuple[bool, str]
) -> None:
    # docs/evaluation-statistics.md §1 quotes these; keep the page true.
    assert grade_answer(prediction, reference) == expected


# --- numbers of any length ------------------------------------------------------------------------

_LONG = "7" * 5000  # more digits than int() converts (sys.get_int_max_str_digits: 4,300)


@pytest.mark.parametrize(
    ("prediction", "reference", "expected"),
    [
        (_LONG + " days", "7 days", (False, "numeric-conflict")),
        ("7 days", _LONG + " days", (False, "numeric-conflict")),
        ("about " + _LONG, "ranging from 3 to 6 days", (False, "numeric-conflict")),
        ("4 days", f"ranging from 3 to {_LONG} days", (True, "numeric-range")),
        ("0" * 4400 + "5 days", "ranging from 3 to 6 days", (True, "numeric-range")),
        (_LONG + "0 apples", "ranging from 3 to " + _LONG + " apples", (False, "numeric-conflict")),
        ("007 apples", "7 pears", (False, "overlap-reject")),
    ],
)
def test_numbers_of_any_length_are_compared_exactly(
    prediction: str, reference: str, expected: tuple[bool, str]
) -> None:
    """A degenerate answer may repeat a digit up to its token limit: graded, never a crash."""
    assert grade_answer(prediction, reference) == expected
    assert expected[1] in possible_rules(prediction)


@given(
    numbers=st.lists(st.integers(min_value=0, max_value=10**30), min_size=1, max_size=3),
    low=st.integers(min_value=0, max_value=10**30),
    high=st.integers(min_value=0, max_value=10**30),
    zeros=st.integers(min_value=0, max_value=3),
)
def test_integer_tokens_compare_as_the_integers_they_spell(
    numbers: list[int], low: int, high: int, zeros: int
) -> None:
    prediction = " ".join("0" * zeros + str(number) for number in numbers)
    reference = f"ranging from {low} to {high} units"
    lo, hi = sorted((low, high))
    rule = grade_answer(prediction, reference).rule
    if rule in ("exact", "substring"):  # the prediction's tokens sit inside the reference's
        return
    in_range = all(lo <= number <= hi for number in numbers)
    assert rule == ("numeric-range" if in_range else "numeric-conflict")
