"""``run-qa``: ask the model every question of the protocol, resumably.

Order of work (reference ``eval-harness-spec.md`` §1.2 and §4.2):

1. the caller resolves the answerer (the endpoint's environment variables, or
   the local model) — before the dataset is touched;
2. :func:`run_qa` reads the directory's marker, if any, and refuses when it
   was written under other protocol files or settings — still before the
   dataset;
3. the dataset (hash first), the 45 cases and the 90 tasks;
4. the marker is written if the directory is new;
5. every task without a usable stored answer is sent, by a bounded pool of
   ``qa.workers`` threads; each success is stored at once.

A stored answer is reused only when it provably answers the task recomputed
now: same identity fields, same kept facts in the same order, same request
fingerprint (:func:`deermem.eval.qa.responses.response_problems`).
Anything else — a missing, corrupt, stale or edited file — is called again.
A failed call writes nothing; running the command again retries just those.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from datetime import datetime
from pathlib import Path
from typing import NamedTuple

from deermem.errors import LLMError
from deermem.eval.protocol.bundle import Protocol
from deermem.eval.protocol.cases import build_cases
from deermem.eval.protocol.dataset import load_dataset
from deermem.eval.provenance import git_state
from deermem.eval.qa.marker import check_marker, marker_record, write_marker
from deermem.eval.qa.providers import Answerer
from deermem.eval.qa.responses import read_response, write_response
from deermem.eval.qa.tasks import AnswerTask, RequestSettings, build_answer_tasks

__all__ = ["AnswerOutcome", "QaRunSummary", "answer_tasks", "run_qa", "split_reusable"]

NEW_DIRECTORY = "use a new output directory"


class AnswerOutcome(NamedTuple):
    """How one pending task ended: stored (``error`` is ``None``) or failed."""

    task: AnswerTask
    attempts: int
    error: str | None

    @property
    def ok(self) -> bool:
        return self.error is None


class QaRunSummary(NamedTuple):
    """What a ``run-qa`` did.

    Attributes:
        tasks: how many tasks the protocol has.
        reused: stored answers kept as they were.
        called: calls that succeeded (and were stored).
        failed: ``(row_id, error)`` of each failed call, sorted by row id.
    """

    tasks: int
    reused: int
    called: int
    failed: tuple[tuple[str, str], ...]

    def lines(self) -> list[str]:
        """The summary ``run-qa`` prints: counts, then one line per failure."""
        head = f"answer rows: {self.reused} reused, {self.called} called, {len(self.failed)} failed"
        return [head, *(f"  failed {row_id}: {error}" for row_id, error in self.failed)]


Progress = Callable[[AnswerOutcome], None]


def run_qa(
    protocol: Protocol,
    dataset: Path,
    directory: Path,
    answerer: Answerer,
    *,
    on_start: Callable[[int, int], None] | None = None,
    progress: Progress | None = None,
    created_at: datetime | None = None,
) -> QaRunSummary:
    """Answer every task of the protocol that has no usable stored answer.

    Args:
        protocol: the loaded protocol.
        dataset: the LongMemEval file (checked against the pinned hash).
        directory: the run directory (``qa_run.json``, ``responses/``).
        answerer: who answers; its model name goes into every request.
        on_start: called with (tasks to call, tasks reused) before the first call.
        progress: called once per finished call, from the calling thread.
        created_at: the marker's time (default: now).

    Raises:
        RunMarkerError: the directory belongs to other protocol files or settings.
        DatasetIntegrityError: the dataset is not the pinned file or breaks the rules.
    """
    settings = RequestSettings.from_protocol(protocol, model=answerer.model)
    existing = check_marker(
        directory, protocol, model=settings.model, refusal=NEW_DIRECTORY, required=False
    )
    data = load_dataset(dataset, expected_sha256=protocol.config.dataset.sha256)
    tasks = build_answer_tasks(protocol, build_cases(protocol, data), settings)
    if existing is None:  # a new run directory
        record = marker_record(protocol, settings, git=git_state(), created_at=created_at)
        write_marker(directory, record)
    reusable, pending = split_reusable(directory, tasks)
    if on_start is not None:
        on_start(len(pending), len(reusable))
    outcomes = answer_tasks(
        directory, pending, answerer, workers=protocol.config.qa.workers, progress=progress
    )
    failed = sorted((o.task.row_id, o.error) for o in outcomes if o.error is not None)
    return QaRunSummary(
        tasks=len(tasks),
        reused=len(reusable),
        called=len(pending) - len(failed),
        failed=tuple(failed),
    )


def split_reusable(
    directory: Path, tasks: Sequence[AnswerTask]
) -> tuple[list[AnswerTask], list[AnswerTask]]:
    """(tasks whose stored answer proves it answers them, tasks to call)."""
    reusable: list[AnswerTask] = []
    pending: list[AnswerTask] = []
    for task in tasks:
        (reusable if read_response(directory, task).usable else pending).append(task)
    return reusable, pending


def answer_tasks(
    directory: Path,
    tasks: Sequence[AnswerTask],
    answerer: Answerer,
    *,
    workers: int,
    progress: Progress | None = None,
) -> list[AnswerOutcome]:
    """Call every task with at most ``workers`` calls in flight; store each success.

    Each answer is written the moment it arrives, so an interrupted run keeps
    what it got. Outcomes are returned in task order.
    """
    if not tasks:
        return []
    outcomes: dict[str, AnswerOutcome] = {}
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="deermem-run-qa") as pool:
        running: set[Future[AnswerOutcome]] = {
            pool.submit(_answer_one, directory, task, answerer) for task in tasks
        }
        try:
            while running:
                done, running = wait(running, return_when=FIRST_COMPLETED)
                for future in done:
                    outcome = future.result()
                    outcomes[outcome.task.row_id] = outcome
                    if progress is not None:
                        progress(outcome)
        except BaseException:
            for future in running:
                future.cancel()  # calls in flight finish and are stored; queued ones never start
            raise
    return [outcomes[task.row_id] for task in tasks]


def _answer_one(directory: Path, task: AnswerTask, answerer: Answerer) -> AnswerOutcome:
    try:
        answer = answerer.answer(task)
    except LLMError as error:
        return AnswerOutcome(task, error.attempts, str(error))
    try:
        write_response(directory, task, answer)
    except OSError as error:
        return AnswerOutcome(task, answer.attempts, f"the answer could not be stored: {error}")
    return AnswerOutcome(task, answer.attempts, None)
