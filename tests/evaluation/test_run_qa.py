"""``deermem eval run-qa`` over real HTTP against a scripted server on 127.0.0.1."""

from __future__ import annotations

import hashlib
import io
import json
import re
import shutil
import sys
from pathlib import Path

import pytest

from deermem.cli import eval as cli_qa
from deermem.cli.eval import AnswerProgress
from deermem.cli.output import err_console
from deermem.eval import files as provenance
from deermem.eval.qa import (
    ARTIFACT_FILES,
    RESPONSE_KEYS,
    AnswerOutcome,
    request_fingerprint,
    response_path,
)
from deermem.testing import Reply
from tests.evaluation.conftest import Answered, Generated, Prepared, Runner
from tests.evaluation.longmemeval_data import protocol_flags
from tests.evaluation.qa_support import (
    API_KEY,
    BASE_URL_ENV,
    KEY_ENV,
    Bundle,
    Oracle,
    bundle_copy,
    distinct,
    edit_text,
    load_json,
    serving,
    tasks_for,
    write_json,
)


@pytest.fixture
def bundle(generated: Generated, tmp_path: Path) -> Bundle:
    """An editable protocol copy; its config sets one timeout second for the timeout test."""
    return bundle_copy(tmp_path / "bundle", generated.dataset, generated.sha256, timeout_seconds=1)


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The pauses run-qa asked for between attempts (none is actually waited)."""
    recorded: list[float] = []
    monkeypatch.setattr(cli_qa, "retry_sleep", recorded.append)
    return recorded


def _point_at(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    monkeypatch.setenv(BASE_URL_ENV, url)
    monkeypatch.setenv(KEY_ENV, f"  {API_KEY}\n")  # values are stripped


def test_a_run_sends_every_task_once_and_stores_it_with_its_fingerprint(
    eval_cli: Runner,
    bundle: Bundle,
    prepared: Prepared,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    sleeps: list[float],
) -> None:
    tasks = tasks_for(bundle, prepared.cases)
    oracle = Oracle(prepared.cases, tasks)
    output = tmp_path / "run"
    with serving(oracle) as server:
        _point_at(monkeypatch, server.url)
        code, out, err = eval_cli("run-qa", *bundle.args(), "--output-dir", str(output))
        requests = server.requests
    assert (code, out) == (0, "answer rows: 0 reused, 90 called, 0 failed\n")
    assert err.startswith(
        "answering 90 questions with deepseek-v4-flash (0 stored answers reused)\n"
    )
    assert err.count(" answered\n") == 90
    assert sleeps == []
    # Every task was sent exactly once, exactly as fingerprinted, to the right place.
    assert len(requests) == 90
    assert {request_fingerprint(r.json()) for r in requests} == {t.fingerprint for t in tasks}
    for request in requests:
        assert (request.method, request.path) == ("POST", "/v1/chat/completions")
        assert request.headers["authorization"] == f"Bearer {API_KEY}"
        body = request.json()
        assert set(body) == {"model", "temperature", "max_tokens", "stream", "messages"}
        assert (body["model"], body["temperature"], body["max_tokens"], body["stream"]) == (
            "deepseek-v4-flash",
            0.0,
            2048,
            False,
        )
    for task in tasks:
        stored = load_json(response_path(output, task.row_id))
        assert tuple(sorted(stored)) == RESPONSE_KEYS
        assert stored["request_fingerprint"] == task.fingerprint
        assert stored["kept_fact_ids"] == list(task.kept_fact_ids)
        assert (stored["row_id"], stored["policy"], stored["capacity"]) == (
            task.row_id,
            task.policy,
            7,
        )
        assert (stored["attempts"], stored["response_model"]) == (1, "oracle-model")
        assert stored["prediction"] == oracle.answer(task.messages[1]["content"])
        assert set(stored["usage"]) == {"prompt_tokens", "completion_tokens", "total_tokens"}


def test_stored_files_hold_no_question_memory_or_key(
    answered: Answered, prepared: Prepared
) -> None:
    texts = [path.read_text() for path in sorted(answered.directory.rglob("*.json"))]
    assert len(texts) == 91  # 90 answers and the marker
    everything = "\n".join(texts)
    assert API_KEY not in everything
    assert "Bearer" not in everything
    assert "STORED MEMORY" not in everything
    for case in prepared.cases:
        assert case.question not in everything
        for fact in case.facts:
            assert str(fact["content"]) not in everything


def test_the_marker_records_five_hashes_settings_and_variable_names(
    answered: Answered, generated: Generated, prepared: Prepared
) -> None:
    marker = load_json(answered.directory / "qa_run.json")
    protocol = prepared.protocol
    assert marker["schema_version"] == 2
    assert marker["protocol_id"] == protocol.protocol_id
    assert marker["artifacts"] == {
        "config_sha256": _sha256(generated.files.config),
        "official_manifest_sha256": _sha256(generated.files.official_manifest),
        "synthetic_manifest_sha256": _sha256(generated.files.synthetic_manifest),
        "answer_prompt_sha256": _sha256(protocol.answer_prompt_path),
        "dataset_sha256": generated.sha256,
    }
    assert set(ARTIFACT_FILES) == set(marker["artifacts"])
    assert marker["dataset"] == {
        "repository": "xiaowu0162/longmemeval-cleaned",
        "revision": "98d7416c24c778c2fee6e6f3006e7a073259d48f",
        "filename": "longmemeval_oracle.json",
        "sha256": generated.sha256,
    }
    assert marker["qa"] == {
        "api_key_env": KEY_ENV,
        "base_url_env": BASE_URL_ENV,
        "capacity": 7,
        "grader_version": "deterministic-overlap-v1",
        "max_attempts": 3,
        "max_tokens": 2048,
        "model": "deepseek-v4-flash",
        "stream": False,
        "temperature": 0.0,
        "timeout_seconds": 120,
        "workers": 3,
    }
    assert isinstance(marker["git"], dict | None)
    text = (answered.directory / "qa_run.json").read_text()
    assert '"temperature": 0.0' in text
    assert text.endswith("}\n")


def test_git_is_null_outside_a_checkout(
    eval_cli: Runner,
    bundle: Bundle,
    prepared: Prepared,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(provenance, "PACKAGE_DIRECTORY", tmp_path)  # as if installed from a wheel
    output = tmp_path / "run"
    with serving(Oracle(prepared.cases, tasks_for(bundle, prepared.cases))) as server:
        _point_at(monkeypatch, server.url)
        assert eval_cli("run-qa", *bundle.args(), "--output-dir", str(output))[0] == 0
    assert load_json(output / "qa_run.json")["git"] is None


def test_a_run_made_outside_a_checkout_resumes_and_grades(
    eval_cli: Runner,
    bundle: Bundle,
    prepared: Prepared,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A marker whose git is null (deermem installed from a wheel) is the run's own marker."""
    monkeypatch.setattr(provenance, "PACKAGE_DIRECTORY", tmp_path)
    output = tmp_path / "run"
    with serving(Oracle(prepared.cases, tasks_for(bundle, prepared.cases))) as server:
        _point_at(monkeypatch, server.url)
        assert eval_cli("run-qa", *bundle.args(), "--output-dir", str(output))[0] == 0
        code, out, err = eval_cli("run-qa", *bundle.args(), "--output-dir", str(output))
    assert (code, out) == (0, "answer rows: 90 reused, 0 called, 0 failed\n"), err
    code, _, err = eval_cli("grade-qa", *bundle.args(), "--output-dir", str(output))
    assert code == 0, err


def test_an_answer_holding_half_an_emoji_is_stored_escaped_graded_and_reported(
    eval_cli: Runner,
    bundle: Bundle,
    prepared: Prepared,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    sleeps: list[float],
) -> None:
    # Valid JSON, but no UTF-8: a server cut an emoji in half at its token limit.
    cut = "I think \ud83d"
    tasks = tasks_for(bundle, prepared.cases)
    oracle = Oracle(prepared.cases, tasks)
    row_id = distinct(tasks)[0].row_id
    completion = {
        "object": "chat.completion",
        "model": "oracle-model",
        "choices": [{"message": {"role": "assistant", "content": cut}, "finish_reason": "length"}],
    }
    oracle.script(row_id, Reply.raw(json.dumps(completion)))  # ASCII: "\\ud83d" escaped
    output = tmp_path / "run"
    with serving(oracle) as server:
        _point_at(monkeypatch, server.url)
        code, out, err = eval_cli("run-qa", *bundle.args(), "--output-dir", str(output))
    assert (code, out) == (0, "answer rows: 0 reused, 90 called, 0 failed\n"), err
    assert sleeps == []
    stored = response_path(output, row_id).read_bytes()
    assert b'"I think \\ud83d"' in stored
    assert load_json(response_path(output, row_id))["prediction"] == cut
    code, _, err = eval_cli("grade-qa", *bundle.args(), "--output-dir", str(output))
    assert code == 0, err
    assert b'"I think \\ud83d"' in (output / "qa.rows.jsonl").read_bytes()
    code, _, err = eval_cli("report", str(output))
    assert code == 0, err
    assert (output / "report.md").exists()


@pytest.mark.parametrize("replaced", ["response", "marker"])
def test_a_stored_file_replaced_by_a_device_is_refused_unread(
    eval_cli: Runner,
    bundle: Bundle,
    prepared: Prepared,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    replaced: str,
) -> None:
    output = tmp_path / "run"
    with serving(Oracle(prepared.cases, tasks_for(bundle, prepared.cases))) as server:
        _point_at(monkeypatch, server.url)
        assert eval_cli("run-qa", *bundle.args(), "--output-dir", str(output))[0] == 0
    task = tasks_for(bundle, prepared.cases)[0]
    path = response_path(output, task.row_id) if replaced == "response" else output / "qa_run.json"
    path.unlink()
    path.symlink_to("/dev/null")  # /dev/zero would never end; both are refused by their mode
    code, out, err = eval_cli("grade-qa", *bundle.args(), "--output-dir", str(output))
    assert (code, out) == (1, "")
    assert str(path if replaced == "marker" else task.row_id) in err
    assert "not a regular file" in err  # in the list of refused answers, or the marker's line
    assert not (output / "qa.rows.jsonl").exists()


# --- the provider's environment ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("environment", "named"),
    [
        ({}, f"{BASE_URL_ENV}, {KEY_ENV}"),  # both, the base URL first
        ({BASE_URL_ENV: "   ", KEY_ENV: "\t"}, f"{BASE_URL_ENV}, {KEY_ENV}"),  # blank = missing
        ({BASE_URL_ENV: "http://127.0.0.1:9/v1"}, KEY_ENV),  # only what is missing
        ({KEY_ENV: API_KEY}, BASE_URL_ENV),
    ],
)
def test_missing_variables_are_named_before_the_dataset_is_touched(
    eval_cli: Runner,
    generated: Generated,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    environment: dict[str, str],
    named: str,
) -> None:
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    absent = tmp_path / "no-such-dataset.json"  # reading it would fail differently
    args = [*generated.protocol_args(), "--dataset", str(absent)]
    code, out, err = eval_cli("run-qa", *args, "--output-dir", str(tmp_path / "run"))
    assert (code, out) == (1, "")
    assert err.startswith(f"error: missing provider environment variables: {named} (")
    assert "--provider local" in err
    assert not (tmp_path / "run").exists()


def test_a_base_url_that_is_no_http_url_is_refused_up_front(
    eval_cli: Runner, generated: Generated, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(BASE_URL_ENV, "api.deepseek.com")
    monkeypatch.setenv(KEY_ENV, API_KEY)
    args = [*generated.protocol_args(), "--dataset", str(generated.dataset)]
    code, _, err = eval_cli("run-qa", *args, "--output-dir", str(tmp_path / "run"))
    assert code == 1
    assert f"error: {BASE_URL_ENV} is not an http:// or https:// URL" in err
    assert API_KEY not in err


@pytest.mark.parametrize(
    "base_url",
    ["http://127.0.0.1:notaport/v1", "http://[::1/v1", "http://user:pa/ss@127.0.0.1/v1"],
)
def test_a_base_url_no_client_can_use_is_named_by_its_variable_before_the_dataset(
    eval_cli: Runner,
    generated: Generated,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    base_url: str,
) -> None:
    monkeypatch.setenv(BASE_URL_ENV, base_url)
    monkeypatch.setenv(KEY_ENV, API_KEY)
    absent = tmp_path / "no-such-dataset.json"  # reading it would fail differently
    args = [*generated.protocol_args(), "--dataset", str(absent)]
    code, out, err = eval_cli("run-qa", *args, "--output-dir", str(tmp_path / "run"))
    assert (code, out) == (1, "")
    assert err.startswith(
        f"error: {BASE_URL_ENV} is not an http:// or https:// URL that can be parsed "
        "(a host, then optionally ':' and a port number)"
    )
    assert len(err.splitlines()) == 1
    assert "model.base_url" not in err
    assert "ss@" not in err  # a password's part is never quoted
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("key", [f"{API_KEY}\nsk-old-0000", f"{API_KEY}\x0bx", f"{API_KEY}\u2026"])
def test_a_key_no_header_can_carry_is_named_before_the_dataset_is_touched(
    eval_cli: Runner,
    generated: Generated,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    key: str,
) -> None:
    monkeypatch.setenv(BASE_URL_ENV, "http://127.0.0.1:9/v1")
    monkeypatch.setenv(KEY_ENV, key)
    absent = tmp_path / "no-such-dataset.json"  # reading it would fail differently
    args = [*generated.protocol_args(), "--dataset", str(absent)]
    code, out, err = eval_cli("run-qa", *args, "--output-dir", str(tmp_path / "run"))
    assert (code, out) == (1, "")
    assert err.startswith(f"error: {KEY_ENV} holds ")
    assert "an API key is printable ASCII" in err
    assert len(err.splitlines()) == 1
    assert API_KEY not in err
    assert not (tmp_path / "run").exists()


def test_model_path_is_for_the_local_provider_only(eval_cli: Runner, tmp_path: Path) -> None:
    code, _, err = eval_cli(
        "run-qa", "--dataset", "x", "--output-dir", str(tmp_path), "--model-path", "m.gguf"
    )
    assert code == 2
    assert "--model-path applies to --provider local only" in err


# --- retries and failures ----------------------------------------------------------------------


def test_retries_follow_the_protocol_and_failures_write_nothing(
    eval_cli: Runner,
    bundle: Bundle,
    prepared: Prepared,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    sleeps: list[float],
) -> None:
    tasks = tasks_for(bundle, prepared.cases)
    oracle = Oracle(prepared.cases, tasks)
    rows = [task.row_id for task in distinct(tasks)]
    # Retried and then answered: 429 (whatever Retry-After says), 500, a dropped
    # connection, a timeout (the config allows 1 s; the reply takes 3).
    oracle.script(rows[0], Reply.error(429, retry_after=30), Reply.error(500))
    oracle.script(rows[1], Reply.drop_connection())
    oracle.script(rows[2], Reply.text("too late", delay=3.0))
    oracle.script(rows[3], Reply.drop_connection(partial=b'{"choices": ['))
    # Failed: retryable every time; and at once: a refused key, a malformed body,
    # a body that is not a completion.
    oracle.script(rows[4], Reply.error(503), Reply.error(502), Reply.error(500))
    oracle.script(rows[5], Reply.error(401, message="bad key"))
    oracle.script(rows[6], Reply.raw("{not json"))
    oracle.script(rows[7], Reply.json({"id": "x", "object": "chat.completion"}))
    output = tmp_path / "run"
    with serving(oracle) as server:
        _point_at(monkeypatch, server.url)
        code, out, _ = eval_cli("run-qa", *bundle.args(), "--output-dir", str(output))
    lines = out.splitlines()
    assert code == 1
    assert lines[0] == "answer rows: 0 reused, 86 called, 4 failed"
    failed = {line.split(": ", 1)[0].removeprefix("  failed "): line for line in lines[1:]}
    assert sorted(failed) == sorted(rows[4:8])
    assert list(failed) == sorted(failed)  # one line per failure, sorted by row id
    assert "HTTP 500" in failed[rows[4]]
    assert "after 3 attempts" in failed[rows[4]]
    assert "HTTP 401" in failed[rows[5]]
    assert "bad key" in failed[rows[5]]
    assert "not valid JSON" in failed[rows[6]]
    assert "'choices' is missing" in failed[rows[7]]
    assert API_KEY not in out
    expected_attempts = {rows[0]: 3, rows[1]: 2, rows[2]: 2, rows[3]: 2}
    for row_id, attempts in expected_attempts.items():
        assert load_json(output / "responses" / f"{row_id}.json")["attempts"] == attempts
    for row_id in rows[4:8]:
        assert not (output / "responses" / f"{row_id}.json").exists()
    assert oracle.received[rows[4]] == 3  # max_attempts
    assert [oracle.received[row] for row in rows[5:8]] == [1, 1, 1]  # never retried
    # 2.0 s before every retry, Retry-After or not: 2 + 1 + 1 + 1 + 2 pauses.
    assert sleeps == [2.0] * 7

    # Running again calls only what failed.
    oracle.received.clear()
    with serving(oracle) as server:
        _point_at(monkeypatch, server.url)
        code, out, _ = eval_cli("run-qa", *bundle.args(), "--output-dir", str(output))
    assert (code, out) == (0, "answer rows: 86 reused, 4 called, 0 failed\n")
    assert sorted(oracle.received) == sorted(rows[4:8])


def test_only_plain_token_counts_and_model_names_are_stored(
    eval_cli: Runner,
    bundle: Bundle,
    prepared: Prepared,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tasks = tasks_for(bundle, prepared.cases)
    oracle = Oracle(prepared.cases, tasks)
    row = distinct(tasks)[0]
    completion = {
        "model": "a model, said in words",  # not a model name: recorded as not said
        "choices": [{"message": {"role": "assistant", "content": "item"}}],
        "usage": {
            "prompt_tokens": 5,
            "completion_tokens": 1,
            "prompt_tokens_details": {"cached_tokens": 2},  # nested: dropped
            "negative": -1,
            "flag": True,
            "odd key!": 3,
        },
    }
    oracle.script(row.row_id, Reply.json(completion))
    output = tmp_path / "run"
    with serving(oracle) as server:
        _point_at(monkeypatch, server.url)
        assert eval_cli("run-qa", *bundle.args(), "--output-dir", str(output))[0] == 0
    stored = load_json(response_path(output, row.row_id))
    assert stored["usage"] == {"completion_tokens": 1, "prompt_tokens": 5}
    assert stored["response_model"] is None
    assert stored["prediction"] == "item"


# --- resume -------------------------------------------------------------------------------------


def test_resume_reuses_only_answers_proven_to_answer_the_task(
    eval_cli: Runner,
    answered: Answered,
    generated: Generated,
    prepared: Prepared,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    output = tmp_path / "run"
    shutil.copytree(answered.directory, output)
    tasks = distinct(answered.tasks)
    rows = [task.row_id for task in tasks]
    other = tasks[-1]

    def edit(row_id: str, **changes: object) -> None:
        path = output / "responses" / f"{row_id}.json"
        data = load_json(path)
        data.update(changes)
        write_json(path, data)

    kept = list(tasks[0].kept_fact_ids)
    edit(rows[0], kept_fact_ids=[kept[1], kept[0], *kept[2:]])  # same facts, other order
    edit(rows[1], request_fingerprint="0" * 64)  # made for another request
    edit(rows[2], capacity=5)
    (output / "responses" / f"{rows[3]}.json").write_text('{"truncated": ')  # corrupt
    (output / "responses" / f"{rows[4]}.json").unlink()  # missing
    edit(rows[5], reference="item 01493427")  # a key no answer file has
    shutil.copyfile(  # an answer moved to another case
        output / "responses" / f"{other.row_id}.json", output / "responses" / f"{rows[6]}.json"
    )
    edit(rows[7], prediction=7)  # not a string
    before = (output / "responses" / f"{rows[10]}.json").read_bytes()
    oracle = Oracle(prepared.cases, answered.tasks)
    with serving(oracle) as server:
        _point_at(monkeypatch, server.url)
        code, out, _ = eval_cli(
            "run-qa", *generated.protocol_args(), "--dataset", str(generated.dataset),
            "--output-dir", str(output),
        )  # fmt: skip
    assert (code, out) == (0, "answer rows: 82 reused, 8 called, 0 failed\n")
    assert sorted(oracle.received) == sorted(rows[:8])
    assert (output / "responses" / f"{rows[10]}.json").read_bytes() == before  # untouched
    for task in tasks[:8]:
        assert load_json(output / "responses" / f"{task.row_id}.json")["request_fingerprint"] == (
            task.fingerprint
        )


@pytest.mark.parametrize("change", ["config", "official", "synthetic", "prompt"])
def test_a_directory_of_other_protocol_files_is_refused_naming_them(
    eval_cli: Runner,
    answered: Answered,
    generated: Generated,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    change: str,
) -> None:
    output = tmp_path / "run"
    shutil.copytree(answered.directory, output)
    bundle = bundle_copy(tmp_path / "bundle", generated.dataset, generated.sha256)
    changed = _change_protocol(bundle, change)
    monkeypatch.setenv(BASE_URL_ENV, "http://127.0.0.1:9/v1")  # never called
    monkeypatch.setenv(KEY_ENV, API_KEY)
    code, out, err = eval_cli("run-qa", *bundle.args(), "--output-dir", str(output))
    assert (code, out) == (1, "")
    assert f"{output / 'qa_run.json'}: was written under other protocol files" in err
    assert f"changed since: {changed}; use a new output directory" in err


def _change_protocol(bundle: Bundle, change: str) -> str:
    """Change one protocol file (keeping it valid); the names the refusal must list."""
    files = bundle.files
    if change == "config":
        edit_text(files.config, "workers: 3", "workers: 2")
        return f"config ({files.config})"
    if change == "official":
        files.official_manifest.write_text(files.official_manifest.read_text() + "\n")
        return f"official manifest ({files.official_manifest})"
    if change == "synthetic":
        data = json.loads(files.synthetic_manifest.read_text())
        data["cases"][0]["question"] += " Think first."
        files.synthetic_manifest.write_text(json.dumps(data, indent=2))
        return f"synthetic manifest ({files.synthetic_manifest})"
    old_hash = _sha256(bundle.prompt)
    bundle.prompt.write_text(bundle.prompt.read_text().replace("QUESTION:", "QUESTION ASKED:"))
    edit_text(files.config, old_hash, _sha256(bundle.prompt))
    return f"config ({files.config}), answer prompt ({bundle.prompt})"


def test_answers_of_another_model_are_not_mixed_in(
    eval_cli: Runner,
    answered: Answered,
    generated: Generated,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    output = tmp_path / "run"
    shutil.copytree(answered.directory, output)
    marker = load_json(output / "qa_run.json")
    marker["qa"]["model"] = "SmolLM2-135M-Instruct.Q4_1"
    write_json(output / "qa_run.json", marker)
    monkeypatch.setenv(BASE_URL_ENV, "http://127.0.0.1:9/v1")
    monkeypatch.setenv(KEY_ENV, API_KEY)
    code, _, err = eval_cli(
        "run-qa", *generated.protocol_args(), "--dataset", str(generated.dataset),
        "--output-dir", str(output),
    )  # fmt: skip
    assert code == 1
    assert 'qa.model "SmolLM2-135M-Instruct.Q4_1" (now "deepseek-v4-flash")' in err


# --- progress -----------------------------------------------------------------------------------


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_gets_a_progress_bar_and_a_pipe_plain_lines(
    answered: Answered, monkeypatch: pytest.MonkeyPatch
) -> None:
    task = answered.tasks[0]
    outcomes = [AnswerOutcome(task, 1, None), AnswerOutcome(answered.tasks[1], 3, "HTTP 500")]
    pipe, terminal = io.StringIO(), _Terminal()
    # The command line's consoles were made when standard error was pytest's pipe.
    monkeypatch.setattr(err_console, "is_interactive", True)
    for stream in (pipe, terminal):
        monkeypatch.setattr(sys, "stderr", stream)  # the progress goes to standard error
        with AnswerProgress(model="m") as shown:
            shown.start(2, 88)
            for outcome in outcomes:
                shown.advance(outcome)
    assert pipe.getvalue() == (
        "answering 2 questions with m (88 stored answers reused)\n"
        f"[1/2] {task.row_id} answered\n"
        f"[2/2] {answered.tasks[1].row_id} failed\n"
    )
    shown_text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", terminal.getvalue())
    assert "answering with m" in shown_text
    assert "2/2" in shown_text
    assert f"failed {answered.tasks[1].row_id}" in shown_text
    quiet = io.StringIO()
    monkeypatch.setattr(sys, "stderr", quiet)
    with AnswerProgress(model="m") as shown:
        shown.start(0, 90)  # nothing to call: nothing to show
    assert quiet.getvalue() == ""


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("model", '"my model"', "a model name"),
        ("api_key_env", '"MY-KEY"', "an environment variable name"),
    ],
)
def test_config_values_the_run_marker_cannot_hold_are_refused_before_the_run(
    eval_cli: Runner,
    generated: Generated,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    key: str,
    value: str,
    expected: str,
) -> None:
    """validate-contracts takes them; the marker's schema would refuse them when read back,
    so run-qa would pay for every answer, then neither resume nor grade."""
    bundle = bundle_copy(tmp_path / "bundle", generated.dataset, generated.sha256, **{key: value})
    monkeypatch.setenv(BASE_URL_ENV, "http://127.0.0.1:9/v1")
    monkeypatch.setenv(KEY_ENV, API_KEY)
    monkeypatch.setenv("MY-KEY", API_KEY)
    absent = tmp_path / "no-such-dataset.json"  # reading it would fail differently
    args = [*protocol_flags(bundle.files), "--dataset", str(absent)]
    code, out, err = eval_cli("run-qa", *args, "--output-dir", str(tmp_path / "run"))
    assert (code, out) == (1, "")
    assert err.startswith(
        f"error: {bundle.files.config}: qa.{key}: cannot be recorded in qa_run.json: "
        f"expected {expected}, got "
    )
    assert len(err.splitlines()) == 1
    assert not (tmp_path / "run").exists()
