"""``deermem eval verify [DIR]`` as a user runs it, on the original's published results."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from deermem.eval import published
from deermem.eval.published import DEFAULT_PUBLISHED, PUBLISHED, PublishedResults
from deermem.eval.verify import render_verification, verify_results
from tests.evaluation.conftest import Runner
from tests.evaluation.qa_support import edit_text
from tests.published import PUBLISHED_SHA256, REPOSITORY_ROOT, published_results


def test_the_published_results_verify_through_the_command(eval_cli: Runner) -> None:
    folder = published_results()
    code, out, err = eval_cli("verify", str(folder))
    assert (code, err) == (0, "")
    assert out == render_verification(verify_results(folder))
    assert "official         23/40       35/40  0.0018310546875" in out
    assert "overall          24/45       40/45  0.00014495849609375" in out


def test_json_output(eval_cli: Runner) -> None:
    code, out, _ = eval_cli("verify", str(published_results()), "--json")
    data = json.loads(out)
    assert (code, data["ok"], data["rows"]) == (0, True, 90)
    assert data["suites"]["official"]["correct"] == {"confidence": 23, "hybrid-v1": 35}
    assert data["suites"]["official"]["bootstrap"]["lower"] == 0.15000000000000002


def test_published_hashes_can_be_required(eval_cli: Runner) -> None:
    pins = [f"--expect-sha256={name}={digest}" for name, digest in PUBLISHED_SHA256.items()]
    assert eval_cli("verify", str(published_results()), *pins)[0] == 0
    wrong = "--expect-sha256=qa.rows.jsonl=" + "0" * 64
    code, out, _ = eval_cli("verify", str(published_results()), wrong)
    assert code == 1
    assert "qa.rows.jsonl: (sha256): expected " + "0" * 64 in out


@pytest.mark.parametrize(
    "pin",
    ["qa.rows.jsonl", "qa.rows.jsonl=abc", "other.json=" + "0" * 64, "../etc/passwd=" + "0" * 64],
)
def test_a_malformed_hash_pin_is_a_usage_error(eval_cli: Runner, pin: str) -> None:
    code, out, err = eval_cli("verify", str(published_results()), "--expect-sha256", pin)
    assert (code, out) == (2, "")
    assert "expected FILE=HEX" in err


def test_an_altered_copy_fails_naming_the_field(eval_cli: Runner, tmp_path: Path) -> None:
    folder = tmp_path / "results"
    shutil.copytree(published_results(), folder)
    edit_text(folder / "qa.stats.json", '"p_value": 0.125', '"p_value": 0.0125')
    code, out, err = eval_cli("verify", str(folder))
    assert (code, err) == (1, "")
    assert out.startswith(f"FAILED {folder}: 1 problem\n")
    assert "  qa.stats.json    failed\n" in out
    assert "qa.stats.json: suites.synthetic.mcnemar.p_value: expected 0.125, got 0.0125" in out
    code, out, _ = eval_cli("verify", str(folder), "--json")
    findings = json.loads(out)["findings"]
    assert code == 1
    assert [(f["file"], f["field"]) for f in findings] == [
        ("qa.stats.json", "suites.synthetic.mcnemar.p_value")
    ]


def test_the_bootstrap_parameters_can_come_from_a_protocol_config(
    eval_cli: Runner, tmp_path: Path
) -> None:
    from deermem.eval.protocol import bundled_protocol_files

    config = tmp_path / "config.yaml"
    config.write_text(bundled_protocol_files().config.read_text())
    assert eval_cli("verify", str(published_results()), "--config", str(config))[0] == 0
    edit_text(config, "bootstrap_seed: 4789", "bootstrap_seed: 4790")
    code, out, _ = eval_cli("verify", str(published_results()), "--config", str(config))
    assert code == 1
    assert "suites.official.bootstrap.seed: expected 4790, got 4789" in out


def test_a_missing_folder_fails(eval_cli: Runner, tmp_path: Path) -> None:
    code, out, _ = eval_cli("verify", str(tmp_path / "nowhere"))
    assert code == 1
    assert "expected a results directory, got no such directory" in out


# --- the results shipped with the package ----------------------------------------------------


def test_without_a_directory_the_shipped_results_are_verified(eval_cli: Runner) -> None:
    folder = published_results()
    assert folder.is_relative_to(Path(published.__file__).parent)  # the package's own copy
    expected = render_verification(verify_results(folder, expected_sha256=PUBLISHED_SHA256))
    for args in ([], ["--published", DEFAULT_PUBLISHED]):
        code, out, err = eval_cli("verify", *args)
        assert (code, out, err) == (0, expected, ""), args
    assert expected.startswith(f"verified {folder}: 90 rows")
    code, out, _ = eval_cli("verify", "--json")
    data = json.loads(out)
    assert (code, data["ok"], data["rows"], data["directory"]) == (0, True, 90, str(folder))


def test_the_shipped_set_pins_the_hashes_it_was_published_with() -> None:
    assert list(PUBLISHED) == [DEFAULT_PUBLISHED] == ["deerflow-pr4810"]
    assert dict(PUBLISHED[DEFAULT_PUBLISHED].sha256) == PUBLISHED_SHA256


def test_the_shipped_hashes_are_checked_not_only_the_figures(
    eval_cli: Runner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A usage count feeds no figure: only the published hash can notice it changed.
    folder = tmp_path / "results"
    shutil.copytree(published_results(), folder)
    rows = folder / "qa.rows.jsonl"
    rows.write_text(rows.read_text().replace('"completion_tokens": ', '"completion_tokens": 1', 1))
    assert eval_cli("verify", str(folder))[0] == 0
    altered = PublishedResults(
        DEFAULT_PUBLISHED, folder, PUBLISHED[DEFAULT_PUBLISHED].sha256, "an altered copy"
    )
    monkeypatch.setattr("deermem.cli.eval.PUBLISHED", {DEFAULT_PUBLISHED: altered})
    code, out, _ = eval_cli("verify")
    assert code == 1
    assert out.startswith(f"FAILED {folder}: 1 problem\n")
    assert "qa.rows.jsonl: (sha256): expected d14dcd1e57bb" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--published", "nope"], "--published 'nope': no such published results (shipped: "),
        (["results", "--published", DEFAULT_PUBLISHED], "a results directory or --published"),
    ],
)
def test_an_unknown_or_doubled_source_is_a_usage_error(
    eval_cli: Runner, args: list[str], message: str
) -> None:
    code, out, err = eval_cli("verify", *args)
    assert (code, out) == (2, "")
    assert message in " ".join(err.replace("│", " ").split())


def test_the_shipped_results_say_where_they_come_from_under_which_licence() -> None:
    folder = published_results()
    assert sorted(path.name for path in folder.iterdir()) == sorted(
        [*PUBLISHED_SHA256, "LICENSE", "PROVENANCE.md"]
    )
    provenance = (folder / "PROVENANCE.md").read_text(encoding="utf-8")
    for needle in ("bytedance/deer-flow", "#4810", "e481a2e73011bc550e826afeccb2aca9b7c798fb"):
        assert needle in provenance
    for name, digest in PUBLISHED_SHA256.items():
        assert f"`{name}`" in provenance
        assert digest in provenance
    licence = (folder / "LICENSE").read_text(encoding="utf-8")
    assert licence.startswith("MIT License\n")
    assert "Copyright (c) 2025-2026 DeerFlow Authors" in licence


def test_no_help_text_names_a_path_outside_the_repository(eval_cli: Runner) -> None:
    for command in ("verify", "report", "run-qa", "grade-qa", "run-policy"):
        code, out, _ = eval_cli(command, "--help")
        assert code == 0
        assert "../" not in out, command
    assert "../" not in (REPOSITORY_ROOT / "README.md").read_text(encoding="utf-8")
