"""``deermem mcp --transport http``: a real server process on 127.0.0.1, real tokens.

One server runs without ``--user`` (each token reaches its own user), one
with ``--user bob``; both serve agent ``coder`` from a store whose tokens
file the tests write first, as ``deermem token add`` does. The server
without ``--user`` runs on both stores for the tests that touch memories
(every tool, isolation, the tokens file of a database's state directory);
the checks of the HTTP layer alone run on Markdown.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from deermem.cli import main
from deermem.service.tokens import TokenFile

from ..served_store import KINDS, PASSWORD, ServedStore
from .conftest import HttpServer, call, http_server, http_session, text_of

SECRET_BOB = "SECRET-b0b1 bob's surprise party is on friday"
SECRET_ALICE = "SECRET-a11c alice is allergic to peanuts"
GRANTS: dict[str, dict[str, Any]] = {
    "alice": {"users": ["alice"]},
    "bob": {"users": ["bob"]},
    "carol": {"users": ["carol"]},
    "pair": {"users": ["alice", "bob"]},
    "admin": {"admin": True},
}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw-test", "version": "0"},
    },
}
ACCEPT = {"Accept": "application/json, text/event-stream"}
on_markdown = pytest.mark.parametrize("per_token", ["markdown"], indirect=True)


def issue_tokens(store: ServedStore) -> dict[str, str]:
    tokens = TokenFile(store.tokens_file)
    now = datetime(2026, 6, 1, tzinfo=UTC)
    return {name: tokens.add(now=now, **grants).token for name, grants in GRANTS.items()}


@pytest.fixture(scope="module", params=KINDS)
def per_token(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[HttpServer, dict[str, str]]]:
    """A server started without --user: each single-user token reaches its own memory."""
    kind = str(request.param)
    base = tmp_path_factory.mktemp(f"per-token-{kind}")
    with ServedStore.make(kind, base, request, database="module_postgres_url") as store:
        tokens = issue_tokens(store)
        with http_server(store, "--agent", "coder", log=base / "stderr.log") as server:
            yield server, tokens


@pytest.fixture(scope="module")
def bobs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[HttpServer, dict[str, str]]]:
    """A server started with --user bob (Markdown)."""
    base = tmp_path_factory.mktemp("bobs")
    store = ServedStore("markdown", base)
    tokens = issue_tokens(store)
    with http_server(store, "--user", "bob", "--agent", "coder", log=base / "stderr.log") as server:
        yield server, tokens


def post(server: HttpServer, token: str | None, body: object, **headers: str) -> httpx.Response:
    sent = {**ACCEPT, **headers}
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    return httpx.post(server.url, json=body, headers=sent, timeout=30)


def test_every_tool_over_http_against_the_store(
    per_token: tuple[HttpServer, dict[str, str]],
) -> None:
    server, tokens = per_token
    store = server.store

    async def scenario() -> None:
        async with http_session(server.url, tokens["alice"]) as alice:
            assert len((await alice.list_tools()).tools) == 7
            added = await call(alice, "memory_add", content=SECRET_ALICE, category="constraint")
            fact_id = added["factId"]
            assert SECRET_ALICE in store.facts("alice", "coder")[fact_id]
            hits = (await call(alice, "memory_search", query="peanuts"))["results"]
            assert [hit["fact"]["id"] for hit in hits] == [fact_id]
            assert SECRET_ALICE in (await call(alice, "memory_context"))["text"]
            updated = await call(alice, "memory_update", fact_id=fact_id, confidence=0.95)
            assert updated["confidence"] == 0.95
            assert "0.95" in store.facts("alice", "coder")[fact_id]
            assert (await call(alice, "memory_why", fact_id=fact_id))["standing"]["rank"] == 1
            assert (await call(alice, "memory_forget", fact_id=fact_id))["archived"] is True
            assert fact_id not in store.facts("alice", "coder")
            assert fact_id in store.archived("alice", "coder")
            assert (await call(alice, "memory_restore", fact_id=fact_id))["restored"] is True
            assert fact_id in store.facts("alice", "coder")

    anyio.run(scenario)
    assert PASSWORD not in server.log_text()


def test_alices_token_cannot_read_write_search_or_learn_of_bob(
    per_token: tuple[HttpServer, dict[str, str]],
) -> None:
    server, tokens = per_token
    store = server.store

    async def scenario() -> None:
        async with http_session(server.url, tokens["bob"]) as bob:
            kept = (await call(bob, "memory_add", content=SECRET_BOB, confidence=0.9))["factId"]
            gone = (await call(bob, "memory_add", content="Bob's old plan"))["factId"]
            await call(bob, "memory_forget", fact_id=gone)  # an archive entry and a receipt
        before = store.holdings("bob")
        assert store.facts("bob", "coder").keys() == {kept}
        async with http_session(server.url, tokens["alice"]) as alice:
            # Searching and reading find nothing of Bob's.
            for query in ("surprise party", "SECRET-b0b1", "plan"):
                results = (await call(alice, "memory_search", query=query))["results"]
                assert all(hit["fact"]["id"] not in (kept, gone) for hit in results)
            context = await call(alice, "memory_context")
            assert "surprise" not in context["text"]
            assert kept not in json.dumps(context["manifest"])
            # Bob's ids answer exactly what an id nobody ever used answers.
            for tool, extra in [
                ("memory_why", {}),
                ("memory_update", {"content": "hijacked"}),
                ("memory_forget", {}),
                ("memory_restore", {}),
            ]:
                for bobs_id in (kept, gone):
                    answer = await alice.call_tool(tool, {"fact_id": bobs_id, **extra})
                    unknown = await alice.call_tool(tool, {"fact_id": "fact_99999999", **extra})
                    assert answer.is_error
                    assert unknown.is_error
                    assert text_of(answer).replace(bobs_id, "ID") == text_of(unknown).replace(
                        "fact_99999999", "ID"
                    )
            # A model that names Bob in the arguments is refused, naming the argument.
            planted = await alice.call_tool(
                "memory_add", {"content": "planted", "user": "bob", "agent": "coder"}
            )
            assert planted.is_error
            assert "user" in text_of(planted)
            assert "agent" in text_of(planted)
            assert "planted" not in store.everything()
        assert store.holdings("bob") == before

    anyio.run(scenario)


@on_markdown
def test_requests_without_a_valid_token_are_refused_before_mcp(
    per_token: tuple[HttpServer, dict[str, str]],
) -> None:
    server, tokens = per_token
    cases = [
        (None, 401, "unauthorized", "missing"),
        ("dmt_0123456789ab_" + "A" * 43, 401, "unauthorized", "invalid"),
        (tokens["alice"][:-4] + "AAAA", 401, "unauthorized", "invalid"),
        # Tokens that do not say which memory they mean, on a server without --user.
        (tokens["admin"], 403, "scope-not-allowed", "ambiguous"),
        (tokens["pair"], 403, "scope-not-allowed", "ambiguous"),
    ]
    for token, status, slug, reason in cases:
        response = post(server, token, INITIALIZE)
        assert response.status_code == status, response.text
        assert response.headers["content-type"] == "application/problem+json"
        problem = response.json()
        assert problem["type"] == f"urn:deermem:problem:{slug}"
        assert problem["reason"] == reason
        assert problem["requestId"] == response.headers["x-request-id"]
    assert post(server, tokens["alice"], INITIALIZE).status_code == 200
    # Bearer alone, as the MCP SDK's bearer check reads it: not mem0's Token scheme.
    for scheme in ("Token", "token"):
        refused = post(server, None, INITIALIZE, Authorization=f"{scheme} {tokens['alice']}")
        assert (refused.status_code, refused.json()["reason"]) == (401, "malformed"), scheme
    lower = post(server, None, INITIALIZE, Authorization=f"bearer {tokens['alice']}")
    assert lower.status_code == 200


@on_markdown
def test_a_session_belongs_to_the_token_that_opened_it(
    per_token: tuple[HttpServer, dict[str, str]],
) -> None:
    server, tokens = per_token
    opened = post(server, tokens["alice"], INITIALIZE)
    assert opened.status_code == 200
    session_id = opened.headers["mcp-session-id"]
    call_tool = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "memory_context", "arguments": {}},
    }
    hijack = post(
        server,
        tokens["bob"],
        call_tool,
        **{"Mcp-Session-Id": session_id, "MCP-Protocol-Version": "2025-06-18"},
    )
    assert hijack.status_code == 404
    assert "alice" not in hijack.text
    assert "SECRET" not in hijack.text


def test_a_revoked_token_stops_working_without_a_restart(
    per_token: tuple[HttpServer, dict[str, str]],
) -> None:
    server, tokens = per_token
    assert post(server, tokens["carol"], INITIALIZE).status_code == 200
    # On a database, the tokens file of the --state-dir the server was given.
    TokenFile(server.store.tokens_file).revoke(tokens["carol"].split("_")[1])
    assert post(server, tokens["carol"], INITIALIZE).status_code == 401


@on_markdown
def test_the_log_has_request_ids_and_no_content_or_token(
    per_token: tuple[HttpServer, dict[str, str]],
) -> None:
    server, tokens = per_token

    async def scenario() -> None:
        async with http_session(server.url, tokens["alice"]) as alice:
            await call(alice, "memory_search", query="SECRET-a11c peanuts")
            await alice.call_tool("memory_add", {"content": SECRET_ALICE + "!" * 3000})

    anyio.run(scenario)
    logged = server.log_text()
    access = [line for line in logged.splitlines() if "deermem.service.http.access" in line]
    assert access
    assert all("request_id=" in line and " POST " in line for line in access)
    assert "SECRET-" not in logged
    for token in tokens.values():
        assert token.split("_", 2)[2] not in logged


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_every_log_line_of_a_request_carries_its_request_id(tmp_path: Path, mode: str) -> None:
    """Tool lines too, under the 2025 handshake (``legacy``) and the newest one.

    The tool runs in the SDK's session task, not in the HTTP request's own
    task; its log line must still carry the id of the request that carried
    the call (the one its access line and ``X-Request-ID`` show).
    """
    store = ServedStore("markdown", tmp_path)
    tokens = issue_tokens(store)
    log = tmp_path / "stderr.log"
    with http_server(store, "--agent", "coder", log=log) as server:

        async def scenario() -> None:
            async with http_session(server.url, tokens["alice"], mode=mode) as alice:
                fact_id = (await call(alice, "memory_add", content="Likes green tea"))["factId"]
                await call(alice, "memory_search", query="tea")
                await call(alice, "memory_context")
                await call(alice, "memory_update", fact_id=fact_id, confidence=0.9)
                await call(alice, "memory_why", fact_id=fact_id)
                await call(alice, "memory_forget", fact_id=fact_id)
                await call(alice, "memory_restore", fact_id=fact_id)
                assert (await alice.call_tool("memory_why", {"fact_id": "fact_0000dead"})).is_error

        anyio.run(scenario)
    lines = server.log_text().splitlines()
    # Only the server's own lines are outside a request: start-up, warm-up, shutdown.
    for line in lines:
        outside = (" uvicorn.error request_id=- ", " deermem.service.warmup request_id=- ")
        assert request_id_of(line) or any(logger in line for logger in outside), line
    posts = {
        request_id_of(line)
        for line in lines
        if " deermem.service.http.access " in line and " POST /mcp 200 " in line
    }
    tools = [request_id_of(line) for line in lines if " deermem.service.mcp request_id=" in line]
    assert len(tools) == len(set(tools)) == 8  # one line per call, each its own request's
    assert set(tools) <= posts


def request_id_of(line: str) -> str | None:
    match = re.search(r" request_id=([0-9a-f]{32}) ", line)
    return match.group(1) if match else None


def test_a_server_for_one_user_takes_only_tokens_that_may_address_it(
    bobs: tuple[HttpServer, dict[str, str]],
) -> None:
    server, tokens = bobs
    refused = post(server, tokens["alice"], INITIALIZE)
    assert refused.status_code == 403
    assert refused.json()["reason"] == "user"
    assert "bob" not in refused.text

    async def scenario() -> None:
        for name in ("bob", "pair", "admin"):  # the 2025 handshake, as chat applications speak
            async with http_session(server.url, tokens[name], mode="legacy") as client:
                await call(client, "memory_add", content=f"Written with the {name} token")
        async with http_session(server.url, tokens["bob"]) as bob:
            context = (await call(bob, "memory_context"))["text"]
            for name in ("bob", "pair", "admin"):
                assert f"Written with the {name} token" in context

    anyio.run(scenario)
    assert len(server.store.facts("bob", "coder")) == 3
    assert not (server.store.root / "users/alice").exists()


def test_under_strict_user_scope_a_server_without_user_serves_each_tokens_user(
    tmp_path: Path,
) -> None:
    """The token names the user, so strict_user_scope does not stop a server without --user."""
    store = ServedStore("markdown", tmp_path)
    root = store.root
    config = tmp_path / "deermem.yaml"
    config.write_text("strict_user_scope: true\n", encoding="utf-8")
    tokens = issue_tokens(store)
    with http_server(
        store, "--config", str(config), "--agent", "coder", log=tmp_path / "stderr.log"
    ) as server:

        async def scenario() -> None:
            async with http_session(server.url, tokens["alice"], mode="legacy") as alice:
                added = await call(alice, "memory_add", content="Written under strict scope")
                assert added["outcome"] == "stored"
                hits = (await call(alice, "memory_search", query="strict"))["results"]
                assert [hit["fact"]["id"] for hit in hits] == [added["factId"]]

        anyio.run(scenario)
    assert len(list((root / "users/alice/agents/coder/facts").rglob("*.md"))) == 1
    assert not (root / "agents").exists()  # the single-user layout was never touched


@pytest.mark.parametrize(
    ("arguments", "status", "message"),
    [
        # Beyond loopback without a token: refused before a socket is opened.
        (["mcp", "--transport", "http", "--host", "0.0.0.0"], 1, "without authentication"),
        (["mcp", "--port", "9000"], 2, "--transport http only"),
        (["mcp", "--transport", "sse"], 2, "stdio"),
    ],
)
def test_the_command_refuses_what_it_cannot_do_safely(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    arguments: list[str],
    status: int,
    message: str,
) -> None:
    assert main(["--root", str(tmp_path), "init"]) == 0
    capsys.readouterr()
    assert main(["--root", str(tmp_path), *arguments]) == status
    captured = capsys.readouterr()
    assert message in " ".join((captured.out + captured.err).split())
    assert "Traceback" not in captured.err


def test_on_a_database_the_http_server_needs_a_place_for_its_tokens_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A database has no directory: --state-dir (or --tokens-file) names where tokens are."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DEERMEM_DATABASE_URL", f"postgresql://deermem:{PASSWORD}@127.0.0.1:1/db")
    assert main(["mcp", "--transport", "http"]) == 1
    error = capsys.readouterr().err
    assert "give --state-dir DIR" in " ".join(error.split())
    assert PASSWORD not in error
    assert "Traceback" not in error
    assert not any(tmp_path.iterdir())
    # Over stdio there are no tokens: no state directory is needed (the database is
    # then opened, and here refuses: nothing listens on port 1).
    assert main(["--user", "alice", "mcp"]) == 1
    error = capsys.readouterr().err
    assert "--state-dir" not in error
    assert "connection failed" in error
    assert PASSWORD not in error
