"""The README's QA and verification commands run as written (scripted endpoint, generated data)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.evaluation.conftest import Generated, Prepared, Runner
from tests.evaluation.qa_support import (
    API_KEY,
    BASE_URL_ENV,
    KEY_ENV,
    Bundle,
    Oracle,
    serving,
    tasks_for,
)
from tests.published import REPOSITORY_ROOT, published_results

README = REPOSITORY_ROOT / "README.md"


def _blocks() -> list[list[list[str]]]:
    """The Evaluation section's shell blocks, each as lines of words (comments dropped)."""
    section = README.read_text().split("## Evaluation\n", 1)[1].split("\n## ", 1)[0]
    return [
        [line.split("#", 1)[0].split() for line in block.strip().splitlines()]
        for block in re.findall(r"```sh\n(.*?)```", section, re.DOTALL)
    ]


def test_the_qa_commands_run_as_written(
    eval_cli: Runner,
    generated: Generated,
    prepared: Prepared,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    block = next(lines for lines in _blocks() if any("run-qa" in line for line in lines))
    exports = [words for words in block if words[0] == "export"]
    assert [words[1].split("=", 1)[0] for words in exports] == [BASE_URL_ENV, KEY_ENV]
    commands = [words for words in block if words[0] != "export"]
    bundle = Bundle(generated.files, generated.dataset)
    monkeypatch.setenv("LONGMEMEVAL_ORACLE_PATH", str(generated.dataset))
    monkeypatch.chdir(tmp_path)
    outputs = []
    with serving(Oracle(prepared.cases, tasks_for(bundle, prepared.cases))) as server:
        monkeypatch.setenv(BASE_URL_ENV, server.url)
        monkeypatch.setenv(KEY_ENV, API_KEY)
        for words in commands:
            assert words[:4] == ["uv", "run", "deermem", "eval"]
            command, *rest = words[4:]
            protocol = generated.protocol_args() if command != "report" else []
            code, out, err = eval_cli(command, *protocol, *rest)
            assert code == 0, err
            outputs.append(out)
    assert [command[4] for command in commands] == ["run-qa", "grade-qa", "report"]
    assert outputs[0] == "answer rows: 0 reused, 90 called, 0 failed\n"
    assert outputs[1].endswith("graded 90 rows to runs/qa\n")
    assert (tmp_path / "runs" / "qa" / "report.md").is_file()
    assert (tmp_path / "runs" / "qa" / "qa-accuracy.png").is_file()


def test_the_verify_command_runs_as_written(
    eval_cli: Runner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    block = next(lines for lines in _blocks() if any("verify" in line for line in lines))
    assert len(block) == 1
    words = block[0]
    assert words == ["uv", "run", "deermem", "eval", "verify"]
    monkeypatch.chdir(tmp_path)  # the shipped results are found from anywhere
    code, out, _ = eval_cli(*words[4:])
    assert code == 0
    assert out.startswith(f"verified {published_results()}: 90 rows")
