"""verify_results: passes on the original's published results, names the field on any tampering."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from deermem.eval.files import document_text, jsonl_line
from deermem.eval.grading import StatisticsParameters
from deermem.eval.verify import (
    RESULT_FILES,
    VerificationReport,
    render_verification,
    verify_results,
)
from tests.published import PUBLISHED_SHA256, published_results

ROWS, SUMMARY, STATS, RUN = "qa.rows.jsonl", "qa.summary.json", "qa.stats.json", "qa_run.json"


# --- the published results pass -------------------------------------------------------------


def test_published_results_verify() -> None:
    report = verify_results(published_results())
    assert report.ok, render_verification(report)
    assert report.rows == 90
    assert dict(report.files) == dict.fromkeys(RESULT_FILES, "verified")
    assert report.derived is not None
    figures = {
        suite: (c.first_correct, c.second_correct, c.cases, c.mcnemar.p_value)
        for suite, c in report.derived.comparisons.items()
    }
    assert figures == {
        "official": (23, 35, 40, 0.0018310546875),
        "synthetic": (1, 5, 5, 0.125),
        "overall": (24, 40, 45, 0.00014495849609375),
    }
    official = report.derived.comparisons["official"].bootstrap
    assert (official.lower, official.upper) == (0.15000000000000002, 0.45000000000000007)


def test_rendered_summary_of_the_published_results() -> None:
    text = render_verification(verify_results(published_results()))
    assert text.startswith("verified ")
    assert "byte for byte" in text
    assert (
        "official         23/40       35/40  0.0018310546875      +0.300 [+0.150, +0.450]" in text
    )
    assert (
        "synthetic          1/5         5/5  0.125                +0.800 [+0.400, +1.000]" in text
    )
    assert (
        "overall          24/45       40/45  0.00014495849609375  +0.356 [+0.200, +0.511]" in text
    )
    assert "95% CI" in text


def test_json_form_of_the_published_results() -> None:
    data = json.loads(json.dumps(verify_results(published_results()).model_dump()))
    assert data["ok"] is True
    assert data["findings"] == []
    assert data["suites"]["overall"]["correct"] == {"confidence": 24, "hybrid-v1": 40}
    assert data["suites"]["overall"]["mcnemar"]["p_value"] == 0.00014495849609375
    assert data["suites"]["synthetic"]["bootstrap"]["lower"] == 0.4


def test_the_protocol_parameters_are_enforced_not_read_from_the_file() -> None:
    report = verify_results(published_results(), parameters=StatisticsParameters(seed=1))
    fields = {(f.file, f.field) for f in report.findings}
    assert {
        (STATS, f"suites.{suite}.bootstrap.seed") for suite in ("official", "overall")
    } <= fields


def test_a_missing_directory_is_a_finding(tmp_path: Path) -> None:
    report = verify_results(tmp_path / "nowhere")
    assert not report.ok
    assert [str(f) for f in report.findings] == [
        "(directory): path: expected a results directory, got no such directory"
    ]


def test_a_file_given_as_the_directory_is_named_as_such(tmp_path: Path) -> None:
    file = tmp_path / "qa.rows.jsonl"
    file.write_text("{}\n", encoding="utf-8")
    assert [str(f) for f in verify_results(file).findings] == [
        "(directory): path: expected a results directory, got not a directory"
    ]


def test_without_the_optional_marker_the_results_still_verify(tmp_path: Path) -> None:
    folder = copy_published(tmp_path)
    (folder / RUN).unlink()
    report = verify_results(folder)
    assert report.ok, render_verification(report)
    assert report.files[RUN] == "absent"


# --- tampering ------------------------------------------------------------------------------


def copy_published(tmp_path: Path) -> Path:
    folder = tmp_path / "results"
    shutil.copytree(published_results(), folder)
    folder.chmod(0o755)  # the reference copy is read-only
    for path in folder.iterdir():
        path.chmod(0o644)
    return folder


def rows_of(folder: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (folder / ROWS).read_text(encoding="utf-8").splitlines()]


def write_rows(folder: Path, rows: list[dict[str, object]]) -> None:
    (folder / ROWS).write_text("".join(jsonl_line(row) for row in rows), encoding="utf-8")


def edit_row(row_id: str, **changes: object) -> Callable[[Path], None]:
    def apply(folder: Path) -> None:
        rows = rows_of(folder)
        (row,) = (row for row in rows if row["row_id"] == row_id)
        row.update(changes)
        write_rows(folder, rows)

    return apply


def edit_document(name: str, change: Callable[[dict[str, object]], None]) -> Callable[[Path], None]:
    def apply(folder: Path) -> None:
        data = json.loads((folder / name).read_text(encoding="utf-8"))
        change(data)
        (folder / name).write_text(document_text(data), encoding="utf-8")

    return apply


def edit_text(name: str, change: Callable[[str], str]) -> Callable[[Path], None]:
    def apply(folder: Path) -> None:
        path = folder / name
        text = path.read_text(encoding="utf-8")
        changed = change(text)
        assert changed != text, "the tamper did not change the file"
        path.write_text(changed, encoding="utf-8")

    return apply


def edit_rows(change: Callable[[list[dict[str, object]]], None]) -> Callable[[Path], None]:
    def apply(folder: Path) -> None:
        rows = rows_of(folder)
        change(rows)
        write_rows(folder, rows)

    return apply


def swap_policies_consistently(rows: list[dict[str, object]]) -> None:
    for row in rows:
        if row["case_id"] == "08e075c7":
            row["policy"] = "hybrid-v1" if row["policy"] == "confidence" else "confidence"
            row["row_id"] = f"08e075c7__{row['policy']}"
    rows.sort(key=lambda row: str(row["row_id"]))


def swap_policy_fields(rows: list[dict[str, object]]) -> None:
    for row in rows:
        if row["case_id"] == "08e075c7":
            row["policy"] = "hybrid-v1" if row["policy"] == "confidence" else "confidence"


def nested(path: str, value: object) -> Callable[[dict[str, object]], None]:
    def change(data: dict[str, object]) -> None:
        *parents, last = path.split(".")
        target: object = data
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]  # type: ignore[index]
        target[int(last) if isinstance(target, list) else last] = value  # type: ignore[index]

    return change


def cases_before_bootstrap(data: dict[str, object]) -> None:
    suite = data["suites"]["official"]  # type: ignore[index]
    data["suites"]["official"] = {"cases": suite["cases"], **suite}  # type: ignore[index]


def write_raw(name: str, data: bytes) -> Callable[[Path], object]:
    return lambda folder: (folder / name).write_bytes(data)


PRIVATE_QUESTION = "Where do I keep my old sneakers?"
PRIVATE_REFERENCE = "In the shoe rack by the door"
PRIVATE_SCENARIO = "the user keeps the shoes in a rack"
FAKE_KEY = "sk-abcdef1234567890"
ROW_15 = "0bb5a684__confidence"  # the 15th published row (index 14)

# (tamper id, the edit, findings that must be present as (file, field, row or None))
TAMPERS: list[tuple[str, Callable[[Path], object], set[tuple[str, str, str | None]]]] = [
    (
        "grade flipped, rule kept",
        edit_row("07741c45__hybrid-v1", grade_correct=False),
        {(ROWS, "grade_correct", "07741c45__hybrid-v1")},
    ),
    (
        "grade and rule changed together",
        edit_row("1cea1afa__confidence", grade_correct=False, grade_rule="overlap-reject"),
        {
            (SUMMARY, "groups[2].correct", None),
            (SUMMARY, "groups[2].accuracy", None),
            (STATS, "suites.official.mcnemar.only_first_correct", None),
            (STATS, "suites.overall.bootstrap.mean_difference", None),
        },
    ),
    (
        "prediction contradicts its rule",
        edit_row("07741c45__confidence", prediction="In a shoe rack"),
        {(ROWS, "grade_rule", "07741c45__confidence")},
    ),
    (
        "summary count",
        edit_document(SUMMARY, nested("groups.1.correct", 8)),
        {(SUMMARY, "groups[1].correct", None)},
    ),
    (
        "summary accuracy",
        edit_document(SUMMARY, nested("groups.0.accuracy", 0.30000000000000004)),
        {(SUMMARY, "groups[0].accuracy", None)},
    ),
    (
        "summary group dropped",
        edit_document(SUMMARY, lambda data: data["groups"].pop()),  # type: ignore[attr-defined]
        {(SUMMARY, "groups", None)},
    ),
    (
        "stats interval bound",
        edit_document(STATS, nested("suites.official.bootstrap.lower", 0.15)),
        {(STATS, "suites.official.bootstrap.lower", None)},
    ),
    (
        "stats seed",
        edit_document(STATS, nested("suites.official.bootstrap.seed", 4790)),
        {(STATS, "suites.official.bootstrap.seed", None)},
    ),
    (
        "stats p value spelled differently",
        edit_text(STATS, lambda t: t.replace('"p_value": 0.125', '"p_value": 1.25e-1')),
        {(STATS, "(layout)", None)},
    ),
    (
        "stats integer for float",
        edit_text(STATS, lambda t: t.replace('"upper": 1.0', '"upper": 1')),
        {(STATS, "suites.synthetic.bootstrap.upper", None)},
    ),
    (
        "stats key order",
        lambda folder: (folder / STATS).write_text(
            json.dumps(
                _apply(json.loads((folder / STATS).read_text()), cases_before_bootstrap), indent=2
            )
            + "\n"
        ),
        {(STATS, "suites.official (key order)", None)},
    ),
    (
        "summary trailing newline removed",
        edit_text(SUMMARY, lambda t: t.rstrip("\n")),
        {(SUMMARY, "(end of file)", None)},
    ),
    (
        "summary duplicate key",
        edit_text(
            SUMMARY,
            lambda t: t.replace('"qa_capacity": 7,', '"qa_capacity": 7,\n  "qa_capacity": 7,'),
        ),
        {(SUMMARY, "'qa_capacity'", None)},
    ),
    (
        "rows trailing blank line",
        edit_text(ROWS, lambda t: t + "\n"),
        {(ROWS, "(end of file)", None)},
    ),
    (
        "private question added to a row",
        edit_row("07741c44__confidence", question=PRIVATE_QUESTION),
        {(ROWS, "'question'", "07741c44__confidence")},
    ),
    (
        "private reference added to the summary",
        edit_document(SUMMARY, nested("groups.0.reference", PRIVATE_REFERENCE)),
        {(SUMMARY, "groups[0].reference", None)},
    ),
    (
        "private text in an identifier",
        edit_row("0977f2af__hybrid-v1", scenario=PRIVATE_SCENARIO),
        {(ROWS, "scenario", "0977f2af__hybrid-v1")},
    ),
    (
        "row dropped",
        edit_rows(
            lambda rows: rows.remove(next(r for r in rows if r["row_id"] == "2ebe6c90__hybrid-v1"))
        ),
        {(ROWS, "policy", "case 2ebe6c90")},
    ),
    (
        "row duplicated",
        edit_rows(lambda rows: rows.insert(14, rows[14])),
        {(ROWS, "row_id", ROW_15)},
    ),
    (
        "rows out of order",
        edit_rows(lambda rows: rows.insert(0, rows.pop(1))),
        {(ROWS, "row_id", "01493427__confidence")},
    ),
    (
        "policy labels swapped",
        edit_rows(swap_policy_fields),
        {(ROWS, "row_id", "08e075c7__confidence"), (ROWS, "row_id", "08e075c7__hybrid-v1")},
    ),
    (
        "policy labels and row ids swapped",
        edit_rows(swap_policies_consistently),
        {
            (SUMMARY, "groups[4].correct", None),
            (STATS, "suites.official.mcnemar.only_second_correct", None),
        },
    ),
    (
        "row layout",
        edit_text(
            ROWS,
            lambda t: t.replace('"attempts": 1, "capacity": 7', '"attempts":1,"capacity":7', 1),
        ),
        {(ROWS, "(layout)", "01493427__confidence")},
    ),
    (
        "row keys unsorted",
        edit_text(
            ROWS,
            lambda t: t.replace(
                '{"attempts": 1, "capacity": 7,', '{"capacity": 7, "attempts": 1,', 1
            ),
        ),
        {(ROWS, "(key order)", "01493427__confidence")},
    ),
    (
        "grader version",
        edit_row("0bc8ad92__hybrid-v1", grader_version="deterministic-overlap-v2"),
        {(ROWS, "grader_version", "0bc8ad92__hybrid-v1")},
    ),
    (
        "kept fact from another case",
        edit_row(
            "01493427__confidence",
            kept_fact_ids=[
                "d_06db6396_0_09d032c9",
                "d_01493427_1_0a34ad58",
                "d_01493427_2_0edc2aef",
                "d_01493427_3_118b2229",
                "d_01493427_4_15745da0",
                "gold_01493427",
                "d_01493427_5_195a1a1b",
            ],
        ),
        {(ROWS, "kept_fact_ids", "01493427__confidence")},
    ),
    (
        "support claimed retained",
        edit_row("07741c45__confidence", support_all_retained=True, support_recall=1.0),
        {(ROWS, "support_all_retained", "07741c45__confidence")},
    ),
    (
        "fingerprint altered",
        edit_row("01493427__hybrid-v1", request_fingerprint="0" * 64),
        {(ROWS, "request_fingerprint", "01493427__hybrid-v1")},
    ),
    (
        "fingerprint of another case",
        edit_row(
            "06db6396__confidence",
            request_fingerprint="422fa7d0efd98d48b9f3c85c1647cd31766b4fb111ea061d9e0ef8c7fa45292b",
        ),
        {(ROWS, "request_fingerprint", "06db6396__confidence")},
    ),
    (
        "usage with text",
        edit_row("0bb5a684__confidence", usage={"prompt_tokens": "881 tokens"}),
        {(ROWS, "usage", "0bb5a684__confidence")},
    ),
    (
        "invalid JSON line",
        edit_text(ROWS, lambda t: "{\n" + t.split("\n", 1)[1]),
        {(ROWS, "(line)", None)},
    ),
    (
        "a row with a number too long to read",
        edit_text(ROWS, lambda t: t.replace('"attempts": 1', '"attempts": ' + "9" * 5000, 1)),
        {(ROWS, "(line)", None)},
    ),
    (
        "a rows line nested too deeply",
        edit_text(ROWS, lambda t: "[" * 100_000 + "]" * 100_000 + "\n" + t),
        {(ROWS, "(line)", None)},
    ),
    (
        "a marker nested too deeply",
        write_raw(RUN, b"[" * 100_000 + b"]" * 100_000),
        {(RUN, "(document)", None)},
    ),
    (
        "a summary with a number too long to read",
        edit_text(SUMMARY, lambda t: t.replace("{", '{"n": ' + "9" * 5000 + ",", 1)),
        {(SUMMARY, "(document)", None)},
    ),
    ("empty rows file", write_raw(ROWS, b""), {(ROWS, "(document)", None)}),
    (
        "rows not UTF-8",
        lambda folder: (folder / ROWS).write_bytes((folder / ROWS).read_bytes() + b"\xff\n"),
        {(ROWS, "(file)", None)},
    ),
    ("rows missing", lambda folder: (folder / ROWS).unlink(), {(ROWS, "(file)", None)}),
    ("summary missing", lambda folder: (folder / SUMMARY).unlink(), {(SUMMARY, "(file)", None)}),
    (
        "marker protocol id",
        edit_document(RUN, nested("protocol_id", "another-protocol-v1")),
        {(SUMMARY, "protocol_id", None), (STATS, "protocol_id", None)},
    ),
    (
        "marker capacity",
        edit_document(RUN, nested("qa.capacity", 5)),
        {(RUN, "qa.capacity", None)},
    ),
    (
        "marker holds a key instead of a variable name",
        edit_document(RUN, nested("qa.api_key_env", FAKE_KEY)),
        {(RUN, "qa.api_key_env", None)},
    ),
    (
        "marker with an extra secret",
        edit_document(RUN, nested("qa.api_key", FAKE_KEY)),
        {(RUN, "qa.api_key", None)},
    ),
    (
        "marker dataset hash",
        edit_document(RUN, nested("artifacts.dataset_sha256", "f" * 64)),
        {(RUN, "artifacts.dataset_sha256", None)},
    ),
    (
        "marker temperature as text",
        edit_document(RUN, nested("qa.temperature", "0")),
        {(RUN, "qa.temperature", None)},
    ),
    (
        "marker layout",
        edit_text(RUN, lambda t: json.dumps(json.loads(t), sort_keys=True) + "\n"),
        {(RUN, "(layout)", None)},
    ),
]


def _apply(
    data: dict[str, object], change: Callable[[dict[str, object]], None]
) -> dict[str, object]:
    change(data)
    return data


@pytest.mark.parametrize(
    ("tamper", "expected"), [(t[1], t[2]) for t in TAMPERS], ids=[t[0] for t in TAMPERS]
)
def test_tampering_is_named(
    tmp_path: Path, tamper: Callable[[Path], object], expected: set[tuple[str, str, str | None]]
) -> None:
    folder = copy_published(tmp_path)
    tamper(folder)
    report = verify_results(folder)
    assert not report.ok
    found = {(f.file, f.field, f.row) for f in report.findings}
    assert expected <= found, render_verification(report)
    assert_findings_are_well_formed(report)
    assert any(report.files[name] == "failed" for name in {file for file, _, _ in expected})


def assert_findings_are_well_formed(report: VerificationReport) -> None:
    rendered = render_verification(report)
    assert rendered.startswith("FAILED ")
    for finding in report.findings:
        text = str(finding)
        assert text.startswith(finding.file)
        assert f": {finding.field}: expected " in text
        if finding.row:
            assert finding.row in text
        if finding.line is not None:
            assert f" line {finding.line}" in text
        assert text in rendered
        # Private text planted by a tamper must never be repeated by the report.
        for secret in (PRIVATE_QUESTION, PRIVATE_REFERENCE, PRIVATE_SCENARIO, FAKE_KEY):
            assert secret not in text
    assert json.loads(json.dumps(report.model_dump()))["ok"] is False


def test_row_findings_name_the_line(tmp_path: Path) -> None:
    folder = copy_published(tmp_path)
    edit_row("07741c45__hybrid-v1", grade_correct=False)(folder)
    report = verify_results(folder)
    (finding,) = report.findings
    assert str(finding) == (
        "qa.rows.jsonl line 8 (row 07741c45__hybrid-v1): grade_correct: "
        'expected true (rule "exact"), got false'
    )
    assert report.files[SUMMARY] == report.files[STATS] == "not checked"


def test_summary_findings_give_expected_and_actual_values(tmp_path: Path) -> None:
    folder = copy_published(tmp_path)
    edit_document(SUMMARY, nested("groups.1.correct", 8))(folder)
    (finding,) = verify_results(folder).findings
    assert str(finding) == "qa.summary.json: groups[1].correct: expected 9, got 8"


def test_findings_are_capped_per_file(tmp_path: Path) -> None:
    folder = copy_published(tmp_path)

    def retag(rows: list[dict[str, object]]) -> None:
        for row in rows:
            row["grader_version"] = "other"

    edit_rows(retag)(folder)
    report = verify_results(folder)
    rows_findings = [f for f in report.findings if f.file == ROWS]
    assert len(rows_findings) == 51
    assert (
        str(rows_findings[-1]) == "qa.rows.jsonl: (more): expected at most 50 listed, got 90 in all"
    )


def test_published_hashes_pin_the_fields_no_figure_depends_on(tmp_path: Path) -> None:
    assert verify_results(published_results(), expected_sha256=PUBLISHED_SHA256).ok
    folder = copy_published(tmp_path)
    # Token counts feed no figure and nothing constrains them: only a hash can tell.
    edit_row("01493427__confidence", usage={"prompt_tokens": 1})(folder)
    assert verify_results(folder).ok
    report = verify_results(folder, expected_sha256=PUBLISHED_SHA256)
    assert [(f.file, f.field, f.expected) for f in report.findings] == [
        (ROWS, "(sha256)", PUBLISHED_SHA256[ROWS])
    ]
    (folder / RUN).unlink()
    missing = verify_results(folder, expected_sha256={RUN: PUBLISHED_SHA256[RUN]})
    assert [(f.file, f.field) for f in missing.findings] == [(RUN, "(file)")]
    outside = verify_results(folder, expected_sha256={"../qa.rows.jsonl": "0" * 64})
    assert [(f.file, f.field) for f in outside.findings] == [("../qa.rows.jsonl", "(sha256)")]


def test_a_prediction_with_a_number_too_long_for_int_is_checked_not_a_crash(
    tmp_path: Path,
) -> None:
    """A degenerate answer (a digit repeated to the token limit) holds more digits than
    int() converts; verification still checks its grade like any other."""
    folder = copy_published(tmp_path)
    long_number = "7" * 5000
    edit_row("07741c45__confidence", prediction=long_number, grade_rule="numeric-conflict")(folder)
    report = verify_results(folder)
    assert report.ok, [str(f) for f in report.findings]
    edit_row("07741c45__confidence", grade_rule="insufficient")(folder)
    (finding,) = verify_results(folder).findings
    assert "grade_rule: expected a rule the grader can give this prediction" in str(finding)
