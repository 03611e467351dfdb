"""Helpers for the QA-run tests: a scripted answering model and protocol copies to edit.

The "model" is a :class:`~deermem.testing.ScriptedChatServer` on 127.0.0.1 whose
replies are computed from each request: it answers a question with the case's
reference answer when the case's support fact is in the stored memory, and
``INSUFFICIENT`` otherwise — the behaviour of a perfect reader, so the grades
follow retention exactly. Per-row scripts (429, 500, timeouts, dropped
connections, malformed bodies) are keyed by the request fingerprint, so they
hit the intended row whatever order the worker threads send in.
"""

from __future__ import annotations

import contextlib
import json
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from deermem.eval.dataset import EvaluationCase
from deermem.eval.protocol import Protocol, ProtocolFiles, load_protocol
from deermem.eval.qa import (
    AnswerTask,
    RequestSettings,
    build_answer_tasks,
    request_fingerprint,
)
from deermem.testing import RecordedRequest, Reply, ScriptedChatServer, ScriptItem
from tests.evaluation.longmemeval_data import copy_protocol, protocol_flags

__all__ = [
    "API_KEY",
    "BASE_URL_ENV",
    "KEY_ENV",
    "Bundle",
    "Oracle",
    "bundle_copy",
    "distinct",
    "edit_text",
    "load_json",
    "serving",
    "tasks_for",
    "write_json",
]

BASE_URL_ENV = "DEERMEM_EVAL_ANSWER_BASE_URL"
KEY_ENV = "DEERMEM_EVAL_ANSWER_API_KEY"
API_KEY = "sk-test-0123456789abcdef"


class Bundle(NamedTuple):
    """An editable copy of the bundled protocol, pinned to the generated dataset."""

    files: ProtocolFiles
    dataset: Path

    def args(self) -> list[str]:
        return [*protocol_flags(self.files), "--dataset", str(self.dataset)]

    def protocol(self) -> Protocol:
        return load_protocol(self.files)

    @property
    def prompt(self) -> Path:
        return self.files.config.parent / "answer-v1.txt"


def bundle_copy(directory: Path, dataset: Path, sha256: str, **config: object) -> Bundle:
    """Copy the bundled protocol into ``directory``, setting ``qa`` keys in the config."""
    files = copy_protocol(directory, sha256)
    for key, value in config.items():
        edit_text(files.config, _qa_line(files.config, key), f"  {key}: {value}")
    return Bundle(files, dataset)


def _qa_line(config: Path, key: str) -> str:
    for line in config.read_text().splitlines():
        if line.startswith(f"  {key}: "):
            return line
    raise AssertionError(f"no qa key {key!r} in {config}")


def edit_text(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, (path, old)
    path.write_text(text.replace(old, new))


def distinct(tasks: Iterable[AnswerTask]) -> list[AnswerTask]:
    """The tasks whose request no other task sends (both policies can keep the same facts)."""
    tasks = list(tasks)
    counts: dict[str, int] = {}
    for task in tasks:
        counts[task.fingerprint] = counts.get(task.fingerprint, 0) + 1
    return [task for task in tasks if counts[task.fingerprint] == 1]


def tasks_for(
    bundle: Bundle, cases: Sequence[EvaluationCase], model: str | None = None
) -> tuple[AnswerTask, ...]:
    """The tasks ``run-qa`` builds under ``bundle`` (for ``model``, default the config's)."""
    protocol = bundle.protocol()
    return build_answer_tasks(protocol, cases, RequestSettings.from_protocol(protocol, model=model))


@contextlib.contextmanager
def serving(oracle: Oracle, *, requests: int = 400) -> Iterator[ScriptedChatServer]:
    """A scripted server that answers up to ``requests`` requests with ``oracle``."""
    with ScriptedChatServer() as server:
        server.enqueue(*([oracle] * requests))
        yield server


class Oracle:
    """Answers like a perfect reader; replays per-row scripts first.

    Attributes:
        scripts: row id -> replies to send before answering.
        received: row id -> how many requests arrived for it.
    """

    def __init__(self, cases: Iterable[EvaluationCase], tasks: Iterable[AnswerTask]) -> None:
        self._by_question = {case.question: case for case in cases}
        # When both policies keep the same facts, the two requests are identical
        # (the same fingerprint); such requests are counted under "(both policies)".
        self._rows: dict[str, str] = {}
        for task in tasks:
            shared = task.fingerprint in self._rows
            self._rows[task.fingerprint] = "(both policies)" if shared else task.row_id
        self.scripts: dict[str, deque[ScriptItem]] = {}
        self.received: dict[str, int] = {}

    def script(self, row_id: str, *replies: ScriptItem) -> None:
        self.scripts[row_id] = deque(replies)

    def __call__(self, request: RecordedRequest) -> ScriptItem:
        body = request.json()
        row_id = self._rows.get(request_fingerprint(body), "(unknown request)")
        self.received[row_id] = self.received.get(row_id, 0) + 1
        queued = self.scripts.get(row_id)
        if queued:
            return queued.popleft()
        return Reply.text(self.answer(body["messages"][1]["content"]), model="oracle-model")

    def answer(self, user_message: str) -> str:
        question = user_message.rsplit("QUESTION: ", 1)[1]
        case = self._by_question[question]
        return case.answer if f"[gold_{case.case_id}]" in user_message else "INSUFFICIENT"


def load_json(path: Path) -> dict[str, Any]:
    data = json.loads(path.read_text())
    assert isinstance(data, dict)
    return data


def write_json(path: Path, data: Mapping[str, object]) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
