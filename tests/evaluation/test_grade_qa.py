"""``deermem eval grade-qa``: refuse anything unproven, then grade blind, byte for byte."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from deermem.eval.rows import QaRow, report_paths
from deermem.eval.verify import verify_results
from tests.evaluation.conftest import Answered, Generated, Prepared, Runner
from tests.evaluation.qa_support import (
    Bundle,
    bundle_copy,
    distinct,
    edit_text,
    load_json,
    write_json,
)

# The oracle answers exactly when the support fact was kept, so the grades are
# the retention figures at cap 7: confidence 26/40 + 1/5, hybrid-v1 40/40 + 5/5.
# McNemar: official 0 vs 14 discordant -> 2/2^14; synthetic 0 vs 4 -> 2/2^4;
# overall 0 vs 18 -> 2/2^18 = 0.0000076...
EXPECTED_STDOUT = """\
official: confidence 26/40, hybrid-v1 40/40, exact McNemar p=0.000122
synthetic: confidence 1/5, hybrid-v1 5/5, exact McNemar p=0.125000
overall: confidence 27/45, hybrid-v1 45/45, exact McNemar p=0.000008
graded 90 rows to {directory}
"""


def _copy(answered: Answered, tmp_path: Path, name: str = "run") -> Path:
    directory = tmp_path / name
    shutil.copytree(answered.directory, directory)
    return directory


def _grade(eval_cli: Runner, generated: Generated, directory: Path) -> tuple[int, str, str]:
    return eval_cli(
        "grade-qa",
        *generated.protocol_args(),
        "--dataset",
        str(generated.dataset),
        "--output-dir",
        str(directory),
    )


def test_grading_prints_each_suite_and_is_byte_identical_across_runs(
    eval_cli: Runner, answered: Answered, generated: Generated, tmp_path: Path
) -> None:
    first, second = _copy(answered, tmp_path, "first"), _copy(answered, tmp_path, "second")
    for directory in (first, second):
        code, out, err = _grade(eval_cli, generated, directory)
        assert (code, err) == (0, "")
        assert out == EXPECTED_STDOUT.format(directory=directory)
    for one, two in zip(report_paths(first), report_paths(second), strict=True):
        assert one.read_bytes() == two.read_bytes()
    stats = load_json(first / "qa.stats.json")
    official = stats["suites"]["official"]
    assert official["mcnemar"] == {
        "both_correct": 26,
        "both_wrong": 0,
        "only_first_correct": 0,
        "only_second_correct": 14,
        "p_value": 2 / 2**14,
    }
    assert official["bootstrap"]["seed"] == 4789
    assert official["bootstrap"]["iterations"] == 10000
    report = verify_results(first)  # what grade-qa wrote verifies, marker included
    assert report.ok, report.findings
    assert report.files["qa_run.json"] == "verified"


def test_rows_take_case_fields_and_grades_from_the_recomputed_tasks(
    eval_cli: Runner, answered: Answered, generated: Generated, prepared: Prepared, tmp_path: Path
) -> None:
    directory = _copy(answered, tmp_path)
    assert _grade(eval_cli, generated, directory)[0] == 0
    lines = (directory / "qa.rows.jsonl").read_text().splitlines()
    rows = [QaRow.from_dict(json.loads(line)) for line in lines]
    assert [row.row_id for row in rows] == sorted(task.row_id for task in answered.tasks)
    cases = {case.case_id: case for case in prepared.cases}
    for row in rows:
        case = cases[row.case_id]
        retained = f"gold_{case.case_id}" in row.kept_fact_ids
        assert (row.question_type, row.support_all_retained) == (case.question_type, retained)
        assert row.grade_correct is retained  # the oracle answers when the support is kept
        assert row.grade_rule == ("exact" if retained else "insufficient")
    text = (directory / "qa.rows.jsonl").read_text()
    for case in prepared.cases:
        assert case.question not in text  # no question, no reference in the report


def test_existing_results_are_refused_before_any_work(
    eval_cli: Runner, answered: Answered, generated: Generated, tmp_path: Path
) -> None:
    directory = _copy(answered, tmp_path)
    (directory / "qa.stats.json").write_text("{}")
    code, out, err = _grade(eval_cli, generated, directory)
    assert (code, out) == (1, "")
    assert "refusing to overwrite existing result files" in err
    assert not (directory / "qa.rows.jsonl").exists()


# --- tampering --------------------------------------------------------------------------------

Tamper = Callable[[Path, Answered], tuple[str, str]]


def _edit(row: int, **changes: object) -> Tamper:
    """Change fields of one stored answer; the row and field the refusal must name."""

    def tamper(directory: Path, answered: Answered) -> tuple[str, str]:
        task = distinct(answered.tasks)[row]
        path = directory / "responses" / f"{task.row_id}.json"
        data = load_json(path)
        data.update(changes)
        write_json(path, data)
        return task.row_id, next(iter(changes))

    return tamper


def _reorder_kept(directory: Path, answered: Answered) -> tuple[str, str]:
    task = distinct(answered.tasks)[5]
    path = directory / "responses" / f"{task.row_id}.json"
    data = load_json(path)
    kept = data["kept_fact_ids"]
    assert isinstance(kept, list)
    data["kept_fact_ids"] = [kept[1], kept[0], *kept[2:]]  # the same facts, another rank order
    write_json(path, data)
    return task.row_id, "kept_fact_ids"


def _swap_kept_fact(directory: Path, answered: Answered) -> tuple[str, str]:
    task = next(t for t in distinct(answered.tasks) if t.policy == "confidence")
    evicted = next(
        str(fact["id"]) for fact in task.case.facts if fact["id"] not in task.kept_fact_ids
    )
    path = directory / "responses" / f"{task.row_id}.json"
    data = load_json(path)
    data["kept_fact_ids"] = [*task.kept_fact_ids[:-1], evicted]
    write_json(path, data)
    return task.row_id, "kept_fact_ids"


def _move_to_other_case(directory: Path, answered: Answered) -> tuple[str, str]:
    tasks = distinct(answered.tasks)
    source, target = tasks[0], tasks[-1]
    shutil.copyfile(
        directory / "responses" / f"{source.row_id}.json",
        directory / "responses" / f"{target.row_id}.json",
    )
    return target.row_id, "row_id"


def _remove(directory: Path, answered: Answered) -> tuple[str, str]:
    task = answered.tasks[17]
    (directory / "responses" / f"{task.row_id}.json").unlink()
    return task.row_id, "no stored answer"


def _corrupt(directory: Path, answered: Answered) -> tuple[str, str]:
    task = answered.tasks[30]
    (directory / "responses" / f"{task.row_id}.json").write_text('{"prediction": ')
    return task.row_id, "a UTF-8 JSON document"


TAMPERING: dict[str, Tamper] = {
    "row_id": _edit(0, row_id="01493427__hybrid-v1"),
    "case_id": _edit(1, case_id="06db6396"),
    "source": _edit(2, source="synthetic"),
    "scenario": _edit(3, scenario="access_help"),
    "policy": _edit(4, policy="hybrid-v1"),
    "capacity": _edit(6, capacity=5),
    "kept facts reordered": _reorder_kept,
    "kept facts changed": _swap_kept_fact,
    "fingerprint": _edit(7, request_fingerprint="ab" * 32),
    "moved to another case": _move_to_other_case,
    "a stored reference": _edit(8, reference="NO"),
    "missing": _remove,
    "corrupt": _corrupt,
    "prediction not a string": _edit(9, prediction=["YES"]),
}


@pytest.mark.parametrize("name", list(TAMPERING))
def test_every_tampered_answer_refuses_the_whole_grading(
    eval_cli: Runner, answered: Answered, generated: Generated, tmp_path: Path, name: str
) -> None:
    directory = _copy(answered, tmp_path)
    row_id, detail = TAMPERING[name](directory, answered)
    code, out, err = _grade(eval_cli, generated, directory)
    assert (code, out) == (1, "")
    first = err.splitlines()[0]
    assert first.startswith("error: refusing to grade: ")
    assert first.endswith(f": {row_id}")  # the refusal names the row(s)
    assert f"{row_id} (responses/{row_id}.json): " in err
    assert detail in err
    for path in report_paths(directory):
        assert not path.exists()


def test_a_killed_grading_is_named_by_report_and_replaced_by_the_re_run(
    eval_cli: Runner,
    answered: Answered,
    generated: Generated,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    directory = _copy(answered, tmp_path)
    assert _grade(eval_cli, generated, directory)[0] == 0
    complete = [path.read_bytes() for path in report_paths(directory)]
    (directory / "qa.stats.json").unlink()  # written last: killed before it was linked
    code, out, err = eval_cli("report", str(directory))
    assert (code, out) == (1, "")
    assert "holds what an interrupted grade-qa left (qa.rows.jsonl, qa.summary.json, " in err
    assert not (directory / "report.md").exists()
    code, _, err = _grade(eval_cli, generated, directory)
    assert code == 0, err
    assert f"{directory / 'qa.rows.jsonl'}, {directory / 'qa.summary.json'}" in caplog.text
    assert [path.read_bytes() for path in report_paths(directory)] == complete
    code, _, err = eval_cli("report", str(directory))
    assert code == 0, err


def test_all_bad_rows_are_named_together_missing_ones_first(
    eval_cli: Runner, answered: Answered, generated: Generated, tmp_path: Path
) -> None:
    directory = _copy(answered, tmp_path)
    _edit(0, capacity=5)(directory, answered)
    _edit(1, request_fingerprint="cd" * 32)(directory, answered)
    missing, _ = _remove(directory, answered)
    code, _, err = _grade(eval_cli, generated, directory)
    assert code == 1
    assert err.splitlines()[0] == (
        f"error: refusing to grade: missing or invalid answer rows: {missing}"
    )
    (directory / "responses" / f"{missing}.json").write_bytes(
        (answered.directory / "responses" / f"{missing}.json").read_bytes()
    )
    code, _, err = _grade(eval_cli, generated, directory)
    rows = sorted(t.row_id for t in distinct(answered.tasks)[:2])
    assert err.splitlines()[0] == (
        "error: refusing to grade: answer rows that do not match the tasks recomputed "
        f"from the current protocol: {', '.join(rows)}"
    )
    assert "capacity: expected 7, got 5" in err
    assert "request_fingerprint: expected" in err


def test_a_run_without_its_marker_is_refused(
    eval_cli: Runner, answered: Answered, generated: Generated, tmp_path: Path
) -> None:
    directory = _copy(answered, tmp_path)
    (directory / "qa_run.json").unlink()
    code, _, err = _grade(eval_cli, generated, directory)
    assert code == 1
    assert f"{directory / 'qa_run.json'}: not found; grading needs the marker run-qa writes" in err


@pytest.mark.parametrize("change", ["config", "official", "synthetic", "prompt"])
def test_changed_protocol_files_are_refused_naming_them(
    eval_cli: Runner, answered: Answered, generated: Generated, tmp_path: Path, change: str
) -> None:
    directory = _copy(answered, tmp_path)
    bundle = bundle_copy(tmp_path / "bundle", generated.dataset, generated.sha256)
    named = _change(bundle, change)
    code, out, err = eval_cli("grade-qa", *bundle.args(), "--output-dir", str(directory))
    assert (code, out) == (1, "")
    assert f"changed since: {named}; refusing to grade" in err
    assert not (directory / "qa.rows.jsonl").exists()


def _change(bundle: Bundle, change: str) -> str:
    files = bundle.files
    if change == "config":
        edit_text(files.config, "bootstrap_iterations: 10000", "bootstrap_iterations: 2000")
        return f"config ({files.config})"
    if change == "official":
        data = json.loads(files.official_manifest.read_text())
        files.official_manifest.write_text(json.dumps(data, indent=4))
        return f"official manifest ({files.official_manifest})"
    if change == "synthetic":
        data = json.loads(files.synthetic_manifest.read_text())
        data["cases"][2]["answer"] = "YES"
        files.synthetic_manifest.write_text(json.dumps(data, indent=2))
        return f"synthetic manifest ({files.synthetic_manifest})"
    import hashlib

    old = hashlib.sha256(bundle.prompt.read_bytes()).hexdigest()
    bundle.prompt.write_text(bundle.prompt.read_text().replace("STORED MEMORY:", "MEMORY:"))
    edit_text(files.config, old, hashlib.sha256(bundle.prompt.read_bytes()).hexdigest())
    return f"config ({files.config}), answer prompt ({bundle.prompt})"


def test_a_marker_of_another_dataset_is_refused_naming_it(
    eval_cli: Runner, answered: Answered, generated: Generated, tmp_path: Path
) -> None:
    directory = _copy(answered, tmp_path)
    marker = load_json(directory / "qa_run.json")
    other = "5" * 64
    marker["artifacts"]["dataset_sha256"] = other
    marker["dataset"]["sha256"] = other
    write_json(directory / "qa_run.json", marker)
    code, _, err = _grade(eval_cli, generated, directory)
    assert code == 1
    assert f"changed since: dataset (pinned {generated.sha256}); refusing to grade" in err


def test_a_hand_edited_marker_is_refused(
    eval_cli: Runner, answered: Answered, generated: Generated, tmp_path: Path
) -> None:
    directory = _copy(answered, tmp_path)
    marker = load_json(directory / "qa_run.json")
    marker["qa"]["max_tokens"] = 1024
    write_json(directory / "qa_run.json", marker)
    code, _, err = _grade(eval_cli, generated, directory)
    assert code == 1
    assert "was written for other QA settings: qa.max_tokens 1024 (now 2048)" in err
    marker["qa"]["api_key_env"] = "sk-live-abcdefghijkl"
    write_json(directory / "qa_run.json", marker)
    code, _, err = _grade(eval_cli, generated, directory)
    assert code == 1
    assert "is not a qa_run.json marker" in err
    assert "sk-live" not in err
