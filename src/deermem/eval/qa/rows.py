"""Graded answer rows: the schema of ``qa.rows.jsonl`` and how a row is made.

A graded row records *that* an answer was right, never *what* the question, the
reference answer or the memory said: those are private (LongMemEval's text, or a
user's memory) and stay out of every published file. A row holds exactly the 19
keys of :data:`ROW_KEYS`; its only free text is ``prediction``, the model's own
answer, which is published on purpose so that anyone can re-grade it.

:func:`row_problems` is the one place that says what a valid row is. It checks
every key's type and form, and the relations inside a row that hold whatever
the protocol: ``row_id`` is ``<case_id>__<policy>``, the grade agrees with its
rule, the rule is one the grader can give this prediction, at most ``capacity``
facts are kept, and the two support fields agree. Identifier fields must look
like identifiers (no spaces, at most 128 characters), so no sentence of private
text can hide in them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, cast

from deermem.eval._problems import FieldProblem, describe_value
from deermem.eval.errors import ResultRowsError
from deermem.eval.grading.grader import (
    CORRECT_RULES,
    GRADER_VERSION,
    RULES,
    grade_answer,
    possible_rules,
)
from deermem.eval.result_files import jsonl_line
from deermem.policy import POLICY_CONFIDENCE, POLICY_HYBRID_V1

__all__ = [
    "POLICIES",
    "ROW_KEYS",
    "ROW_SCHEMA_VERSION",
    "SOURCES",
    "AnswerToGrade",
    "QaRow",
    "grade_answer_row",
    "render_rows",
    "row_id_of",
    "row_problems",
]

ROW_SCHEMA_VERSION: Final = 1

POLICIES: Final = (POLICY_CONFIDENCE, POLICY_HYBRID_V1)
"""The compared policies, first and second."""

SOURCES: Final = ("longmemeval", "synthetic")
"""Where a case comes from: the official LongMemEval questions or our own corrections."""

ROW_KEYS: Final = (
    "attempts",
    "capacity",
    "case_id",
    "grade_correct",
    "grade_rule",
    "grader_version",
    "kept_fact_ids",
    "policy",
    "prediction",
    "question_type",
    "request_fingerprint",
    "response_model",
    "row_id",
    "scenario",
    "schema_version",
    "source",
    "support_all_retained",
    "support_recall",
    "usage",
)

IDENTIFIER: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
_ROW_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,255}")
_MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:/@+-]{0,199}")
_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True, slots=True)
class QaRow:
    """One graded answer: a line of ``qa.rows.jsonl``. Build with :meth:`from_dict`."""

    row_id: str
    case_id: str
    source: str
    scenario: str
    question_type: str
    policy: str
    capacity: int
    kept_fact_ids: tuple[str, ...]
    support_all_retained: bool
    support_recall: float
    prediction: str
    grade_correct: bool
    grade_rule: str
    grader_version: str
    attempts: int
    request_fingerprint: str
    response_model: str | None
    usage: Mapping[str, int]
    schema_version: int = ROW_SCHEMA_VERSION

    def to_dict(self) -> dict[str, object]:
        """The row as published (keys are sorted when serialised)."""
        return {
            "attempts": self.attempts,
            "capacity": self.capacity,
            "case_id": self.case_id,
            "grade_correct": self.grade_correct,
            "grade_rule": self.grade_rule,
            "grader_version": self.grader_version,
            "kept_fact_ids": list(self.kept_fact_ids),
            "policy": self.policy,
            "prediction": self.prediction,
            "question_type": self.question_type,
            "request_fingerprint": self.request_fingerprint,
            "response_model": self.response_model,
            "row_id": self.row_id,
            "scenario": self.scenario,
            "schema_version": self.schema_version,
            "source": self.source,
            "support_all_retained": self.support_all_retained,
            "support_recall": self.support_recall,
            "usage": dict(self.usage),
        }

    def to_json_line(self) -> str:
        """The row's exact line in ``qa.rows.jsonl``, newline included."""
        return jsonl_line(self.to_dict())

    @classmethod
    def from_dict(cls, data: object) -> QaRow:
        """Validate a parsed row and build it.

        Raises:
            ResultRowsError: the row breaks the schema; every problem is named.
        """
        problems = row_problems(data)
        if problems:
            row = _row_label(data)
            raise ResultRowsError([f"{row}: {problem}" for problem in problems])
        record = cast(dict[str, object], data)
        return cls(
            row_id=cast(str, record["row_id"]),
            case_id=cast(str, record["case_id"]),
            source=cast(str, record["source"]),
            scenario=cast(str, record["scenario"]),
            question_type=cast(str, record["question_type"]),
            policy=cast(str, record["policy"]),
            capacity=cast(int, record["capacity"]),
            kept_fact_ids=tuple(cast(list[str], record["kept_fact_ids"])),
            support_all_retained=cast(bool, record["support_all_retained"]),
            support_recall=cast(float, record["support_recall"]),
            prediction=cast(str, record["prediction"]),
            grade_correct=cast(bool, record["grade_correct"]),
            grade_rule=cast(str, record["grade_rule"]),
            grader_version=cast(str, record["grader_version"]),
            attempts=cast(int, record["attempts"]),
            request_fingerprint=cast(str, record["request_fingerprint"]),
            response_model=cast("str | None", record["response_model"]),
            usage=dict(cast(dict[str, int], record["usage"])),
            schema_version=cast(int, record["schema_version"]),
        )


@dataclass(frozen=True, slots=True)
class AnswerToGrade:
    """One stored answer joined with the task recomputed from the protocol.

    ``grade-qa`` fills the case fields, ``kept_fact_ids``, ``support_fact_ids``
    and ``reference`` from the task it recomputes from the protocol and the
    dataset — never from the stored answer, which could have been edited — and
    takes ``prediction``, ``attempts``, ``request_fingerprint``,
    ``response_model`` and ``usage`` from the stored answer after checking its
    identity fields and fingerprint against the task.
    """

    case_id: str
    source: str
    scenario: str
    question_type: str
    policy: str
    capacity: int
    kept_fact_ids: tuple[str, ...]
    support_fact_ids: tuple[str, ...]
    reference: str
    prediction: str
    attempts: int
    request_fingerprint: str
    response_model: str | None
    usage: Mapping[str, int]


def grade_answer_row(answer: AnswerToGrade) -> QaRow:
    """Grade one answer blind and build its published row (without the reference).

    Raises:
        GradingError: the reference has no tokens.
        ResultRowsError: a field of ``answer`` does not fit the row schema.
    """
    correct, rule = grade_answer(answer.prediction, answer.reference)
    kept = set(answer.kept_fact_ids)
    support = answer.support_fact_ids
    retained = sum(1 for fact_id in support if fact_id in kept)
    return QaRow.from_dict(
        {
            "attempts": answer.attempts,
            "capacity": answer.capacity,
            "case_id": answer.case_id,
            "grade_correct": correct,
            "grade_rule": rule,
            "grader_version": GRADER_VERSION,
            "kept_fact_ids": list(answer.kept_fact_ids),
            "policy": answer.policy,
            "prediction": answer.prediction,
            "question_type": answer.question_type,
            "request_fingerprint": answer.request_fingerprint,
            "response_model": answer.response_model,
            "row_id": f"{answer.case_id}__{answer.policy}",
            "scenario": answer.scenario,
            "schema_version": ROW_SCHEMA_VERSION,
            "source": answer.source,
            "support_all_retained": bool(support) and retained == len(support),
            "support_recall": retained / len(support) if support else 0.0,
            "usage": dict(answer.usage),
        }
    )


def render_rows(rows: Sequence[QaRow]) -> str:
    """The text of ``qa.rows.jsonl``: one canonical line per row, sorted by ``row_id``."""
    return "".join(row.to_json_line() for row in sorted(rows, key=lambda row: row.row_id))


def row_problems(data: object) -> list[FieldProblem]:
    """Every way ``data`` (a parsed JSON value) fails to be a valid graded row."""
    if not isinstance(data, dict):
        return [FieldProblem("(row)", "a JSON object", describe_value(data, reveal=False))]
    problems: list[FieldProblem] = []
    missing = [key for key in ROW_KEYS if key not in data]
    if missing:
        problems.append(
            FieldProblem("(keys)", "all 19 schema keys", "missing " + ", ".join(missing))
        )
    for key in sorted(set(data) - set(ROW_KEYS)):
        problems.append(
            FieldProblem(
                _safe_key(key),
                "no such key (a row carries only the 19 schema keys)",
                describe_value(data[key], reveal=False),
            )
        )
    for key, (check, expected) in _FIELD_CHECKS.items():
        if key in data and not check(data[key]):
            problems.append(
                FieldProblem(key, expected, describe_value(data[key], reveal=key in _REVEALED))
            )
    if not problems:
        problems.extend(_relation_problems(data))
    return problems


def _relation_problems(row: dict[str, object]) -> list[FieldProblem]:
    """Relations between the fields of one well-typed row."""
    problems: list[FieldProblem] = []
    row_id = f"{row['case_id']}__{row['policy']}"
    if row["row_id"] != row_id:
        problems.append(
            FieldProblem("row_id", describe_value(row_id), describe_value(row["row_id"]))
        )
    rule = cast(str, row["grade_rule"])
    if row["grade_correct"] is not (rule in CORRECT_RULES):
        expected = f"{describe_value(rule in CORRECT_RULES)} (rule {describe_value(rule)})"
        problems.append(
            FieldProblem("grade_correct", expected, describe_value(row["grade_correct"]))
        )
    allowed = possible_rules(cast(str, row["prediction"]))
    if rule not in allowed:
        expected = "a rule the grader can give this prediction: " + ", ".join(
            r for r in RULES if r in allowed
        )
        problems.append(FieldProblem("grade_rule", expected, describe_value(rule)))
    kept = cast(list[str], row["kept_fact_ids"])
    if len(kept) > cast(int, row["capacity"]):
        expected = f"at most capacity = {row['capacity']} ids"
        problems.append(FieldProblem("kept_fact_ids", expected, f"{len(kept)} ids"))
    if row["support_all_retained"] is not (row["support_recall"] == 1.0):
        expected = f"support_recall {'1.0' if row['support_all_retained'] else 'below 1.0'}"
        expected += f" when support_all_retained is {describe_value(row['support_all_retained'])}"
        problems.append(
            FieldProblem("support_recall", expected, describe_value(row["support_recall"]))
        )
    return problems


def _is_count(minimum: int) -> Callable[[object], bool]:
    return lambda value: type(value) is int and value >= minimum


def _matches(pattern: re.Pattern[str]) -> Callable[[object], bool]:
    return lambda value: isinstance(value, str) and pattern.fullmatch(value) is not None


def _is_kept_ids(value: object) -> bool:
    return (
        isinstance(value, list)
        and len(value) > 0
        and all(isinstance(item, str) and IDENTIFIER.fullmatch(item) for item in value)
        and len(set(value)) == len(value)
    )


def _is_usage(value: object) -> bool:
    return isinstance(value, dict) and all(
        IDENTIFIER.fullmatch(key) and type(count) is int and count >= 0
        for key, count in value.items()
    )


_FIELD_CHECKS: Final[dict[str, tuple[Callable[[object], bool], str]]] = {
    "attempts": (_is_count(1), "an integer ≥ 1"),
    "capacity": (_is_count(1), "an integer ≥ 1"),
    "case_id": (_matches(IDENTIFIER), "an identifier"),
    "grade_correct": (lambda v: isinstance(v, bool), "true or false"),
    "grade_rule": (lambda v: v in RULES, "one of " + ", ".join(RULES)),
    "grader_version": (lambda v: v == GRADER_VERSION, describe_value(GRADER_VERSION)),
    "kept_fact_ids": (_is_kept_ids, "a non-empty list of unique fact ids"),
    "policy": (lambda v: v in POLICIES, "one of " + ", ".join(POLICIES)),
    "prediction": (lambda v: isinstance(v, str), "a string"),
    "question_type": (_matches(IDENTIFIER), "an identifier"),
    "request_fingerprint": (_matches(_SHA256), "64 lowercase hex digits"),
    "response_model": (lambda v: v is None or _matches(_MODEL_NAME)(v), "a model name or null"),
    "row_id": (_matches(_ROW_ID), "an identifier"),
    "scenario": (_matches(IDENTIFIER), "an identifier"),
    "schema_version": (lambda v: type(v) is int and v == ROW_SCHEMA_VERSION, "1"),
    "source": (lambda v: v in SOURCES, "one of " + ", ".join(SOURCES)),
    "support_all_retained": (lambda v: isinstance(v, bool), "true or false"),
    "support_recall": (
        lambda v: type(v) is float and 0.0 <= v <= 1.0,
        "a float between 0.0 and 1.0",
    ),
    "usage": (_is_usage, "an object of non-negative integer token counts"),
}

# Fields whose bad values are safe to quote in a message: numbers, flags, labels.
_REVEALED: Final = frozenset(
    {
        "attempts",
        "capacity",
        "grade_correct",
        "grade_rule",
        "grader_version",
        "policy",
        "schema_version",
        "source",
        "support_all_retained",
        "support_recall",
    }
)


def _safe_key(key: str) -> str:
    """An unexpected key, quoted if it looks like a key and shortened otherwise."""
    return repr(key) if IDENTIFIER.fullmatch(key) else f"(a key of {len(key)} characters)"


def row_id_of(data: object) -> str | None:
    """The ``row_id`` of a parsed row if it is well-formed (safe to name it by)."""
    row_id = data.get("row_id") if isinstance(data, dict) else None
    if isinstance(row_id, str) and _ROW_ID.fullmatch(row_id):
        return row_id
    return None


def _row_label(data: object) -> str:
    """How to name a row in a message: its row_id if it has a sane one."""
    row_id = row_id_of(data)
    return f"row {row_id}" if row_id else "row (without a valid row_id)"
