"""The question-answering run: tasks, who answers, stored answers, ``run-qa``, ``grade-qa``.

**The tasks.** For every case and each policy, the production selector runs at
the protocol's QA capacity; the facts it keeps become the stored memory of one
chat request (rendered by the protocol's answer prompt, reference
``eval-harness-spec.md`` §2.4). 45 cases × 2 policies give the 90 tasks, in
case order, ``confidence`` before ``hybrid-v1``.

**The request fingerprint** (§4.2) is the hex SHA-256 of the exact request
body — ``model``, ``temperature`` (a float), ``max_tokens``, ``stream`` and the
two messages — serialised by ``json.dumps`` with sorted keys,
``ensure_ascii=False`` and the default separators, encoded as UTF-8. The key,
the endpoint, the timeout, the retries and the worker count are not part of
it. Every stored answer carries the fingerprint of the request it answered, so
``run-qa`` (resuming) and ``grade-qa`` can prove, by recomputing the task from
the protocol and the dataset, that an answer belongs to *this* memory under
*this* prompt and model settings. The HTTP answerer POSTs each task's payload
exactly as the task built it — the bytes the fingerprint hashes.

**Who answers** is :mod:`deermem.eval.answerers` (an OpenAI-compatible
endpoint, or the embedded model); a run needs only an :class:`Answerer`.

**The run directory.** ``responses/<row_id>.json`` holds one answer per task,
written the moment a call succeeds (atomically, so a crash leaves the old file
or the new one), which is what makes a run resumable. A file records *which
request* it answers — the task's identity fields, the kept facts in rank order
and the request fingerprint — and the answer itself, never the question, the
reference answer, the memory text, a header or a key. The run marker
``qa_run.json`` is written once, when a directory is first used: the protocol
id, the dataset pin, the **five protocol hashes** (config, both manifests,
answer prompt, dataset), the QA parameters — the *names* of the variables
holding the endpoint and the key, never their values — and the git state.
Every later ``run-qa`` and ``grade-qa`` on the directory reads it first,
without writing anything, and refuses when any of the five files changed
since, naming them: answers made under one prompt or pool must never be mixed
with, or graded as, answers made under another.

**run-qa** (§1.2, §4.2): the caller resolves the answerer — before the dataset
is touched; :func:`run_qa` checks the marker, then reads the dataset (hash
first) and builds the cases and tasks, writes the marker if the directory is
new, and sends every task without a usable stored answer through a bounded
pool of ``qa.workers`` threads, storing each success at once. A stored answer
is reused only when it provably answers the task recomputed now
(:func:`response_problems`); anything else — missing, corrupt, stale or edited
— is called again. A failed call writes nothing; running the command again
retries just those.

**grade-qa** (§4.3) writes nothing until every check has passed, in this
order: the three result files must not exist yet; the marker must name the
same five files and QA settings; the dataset, the cases and the tasks are
recomputed; every task must have a stored answer that follows the schema (all
missing or malformed ones named together) and carries its task's identity,
kept facts and fingerprint (all mismatches named together). Then each answer
is graded against the reference answer of the task *recomputed from the
dataset* — never anything stored beside the answer — by
:func:`deermem.eval.grading.grade_answer`, which sees only the prediction and
the reference, and the report is written. The same inputs give the same bytes
on every run.
"""

from __future__ import annotations

import hashlib
import json
import re
import typing
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from datetime import datetime
from pathlib import Path
from typing import Final, NamedTuple, cast

from deermem.errors import LLMError
from deermem.eval.dataset import EvaluationCase, build_cases, load_dataset
from deermem.eval.errors import (
    AnswerRowIntegrityError,
    EvaluationError,
    ProtocolError,
    RunMarkerError,
)
from deermem.eval.files import (
    IDENTIFIER,
    MODEL_NAME,
    ROW_ID,
    SHA256,
    FieldProblem,
    InvalidJsonError,
    Rule,
    clean_usage,
    describe_value,
    document_text,
    ensure_new_set,
    git_state,
    is_count,
    is_usage,
    matching,
    parse_json,
    record_problems,
    replace_file,
    utc_timestamp,
    write_new_files,
)
from deermem.eval.policy_run import decide
from deermem.eval.protocol import (
    Protocol,
)
from deermem.eval.rows import (
    MARKER_FILE,
    RUN_SCHEMA_VERSION,
    AnswerToGrade,
    QaReport,
    QaRow,
    build_qa_report,
    grade_answer_row,
    report_paths,
    run_problems,
    write_qa_report,
)
from deermem.policy import POLICIES
from deermem.store.markdown.files import read_regular_file

__all__ = [
    "Answer",
    "AnswerOutcome",
    "AnswerTask",
    "Answerer",
    "build_answer_tasks",
    "grade_qa",
    "run_qa",
]

# --- the tasks ------------------------------------------------------------------------------------

ROW_ID_SEPARATOR: Final = "__"


class RequestSettings(NamedTuple):
    """The request parameters a QA run sends with every question.

    Attributes:
        model: the model name sent in the request (the config's ``qa.model``,
            or the local model's name with ``--provider local``).
        temperature: sent as a float, so ``0`` in the config becomes ``0.0``.
        max_tokens: the answer's token limit.
        stream: always false (the contract load refuses anything else).
    """

    model: str
    temperature: float
    max_tokens: int
    stream: bool = False

    @classmethod
    def from_protocol(cls, protocol: Protocol, *, model: str | None = None) -> RequestSettings:
        """The protocol's settings, optionally for another model name."""
        qa = protocol.config.qa
        return cls(
            model=qa.model if model is None else model,
            temperature=float(qa.temperature),
            max_tokens=qa.max_tokens,
            stream=qa.stream,
        )


class AnswerTask(NamedTuple):
    """One question to answer: a case under one policy at the QA capacity.

    Attributes:
        row_id: ``<case_id>__<policy>``.
        kept_fact_ids: the facts the selector kept, in rank order.
        payload: the exact request body (treat as read-only).
        fingerprint: :func:`request_fingerprint` of ``payload``.
    """

    row_id: str
    case: EvaluationCase
    policy: str
    capacity: int
    kept_fact_ids: tuple[str, ...]
    payload: Mapping[str, object]
    fingerprint: str

    @property
    def identity(self) -> dict[str, object]:
        """The fields that say which task a stored answer belongs to."""
        case = self.case
        return {
            "row_id": self.row_id,
            "case_id": case.case_id,
            "source": case.source,
            "scenario": case.scenario,
            "policy": self.policy,
            "capacity": self.capacity,
        }

    @property
    def messages(self) -> list[dict[str, str]]:
        """The request's chat messages (``role`` and ``content``)."""
        messages = self.payload["messages"]
        assert isinstance(messages, list)
        return messages


def row_id_for(case_id: str, policy: str) -> str:
    """The row id of a case under a policy: ``<case_id>__<policy>``."""
    return f"{case_id}{ROW_ID_SEPARATOR}{policy}"


def request_payload(
    settings: RequestSettings, messages: Sequence[Mapping[str, str]]
) -> dict[str, object]:
    """The request body: the settings and the messages, nothing else."""
    return {
        "model": settings.model,
        "temperature": float(settings.temperature),
        "max_tokens": settings.max_tokens,
        "stream": settings.stream,
        "messages": [{"role": m["role"], "content": m["content"]} for m in messages],
    }


def request_fingerprint(payload: Mapping[str, object]) -> str:
    """The hex SHA-256 of a request body as reference §4.2 defines it."""
    text = json.dumps(payload, ensure_ascii=False, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def build_answer_tasks(
    protocol: Protocol, cases: Sequence[EvaluationCase], settings: RequestSettings
) -> tuple[AnswerTask, ...]:
    """Every task of the run, in case order and, per case, in policy order.

    Raises:
        EvaluationError: two tasks would share a row id, or the selector kept
            no fact (an answer prompt needs at least one).
    """
    capacity = protocol.config.pool.qa_capacity
    template = protocol.answer_template
    tasks: list[AnswerTask] = []
    for case in cases:
        contents = {str(fact["id"]): str(fact["content"]) for fact in case.facts}
        for policy in POLICIES:
            kept = decide(protocol, case, policy, capacity).kept_ids
            messages = template.render(
                question=case.question,
                question_date=case.question_date,
                facts=[(fact_id, contents[fact_id]) for fact_id in kept],
            )
            payload = request_payload(settings, messages)
            tasks.append(
                AnswerTask(
                    row_id=row_id_for(case.case_id, policy),
                    case=case,
                    policy=policy,
                    capacity=capacity,
                    kept_fact_ids=kept,
                    payload=payload,
                    fingerprint=request_fingerprint(payload),
                )
            )
    seen: set[str] = set()
    for task in tasks:
        if task.row_id in seen:
            raise EvaluationError(f"two answer tasks share the row id {task.row_id!r}")
        seen.add(task.row_id)
    return tuple(tasks)


# --- who answers: what a run asks of them (deermem.eval.answerers has them) --------------------


class Answerer(typing.Protocol):
    """Something that answers tasks; used by one QA run from several threads."""

    @property
    def model(self) -> str:
        """The model name the requests carry (and so their fingerprints)."""
        ...

    def answer(self, task: AnswerTask) -> Answer:
        """Answer one task.

        Raises:
            LLMError: the call gave no usable answer (after the retries).
        """
        ...

    def close(self) -> None:
        """Release connections or the model."""
        ...


# --- stored answers -------------------------------------------------------------------------------

RESPONSES_DIRECTORY: Final = "responses"
RESPONSE_SCHEMA_VERSION: Final = 1

# Stored answers are written by utc_timestamp: microseconds always shown.
_ANSWER_TIMESTAMP: Final = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z")


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
    if not ROW_ID.fullmatch(row_id):
        raise EvaluationError(f"row id {row_id!r} cannot name a response file")
    return directory / RESPONSES_DIRECTORY / f"{row_id}.json"


def clean_model_name(model: str | None) -> str | None:
    """The reported model if it reads as a model name; ``None`` otherwise.

    A published row may carry no free text but the prediction, so a server
    that reports something other than a name is recorded as not saying.
    """
    if model is not None and MODEL_NAME.fullmatch(model):
        return model
    return None


def response_record(
    task: AnswerTask, answer: Answer, *, created_at: datetime | None = None
) -> dict[str, object]:
    """The stored form of ``answer`` to ``task``."""
    return {
        "schema_version": RESPONSE_SCHEMA_VERSION,
        **task.identity,
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
        raw = read_regular_file(path)
    except FileNotFoundError:
        return StoredResponse(path, None, ())
    except OSError as error:
        unreadable = FieldProblem("(file)", "a readable file", error.strerror or str(error))
        return StoredResponse(path, None, (unreadable,), malformed=True)
    try:
        data: object = parse_json(raw.decode("utf-8"))
    except (UnicodeDecodeError, InvalidJsonError):
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
    problems = [
        FieldProblem(name, describe_value(value), _shown(data[name]))
        for name, value in task.identity.items()
        if data[name] != value
    ]
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
    return record_problems(
        data, _CHECKS, record="a stored answer", shown=lambda _key, value: _shown(value)
    )


def _is_id_list(value: object) -> bool:
    return isinstance(value, list) and all(matching(IDENTIFIER)(item) for item in value)


def _shown(value: object) -> str:
    """A found value, quoted when it is a number, a flag or identifiers; else its shape."""
    if isinstance(value, bool | int | float) or value is None:
        return describe_value(value)
    if isinstance(value, str):
        return describe_value(value, reveal=IDENTIFIER.fullmatch(value) is not None)
    if _is_id_list(value):
        return describe_value(value)
    return describe_value(value, reveal=False)


_CHECKS: Final[dict[str, Rule]] = {
    "attempts": (is_count(1), "an integer ≥ 1"),
    "capacity": (is_count(1), "an integer ≥ 1"),
    "case_id": (matching(IDENTIFIER), "an identifier"),
    "created_at": (matching(_ANSWER_TIMESTAMP), "an ISO UTC timestamp with microseconds and Z"),
    "kept_fact_ids": (_is_id_list, "a list of fact ids"),
    "policy": (matching(IDENTIFIER), "a policy name"),
    "prediction": (lambda value: isinstance(value, str), "a string"),
    "request_fingerprint": (matching(SHA256), "64 lowercase hex digits"),
    "response_model": (
        lambda value: value is None or matching(MODEL_NAME)(value),
        "a model name or null",
    ),
    "row_id": (matching(ROW_ID), "a row id"),
    "scenario": (matching(IDENTIFIER), "an identifier"),
    "schema_version": (
        lambda value: type(value) is int and value == RESPONSE_SCHEMA_VERSION,
        str(RESPONSE_SCHEMA_VERSION),
    ),
    "source": (matching(IDENTIFIER), "an identifier"),
    "usage": (is_usage, "an object of non-negative integer token counts"),
}

RESPONSE_KEYS: Final = tuple(_CHECKS)
"""The keys of a stored answer, sorted."""


# --- the run marker -------------------------------------------------------------------------------


ARTIFACT_FILES: Final = {
    "config_sha256": "config",
    "official_manifest_sha256": "official manifest",
    "synthetic_manifest_sha256": "synthetic manifest",
    "answer_prompt_sha256": "answer prompt",
    "dataset_sha256": "dataset",
}
"""The five protocol hashes, in the order they are reported, and the file each names."""


def run_artifacts(protocol: Protocol) -> dict[str, str]:
    """The five hashes of a QA run under ``protocol``.

    The dataset's is the config's pin: every command refuses a dataset with
    any other hash, so the pin is the hash of the file the run reads.
    """
    return {**protocol.artifacts._asdict(), "dataset_sha256": protocol.config.dataset.sha256}


def qa_parameters(protocol: Protocol, settings: RequestSettings) -> dict[str, object]:
    """The ``qa`` section of the marker: the run's settings, variable names only."""
    qa = protocol.config.qa
    return {
        "api_key_env": qa.api_key_env,
        "base_url_env": qa.base_url_env,
        "capacity": protocol.config.pool.qa_capacity,
        "grader_version": qa.grader_version,
        "max_attempts": qa.max_attempts,
        "max_tokens": settings.max_tokens,
        "model": settings.model,
        "stream": settings.stream,
        "temperature": settings.temperature,
        "timeout_seconds": qa.timeout_seconds,
        "workers": qa.workers,
    }


def marker_record(
    protocol: Protocol,
    settings: RequestSettings,
    *,
    git: Mapping[str, object] | None,
    created_at: datetime | None = None,
) -> dict[str, object]:
    """The marker of a new QA run."""
    return {
        **protocol.run_header(
            schema_version=RUN_SCHEMA_VERSION,
            dataset_sha256=protocol.config.dataset.sha256,  # the pin: the only file accepted
            created_at=created_at,
            git=git,
        ),
        "artifacts": run_artifacts(protocol),
        "qa": qa_parameters(protocol, settings),
    }


def check_recordable(
    record: Mapping[str, object], protocol: Protocol, settings: RequestSettings
) -> None:
    """Refuse a run whose marker the marker's own schema would refuse when read back.

    Otherwise the run would pay for every answer, then neither resume nor be
    graded. The marker's keys are the config's (``qa.model``, ``dataset.filename``
    ...), but for the model of ``--provider local``, named by its file.

    Raises:
        ProtocolError: a config value the marker cannot hold (file, key, what it expects).
        EvaluationError: the local model's file name is not a model name.
    """
    problems = run_problems(dict(record))
    if not problems:
        return
    first = problems[0]
    if first.field == "qa.model" and settings.model != protocol.config.qa.model:
        raise EvaluationError(
            f"the local model is named by its file name, {describe_value(settings.model)}, "
            f"which is not a model name ([A-Za-z0-9_.:/@+-], starting with a letter or "
            "digit): rename the model file"
        )
    raise ProtocolError(
        str(protocol.files.config),
        first.field,
        f"cannot be recorded in {MARKER_FILE}: expected {first.expected}, got {first.actual}",
    )


def write_marker(directory: Path, record: Mapping[str, object]) -> Path:
    """Write the marker of a new run (atomically; never over an existing one)."""
    path = directory / MARKER_FILE
    write_new_files([(path, document_text(record).encode("utf-8"))])
    return path


def check_marker(
    directory: Path,
    protocol: Protocol,
    *,
    model: str | None,
    refusal: str,
    required: bool,
) -> str | None:
    """Read the marker (never writing) and check it against the current protocol.

    Args:
        directory: the QA run directory.
        protocol: the protocol loaded now.
        model: the model this command would use; ``None`` takes the marker's
            (grading recomputes requests for the model that answered).
        refusal: how the message ends (``"use a new output directory"``).
        required: whether a missing marker is an error (grading) or means a
            new run (``run-qa``).

    Returns:
        The model the directory's answers were requested from, or ``None`` for
        a new run.

    Raises:
        RunMarkerError: the marker is missing (when required), unreadable,
            breaks its schema, or names other protocol files or settings.
    """
    path = directory / MARKER_FILE
    marker = _read(path, required=required)
    if marker is None:
        return None
    artifacts = marker["artifacts"]
    assert isinstance(artifacts, dict)
    current = run_artifacts(protocol)
    changed = tuple(name for key, name in ARTIFACT_FILES.items() if artifacts[key] != current[key])
    if changed:
        where = _paths(protocol)
        listed = ", ".join(f"{name} ({where[name]})" for name in changed)
        raise RunMarkerError(
            str(path),
            f"was written under other protocol files; changed since: {listed}; {refusal}",
            changed=changed,
        )
    recorded = marker["qa"]
    assert isinstance(recorded, dict)
    used = str(recorded["model"]) if model is None else model
    expected = qa_parameters(protocol, RequestSettings.from_protocol(protocol, model=used))
    differing = tuple(key for key in sorted(expected) if recorded[key] != expected[key])
    if differing:
        details = ", ".join(
            f"qa.{key} {json.dumps(recorded[key])} (now {json.dumps(expected[key])})"
            for key in differing
        )
        raise RunMarkerError(
            str(path),
            f"was written for other QA settings: {details}; {refusal}",
            changed=tuple(f"qa.{key}" for key in differing),
        )
    return used


def _read(path: Path, *, required: bool) -> dict[str, object] | None:
    try:
        text = read_regular_file(path).decode("utf-8")
    except FileNotFoundError:
        if required:
            raise RunMarkerError(
                str(path), "not found; grading needs the marker run-qa writes"
            ) from None
        return None
    except OSError as error:
        raise RunMarkerError(str(path), f"cannot be read: {error.strerror or error}") from None
    except UnicodeDecodeError as error:
        raise RunMarkerError(str(path), f"cannot be read: {error}") from None
    try:
        data: object = parse_json(text)
    except InvalidJsonError as error:
        raise RunMarkerError(str(path), f"is not valid JSON: {error.reason}") from None
    problems = run_problems(data)
    if problems:
        raise RunMarkerError(
            str(path), "is not a qa_run.json marker: " + "; ".join(map(str, problems[:5]))
        )
    assert isinstance(data, dict)
    return data


def _paths(protocol: Protocol) -> dict[str, str]:
    files = protocol.files
    return {
        "config": str(files.config),
        "official manifest": str(files.official_manifest),
        "synthetic manifest": str(files.synthetic_manifest),
        "answer prompt": str(protocol.answer_prompt_path),
        "dataset": f"pinned {protocol.config.dataset.sha256}",
    }


# --- run-qa ---------------------------------------------------------------------------------------

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
    record = None
    if existing is None:  # a new run directory: its marker must be one a later run can read
        record = marker_record(protocol, settings, git=git_state(), created_at=created_at)
        check_recordable(record, protocol, settings)
    data = load_dataset(dataset, expected_sha256=protocol.config.dataset.sha256)
    tasks = build_answer_tasks(protocol, build_cases(protocol, data), settings)
    if record is not None:
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


# --- grade-qa -------------------------------------------------------------------------------------

MAX_LISTED_PROBLEMS: Final = 30
_REFUSE: Final = "refusing to grade"


def grade_qa(protocol: Protocol, dataset: Path, directory: Path) -> QaReport:
    """Check a QA run directory against the protocol, grade it, and write the report.

    Graded results are written as one set, ``qa.stats.json`` last; what an
    interrupted grading left (the set without it) is replaced.

    Raises:
        ResultsExistError: the graded results are already there.
        RunMarkerError: the marker is missing or names other protocol files or settings.
        DatasetIntegrityError: the dataset is not the pinned file or breaks the rules.
        AnswerRowIntegrityError: a stored answer is missing, malformed, or not
            the answer to its recomputed task.
    """
    ensure_new_set(report_paths(directory))
    model = check_marker(directory, protocol, model=None, refusal=_REFUSE, required=True)
    data = load_dataset(dataset, expected_sha256=protocol.config.dataset.sha256)
    settings = RequestSettings.from_protocol(protocol, model=model)
    tasks = build_answer_tasks(protocol, build_cases(protocol, data), settings)
    rows = grade_answers(tasks, collect_answers(directory, tasks))
    report = build_qa_report(
        rows, protocol_id=protocol.protocol_id, parameters=protocol.config.statistics.parameters
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
