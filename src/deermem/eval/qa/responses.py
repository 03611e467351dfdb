"""Stored answers: ``responses/<row_id>.json``, one file per answered task.

``run-qa`` writes a file the moment a call succeeds (atomically, so a crash
leaves the old file or the new one), which is what makes a run resumable. A
file records *which request* it answers — the task's identity fields, the kept
facts in rank order and the request fingerprint — and the answer itself, never
the question, the reference answer, the memory text, a header or a key
(reference ``eval-harness-spec.md`` §4.2).

One function, :func:`response_problems`, says whether a stored file is the
answer to a task recomputed from the current protocol. ``run-qa`` reuses a
file only when it has no problem (anything else is called again); ``grade-qa``
refuses to grade when any file has one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Final, NamedTuple, cast

from deermem.eval._problems import FieldProblem, describe_value
from deermem.eval.errors import EvaluationError
from deermem.eval.qa.rows import IDENTIFIER
from deermem.eval.qa.tasks import AnswerTask
from deermem.eval.result_files import document_text, replace_file, utc_timestamp

__all__ = [
    "IDENTITY_FIELDS",
    "RESPONSES_DIRECTORY",
    "RESPONSE_KEYS",
    "RESPONSE_SCHEMA_VERSION",
    "Answer",
    "StoredResponse",
    "clean_model_name",
    "clean_usage",
    "read_response",
    "response_path",
    "response_problems",
    "response_record",
    "write_response",
]

RESPONSES_DIRECTORY: Final = "responses"
RESPONSE_SCHEMA_VERSION: Final = 1
RESPONSE_KEYS: Final = (
    "attempts",
    "capacity",
    "case_id",
    "created_at",
    "kept_fact_ids",
    "policy",
    "prediction",
    "request_fingerprint",
    "response_model",
    "row_id",
    "scenario",
    "schema_version",
    "source",
    "usage",
)
IDENTITY_FIELDS: Final = ("row_id", "case_id", "source", "scenario", "policy", "capacity")
"""The fields that say which task a stored answer belongs to."""

_Check = Callable[[object], bool]

_FILE_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,255}")
_MODEL_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:/@+-]{0,199}")
_SHA256: Final = re.compile(r"[0-9a-f]{64}")
_TIMESTAMP: Final = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z")


class Answer(NamedTuple):
    """What one successful call produced.

    Attributes:
        prediction: the model's answer text, verbatim.
        attempts: how many attempts the call took.
        response_model: the model the server says answered, when it said.
        usage: the server's integer token counts.
    """

    prediction: str
    attempts: int
    response_model: str | None
    usage: Mapping[str, int]


class StoredResponse(NamedTuple):
    """A stored answer file, read and checked against its task.

    Attributes:
        path: the file.
        data: the parsed file, or ``None`` when it is missing or unreadable.
        problems: every way it fails to be the answer to the task; empty
            when it is (then :meth:`answer` is safe to call).
        malformed: the file is unreadable or breaks the schema (rather than
            being a well-formed answer to some other request).
    """

    path: Path
    data: Mapping[str, object] | None
    problems: tuple[FieldProblem, ...]
    malformed: bool = False

    @property
    def missing(self) -> bool:
        return self.data is None and not self.problems

    @property
    def usable(self) -> bool:
        return self.data is not None and not self.problems

    def answer(self) -> Answer:
        """The stored answer (only for a usable file)."""
        if self.data is None or self.problems:
            raise EvaluationError(f"{self.path} is not a usable stored answer")
        data = self.data  # checked by the schema: the casts hold
        return Answer(
            prediction=cast(str, data["prediction"]),
            attempts=cast(int, data["attempts"]),
            response_model=cast("str | None", data["response_model"]),
            usage=dict(cast(dict[str, int], data["usage"])),
        )


def response_path(directory: Path, row_id: str) -> Path:
    """Where a task's answer is stored.

    Raises:
        EvaluationError: the row id could not be a plain file name (row ids are
            built from validated identifiers, so this guards against misuse).
    """
    if not _FILE_NAME.fullmatch(row_id):
        raise EvaluationError(f"row id {row_id!r} cannot name a response file")
    return directory / RESPONSES_DIRECTORY / f"{row_id}.json"


def clean_usage(usage: Mapping[str, int]) -> dict[str, int]:
    """The token counts a row may publish: non-negative integers under plain names."""
    return {
        key: value
        for key, value in sorted(usage.items())
        if IDENTIFIER.fullmatch(key) and type(value) is int and value >= 0
    }


def clean_model_name(model: str | None) -> str | None:
    """The reported model if it reads as a model name; ``None`` otherwise.

    A published row may carry no free text but the prediction, so a server
    that reports something other than a name is recorded as not saying.
    """
    if model is not None and _MODEL_NAME.fullmatch(model):
        return model
    return None


def response_record(
    task: AnswerTask, answer: Answer, *, created_at: datetime | None = None
) -> dict[str, object]:
    """The stored form of ``answer`` to ``task``."""
    case = task.case
    return {
        "schema_version": RESPONSE_SCHEMA_VERSION,
        "row_id": task.row_id,
        "case_id": case.case_id,
        "source": case.source,
        "scenario": case.scenario,
        "policy": task.policy,
        "capacity": task.capacity,
        "kept_fact_ids": list(task.kept_fact_ids),
        "prediction": answer.prediction,
        "attempts": answer.attempts,
        "request_fingerprint": task.fingerprint,
        "response_model": clean_model_name(answer.response_model),
        "usage": clean_usage(answer.usage),
        "created_at": utc_timestamp(created_at),
    }


def write_response(
    directory: Path, task: AnswerTask, answer: Answer, *, created_at: datetime | None = None
) -> Path:
    """Store ``answer`` atomically, replacing an earlier (stale) answer to the task."""
    path = response_path(directory, task.row_id)
    record = response_record(task, answer, created_at=created_at)
    replace_file(path, document_text(record).encode("utf-8"))
    return path


def read_response(directory: Path, task: AnswerTask) -> StoredResponse:
    """Read the stored answer to ``task`` and check it against the task.

    Never raises for a bad file: what is wrong is in ``problems``.
    """
    path = response_path(directory, task.row_id)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return StoredResponse(path, None, ())
    except OSError as error:
        unreadable = FieldProblem("(file)", "a readable file", error.strerror or str(error))
        return StoredResponse(path, None, (unreadable,), malformed=True)
    try:
        data: object = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        invalid = FieldProblem("(file)", "a UTF-8 JSON document", "something else")
        return StoredResponse(path, None, (invalid,), malformed=True)
    if not isinstance(data, dict):
        shape = FieldProblem("(file)", "a JSON object", describe_value(data, reveal=False))
        return StoredResponse(path, None, (shape,), malformed=True)
    schema = _schema_problems(data)
    if schema:
        return StoredResponse(path, data, tuple(schema), malformed=True)
    return StoredResponse(path, data, tuple(_task_problems(data, task)))


def response_problems(data: Mapping[str, object], task: AnswerTask) -> list[FieldProblem]:
    """Every way ``data`` fails to be the stored answer to ``task``.

    First the schema (exactly :data:`RESPONSE_KEYS`, each of its type); then,
    if that holds, the proof that it answers *this* task: the identity fields,
    the kept facts in rank order and the request fingerprint must equal the
    task recomputed from the current protocol.
    """
    return _schema_problems(data) or _task_problems(data, task)


def _task_problems(data: Mapping[str, object], task: AnswerTask) -> list[FieldProblem]:
    """How a well-formed stored answer differs from the task recomputed now."""
    problems: list[FieldProblem] = []
    case = task.case
    expected: dict[str, object] = {
        "row_id": task.row_id,
        "case_id": case.case_id,
        "source": case.source,
        "scenario": case.scenario,
        "policy": task.policy,
        "capacity": task.capacity,
    }
    for name in IDENTITY_FIELDS:
        if data[name] != expected[name]:
            problems.append(FieldProblem(name, describe_value(expected[name]), _shown(data[name])))
    kept = list(task.kept_fact_ids)
    if data["kept_fact_ids"] != kept:
        wanted = f"the selector's kept facts in rank order {json.dumps(kept)}"
        found = data["kept_fact_ids"]
        problems.append(FieldProblem("kept_fact_ids", wanted, json.dumps(found)))
    if data["request_fingerprint"] != task.fingerprint:
        problems.append(
            FieldProblem(
                "request_fingerprint",
                f"{task.fingerprint} (recomputed from the current protocol)",
                str(data["request_fingerprint"]),
            )
        )
    return problems


def _schema_problems(data: Mapping[str, object]) -> list[FieldProblem]:
    problems: list[FieldProblem] = []
    missing = [key for key in RESPONSE_KEYS if key not in data]
    if missing:
        problems.append(
            FieldProblem("(keys)", "every response key", "missing " + ", ".join(missing))
        )
    for key in sorted(set(data) - set(RESPONSE_KEYS)):
        shown = repr(key) if IDENTIFIER.fullmatch(key) else f"(a key of {len(key)} characters)"
        problems.append(FieldProblem(shown, "no such key", describe_value(data[key], reveal=False)))
    for key, (valid, wanted) in _CHECKS.items():
        if key in data and not valid(data[key]):
            problems.append(FieldProblem(key, wanted, _shown(data[key])))
    return problems


def _is_int(minimum: int) -> _Check:
    return lambda value: type(value) is int and value >= minimum


def _matches(pattern: re.Pattern[str]) -> _Check:
    return lambda value: isinstance(value, str) and pattern.fullmatch(value) is not None


def _is_usage(value: object) -> bool:
    return isinstance(value, dict) and clean_usage(value) == value


def _is_id_list(value: object) -> bool:
    return isinstance(value, list) and all(_matches(IDENTIFIER)(item) for item in value)


def _shown(value: object) -> str:
    """A found value, quoted when it is a number, a flag or identifiers; else its shape."""
    if isinstance(value, bool | int | float) or value is None:
        return describe_value(value)
    if isinstance(value, str):
        return describe_value(value, reveal=IDENTIFIER.fullmatch(value) is not None)
    if _is_id_list(value):
        return describe_value(value)
    return describe_value(value, reveal=False)


_CHECKS: Final[dict[str, tuple[_Check, str]]] = {
    "attempts": (_is_int(1), "an integer ≥ 1"),
    "capacity": (_is_int(1), "an integer ≥ 1"),
    "case_id": (_matches(IDENTIFIER), "an identifier"),
    "created_at": (_matches(_TIMESTAMP), "an ISO UTC timestamp with microseconds and Z"),
    "kept_fact_ids": (_is_id_list, "a list of fact ids"),
    "policy": (_matches(IDENTIFIER), "a policy name"),
    "prediction": (lambda value: isinstance(value, str), "a string"),
    "request_fingerprint": (_matches(_SHA256), "64 lowercase hex digits"),
    "response_model": (
        lambda value: value is None or _matches(_MODEL_NAME)(value),
        "a model name or null",
    ),
    "row_id": (_matches(_FILE_NAME), "a row id"),
    "scenario": (_matches(IDENTIFIER), "an identifier"),
    "schema_version": (
        lambda value: type(value) is int and value == RESPONSE_SCHEMA_VERSION,
        str(RESPONSE_SCHEMA_VERSION),
    ),
    "source": (_matches(IDENTIFIER), "an identifier"),
    "usage": (_is_usage, "an object of non-negative integer token counts"),
}
