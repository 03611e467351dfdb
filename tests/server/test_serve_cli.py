"""``deermem serve`` and ``deermem token`` as a user runs them: real processes, real workers."""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import yaml

from deermem.cli import main
from deermem.service.errors import ListenError
from deermem.service.http.run import started
from deermem.testing import ScriptedChatServer

from ..served_store import PASSWORD, ServedStore, on_both_stores
from ..wire_support import answer, conversation, model_settings, new_fact
from .conftest import free_port

ALICE = "/v1/users/alice/agents/coder"


def deermem(*args: str) -> list[str]:
    return [sys.executable, "-m", "deermem", *args]


@contextmanager
def serving(args: list[str], log: Path, env: Mapping[str, str] | None = None) -> Iterator[str]:
    port = free_port()
    with log.open("wb") as stderr:
        process = subprocess.Popen(
            [*args, "--port", str(port)], stdout=subprocess.DEVNULL, stderr=stderr, env=env
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/v1/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"the server did not start:\n{log.read_text()}")
            time.sleep(0.1)
        yield url
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def test_listening_beyond_loopback_without_tokens_refuses_to_start(tmp_path: Path) -> None:
    assert main(["--root", str(tmp_path), "init"]) == 0
    result = subprocess.run(
        deermem("--root", str(tmp_path), "serve", "--host", "0.0.0.0", "--port", "1"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert "refusing to listen on '0.0.0.0' without authentication" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_bad_patterns_or_prompts_dir_refuses_to_start(tmp_path: Path) -> None:
    """A pattern file or prompts_dir every conversation job would fail on stops start-up
    with the one-line error `deermem ingest` gives (it started, then every job was a 500).
    The MCP server learns nothing, so it does not read them."""
    assert main(["--root", str(tmp_path / "store"), "init"]) == 0
    patterns = tmp_path / "patterns"
    patterns.mkdir()
    (patterns / "goal.yaml").write_text("- '(unclosed'\n", "utf-8")
    bad_patterns = tmp_path / "patterns.toml"
    bad_patterns.write_text(f"patterns_dir = {json.dumps(str(patterns))}\n", "utf-8")
    no_prompts = tmp_path / "prompts.toml"
    no_prompts.write_text(f"prompts_dir = {json.dumps(str(tmp_path / 'none'))}\n", "utf-8")
    expected = {
        bad_patterns: f"error: {patterns / 'goal.yaml'}: pattern 0 `(unclosed`: invalid regular",
        no_prompts: f"error: {tmp_path / 'none'}: prompts_dir is not a directory",
    }
    for config, said in expected.items():
        result = subprocess.run(
            deermem("--config", str(config), "--root", str(tmp_path / "store"), "serve"),
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
        assert result.returncode == 1
        assert result.stderr.startswith(said), result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
        assert "Traceback" not in result.stderr


# The commands that start a server: HTTP, MCP over stdio, MCP over HTTP.
SERVERS: list[tuple[str, ...]] = [("serve",), ("mcp",), ("mcp", "--transport", "http")]


@pytest.mark.parametrize("command", SERVERS)
def test_a_mistyped_log_level_is_a_usage_error_naming_the_levels(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    assert main(["--root", str(tmp_path), "init"]) == 0
    result = subprocess.run(
        deermem("--root", str(tmp_path), *command, "--log-level", "VERBOSE"),
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 2
    assert "--log-level" in result.stderr
    assert "'VERBOSE': expected debug, info, warning" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "command", [*SERVERS, ("token", "add", "--user", "alice"), ("token", "list")]
)
def test_a_mistyped_root_is_an_error_not_a_new_store(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    """README: a mistyped --root is an error, not a new, empty memory (nor a tokens file)."""
    typo = tmp_path / "memroy"
    result = subprocess.run(
        deermem("--root", str(typo), *command),
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 1
    assert f"no store at {typo} (from --root)" in result.stderr
    assert f"deermem --root {typo} init" in result.stderr
    assert "Traceback" not in result.stderr
    assert not typo.exists()


def test_token_add_with_its_own_state_directory_needs_no_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The tokens file named by --state-dir is not the store's: the root is not read."""
    state = tmp_path / "state"
    args = ["--root", str(tmp_path / "unused"), "token", "add", "--user", "alice"]
    assert main([*args, "--state-dir", str(state)]) == 0
    assert (state / "tokens.json").is_file()
    assert not (tmp_path / "unused").exists()


@pytest.mark.parametrize("command", [("serve",), ("mcp", "--transport", "http")])
def test_a_port_in_use_is_one_error_line_and_status_1(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    """README keeps exit status 3 for `ingest`: uvicorn's own start-up failure must not show."""
    assert main(["--root", str(tmp_path), "init"]) == 0
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            deermem("--root", str(tmp_path), "--user", "alice", *command, "--port", str(port)),
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
    assert result.returncode == 1
    assert result.stderr.startswith(f"error: 127.0.0.1:{port} is in use")
    assert result.stderr.count("\n") == 1
    assert "Traceback" not in result.stderr


def test_a_start_up_uvicorn_gives_up_on_is_a_listen_error() -> None:
    """A port taken between the check and uvicorn's bind: uvicorn's exit 3 becomes an error."""

    def gives_up() -> None:
        raise SystemExit(3)  # uvicorn's STARTUP_FAILURE

    with pytest.raises(ListenError, match=r"^\[::1\]:8765 could not be listened on"):
        started(gives_up, "::1", 8765)


def test_token_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = ["--root", str(tmp_path)]
    assert main([*root, "init"]) == 0
    capsys.readouterr()
    assert main([*root, "token", "add", "--user", "alice", "--name", "ci", "--json"]) == 0
    added = json.loads(capsys.readouterr().out)
    assert added["users"] == ["alice"]
    assert added["token"].startswith("dmt_")
    tokens_file = tmp_path / ".server" / "tokens.json"
    assert added["token"] not in tokens_file.read_text()
    assert main([*root, "token", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [entry["id"] for entry in listed] == [added["id"]]
    assert "sha256" not in listed[0]
    assert "token" not in listed[0]
    assert main([*root, "token", "revoke", added["id"]]) == 0
    assert main([*root, "token", "revoke", added["id"]]) == 1
    assert "no token with id" in capsys.readouterr().err
    assert main([*root, "token", "add"]) == 2  # neither --user nor --admin


@pytest.mark.parametrize("user", ["", "a\x01b"])
def test_token_add_refuses_a_user_id_no_request_can_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], user: str
) -> None:
    """`token add --user ""` ended in a traceback (ValueError); an id with a control
    character made a token that could never be used. Both are refused, nothing added."""
    root = ["--root", str(tmp_path)]
    assert main([*root, "init"]) == 0
    capsys.readouterr()
    assert main([*root, "token", "add", "--user", "alice", "--user", user]) == 1
    assert capsys.readouterr().err.startswith(f"error: user id {user!r} is not allowed")
    assert not (tmp_path / ".server" / "tokens.json").exists()


def test_on_a_database_the_server_needs_a_state_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A database has no directory for tokens and job records: no guess, one clear line."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DEERMEM_DATABASE_URL", f"postgresql://deermem:{PASSWORD}@127.0.0.1:1/db")
    for command in (["serve"], ["token", "add", "--user", "alice"], ["token", "list"]):
        assert main(command) == 1, command
        error = capsys.readouterr().err
        assert "give --state-dir DIR (or set DEERMEM_STATE_DIR)" in " ".join(error.split())
        assert "postgresql://deermem:***@127.0.0.1:1/db" in error  # which store, redacted
        assert PASSWORD not in error
        assert "Traceback" not in error
    assert not any(tmp_path.iterdir())  # nothing was guessed into the working directory

    # With one, tokens are made there, and the server checks the database before it listens.
    monkeypatch.setenv("DEERMEM_STATE_DIR", str(tmp_path / "state"))
    assert main(["token", "add", "--user", "alice"]) == 0
    assert (tmp_path / "state" / "tokens.json").is_file()
    capsys.readouterr()
    assert main(["serve", "--port", str(free_port())]) == 1  # nothing listens on port 1
    error = capsys.readouterr().err
    assert error.startswith("error:")
    assert PASSWORD not in error
    assert "Traceback" not in error


def test_a_database_that_is_not_migrated_stops_the_server_before_it_listens(
    empty_postgres_url: str, tmp_path: Path
) -> None:
    env = {"DEERMEM_DATABASE_URL": empty_postgres_url, "DEERMEM_STATE_DIR": str(tmp_path)}
    result = subprocess.run(
        deermem("serve", "--workers", "2", "--port", str(free_port())),
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **env},
    )
    assert result.returncode == 1
    assert "deermem db upgrade" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1  # one line, not one per worker
    assert "Traceback" not in result.stderr


@on_both_stores
def test_two_workers_share_the_store_and_the_jobs(store: ServedStore) -> None:
    """Workers share the store and the state directory: any worker answers for any job."""
    with ScriptedChatServer() as chat:
        config = store.base / "deermem.yaml"
        settings = {"max_facts": 10, "model": model_settings(chat, max_retries=0)}
        config.write_text(yaml.safe_dump(settings))
        env = store.environ(os.environ)
        token = _new_token(store)
        log = store.base / "server.log"
        args = deermem(
            *store.global_args(), "--config", str(config), "serve", "--workers", "2",
            *store.server_args(),
        )  # fmt: skip
        contents = [f"worker fact number {n} about llamas" for n in range(30)]
        chat.enqueue(*[answer(newFacts=[new_fact(f"learned fact {n}", 0.9)]) for n in range(6)])
        with serving(args, log, env) as url:
            headers = {"Authorization": f"Bearer {token}"}

            def create(content: str) -> httpx.Response:
                return httpx.post(
                    f"{url}{ALICE}/facts", json={"content": content}, headers=headers, timeout=60
                )

            with ThreadPoolExecutor(8) as pool:
                created = list(pool.map(create, contents))
            assert [r.status_code for r in created] == [201] * 30
            # No lost write: every fact is in the library or in the archive; the cap holds.
            library = httpx.get(
                f"{url}{ALICE}/facts", params={"limit": 200}, headers=headers
            ).json()["facts"]
            archive = httpx.get(
                f"{url}{ALICE}/archive", params={"limit": 200}, headers=headers
            ).json()["entries"]
            assert len(library) == 10
            everything = {f["content"] for f in library} | {e["fact"]["content"] for e in archive}
            assert everything == set(contents)
            assert store.facts("alice", "coder").keys() == {f["id"] for f in library}

            jobs = []
            for n in range(6):
                accepted = httpx.post(
                    f"{url}{ALICE}/conversations",
                    json={"threadId": f"t{n}", "messages": conversation(f"hi {n}", "hello")},
                    headers=headers,
                )
                assert accepted.status_code == 202
                jobs.append(accepted.headers["location"])
            # Each poll is a new connection, so both workers answer; each finds every job.
            deadline = time.monotonic() + 60
            statuses: dict[str, str] = {}
            while time.monotonic() < deadline:
                for job in jobs:
                    response = httpx.get(f"{url}{job}", headers=headers)
                    assert response.status_code == 200, response.text
                    statuses[job] = response.json()["status"]
                if set(statuses.values()) == {"done"}:
                    break
                time.sleep(0.1)
            assert set(statuses.values()) == {"done"}
            bad = httpx.get(f"{url}{ALICE}/facts", headers={"Authorization": "Bearer nope"})
            assert bad.status_code == 401
        _assert_log_is_clean(log.read_text(), token, contents)
        # Each worker loaded, once it answered, what its first requests wait for (issue 23).
        warmed = [line for line in log.read_text().splitlines() if "warmed up in" in line]
        assert len(warmed) == 2
        assert all("what the first requests need is loaded" in line for line in warmed)
        # The start-up line names what is served, no secret (issue 24, point 14).
        [line] = [line for line in log.read_text().splitlines() if "serving the store" in line]
        assert "tokens file " in line
        assert f"model scripted at {chat.url}" in line
        assert "password" not in line


def test_under_strict_user_scope_the_server_starts_and_serves_the_users_it_is_asked_for(
    tmp_path: Path,
) -> None:
    """Every request names its user, so a configuration that forbids user-less memory is fine."""
    config = tmp_path / "deermem.yaml"
    config.write_text(yaml.safe_dump({"strict_user_scope": True}))
    root = tmp_path / "store"
    token = _new_token(ServedStore("markdown", tmp_path))
    args = deermem("--root", str(root), "--config", str(config), "serve")
    with serving(args, tmp_path / "server.log") as url:
        headers = {"Authorization": f"Bearer {token}"}
        created = httpx.post(
            f"{url}{ALICE}/facts", json={"content": "Prefers uv over pip"}, headers=headers
        )
        assert created.status_code == 201, created.text
        listed = httpx.get(f"{url}{ALICE}/facts", headers=headers).json()["facts"]
        assert [fact["id"] for fact in listed] == [created.json()["factId"]]
    assert list((root / "users/alice/agents/coder/facts").rglob("*.md"))
    assert not (root / "memory.json").exists()  # the single-user layout was never touched


def _new_token(store: ServedStore) -> str:
    """Make a token for alice as a user would; it is the one line on stdout."""
    result = subprocess.run(
        deermem(*store.global_args(), "token", "add", "--user", "alice", *store.server_args()),
        capture_output=True,
        text=True,
        timeout=60,
        env=store.environ(os.environ),
    )
    assert result.returncode == 0, result.stderr
    [token] = result.stdout.splitlines()
    return token


def _assert_log_is_clean(text: str, token: str, contents: list[str]) -> None:
    lines = [line for line in text.splitlines() if line.strip()]
    access = [line for line in lines if " deermem.service.http.access " in line]
    assert len(access) >= 30 + 6 + 1
    for line in lines:
        assert " request_id=" in line, line  # every line, from every logger and worker
    for line in access:
        request_id = line.split(" request_id=")[1].split(" ")[0]
        assert len(request_id) == 32, line
        assert (
            "/v1/users/{user}/agents/{agent}" in line
            or "/v1/jobs/{job_id}" in line
            or ("/v1/health" in line)
        )
    assert token not in text
    assert token.split("_", 2)[2] not in text
    assert "Bearer" not in text
    assert PASSWORD not in text
    assert not any("alice" in line for line in access)  # route templates, not paths
    for content in contents:
        assert content not in text
    assert "llamas" not in text
    assert "learned fact" not in text
    assert "Traceback" not in text


def _cookie_flags(response: httpx.Response, name: str) -> set[str]:
    cookie = next(
        value
        for key, value in response.headers.multi_items()
        if key == "set-cookie" and value.startswith(f"{name}=")
    )
    return {part.strip().lower() for part in cookie.split(";")[1:]}


def test_behind_a_tls_proxy_on_the_machine_the_inspector_cookies_are_secure(
    store: ServedStore,
) -> None:
    """`deermem serve` ran uvicorn with proxy_headers off: a request a same-machine TLS proxy
    forwarded (`X-Forwarded-Proto: https`) read as plain HTTP, so the session cookie was
    never `Secure` and redirects named `http`."""
    token = _new_token(store)
    args = deermem(*store.global_args(), "serve", *store.server_args())
    with serving(args, store.base / "server.log", store.environ(os.environ)) as url:
        proxied = httpx.Client(base_url=url, headers={"X-Forwarded-Proto": "https"})
        form = proxied.get("/ui/sign-in")
        assert "secure" in _cookie_flags(form, "deermem_ui_pre")
        csrf = form.text.split('name="csrf" value="')[1].split('"')[0]
        # httpx keeps a Secure cookie off plain HTTP (the proxy's leg): it goes as forwarded
        nonce = form.headers["set-cookie"].split(";")[0]
        answer = proxied.post(
            "/ui/sign-in", data={"token": token, "csrf": csrf}, headers={"Cookie": nonce}
        )
        assert answer.status_code == 303
        assert "secure" in _cookie_flags(answer, "deermem_ui")
        slash = proxied.get("/ui", follow_redirects=False)
        assert slash.headers["location"].startswith("https://")
        # without the proxy's word the request is what it is: plain HTTP
        plain = httpx.get(f"{url}/ui/sign-in")
        assert "secure" not in _cookie_flags(plain, "deermem_ui_pre")
        proxied.close()


DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_the_start_it_block_of_the_docs_runs_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """svc7-01: docs/server.md's first block, line by line, in an empty directory: a store,
    a token, a server that answers it. (It passed a `--config deermem.yaml` that no step
    made, so the server never started.)"""
    text = (DOCS / "server.md").read_text("utf-8")
    block = text.split("## Start it", 1)[1].split("```sh\n", 1)[1].split("\n```", 1)[0]
    lines = [shlex.split(line.split("#", 1)[0]) for line in block.splitlines()]
    assert [line[0] for line in lines] == ["deermem"] * 3
    init, add, serve = (deermem(*line[1:]) for line in lines)
    assert serve[-4:] == ["--port", "8765", "--workers", "2"]
    monkeypatch.chdir(tmp_path)
    subprocess.run(init, check=True, capture_output=True, timeout=60)
    added = subprocess.run(add, check=True, capture_output=True, text=True, timeout=60)
    token = added.stdout.strip()
    # As written, but on a free port (serving() gives one) and one worker.
    with serving([*serve[:-4], "--workers", "1"], tmp_path / "server.log") as url:
        response = httpx.get(
            f"{url}/v1/users/alice/agents/laptop/facts",
            headers={"Authorization": f"Bearer {token}"},
        )
        assert response.status_code == 200, response.text
