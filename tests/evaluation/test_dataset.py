"""The dataset: accepted only with its pinned hash, read strictly, rendered exactly."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from deermem.eval.dataset import (
    answer_text,
    file_sha256,
    load_dataset,
    render_evidence,
)
from deermem.eval.errors import DatasetHashMismatchError, DatasetIntegrityError
from tests.evaluation.conftest import Generated


def write(path: Path, document: object) -> str:
    data = json.dumps(document).encode()
    path.write_bytes(data)
    return hashlib.sha256(data).hexdigest()


def row(question_id: str, **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "question_id": question_id,
        "question_type": "knowledge-update",
        "question": "Where?",
        "answer": "Here.",
        "question_date": "2023/05/20 (Sat) 02:21",
        "haystack_session_ids": [],
        "haystack_dates": [],
        "haystack_sessions": [],
    }
    base.update(fields)
    return base


# --- the hash gate -------------------------------------------------------------------------


def test_a_file_with_another_hash_is_refused_before_it_is_parsed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "longmemeval_oracle.json"
    path.write_bytes(b"this is not even JSON")
    parsed: list[object] = []
    monkeypatch.setattr(json, "loads", lambda data: parsed.append(data))  # the json module
    expected = "0" * 64
    with pytest.raises(DatasetHashMismatchError) as caught:
        load_dataset(path, expected_sha256=expected)
    actual = hashlib.sha256(b"this is not even JSON").hexdigest()
    assert (caught.value.expected, caught.value.actual) == (expected, actual)
    assert expected in str(caught.value)
    assert actual in str(caught.value)
    assert str(path) in str(caught.value)
    assert parsed == []  # json was never asked to read it


def test_a_wrong_file_is_hashed_in_chunks_and_never_held_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # LongMemEval's other variants are gigabytes: refusing one must not load it.
    path = tmp_path / "longmemeval_s.json"
    path.write_bytes(b"[]" * 100_000)
    whole: list[Path] = []
    monkeypatch.setattr(Path, "read_bytes", lambda self: whole.append(self))
    with pytest.raises(DatasetHashMismatchError) as caught:
        load_dataset(path, expected_sha256="0" * 64)
    assert caught.value.actual == hashlib.sha256(b"[]" * 100_000).hexdigest()
    assert whole == []


@pytest.mark.parametrize("where", ["directory", "/dev/null"])
def test_what_is_not_a_regular_file_is_refused_before_it_is_read(
    tmp_path: Path, where: str
) -> None:
    # A device (/dev/zero never ends), a pipe or a directory has no fixed bytes to pin.
    path = tmp_path if where == "directory" else Path(where)
    with pytest.raises(DatasetIntegrityError, match="is not a regular file") as caught:
        load_dataset(path, expected_sha256="0" * 64)
    assert str(caught.value).startswith(f"{path}: ")


def test_the_pinned_hash_admits_the_file(generated: Generated) -> None:
    dataset = load_dataset(generated.dataset, expected_sha256=generated.sha256)
    assert dataset.sha256 == generated.sha256 == file_sha256(generated.dataset)
    assert "01493427" in dataset
    assert len(dataset) == len(json.loads(generated.dataset.read_text()))


def test_a_missing_file_says_it_is_never_downloaded(tmp_path: Path) -> None:
    with pytest.raises(DatasetIntegrityError, match="never downloads"):
        load_dataset(tmp_path / "absent.json", expected_sha256="0" * 64)


@pytest.mark.parametrize(
    ("document", "fragment"),
    [
        ({"rows": []}, "list of question objects"),
        ([row("a"), "b"], "list of question objects"),
        ([row("a"), row("")], "row 1 has no question_id"),
        ([row("a"), {"question": "no id"}], "row 1 has no question_id"),
        ([row("a"), row("b"), row("a")], "'a' appears twice"),
    ],
)
def test_malformed_files_are_refused(tmp_path: Path, document: object, fragment: str) -> None:
    path = tmp_path / "data.json"
    digest = write(path, document)
    with pytest.raises(DatasetIntegrityError, match=fragment):
        load_dataset(path, expected_sha256=digest)


def test_invalid_json_with_the_pinned_hash_is_an_integrity_error(tmp_path: Path) -> None:
    path = tmp_path / "data.json"
    path.write_bytes(b"[{")
    with pytest.raises(DatasetIntegrityError, match="not valid JSON"):
        load_dataset(path, expected_sha256=hashlib.sha256(b"[{").hexdigest())


# --- evidence rendering --------------------------------------------------------------------


def test_evidence_uses_marked_turns_with_a_user_fallback_in_the_exact_format() -> None:
    record = row(
        "q",
        haystack_session_ids=["s1", "s2", "s3"],
        haystack_dates=["2026/01/01", "2026/01/02", "2026/01/03"],
        haystack_sessions=[
            [
                {"role": "user", "content": "unmarked user"},
                {"role": "assistant", "content": "marked answer", "has_answer": True},
            ],
            [
                {"role": "user", "content": "fallback user"},
                {"role": "assistant", "content": "unmarked assistant"},
            ],
            [{"role": "assistant", "content": "no user turn, nothing marked"}],
        ],
    )
    assert render_evidence(record) == (
        "SESSION s1 AT 2026/01/01\nASSISTANT: marked answer\n\n"
        "SESSION s2 AT 2026/01/02\nUSER: fallback user"
    )


def test_only_has_answer_true_marks_a_turn_and_odd_turns_are_skipped() -> None:
    record = row(
        "q",
        haystack_session_ids=[7, "s2"],
        haystack_dates=[None, "2026/01/02"],
        haystack_sessions=[
            [
                {"role": "assistant", "content": "truthy but not true", "has_answer": 1},
                {"content": "no role", "has_answer": True},
                {"role": "user", "content": 42, "has_answer": True},  # content not text
                "not a turn",
            ],
            [
                {"role": "assistant", "content": "marked as a string", "has_answer": "true"},
                {"role": "User", "content": "fallback, role compared lower-cased"},
            ],
        ],
    )
    # str() of the raw id and date; a marked turn without a role renders as UNKNOWN
    assert render_evidence(record) == (
        "SESSION 7 AT None\nUNKNOWN: no role\n\n"
        "SESSION s2 AT 2026/01/02\nUSER: fallback, role compared lower-cased"
    )


@pytest.mark.parametrize(
    ("fields", "fragment"),
    [
        ({"haystack_sessions": None}, "must be lists"),
        (
            {"haystack_session_ids": ["a"], "haystack_dates": [], "haystack_sessions": []},
            "different lengths",
        ),
        (
            {"haystack_session_ids": ["a"], "haystack_dates": ["d"], "haystack_sessions": ["x"]},
            "not a list of turns",
        ),
    ],
)
def test_malformed_haystacks_are_refused(fields: dict[str, Any], fragment: str) -> None:
    with pytest.raises(DatasetIntegrityError, match=fragment):
        render_evidence(row("q", **fields), path="data.json")


@pytest.mark.parametrize(
    ("fields", "fragment"),
    [
        ({"question": ""}, "non-empty strings"),
        ({"question_type": None}, "non-empty strings"),
        ({"question_date": 20230520}, "question_date must be a string or null"),
    ],
)
def test_rows_without_their_identity_are_refused_when_used(
    tmp_path: Path, fields: dict[str, Any], fragment: str
) -> None:
    path = tmp_path / "data.json"
    digest = write(path, [row("q", **fields)])
    dataset = load_dataset(path, expected_sha256=digest)  # loading indexes; use validates
    with pytest.raises(DatasetIntegrityError, match=fragment):
        dataset.evidence("q")


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("Lyon", "Lyon"),
        (3, "3"),
        (2.5, "2.5"),
        (["b", "a"], '["b", "a"]'),
        ({"b": 1, "a": "é"}, '{"a": "é", "b": 1}'),
    ],
)
def test_answers_become_text(value: object, text: str) -> None:
    assert answer_text(value) == text
