"""``deermem eval`` as a user runs it: output, exit status, files, how the program ends."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from deermem.cli import main
from deermem.cli.eval import print_retention
from deermem.eval import files as provenance
from deermem.eval.policy_run import format_plain, policy_summary, retention_table
from tests.evaluation.conftest import Generated, Prepared, Runner
from tests.evaluation.longmemeval_data import (
    BANK_IDS,
    PINNED_SHA256,
    build_rows,
    copy_protocol,
    protocol_flags,
    write_dataset,
)
from tests.evaluation.original_protocol import write_original_bundle

PLAIN_TABLE = """\
                                    cap 5           cap 7           cap 9
scenario               n   conf  hybrid    conf  hybrid    conf  hybrid
confirmation_help     10   0/10   10/10    3/10   10/10    6/10   10/10
access_help           10   0/10    0/10    3/10   10/10    6/10   10/10
confidence_control    10  10/10   10/10   10/10   10/10   10/10   10/10
noisy_signal_control  10  10/10   10/10   10/10   10/10   10/10   10/10
official total        40  20/40   30/40   26/40   40/40   32/40   40/40
correction_reserve     5    0/5     5/5     1/5     5/5     3/5     5/5
overall               45  20/45   35/45   27/45   45/45   35/45   45/45
conf = confidence, hybrid = hybrid-v1
"""


def test_validate_contracts_needs_no_dataset(eval_cli: Runner) -> None:
    assert eval_cli("validate-contracts") == (
        0,
        "validated 40 official and 5 synthetic cases\n",
        "",
    )
    code, out, _ = eval_cli("validate-contracts", "--json")
    data = json.loads(out)
    assert (code, data["official_cases"], data["synthetic_cases"]) == (0, 40, 5)
    assert set(data["artifacts"]) == {
        "answer_prompt_sha256",
        "config_sha256",
        "official_manifest_sha256",
        "synthetic_manifest_sha256",
    }


def test_validate_checks_the_dataset_and_prepares_the_cases(
    eval_cli: Runner, generated: Generated, monkeypatch: pytest.MonkeyPatch
) -> None:
    args = ("validate", *generated.protocol_args())
    expected = f"validated dataset {generated.sha256} and prepared 45 cases\n"
    assert eval_cli(*args, "--dataset", str(generated.dataset)) == (0, expected, "")
    monkeypatch.setenv("LONGMEMEVAL_ORACLE_PATH", str(generated.dataset))
    assert eval_cli(*args) == (0, expected, "")
    _code, out, _ = eval_cli(*args, "--json")
    assert json.loads(out)["cases"] == 45


def test_a_command_without_a_dataset_is_a_usage_error(eval_cli: Runner) -> None:
    code, _out, err = eval_cli("validate")
    assert code == 2
    assert "--dataset is required (or set LONGMEMEVAL_ORACLE_PATH)" in err


def test_the_real_file_is_required_by_default(
    eval_cli: Runner, generated: Generated, tmp_path: Path
) -> None:
    output = tmp_path / "out"
    code, out, err = eval_cli(
        "run-policy", "--dataset", str(generated.dataset), "--output-dir", str(output)
    )
    assert (code, out) == (1, "")
    assert err.count("\n") == 1
    assert err.startswith("error: ")
    assert f"the protocol pins {PINNED_SHA256}, this file has {generated.sha256}" in err
    assert not output.exists()


def test_run_policy_writes_the_results_and_prints_the_table(
    eval_cli: Runner, generated: Generated, tmp_path: Path
) -> None:
    output = tmp_path / "runs" / "policy"
    code, out, err = eval_cli(
        "run-policy",
        *generated.protocol_args(),
        "--dataset",
        str(generated.dataset),
        "--output-dir",
        str(output),
    )
    assert (code, err) == (0, "")
    first_line, title, table = out.split("\n", 2)
    assert first_line == f"wrote 270 policy rows for 45 cases to {output}"
    assert (
        title
        == "Support fact retained (cases kept / cases), protocol deermem-pr4789-reproduction-v1"
    )
    assert table == PLAIN_TABLE
    assert len((output / "policy.raw.jsonl").read_text().splitlines()) == 270
    run = json.loads((output / "run.json").read_text())
    assert run["dataset"]["sha256"] == generated.sha256

    before = {path.name: path.read_bytes() for path in output.iterdir()}
    code, out, err = eval_cli(
        "run-policy",
        *generated.protocol_args(),
        "--dataset",
        str(generated.dataset),
        "--output-dir",
        str(output),
    )
    assert code == 1
    assert "refusing to overwrite existing result files" in err
    assert {path.name: path.read_bytes() for path in output.iterdir()} == before


def test_a_killed_run_policy_is_named_by_report_and_replaced_by_the_re_run(
    eval_cli: Runner, generated: Generated, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    output = tmp_path / "policy"
    args = [*generated.protocol_args(), "--dataset", str(generated.dataset)]
    assert eval_cli("run-policy", *args, "--output-dir", str(output))[0] == 0
    complete = {path.name: path.read_bytes() for path in output.iterdir()}
    # What SIGKILL (or a power cut) leaves while the set is published: the files linked
    # so far, and the temporary file of the next one; run.json, linked last, is missing.
    (output / "run.json").unlink()
    stray = output / ".run.json.0123456789abcdef.tmp"
    stray.write_text("{")
    code, out, err = eval_cli("report", str(output))
    assert (code, out) == (1, "")
    assert err == (
        f"error: {output}: holds what an interrupted run-policy left (policy.raw.jsonl, "
        "summary.json, without run.json, which it writes last); run run-policy again to "
        "replace it\n"
    )
    code, _, err = eval_cli("run-policy", *args, "--output-dir", str(output))
    assert code == 0, err
    assert "replacing what an interrupted write left" in caplog.text
    replaced = [output / "policy.raw.jsonl", output / "summary.json", stray]
    assert ", ".join(map(str, replaced)) in caplog.text
    again = {path.name: path.read_bytes() for path in output.iterdir()}
    assert sorted(again) == sorted(complete)
    assert again["policy.raw.jsonl"] == complete["policy.raw.jsonl"]
    assert again["summary.json"] == complete["summary.json"]
    # Complete again: refused, as any complete set is.
    code, _, err = eval_cli("run-policy", *args, "--output-dir", str(output))
    assert code == 1
    assert "refusing to overwrite existing result files" in err


def test_the_original_bundle_validates_and_gives_the_same_rows(
    eval_cli: Runner, generated: Generated, tmp_path: Path
) -> None:
    files = write_original_bundle(tmp_path / "original")
    args = [
        "--config",
        str(files.config),
        "--official-manifest",
        str(files.official_manifest),
        "--synthetic-manifest",
        str(files.synthetic_manifest),
    ]
    assert eval_cli("validate-contracts", *args)[:2] == (
        0,
        "validated 40 official and 5 synthetic cases\n",
    )
    # unchanged, it pins the real file, so a generated one is refused
    code, _, err = eval_cli("validate", *args, "--dataset", str(generated.dataset))
    assert code == 1
    assert PINNED_SHA256 in err

    # re-pinned to the generated file, it yields the very rows deermem's own bundle yields
    repinned = copy_protocol(
        tmp_path / "repinned", generated.sha256, source=files, root=tmp_path / "original"
    )
    theirs, ours = tmp_path / "theirs", tmp_path / "ours"
    repinned_args = [
        "--config",
        str(repinned.config),
        "--official-manifest",
        str(repinned.official_manifest),
        "--synthetic-manifest",
        str(repinned.synthetic_manifest),
    ]
    dataset = ["--dataset", str(generated.dataset)]
    assert eval_cli("run-policy", *repinned_args, *dataset, "--output-dir", str(theirs))[0] == 0
    assert (
        eval_cli("run-policy", *generated.protocol_args(), *dataset, "--output-dir", str(ours))[0]
        == 0
    )
    assert (theirs / "policy.raw.jsonl").read_bytes() == (ours / "policy.raw.jsonl").read_bytes()
    summary = json.loads((theirs / "summary.json").read_text())
    assert summary["protocol_id"] == "deermem-hybrid-v1-pr4789-reproduction-v1"
    assert summary["groups"] == json.loads((ours / "summary.json").read_text())["groups"]


def test_protocol_errors_are_one_line(eval_cli: Runner, tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("schema_version: 1\n")
    code, out, err = eval_cli("validate-contracts", "--config", str(config))
    assert (code, out) == (1, "")
    assert err.startswith(f"error: {config}: missing key(s) 'protocol_id'")
    assert err.count("\n") == 1


def test_a_file_system_refusal_is_one_line_naming_the_path(
    eval_cli: Runner, generated: Generated, tmp_path: Path
) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where the output directory must go")
    code, out, err = eval_cli(
        "run-policy",
        *generated.protocol_args(),
        "--dataset",
        str(generated.dataset),
        "--output-dir",
        str(blocker / "out"),
    )
    assert (code, out) == (1, "")
    assert err == f"error: {blocker / 'out'}: Not a directory\n"


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (("--help",), 0),
        (("run-policy", "--help"), 0),
        ((), 2),
        (("nonsense",), 2),
        (("run-policy",), 2),
    ],
)
def test_help_and_usage_errors(eval_cli: Runner, args: tuple[str, ...], code: int) -> None:
    status, out, _err = eval_cli(*args)
    assert status == code
    if code == 0:
        assert "Example:" in out


def test_deermem_help_lists_eval(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert "eval" in capsys.readouterr().out


def test_the_typer_application_forwards_eval() -> None:
    from typer.testing import CliRunner

    from deermem.cli import app

    result = CliRunner().invoke(app, ["eval", "validate-contracts"])
    assert (result.exit_code, result.output) == (0, "validated 40 official and 5 synthetic cases\n")


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_gets_a_rich_table(prepared: Prepared) -> None:
    table = retention_table(policy_summary(prepared.protocol.protocol_id, prepared.outcomes))
    terminal, pipe = _Terminal(), io.StringIO()
    print_retention(table, terminal)
    print_retention(table, pipe)
    assert pipe.getvalue() == format_plain(table)
    text = terminal.getvalue()
    assert "Support fact retained" in text
    assert "27/45" in text
    assert "45/45" in text
    assert "conf = confidence" in text


# --- provenance -----------------------------------------------------------------------------


def test_run_json_records_null_git_outside_a_checkout(
    eval_cli: Runner, generated: Generated, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(provenance, "PACKAGE_DIRECTORY", tmp_path)  # as if installed from a wheel
    output = tmp_path / "out"
    code, _, _ = eval_cli(
        "run-policy",
        *generated.protocol_args(),
        "--dataset",
        str(generated.dataset),
        "--output-dir",
        str(output),
    )
    assert code == 0
    assert json.loads((output / "run.json").read_text())["git"] is None


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_git_state_reads_head_and_dirtiness(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "test",
        "GIT_AUTHOR_EMAIL": "test@example.invalid",
        "GIT_COMMITTER_NAME": "test",
        "GIT_COMMITTER_EMAIL": "test@example.invalid",
    }
    package = tmp_path / "repo" / "pkg"
    package.mkdir(parents=True)
    (package / "module.py").write_text("")
    for command in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "initial"]):
        subprocess.run(["git", "-C", str(tmp_path / "repo"), *command], check=True, env=env)
    head = subprocess.run(
        ["git", "-C", str(package), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert provenance.git_state(package) == {"head": head, "dirty": False}
    (package / "new.py").write_text("")
    assert provenance.git_state(package) == {"head": head, "dirty": True}
    untracked = tmp_path / "repo" / "venv"
    untracked.mkdir()
    assert provenance.git_state(untracked) is None  # inside a repository that does not track it
    assert provenance.git_state(tmp_path) is None  # not a checkout at all
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert provenance.git_state(package) is None  # no git installed


def test_a_git_that_does_not_answer_is_given_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hanging = tmp_path / "bin" / "git"
    hanging.parent.mkdir()
    hanging.write_text("#!/bin/sh\nexec sleep 30\n")
    hanging.chmod(0o755)
    monkeypatch.setenv("PATH", str(hanging.parent))
    monkeypatch.setattr(provenance, "_GIT_TIMEOUT_SECONDS", 0.2)
    assert provenance.git_state(tmp_path) is None  # killed after the timeout, not waited for


# --- the report -----------------------------------------------------------------------------


def test_report_renders_markdown_and_png_deterministically(
    eval_cli: Runner, generated: Generated, tmp_path: Path
) -> None:
    run_dir = tmp_path / "run"
    assert (
        eval_cli(
            "run-policy",
            *generated.protocol_args(),
            "--dataset",
            str(generated.dataset),
            "--output-dir",
            str(run_dir),
        )[0]
        == 0
    )
    code, out, err = eval_cli("report", str(run_dir))
    assert (code, err) == (0, "")
    assert out == f"wrote {run_dir / 'report.md'} and {run_dir / 'retention.png'}\n"
    markdown = (run_dir / "report.md").read_text()
    assert (
        "| **overall** | **all** | **45** | **20/45** | **35/45** | **27/45** | **45/45** |"
        in markdown
    )
    assert "- cap 7: confidence 27/45, hybrid-v1 45/45" in markdown
    assert "![Support facts retained by cap and policy](retention.png)" in markdown
    png = (run_dir / "retention.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    assert b"Software" not in png
    assert b"matplotlib" not in png.lower()

    again = tmp_path / "again"
    assert eval_cli("report", str(run_dir), "--output-dir", str(again))[0] == 0
    assert (again / "report.md").read_bytes() == markdown.encode()
    assert (again / "retention.png").read_bytes() == png

    code, _, err = eval_cli("report", str(run_dir))
    assert code == 1
    assert "refusing to overwrite" in err


# Run in a fresh interpreter in which matplotlib cannot be imported, as if the
# `eval` extra were not installed: a finder ahead of all others refuses it.
_WITHOUT_MATPLOTLIB = """\
import sys

class NoMatplotlib:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NoMatplotlib)
from deermem.cli import run

run()
"""


def test_report_without_matplotlib_writes_the_markdown_and_says_how_to_get_charts(
    eval_cli: Runner, generated: Generated, tmp_path: Path
) -> None:
    run_dir = tmp_path / "run"
    common = [*generated.protocol_args(), "--dataset", str(generated.dataset)]
    assert eval_cli("run-policy", *common, "--output-dir", str(run_dir))[0] == 0
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT_MATPLOTLIB, "eval", "report", str(run_dir)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"wrote {run_dir / 'report.md'}\n"
    [note] = done.stderr.splitlines()  # one line: what is missing and how to install it
    assert "matplotlib" in note
    assert "uv sync --extra eval" in note
    assert sorted(path.name for path in run_dir.iterdir()) == [
        "policy.raw.jsonl",
        "report.md",
        "run.json",
        "summary.json",
    ]
    markdown = (run_dir / "report.md").read_text()
    assert "- cap 7: confidence 27/45, hybrid-v1 45/45" in markdown
    assert "retention.png" not in markdown
    assert "no chart; drawing it needs matplotlib (`uv sync --extra eval`)" in markdown

    # with matplotlib, the same table and the chart
    with_charts = tmp_path / "with-charts"
    assert eval_cli("report", str(run_dir), "--output-dir", str(with_charts))[0] == 0
    charted = (with_charts / "report.md").read_text()
    assert (
        charted.replace(
            "![Support facts retained by cap and policy](retention.png)",
            "*Support facts retained by cap and policy: no chart; drawing it needs matplotlib "
            "(`uv sync --extra eval`).*",
        )
        == markdown
    )
    assert (with_charts / "retention.png").is_file()


def test_report_of_a_directory_without_a_run(eval_cli: Runner, tmp_path: Path) -> None:
    code, _, err = eval_cli("report", str(tmp_path))
    assert code == 1
    assert "holds neither a policy run (summary.json, run.json) nor graded QA results" in err
    (tmp_path / "run.json").write_text("{}")
    code, _, err = eval_cli("report", str(tmp_path))
    assert code == 1
    assert "summary.json: not found" in err
    (tmp_path / "summary.json").write_text('{"schema_version": 1, "groups": []}')
    (tmp_path / "run.json").write_text("{}")
    code, _, err = eval_cli("report", str(tmp_path))
    assert code == 1
    assert "not a policy-run summary" in err


def test_the_readme_commands_reproduce_the_table(
    eval_cli: Runner, generated: Generated, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    section = readme.split("## Evaluation", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    lines = [line.split("#", 1)[0].split() for line in section.strip().splitlines()]
    assert lines[0] == ["export", "LONGMEMEVAL_ORACLE_PATH=longmemeval_oracle.json"]
    monkeypatch.setenv("LONGMEMEVAL_ORACLE_PATH", str(generated.dataset))
    monkeypatch.chdir(tmp_path)
    outputs = []
    for words in lines[1:]:
        assert words[:4] == ["uv", "run", "deermem", "eval"]
        command, *rest = words[4:]
        protocol = generated.protocol_args() if command != "report" else []
        code, out, err = eval_cli(command, *protocol, *rest)
        assert (code, err) == (0, "")
        outputs.append(out)
    assert "overall               45  20/45   35/45   27/45   45/45   35/45   45/45" in outputs[1]
    assert (tmp_path / "runs" / "policy" / "report.md").is_file()


def _program(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run the console script's entry point on ARGS; an exit handler reports a teardown."""
    script = (
        "import atexit, sys\n"
        "atexit.register(lambda: print('TEARDOWN', file=sys.stderr))\n"
        "from deermem.cli import run\n"
        "run()\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DEERMEM_", "LONGMEMEVAL_"))}
    return subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, cwd=cwd, env=env
    )


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (("eval", "validate-contracts", "--json"), 0),  # a batch command
        (("eval", "validate-contracts", "--config", "missing.yaml"), 1),  # a refusal
        (("eval", "validate", "--no-such-flag"), 2),  # a usage error
        (("--help",), 0),
        (("eval",), 2),
    ],
)
def test_every_command_exits_the_ordinary_way(
    tmp_path: Path, args: tuple[str, ...], code: int
) -> None:
    done = _program(*args, cwd=tmp_path)
    assert done.returncode == code
    assert done.stderr.endswith("TEARDOWN\n")  # exit handlers ran, after all output
    assert "Traceback" not in done.stderr
    if args[-1] == "--json":
        assert json.loads(done.stdout)["official_cases"] == 40


def test_the_program_runs_under_the_profiler(tmp_path: Path) -> None:
    profiled = ["-m", "deermem", "eval", "validate-contracts"]
    done = subprocess.run(
        [sys.executable, "-m", "cProfile", "-s", "cumulative", *profiled],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 0
    first, _, profile = done.stdout.partition("\n")
    assert first == "validated 40 official and 5 synthetic cases"
    assert "function calls" in profile  # the profile is printed: the process ended normally
    assert "load_protocol" in profile


def test_python_m_deermem_runs_the_program(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "deermem", "eval", "validate-contracts"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    assert (done.returncode, done.stdout) == (0, "validated 40 official and 5 synthetic cases\n")


# --- identifiers that cannot make fact ids ------------------------------------------------------


@pytest.mark.parametrize(
    "source_id", ["001be528/x", "001be528 x", "001be528\nx", "001" + "b" * 130]
)
def test_a_bank_record_whose_id_cannot_make_fact_ids_is_refused_before_any_run(
    eval_cli: Runner, tmp_path: Path, source_id: str
) -> None:
    """Its id would go into fact ids that no stored answer or graded row may hold: run-qa
    would pay for answers that grade-qa then refuses, blaming the answers."""
    rows = build_rows()
    (bank_row,) = (row for row in rows if row["question_id"] == BANK_IDS[0])
    rows.append({**bank_row, "question_id": source_id})  # sorts first: in the bank
    dataset = tmp_path / "longmemeval_oracle.json"
    files = copy_protocol(tmp_path / "bundle", write_dataset(dataset, rows))
    for command in ("validate", "run-policy"):
        code, out, err = eval_cli(
            command, *protocol_flags(files), "--dataset", str(dataset),
            *(["--output-dir", str(tmp_path / "out")] if command == "run-policy" else []),
        )  # fmt: skip
        assert (code, out) == (1, "")
        assert err.startswith(f"error: {dataset}: question_id {json.dumps(source_id)[:77]}")
        assert "of a distractor-bank record is not a plain identifier" in err
        assert err.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_a_case_id_too_long_for_its_fact_ids_names_the_manifest(
    eval_cli: Runner, generated: Generated, tmp_path: Path
) -> None:
    files = copy_protocol(tmp_path / "bundle", generated.sha256)
    manifest = json.loads(files.synthetic_manifest.read_text())
    long_id = "correction_" + "x" * 110  # a plain identifier; d_<id>_0_<source> is not
    manifest["cases"][1]["case_id"] = long_id
    files.synthetic_manifest.write_text(json.dumps(manifest, indent=2) + "\n")
    assert eval_cli("validate-contracts", *protocol_flags(files))[0] == 0
    code, out, err = eval_cli(
        "validate", *protocol_flags(files), "--dataset", str(generated.dataset)
    )
    assert (code, out) == (1, "")
    assert err == (
        f"error: {files.synthetic_manifest}: cases: case id {long_id!r} is too long: its pool "
        "would have a fact id of 134 characters ([A-Za-z0-9_.-], at most 128 characters); "
        "shorten the case id\n"
    )
