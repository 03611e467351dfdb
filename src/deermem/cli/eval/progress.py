"""Progress of ``run-qa`` on stderr: a rich bar on a terminal, plain lines elsewhere.

A run in CI or with its output redirected gets one line when the calls start
and one per finished call, so a log holds no control codes.
"""

from __future__ import annotations

from typing import TextIO

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TimeElapsedColumn

from deermem.eval.qa.run import AnswerOutcome

__all__ = ["AnswerProgress"]


class AnswerProgress:
    """Shows how far a ``run-qa`` has got.

    Use it as a context manager; pass :meth:`start` and :meth:`advance` to
    :func:`deermem.eval.qa.run.run_qa`.
    """

    def __init__(self, stream: TextIO, *, model: str) -> None:
        self._stream = stream
        self._model = model
        self._terminal = stream.isatty()
        self._bar: Progress | None = None
        self._task: TaskID | None = None
        self._total = 0
        self._done = 0

    def __enter__(self) -> AnswerProgress:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def start(self, pending: int, reused: int) -> None:
        """Called once the tasks are known: ``pending`` to call, ``reused`` kept."""
        self._total = pending
        if not pending:
            return
        if not self._terminal:
            self._stream.write(
                f"answering {pending} questions with {self._model}"
                f" ({reused} stored answers reused)\n"
            )
            self._stream.flush()
            return
        self._bar = Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=Console(file=self._stream),
            transient=False,
        )
        self._bar.start()
        self._task = self._bar.add_task(f"answering with {self._model}", total=pending)

    def advance(self, outcome: AnswerOutcome) -> None:
        """Called once per finished call."""
        self._done += 1
        if self._bar is not None and self._task is not None:
            self._bar.advance(self._task)
            if outcome.error is not None:
                self._bar.console.print(f"[red]failed[/red] {escape(outcome.task.row_id)}")
            return
        status = "answered" if outcome.error is None else "failed"
        width = len(str(self._total))
        self._stream.write(
            f"[{self._done:>{width}}/{self._total}] {outcome.task.row_id} {status}\n"
        )
        self._stream.flush()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
