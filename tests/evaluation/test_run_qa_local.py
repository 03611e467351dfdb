"""``run-qa --provider local``: the embedded SmolLM2 model answers, end to end.

Plumbing only, never quality: the model is tiny. To keep this fast on two
cores, the dataset gives every fact the shortest evidence the protocol
accepts, the protocol copy caps answers at 8 tokens, and the run directory
already holds stored answers for all but three tasks (written for the local
model's requests, so the run reuses them). What runs for real: the contract
load, the local model through llama.cpp, fingerprints under the local model's
name, resume, the marker, grade-qa and verify. Needs the ``local`` extra
(``.ci/run`` installs it).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from deermem.eval.answerers import LocalAnswerer
from deermem.eval.dataset import build_cases, load_dataset
from deermem.eval.qa import Answer, write_response
from deermem.eval.verify import verify_results
from tests.evaluation.conftest import Generated, Runner
from tests.evaluation.longmemeval_data import build_rows, write_dataset
from tests.evaluation.qa_support import bundle_copy, load_json, tasks_for

pytestmark = [
    pytest.mark.local_model,
    pytest.mark.skipif(
        importlib.util.find_spec("llama_cpp") is None,
        reason="llama_cpp is not importable: install the extra with `uv sync --extra local`",
    ),
]

CALLED = 3


def test_the_local_model_answers_a_run_that_grades_and_verifies(
    eval_cli: Runner, tmp_path: Path
) -> None:
    dataset = tmp_path / "longmemeval_oracle.json"
    sha256 = write_dataset(dataset, build_rows(tiny_evidence=True))
    bundle = bundle_copy(tmp_path / "bundle", dataset, sha256, max_tokens=8)
    protocol = bundle.protocol()
    cases = build_cases(protocol, load_dataset(dataset, expected_sha256=sha256))
    model = LocalAnswerer(protocol.config.qa).model
    assert model == "SmolLM2-135M-Instruct.Q4_1"
    tasks = tasks_for(bundle, cases, model=model)
    by_size = sorted(tasks, key=lambda task: len(task.messages[1]["content"]))
    left = {task.row_id for task in by_size[:CALLED]}
    output = tmp_path / "run"
    for task in tasks:
        if task.row_id not in left:
            write_response(output, task, Answer("INSUFFICIENT", 1, model, {}))

    args = [*bundle.args(), "--output-dir", str(output)]
    code, out, err = eval_cli("run-qa", *args, "--provider", "local")
    assert (code, out) == (0, f"answer rows: {90 - CALLED} reused, {CALLED} called, 0 failed\n")
    assert f"answering {CALLED} questions with {model}" in err
    for task in tasks:
        if task.row_id in left:
            stored = load_json(output / "responses" / f"{task.row_id}.json")
            assert stored["request_fingerprint"] == task.fingerprint
            assert (stored["response_model"], stored["attempts"]) == (model, 1)
            assert isinstance(stored["prediction"], str)
            assert stored["usage"]["completion_tokens"] <= 8
    marker = load_json(output / "qa_run.json")
    assert marker["qa"]["model"] == model
    assert marker["qa"]["max_tokens"] == 8

    code, out, _ = eval_cli("run-qa", *args, "--provider", "local")
    assert (code, out) == (0, "answer rows: 90 reused, 0 called, 0 failed\n")

    code, out, err = eval_cli("grade-qa", *args)
    assert (code, err) == (0, "")
    assert out.endswith(f"graded 90 rows to {output}\n")
    assert verify_results(output).ok

    # a model file that is not there is refused before the dataset is read
    missing = tmp_path / "missing.gguf"
    code, _, err = eval_cli("run-qa", *args, "--provider", "local", "--model-path", str(missing))
    assert code == 1
    assert f"model file {missing} does not exist" in err


def test_a_model_file_whose_name_is_no_model_name_is_refused_before_the_run(
    eval_cli: Runner, tmp_path: Path, generated: Generated
) -> None:
    """The model is named by its file; a name the marker cannot hold would give a run
    that pays for every answer, then neither resumes nor grades."""
    model = tmp_path / "my model.gguf"
    model.write_bytes(b"GGUF")  # never loaded: refused first
    absent = tmp_path / "no-such-dataset.json"  # reading it would fail differently
    args = [*generated.protocol_args(), "--dataset", str(absent)]
    output = tmp_path / "run"
    code, out, err = eval_cli(
        "run-qa", *args, "--output-dir", str(output), "--provider", "local",
        "--model-path", str(model),
    )  # fmt: skip
    assert (code, out) == (1, "")
    assert err == (
        'error: the local model is named by its file name, "my model", which is not a model '
        "name ([A-Za-z0-9_.:/@+-], starting with a letter or digit): rename the model file\n"
    )
    assert not output.exists()
