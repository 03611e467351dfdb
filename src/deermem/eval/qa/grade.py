"""``grade-qa``: prove every stored answer belongs to the protocol, then grade them blind.

Nothing is written until every check has passed (reference
``eval-harness-spec.md`` §4.3, in this order):

1. the three result files must not exist yet (they are never overwritten);
2. ``qa_run.json`` must exist and name the same five protocol files (hashes)
   and QA settings — read only;
3. the dataset (hash first), the cases and the 90 tasks are recomputed;
4. every task must have a stored answer that parses and follows the schema —
   all missing or malformed ones are named together;
5. every stored answer must carry the task's identity fields, its kept facts
   in rank order and its request fingerprint — all mismatches are named
   together.

Then each answer is graded against the reference answer of the task
*recomputed from the dataset* — never anything stored beside the answer — by
:func:`deermem.eval.grading.grader.grade_answer`, which sees only the
prediction and the reference, and the report (rows, summary, statistics with
the protocol's bootstrap parameters) is written. The same inputs give the same
bytes on every run.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Final

from deermem.eval.errors import AnswerRowIntegrityError
from deermem.eval.grading.statistics import StatisticsParameters
from deermem.eval.protocol.bundle import Protocol
from deermem.eval.protocol.cases import build_cases
from deermem.eval.protocol.dataset import load_dataset
from deermem.eval.qa.marker import check_marker
from deermem.eval.qa.responses import StoredResponse, read_response
from deermem.eval.qa.results import (
    ROWS_FILE,
    STATS_FILE,
    SUMMARY_FILE,
    QaReport,
    build_qa_report,
    write_qa_report,
)
from deermem.eval.qa.rows import AnswerToGrade, QaRow, grade_answer_row
from deermem.eval.qa.tasks import AnswerTask, RequestSettings, build_answer_tasks
from deermem.eval.result_files import ensure_absent

__all__ = ["MAX_LISTED_PROBLEMS", "collect_answers", "grade_answers", "grade_qa", "report_paths"]

MAX_LISTED_PROBLEMS: Final = 30
_REFUSE: Final = "refusing to grade"


def report_paths(directory: Path) -> tuple[Path, Path, Path]:
    """The three files ``grade-qa`` writes, in writing order."""
    return (directory / ROWS_FILE, directory / SUMMARY_FILE, directory / STATS_FILE)


def grade_qa(protocol: Protocol, dataset: Path, directory: Path) -> QaReport:
    """Check a QA run directory against the protocol, grade it, and write the report.

    Raises:
        ResultsExistError: a result file is already there.
        RunMarkerError: the marker is missing or names other protocol files or settings.
        DatasetIntegrityError: the dataset is not the pinned file or breaks the rules.
        AnswerRowIntegrityError: a stored answer is missing, malformed, or not
            the answer to its recomputed task.
    """
    ensure_absent(report_paths(directory))
    model = check_marker(directory, protocol, model=None, refusal=_REFUSE, required=True)
    data = load_dataset(dataset, expected_sha256=protocol.config.dataset.sha256)
    settings = RequestSettings.from_protocol(protocol, model=model)
    tasks = build_answer_tasks(protocol, build_cases(protocol, data), settings)
    rows = grade_answers(tasks, collect_answers(directory, tasks))
    statistics = protocol.config.statistics
    report = build_qa_report(
        rows,
        protocol_id=protocol.protocol_id,
        parameters=StatisticsParameters(
            seed=statistics.bootstrap_seed,
            iterations=statistics.bootstrap_iterations,
            alpha=statistics.alpha,
        ),
    )
    write_qa_report(directory, report)
    return report


def collect_answers(directory: Path, tasks: Sequence[AnswerTask]) -> list[StoredResponse]:
    """Every task's stored answer, each proven to answer it; refuse on any problem.

    Raises:
        AnswerRowIntegrityError: first, if any answer is missing or malformed
            (all of those named); else, if any answer's identity, kept facts or
            fingerprint differ from its task (all of those named).
    """
    stored = [read_response(directory, task) for task in tasks]
    ordered = sorted(zip(tasks, stored, strict=True), key=lambda pair: pair[0].row_id)
    broken = [
        (task, response) for task, response in ordered if response.missing or response.malformed
    ]
    if broken:
        _refuse("missing or invalid answer rows", broken, directory)
    mismatched = [(task, response) for task, response in ordered if response.problems]
    if mismatched:
        _refuse(
            "answer rows that do not match the tasks recomputed from the current protocol",
            mismatched,
            directory,
        )
    return stored


def grade_answers(tasks: Sequence[AnswerTask], stored: Sequence[StoredResponse]) -> list[QaRow]:
    """Grade each checked answer blind against its task's reference (from the dataset)."""
    return [_grade(task, response) for task, response in zip(tasks, stored, strict=True)]


def _grade(task: AnswerTask, response: StoredResponse) -> QaRow:
    answer = response.answer()
    case = task.case
    return grade_answer_row(
        AnswerToGrade(
            case_id=case.case_id,
            source=case.source,
            scenario=case.scenario,
            question_type=case.question_type,
            policy=task.policy,
            capacity=task.capacity,
            kept_fact_ids=task.kept_fact_ids,
            support_fact_ids=case.support_fact_ids,
            reference=case.answer,  # from the recomputed task, never from a stored file
            prediction=answer.prediction,
            attempts=answer.attempts,
            request_fingerprint=task.fingerprint,
            response_model=answer.response_model,
            usage=answer.usage,
        )
    )


def _refuse(
    summary: str, pairs: Sequence[tuple[AnswerTask, StoredResponse]], directory: Path
) -> None:
    problems: list[str] = []
    for task, response in pairs:
        where = str(response.path.relative_to(directory))
        if response.missing:
            problems.append(f"{task.row_id} ({where}): no stored answer")
        problems.extend(f"{task.row_id} ({where}): {problem}" for problem in response.problems)
    if len(problems) > MAX_LISTED_PROBLEMS:
        more = len(problems) - MAX_LISTED_PROBLEMS
        problems = [*problems[:MAX_LISTED_PROBLEMS], f"... and {more} more"]
    raise AnswerRowIntegrityError(
        f"{_REFUSE}: {summary}", [task.row_id for task, _ in pairs], problems
    )
