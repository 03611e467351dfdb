"""The LongMemEval oracle file: checked by hash, then read, never fetched.

The dataset is the one input that is not ours to ship. A run therefore
accepts exactly one file — the one whose SHA-256 the protocol pins — and
checks that hash on the raw bytes *before* parsing anything, so a different
revision can neither be misread nor slip through with a plausible result.
deermem never downloads it (docs/evaluation.md says where to get it).

Evidence rendering (reference ``eval-harness-spec.md`` §3.1) turns a question's
haystack into the text of a fact. Its exact characters matter: the selection
rule and the distractor bank filter on their length.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, NamedTuple

from deermem.eval.errors import DatasetHashMismatchError, DatasetIntegrityError

__all__ = [
    "Dataset",
    "EvidenceRecord",
    "answer_text",
    "file_sha256",
    "load_dataset",
    "render_evidence",
]

_CHUNK: Final = 1 << 20


class EvidenceRecord(NamedTuple):
    """One dataset question, with its haystack rendered to the text of a fact.

    Attributes:
        answer: the reference answer as a string (non-strings JSON-encoded).
        question_date: the question's date line, or ``None``.
        content: the rendered evidence (may be empty when no turn qualifies).
    """

    question_id: str
    question_type: str
    question: str
    answer: str
    question_date: str | None
    content: str


class Dataset:
    """The parsed dataset: rows in file order, indexed by question id.

    Evidence is rendered on demand and remembered, because a run needs it for
    the ~150 candidate rows only, not for every row of the file.
    """

    __slots__ = ("_by_id", "_evidence", "path", "rows", "sha256")

    def __init__(self, path: str, sha256: str, rows: list[dict[str, Any]]) -> None:
        self.path = path
        self.sha256 = sha256
        self.rows: tuple[dict[str, Any], ...] = tuple(rows)
        self._by_id: dict[str, dict[str, Any]] = {}
        for position, row in enumerate(self.rows):
            question_id = row.get("question_id")
            if not isinstance(question_id, str) or not question_id:
                raise DatasetIntegrityError(
                    path, f"row {position} has no question_id (a non-empty string is required)"
                )
            if question_id in self._by_id:
                raise DatasetIntegrityError(path, f"question_id {question_id!r} appears twice")
            self._by_id[question_id] = row
        self._evidence: dict[str, EvidenceRecord] = {}

    def __len__(self) -> int:
        return len(self.rows)

    def __contains__(self, question_id: object) -> bool:
        return question_id in self._by_id

    def row(self, question_id: str) -> Mapping[str, Any]:
        """The raw row of ``question_id``.

        Raises:
            DatasetIntegrityError: no such question in the file.
        """
        try:
            return self._by_id[question_id]
        except KeyError:
            raise DatasetIntegrityError(self.path, f"has no question {question_id!r}") from None

    def evidence(self, question_id: str) -> EvidenceRecord:
        """The question's identity fields and rendered evidence.

        Raises:
            DatasetIntegrityError: the row lacks its identity fields, has a bad
                ``question_date``, or malformed haystack arrays.
        """
        record = self._evidence.get(question_id)
        if record is None:
            record = self._evidence[question_id] = _evidence_record(
                self.row(question_id), self.path
            )
        return record


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file's raw bytes, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while chunk := stream.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def load_dataset(path: Path, *, expected_sha256: str) -> Dataset:
    """Read the dataset, refusing any file but the pinned one.

    The bytes are hashed before they are parsed: a mismatch is reported with
    both hashes and nothing of the file is interpreted.

    Raises:
        DatasetHashMismatchError: the SHA-256 differs from ``expected_sha256``.
        DatasetIntegrityError: the file cannot be read, is not JSON, or its
            rows break the expected shape.
    """
    shown = str(path)
    try:
        data = path.read_bytes()
    except OSError as error:
        raise DatasetIntegrityError(
            shown,
            f"cannot read the dataset: {error.strerror or error} "
            "(deermem never downloads it; see docs/evaluation.md)",
        ) from None
    actual = hashlib.sha256(data).hexdigest()
    if actual != expected_sha256:
        raise DatasetHashMismatchError(shown, expected=expected_sha256, actual=actual)
    try:
        document = json.loads(data)
    except (ValueError, RecursionError) as error:  # JSONDecodeError and bad encodings
        raise DatasetIntegrityError(shown, f"is not valid JSON: {error}") from None
    if not isinstance(document, list) or not all(isinstance(row, dict) for row in document):
        raise DatasetIntegrityError(shown, "the top level must be a list of question objects")
    return Dataset(shown, actual, document)


def answer_text(value: object) -> str:
    """The reference answer as text: strings as they are, anything else as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def render_evidence(row: Mapping[str, Any], *, path: str = "<dataset>") -> str:
    """Render a question's haystack as the text of a fact.

    Each session becomes a ``SESSION <id> AT <date>`` line followed by one
    ``ROLE: content`` line per selected turn: the turns marked
    ``has_answer: true``, or, when a session marks none, its user turns; a
    session with neither is left out. Sessions are separated by a blank line.

    Raises:
        DatasetIntegrityError: the three haystack arrays are not lists of the
            same length, or a session is not a list of turns.
    """
    session_ids = row.get("haystack_session_ids")
    dates = row.get("haystack_dates")
    sessions = row.get("haystack_sessions")
    question_id = row.get("question_id")
    if not (
        isinstance(session_ids, list) and isinstance(dates, list) and isinstance(sessions, list)
    ):
        raise DatasetIntegrityError(
            path,
            f"question {question_id!r}: haystack_session_ids, haystack_dates and "
            "haystack_sessions must be lists",
        )
    if not len(session_ids) == len(dates) == len(sessions):
        raise DatasetIntegrityError(
            path,
            f"question {question_id!r}: haystack arrays have different lengths "
            f"({len(session_ids)}, {len(dates)}, {len(sessions)})",
        )
    blocks: list[str] = []
    for position, (session_id, date, session) in enumerate(
        zip(session_ids, dates, sessions, strict=True)
    ):
        if not isinstance(session, list):
            raise DatasetIntegrityError(
                path, f"question {question_id!r}: session {position} is not a list of turns"
            )
        turns = [
            turn
            for turn in session
            if isinstance(turn, dict) and isinstance(turn.get("content"), str)
        ]
        selected = [turn for turn in turns if turn.get("has_answer") is True]
        if not selected:
            selected = [turn for turn in turns if _role(turn).lower() == "user"]
        if selected:
            lines = [f"SESSION {session_id} AT {date}"]
            lines.extend(
                f"{_role(turn).upper() or 'UNKNOWN'}: {turn['content']}" for turn in selected
            )
            blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def _role(turn: Mapping[str, Any]) -> str:
    role = turn.get("role")
    return role if isinstance(role, str) else ""


def _evidence_record(row: Mapping[str, Any], path: str) -> EvidenceRecord:
    question_id = row.get("question_id")
    question_type = row.get("question_type")
    question = row.get("question")
    if not all(
        isinstance(value, str) and value for value in (question_id, question_type, question)
    ):
        raise DatasetIntegrityError(
            path,
            f"question {question_id!r}: question_id, question_type and question must be "
            "non-empty strings",
        )
    question_date = row.get("question_date")
    if question_date is not None and not isinstance(question_date, str):
        raise DatasetIntegrityError(
            path, f"question {question_id!r}: question_date must be a string or null"
        )
    return EvidenceRecord(
        question_id=str(question_id),
        question_type=str(question_type),
        question=str(question),
        answer=answer_text(row.get("answer")),
        question_date=question_date,
        content=render_evidence(row, path=path),
    )
