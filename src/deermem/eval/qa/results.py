"""From graded rows to the published QA report: rows, summary and statistics.

``grade-qa`` ends here and ``verify`` starts here: both derive
``qa.summary.json`` and ``qa.stats.json`` from the same rows with the same
functions, so a published report can be re-derived and compared byte for byte.

The three suites are kept apart on purpose. ``official`` (the LongMemEval
questions) and ``synthetic`` (our correction cases) measure different things,
and ``overall`` pools them; the summary has no pooled group at all.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from deermem.eval._problems import FieldProblem, describe_value
from deermem.eval.errors import ResultRowsError
from deermem.eval.grading.grader import GRADER_VERSION
from deermem.eval.grading.statistics import (
    DEFAULT_PARAMETERS,
    PairedComparison,
    StatisticsParameters,
    compare_pairs,
)
from deermem.eval.qa.rows import POLICIES, QaRow, render_rows
from deermem.eval.result_files import document_text, write_new_files

__all__ = [
    "REPORT_SCHEMA_VERSION",
    "ROWS_FILE",
    "RUN_FILE",
    "STATS_FILE",
    "SUITES",
    "SUITE_OF_SOURCE",
    "SUMMARY_FILE",
    "QaReport",
    "SummaryGroup",
    "build_qa_report",
    "check_rows",
    "compare_suites",
    "pairing_problems",
    "statistics_document",
    "summarize",
    "summary_document",
    "write_qa_report",
]

ROWS_FILE: Final = "qa.rows.jsonl"
SUMMARY_FILE: Final = "qa.summary.json"
STATS_FILE: Final = "qa.stats.json"
RUN_FILE: Final = "qa_run.json"

REPORT_SCHEMA_VERSION: Final = 1

SUITES: Final = ("official", "synthetic", "overall")
SUITE_OF_SOURCE: Final = {"longmemeval": "official", "synthetic": "synthetic"}

# Fields that describe the case, so both rows of a pair must agree on them.
_CASE_FIELDS: Final = ("source", "scenario", "question_type", "capacity")


@dataclass(frozen=True, slots=True)
class SummaryGroup:
    """Accuracy of one policy on one scenario."""

    source: str
    scenario: str
    policy: str
    cases: int
    correct: int

    @property
    def accuracy(self) -> float:
        """Correct answers over cases."""
        return self.correct / self.cases

    def to_dict(self) -> dict[str, object]:
        """One entry of ``groups`` in ``qa.summary.json``."""
        return {
            "accuracy": self.accuracy,
            "cases": self.cases,
            "correct": self.correct,
            "policy": self.policy,
            "scenario": self.scenario,
            "source": self.source,
        }


@dataclass(frozen=True, slots=True)
class QaReport:
    """A complete QA report, ready to write or to compare with a published one.

    Attributes:
        protocol_id: the protocol the rows were produced under.
        rows: the graded rows, sorted by ``row_id``.
        groups: the summary groups, sorted by (source, scenario, policy).
        comparisons: suite name → statistics, in the order of :data:`SUITES`.
    """

    protocol_id: str
    rows: tuple[QaRow, ...]
    groups: tuple[SummaryGroup, ...]
    comparisons: Mapping[str, PairedComparison]

    @property
    def capacity(self) -> int:
        """The capacity every row was answered at."""
        return self.rows[0].capacity

    def summary(self) -> dict[str, object]:
        """The ``qa.summary.json`` document."""
        return summary_document(self.groups, protocol_id=self.protocol_id, capacity=self.capacity)

    def statistics(self) -> dict[str, object]:
        """The ``qa.stats.json`` document."""
        return statistics_document(self.comparisons, protocol_id=self.protocol_id)

    def files(self) -> dict[str, str]:
        """File name → exact text of the three result files, in writing order."""
        return {
            ROWS_FILE: render_rows(self.rows),
            SUMMARY_FILE: document_text(self.summary()),
            STATS_FILE: document_text(self.statistics()),
        }


def check_rows(rows: Iterable[QaRow]) -> tuple[QaRow, ...]:
    """Sort rows by ``row_id`` and check that they form complete, consistent pairs.

    Raises:
        ResultRowsError: naming every duplicate, unpaired or inconsistent row
            (see :func:`pairing_problems`).
    """
    ordered = tuple(sorted(rows, key=lambda row: row.row_id))
    problems = pairing_problems(ordered)
    if problems:
        raise ResultRowsError([str(problem) for problem in problems])
    return ordered


def pairing_problems(rows: Sequence[QaRow]) -> list[FieldProblem]:
    """Every way the rows fail to be complete, consistent pairs of one capacity.

    Every case needs exactly one row per policy, the two rows of a case must
    agree on the case fields (source, scenario, question type, capacity), and
    all rows must share one capacity.
    """
    if not rows:
        return [FieldProblem("(rows)", "at least one pair of rows", "no rows")]
    problems: list[FieldProblem] = []
    cases: dict[str, dict[str, QaRow]] = {}
    for row in rows:
        policies = cases.setdefault(row.case_id, {})
        if row.policy in policies:
            problems.append(
                FieldProblem("row_id", "a row_id used once", "a repeated row_id", row.row_id)
            )
        policies[row.policy] = row
    for case_id, policies in cases.items():
        missing = [policy for policy in POLICIES if policy not in policies]
        if missing:
            expected = "a row for each policy (" + ", ".join(POLICIES) + ")"
            found = "no row for " + ", ".join(missing)
            problems.append(FieldProblem("policy", expected, found, f"case {case_id}"))
            continue
        first, second = (policies[policy] for policy in POLICIES)
        for name in _CASE_FIELDS:
            want, got = getattr(first, name), getattr(second, name)
            if want != got:
                expected = f"{describe_value(want)} (as in {first.row_id})"
                problems.append(FieldProblem(name, expected, describe_value(got), second.row_id))
    capacities = sorted({row.capacity for row in rows})
    if len(capacities) > 1:
        found = ", ".join(map(str, capacities))
        problems.append(FieldProblem("capacity", "one capacity for all rows", found))
    return problems


def summarize(rows: Iterable[QaRow]) -> tuple[SummaryGroup, ...]:
    """Accuracy per (source, scenario, policy), sorted by that tuple."""
    tallies: dict[tuple[str, str, str], list[int]] = {}
    for row in rows:
        tally = tallies.setdefault((row.source, row.scenario, row.policy), [0, 0])
        tally[0] += 1
        tally[1] += row.grade_correct
    return tuple(
        SummaryGroup(source, scenario, policy, cases, correct)
        for (source, scenario, policy), (cases, correct) in sorted(tallies.items())
    )


def compare_suites(
    rows: Iterable[QaRow], parameters: StatisticsParameters = DEFAULT_PARAMETERS
) -> dict[str, PairedComparison]:
    """McNemar and the bootstrap for each suite, over cases sorted by ``case_id``.

    Args:
        rows: complete pairs, as :func:`check_rows` returns them.
        parameters: the bootstrap's seed, iterations and alpha.

    Raises:
        ResultRowsError: a suite has no cases.
    """
    grades: dict[str, dict[str, bool]] = {}
    sources: dict[str, str] = {}
    for row in rows:
        grades.setdefault(row.case_id, {})[row.policy] = row.grade_correct
        sources[row.case_id] = row.source
    pairs: dict[str, list[tuple[bool, bool]]] = {suite: [] for suite in SUITES}
    for case_id in sorted(grades):
        pair = (grades[case_id][POLICIES[0]], grades[case_id][POLICIES[1]])
        pairs[SUITE_OF_SOURCE[sources[case_id]]].append(pair)
        pairs["overall"].append(pair)
    empty = [suite for suite in SUITES if not pairs[suite]]
    if empty:
        raise ResultRowsError([f"suite {suite!r} has no cases" for suite in empty])
    return {suite: compare_pairs(pairs[suite], parameters) for suite in SUITES}


def summary_document(
    groups: Sequence[SummaryGroup], *, protocol_id: str, capacity: int
) -> dict[str, object]:
    """The ``qa.summary.json`` document for these groups."""
    return {
        "grader_version": GRADER_VERSION,
        "groups": [group.to_dict() for group in groups],
        "protocol_id": protocol_id,
        "qa_capacity": capacity,
        "schema_version": REPORT_SCHEMA_VERSION,
    }


def statistics_document(
    comparisons: Mapping[str, PairedComparison], *, protocol_id: str
) -> dict[str, object]:
    """The ``qa.stats.json`` document for these suites."""
    return {
        "grader_version": GRADER_VERSION,
        "policies": list(POLICIES),
        "protocol_id": protocol_id,
        "schema_version": REPORT_SCHEMA_VERSION,
        "suites": {suite: comparison.to_dict() for suite, comparison in comparisons.items()},
    }


def build_qa_report(
    rows: Iterable[QaRow],
    *,
    protocol_id: str,
    parameters: StatisticsParameters = DEFAULT_PARAMETERS,
) -> QaReport:
    """Check the rows and derive everything the report publishes.

    Raises:
        ResultRowsError: the rows are not complete, consistent pairs, or a suite
            has no cases.
    """
    ordered = check_rows(rows)
    return QaReport(
        protocol_id=protocol_id,
        rows=ordered,
        groups=summarize(ordered),
        comparisons=compare_suites(ordered, parameters),
    )


def write_qa_report(directory: Path, report: QaReport) -> tuple[Path, ...]:
    """Write ``qa.rows.jsonl``, ``qa.summary.json`` and ``qa.stats.json`` atomically.

    Raises:
        ResultsExistError: any of the three files exists; nothing is written.
    """
    return write_new_files(
        [(directory / name, text.encode("utf-8")) for name, text in report.files().items()]
    )
