"""Graded rows, the summary and the statistics documents, and how they are written."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

from deermem import POLICY_CONFIDENCE, POLICY_HYBRID_V1
from deermem.eval.errors import ResultRowsError, ResultsExistError
from deermem.eval.grading import StatisticsParameters
from deermem.eval.rows import (
    ROW_KEYS,
    ROWS_FILE,
    STATS_FILE,
    SUMMARY_FILE,
    AnswerToGrade,
    QaRow,
    build_qa_report,
    check_rows,
    grade_answer_row,
    render_rows,
    summarize,
    write_qa_report,
)
from deermem.policy import POLICIES

FAST = StatisticsParameters(seed=4789, iterations=50, alpha=0.05)


def answer(
    case_id: str,
    policy: str,
    *,
    prediction: str = "Paris",
    reference: str = "Paris",
    source: str = "longmemeval",
    scenario: str = "access_help",
    kept: tuple[str, ...] | None = None,
    capacity: int = 2,
) -> AnswerToGrade:
    kept = kept if kept is not None else (f"gold_{case_id}", f"d_{case_id}_0_0a1b2c3d")
    fingerprint = hashlib.sha256(f"{case_id}|{sorted(kept)}".encode()).hexdigest()
    return AnswerToGrade(
        case_id=case_id,
        source=source,
        scenario=scenario,
        question_type="synthetic-correction" if source == "synthetic" else "knowledge-update",
        policy=policy,
        capacity=capacity,
        kept_fact_ids=kept,
        support_fact_ids=(f"gold_{case_id}",),
        reference=reference,
        prediction=prediction,
        attempts=1,
        request_fingerprint=fingerprint,
        response_model="local-model",
        usage={"completion_tokens": 3, "prompt_tokens": 40, "total_tokens": 43},
    )


def small_rows() -> list[QaRow]:
    """Three official cases and two synthetic ones; hybrid-v1 wins more often."""
    specs = [
        ("c1", "longmemeval", "access_help", ("INSUFFICIENT", "Lyon")),
        ("c2", "longmemeval", "access_help", ("Lyon", "Lyon")),
        ("c3", "longmemeval", "confidence_control", ("Lyon", "INSUFFICIENT")),
        ("s1", "synthetic", "correction_reserve", ("INSUFFICIENT", "NO")),
        ("s2", "synthetic", "correction_reserve", ("YES", "NO")),
    ]
    rows = []
    for case_id, source, scenario, predictions in specs:
        reference = "NO" if source == "synthetic" else "Lyon"
        for policy, prediction in zip(POLICIES, predictions, strict=True):
            rows.append(
                grade_answer_row(
                    answer(
                        case_id,
                        policy,
                        prediction=prediction,
                        reference=reference,
                        source=source,
                        scenario=scenario,
                    )
                )
            )
    return rows


# --- rows -----------------------------------------------------------------------------------


def test_policy_labels_are_the_production_constants() -> None:
    assert (POLICY_CONFIDENCE, POLICY_HYBRID_V1) == POLICIES


def test_grading_a_row_keeps_the_reference_out() -> None:
    row = grade_answer_row(
        answer("c1", "hybrid-v1", prediction="under my bed", reference="Under the secret bed")
    )
    assert (row.grade_correct, row.grade_rule) == (False, "overlap-reject")
    line = row.to_json_line()
    assert "secret" not in line
    assert set(json.loads(line)) == set(ROW_KEYS)
    assert len(ROW_KEYS) == 19
    assert row.row_id == "c1__hybrid-v1"
    assert row.grader_version == "deterministic-overlap-v1"


@pytest.mark.parametrize(
    ("kept", "retained", "recall"),
    [
        (("d_c1_0_x", "gold_c1"), True, 1.0),
        (("d_c1_0_x", "d_c1_1_y"), False, 0.0),
    ],
)
def test_support_fields_follow_the_kept_ids(
    kept: tuple[str, ...], retained: bool, recall: float
) -> None:
    row = grade_answer_row(answer("c1", "confidence", kept=kept))
    assert (row.support_all_retained, row.support_recall) == (retained, recall)
    assert row.kept_fact_ids == kept  # rank order preserved


def test_a_row_outside_the_schema_is_refused_naming_the_field() -> None:
    with pytest.raises(ResultRowsError, match="policy") as caught:
        grade_answer_row(answer("c1", "random"))
    assert "row c1__random" in str(caught.value)
    with pytest.raises(ResultRowsError, match="kept_fact_ids"):
        grade_answer_row(answer("c1", "confidence", kept=("a", "b", "c")))  # over capacity 2


def test_rows_render_sorted_with_the_canonical_layout() -> None:
    rows = [grade_answer_row(answer("c2", "confidence", prediction="Zürich, 5 km"))] + [
        grade_answer_row(answer("c1", policy)) for policy in reversed(POLICIES)
    ]
    text = render_rows(rows)
    lines = text.splitlines()
    assert [json.loads(line)["row_id"] for line in lines] == [
        "c1__confidence",
        "c1__hybrid-v1",
        "c2__confidence",
    ]
    assert text.endswith("}\n")
    assert '"prediction": "Zürich, 5 km"' in text  # UTF-8, not \u escapes
    assert lines[0].startswith('{"attempts": 1, "capacity": 2, "case_id": "c1", ')


def test_row_round_trips_through_its_dict() -> None:
    row = small_rows()[0]
    assert QaRow.from_dict(json.loads(row.to_json_line())) == row


# --- pairing --------------------------------------------------------------------------------


def test_check_rows_names_an_unpaired_case() -> None:
    rows = [row for row in small_rows() if row.row_id != "c2__hybrid-v1"]
    with pytest.raises(ResultRowsError, match=r"case c2: policy: .* no row for hybrid-v1"):
        check_rows(rows)


def test_check_rows_names_a_duplicate() -> None:
    rows = small_rows()
    with pytest.raises(ResultRowsError, match="c1__confidence: row_id"):
        check_rows([*rows, rows[0]])


def test_check_rows_names_a_pair_that_disagrees_on_the_case() -> None:
    rows = small_rows()
    moved = grade_answer_row(answer("c1", "hybrid-v1", scenario="confirmation_help"))
    with pytest.raises(ResultRowsError, match=r"c1__hybrid-v1: scenario: .*access_help"):
        check_rows([moved if row.row_id == moved.row_id else row for row in rows])


def test_check_rows_needs_one_capacity_and_some_rows() -> None:
    rows = [row for row in small_rows() if row.case_id != "c1"]
    rows += [grade_answer_row(answer("c1", policy, capacity=3)) for policy in POLICIES]
    with pytest.raises(ResultRowsError, match="one capacity for all rows"):
        check_rows(rows)
    with pytest.raises(ResultRowsError, match="no rows"):
        check_rows([])


# --- summary and statistics -----------------------------------------------------------------


def test_summary_groups_by_source_scenario_policy() -> None:
    groups = [asdict(group) for group in summarize(small_rows())]
    assert groups == [
        {"accuracy": 0.5, "cases": 2, "correct": 1, "policy": "confidence",
         "scenario": "access_help", "source": "longmemeval"},
        {"accuracy": 1.0, "cases": 2, "correct": 2, "policy": "hybrid-v1",
         "scenario": "access_help", "source": "longmemeval"},
        {"accuracy": 1.0, "cases": 1, "correct": 1, "policy": "confidence",
         "scenario": "confidence_control", "source": "longmemeval"},
        {"accuracy": 0.0, "cases": 1, "correct": 0, "policy": "hybrid-v1",
         "scenario": "confidence_control", "source": "longmemeval"},
        {"accuracy": 0.0, "cases": 2, "correct": 0, "policy": "confidence",
         "scenario": "correction_reserve", "source": "synthetic"},
        {"accuracy": 1.0, "cases": 2, "correct": 2, "policy": "hybrid-v1",
         "scenario": "correction_reserve", "source": "synthetic"},
    ]  # fmt: skip


def test_suites_are_kept_separate() -> None:
    report = build_qa_report(small_rows(), protocol_id="tiny-v1", parameters=FAST)
    tables = {
        suite: (c.cases, c.mcnemar.only_first_correct, c.mcnemar.only_second_correct)
        for suite, c in report.comparisons.items()
    }
    assert list(tables) == ["official", "synthetic", "overall"]
    assert tables == {"official": (3, 1, 1), "synthetic": (2, 0, 2), "overall": (5, 1, 3)}
    assert "overall" not in {group.source for group in report.groups}  # no pooled group


def test_a_suite_without_cases_is_refused() -> None:
    rows = [row for row in small_rows() if row.source == "longmemeval"]
    with pytest.raises(ResultRowsError, match="suite 'synthetic' has no cases"):
        build_qa_report(rows, protocol_id="tiny-v1", parameters=FAST)


def test_documents_have_the_published_shape() -> None:
    report = build_qa_report(small_rows(), protocol_id="tiny-v1", parameters=FAST)
    files = report.files()
    assert list(files) == [ROWS_FILE, SUMMARY_FILE, STATS_FILE]
    summary = json.loads(files[SUMMARY_FILE])
    assert list(summary) == [
        "grader_version",
        "groups",
        "protocol_id",
        "qa_capacity",
        "schema_version",
    ]
    assert (summary["protocol_id"], summary["qa_capacity"], summary["schema_version"]) == (
        "tiny-v1",
        2,
        1,
    )
    stats = json.loads(files[STATS_FILE])
    assert list(stats) == ["grader_version", "policies", "protocol_id", "schema_version", "suites"]
    assert stats["policies"] == ["confidence", "hybrid-v1"]
    assert list(stats["suites"]) == ["official", "overall", "synthetic"]  # sorted keys
    assert files[STATS_FILE].startswith('{\n  "grader_version": "deterministic-overlap-v1",\n')
    assert files[STATS_FILE].endswith("\n}\n")


def test_report_is_byte_identical_across_runs_and_processes(tmp_path: Path) -> None:
    first = build_qa_report(small_rows(), protocol_id="tiny-v1").files()
    assert build_qa_report(reversed(small_rows()), protocol_id="tiny-v1").files() == first
    # A fresh interpreter (new hash seed) must write the same bytes.
    script = (
        "import sys, json; from pathlib import Path\n"
        "from tests.test_eval_qa_report import small_rows\n"
        "from deermem.eval.rows import build_qa_report, write_qa_report\n"
        "write_qa_report(Path(sys.argv[1]), build_qa_report(small_rows(), protocol_id='tiny-v1'))\n"
    )
    environment = {**os.environ, "PYTHONHASHSEED": "12345"}
    subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "other")],
        check=True,
        cwd=Path(__file__).resolve().parents[1],
        env=environment,
    )
    for name, text in first.items():
        assert (tmp_path / "other" / name).read_bytes() == text.encode("utf-8")


# --- writing ---------------------------------------------------------------------------------


def test_write_creates_the_three_files_and_refuses_to_overwrite(tmp_path: Path) -> None:
    report = build_qa_report(small_rows(), protocol_id="tiny-v1", parameters=FAST)
    target = tmp_path / "nested" / "results"
    written = write_qa_report(target, report)
    assert [path.name for path in written] == [ROWS_FILE, SUMMARY_FILE, STATS_FILE]
    before = {path.name: path.read_bytes() for path in written}
    with pytest.raises(ResultsExistError, match="refusing to overwrite") as caught:
        write_qa_report(target, report)
    assert caught.value.paths == sorted(str(path) for path in written)
    assert {path.name: path.read_bytes() for path in written} == before
    assert sorted(p.name for p in target.iterdir()) == sorted(before)  # no temporary left


def test_one_existing_file_blocks_the_whole_write(tmp_path: Path) -> None:
    (tmp_path / STATS_FILE).write_text("keep me", encoding="utf-8")
    report = build_qa_report(small_rows(), protocol_id="tiny-v1", parameters=FAST)
    with pytest.raises(ResultsExistError) as caught:
        write_qa_report(tmp_path, report)
    assert caught.value.paths == [str(tmp_path / STATS_FILE)]
    assert sorted(p.name for p in tmp_path.iterdir()) == [STATS_FILE]
    assert (tmp_path / STATS_FILE).read_text(encoding="utf-8") == "keep me"


def test_a_file_appearing_mid_write_is_not_overwritten_and_the_write_rolls_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_link = os.link

    def racing_link(source: str, target: str) -> None:
        if Path(target).name == SUMMARY_FILE:  # another writer gets there first
            Path(target).write_text("theirs", encoding="utf-8")
        real_link(source, target)

    monkeypatch.setattr(os, "link", racing_link)
    report = build_qa_report(small_rows(), protocol_id="tiny-v1", parameters=FAST)
    with pytest.raises(ResultsExistError, match=SUMMARY_FILE):
        write_qa_report(tmp_path, report)
    assert sorted(p.name for p in tmp_path.iterdir()) == [SUMMARY_FILE]  # ours rolled back
    assert (tmp_path / SUMMARY_FILE).read_text(encoding="utf-8") == "theirs"


def test_write_without_hard_links_falls_back_to_rename(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_links(source: str, target: str) -> None:
        raise OSError(errno.EPERM, "hard links not supported")

    monkeypatch.setattr(os, "link", no_links)
    report = build_qa_report(small_rows(), protocol_id="tiny-v1", parameters=FAST)
    write_qa_report(tmp_path, report)
    for name, text in report.files().items():
        assert (tmp_path / name).read_text(encoding="utf-8") == text
    assert len(list(tmp_path.iterdir())) == 3
