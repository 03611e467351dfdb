"""``deermem model check`` against the scripted server, as a user runs it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deermem.cli import main
from deermem.testing import Reply, ScriptedChatServer

KEY = "sk-cli-test-secret"


def config_file(tmp_path: Path, server: ScriptedChatServer) -> Path:
    path = tmp_path / "deermem.yaml"
    path.write_text(
        "model:\n"
        "  model: scripted\n"
        f"  base_url: {server.url}\n"
        "  api_key_env: CLI_TEST_KEY\n"
        "  retry_backoff_seconds: 0\n",
        "utf-8",
    )
    return path


def test_check_shows_the_answer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLI_TEST_KEY", KEY)
    with ScriptedChatServer() as server:
        server.enqueue(Reply.error(503), Reply.text("ready", model="served"))
        code = main(["model", "check", str(config_file(tmp_path, server))])
        request = server.requests[-1]
        url = server.url
    out = capsys.readouterr().out
    assert code == 0
    assert f"ok  scripted at {url}/chat/completions" in out
    assert "after 2 attempt(s)" in out
    assert "reported model: served" in out
    assert "answer: ready" in out
    assert request.messages == [{"role": "user", "content": "Reply with the single word: ready"}]
    assert KEY not in out


def test_check_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLI_TEST_KEY", KEY)
    with ScriptedChatServer() as server:
        server.enqueue(Reply.text("pong", usage={"prompt_tokens": 4, "completion_tokens": 1}))
        code = main(
            ["model", "check", str(config_file(tmp_path, server)), "--prompt", "ping", "--json"]
        )
    report = json.loads(capsys.readouterr().out)
    assert code == 0
    assert report["answer"] == "pong"
    assert report["usage"] == {"completion_tokens": 1, "prompt_tokens": 4}
    assert report["attempts"] == 1
    assert report["provider"] == "openai"
    assert KEY not in json.dumps(report)


def test_a_failure_is_one_line_without_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLI_TEST_KEY", KEY)
    with ScriptedChatServer() as server:
        server.enqueue(Reply.error(401, message=f"Incorrect API key provided: {KEY}"))
        code = main(["model", "check", str(config_file(tmp_path, server))])
    captured = capsys.readouterr()
    assert code == 1
    assert "HTTP 401" in captured.err
    assert KEY not in captured.err + captured.out
    assert captured.err.count("\n") == 1


def test_a_body_nested_too_deeply_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLI_TEST_KEY", KEY)
    nested = "[" * 100_000 + "]" * 100_000
    with ScriptedChatServer() as server:
        server.enqueue(Reply.raw('{"x": ' + nested + ', "choices": []}'))
        code = main(["model", "check", str(config_file(tmp_path, server))])
    captured = capsys.readouterr()
    assert code == 1
    assert "the body is not valid JSON" in captured.err
    assert captured.err.count("\n") == 1


def test_no_model_configured_says_how_to_configure_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["model", "check", "--ignore-env"]) == 1
    assert "no model is configured" in capsys.readouterr().err


def test_an_unset_key_variable_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with ScriptedChatServer() as server:
        code = main(["model", "check", str(config_file(tmp_path, server))])
    assert code == 1
    assert "CLI_TEST_KEY" in capsys.readouterr().err


def test_a_key_that_is_not_printable_ascii_is_one_line_without_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLI_TEST_KEY", KEY + "\u200b")  # a zero-width space, pasted with it
    with ScriptedChatServer() as server:
        path = str(config_file(tmp_path, server))
        assert main(["model", "check", path]) == 1
        model_check = capsys.readouterr()
        assert main(["config", "check", path]) == 1
        config_check = capsys.readouterr()
        assert server.requests == []
    for captured in (model_check, config_check):
        assert "CLI_TEST_KEY" in captured.err
        assert "U+200B ZERO WIDTH SPACE" in captured.err
        assert KEY not in captured.err + captured.out
        assert captured.err.count("\n") == 1
    # The environment left out, the key is not read: the file alone is valid.
    assert main(["config", "check", path, "--ignore-env"]) == 0


def test_without_a_file_the_check_uses_the_configuration_every_command_uses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The store's own deermem.yaml (written by init) and --config name the model too.
    monkeypatch.setenv("CLI_TEST_KEY", KEY)
    with ScriptedChatServer() as server:
        store = tmp_path / "store"
        store.mkdir()
        config_file(store, server)  # store/deermem.yaml: the store's own settings
        server.enqueue(Reply.text("from the store's settings"))
        assert main(["--root", str(store), "model", "check"]) == 0
        assert "from the store's settings" in capsys.readouterr().out
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        server.enqueue(Reply.text("from --config"))
        given = ["--root", str(tmp_path / "none"), "--config", str(config_file(elsewhere, server))]
        assert main([*given, "model", "check"]) == 0
        assert "from --config" in capsys.readouterr().out
