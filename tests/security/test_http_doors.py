"""The HTTP service's doors, tried as an attacker would (issue "no way in", points 2 and 5–9).

Real uvicorn on 127.0.0.1 (in this process, or ``deermem serve`` / ``deermem
mcp`` as processes), both stores where the point concerns the store:

* DNS rebinding — a loopback server answers only for loopback host names
  and the configured ones, and refuses a browser request from another
  origin; the MCP server applies the same rule;
* revoking the last token never opens the server again, not even after a
  restart;
* deep nesting and oversized unknown fields are a 422 before any store is
  touched, and never a stack trace in the log;
* an id that no fact can have (a NUL in it) is not found, on both stores;
* a malformed ``Authorization`` header is ``malformed``, an expired token
  ``expired``;
* strict request types, 503 with ``Retry-After`` while the database is
  away, tokens that expire, and a deadline for request headers.
"""

from __future__ import annotations

import json
import logging
import os
import select
import socket
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import anyio
import httpx
import psycopg
import pytest

from deermem import CorruptMemoryFile, Memory, MemoryConfig
from deermem.cli import main
from deermem.service.http.app import create_app
from deermem.service.settings import ServerSettings, close_store
from deermem.service.tokens import TokenFile

from ..mcp.conftest import HttpServer, call, http_server, http_session, text_of
from ..served_store import KINDS, PASSWORD, ServedStore, on_both_stores
from ..server.conftest import LiveServer, free_port, run_in_thread
from ..server.conftest import store as store  # the fixture: Markdown, or both kinds
from ..server.test_serve_cli import deermem, serving

ALICE = "/v1/users/alice/agents/coder"
NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
PROBLEM = "application/problem+json"


class Clock:
    """A clock a test moves: the server's ``now`` (token expiry reads it)."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


@contextmanager
def live_server(
    store: ServedStore,
    *,
    allowed_hosts: tuple[str, ...] = (),
    clock: Callable[[], datetime] | None = None,
    tokens: Mapping[str, Mapping[str, Any]] | None = None,
    **config: Any,
) -> Iterator[tuple[LiveServer, dict[str, str]]]:
    """A server on 127.0.0.1 with these allowed hosts and this clock (default: fixed at
    :data:`NOW`); ``tokens`` are made first."""
    settings = ServerSettings(
        port=free_port(), state_dir=str(store.state_dir), allowed_hosts=allowed_hosts
    )
    root = store.root if store.kind == "markdown" else None
    memory = Memory.open_unscoped(root, store.config(**config), clock=clock or Clock(NOW))
    token_file = TokenFile(settings.tokens_path(memory.config))
    issued = {
        name: token_file.add(now=memory.now(), **grants).token
        for name, grants in (tokens or {}).items()
    }
    server, thread = run_in_thread(create_app(settings, memory=memory), settings.port)
    live = LiveServer(
        f"http://127.0.0.1:{settings.port}", store, memory, token_file, server, thread
    )
    try:
        yield live, issued
    finally:
        live.stop()
        memory.close()
        close_store(memory.store)


@pytest.fixture
def open_server(store: ServedStore) -> Iterator[LiveServer]:
    """An open loopback server (no tokens), as a user starts one on a laptop."""
    with live_server(store) as (server, _):
        yield server


def assert_problem(response: httpx.Response, status: int, slug: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    problem: dict[str, Any] = response.json()
    assert problem["type"] == f"urn:deermem:problem:{slug}"
    assert problem["requestId"] == response.headers["x-request-id"]
    return problem


# --- 2: DNS rebinding: Host and Origin ------------------------------------------------------


REFUSED_HOSTS = [
    "attacker.example",  # a page whose name now resolves to 127.0.0.1
    "attacker.example:8765",
    "localhost.attacker.example",
    "127.0.0.1.attacker.example",
    "localhost.",
    "",
]
OWN_HOSTS = ["localhost", "LOCALHOST", "127.0.0.1", "[::1]", "127.0.0.9"]


def test_a_loopback_server_answers_only_for_loopback_host_names(open_server: LiveServer) -> None:
    client = open_server.client()
    requests: list[tuple[str, str, dict[str, object] | None]] = [
        ("GET", "/v1/health", None),  # not even that a server listens here
        ("GET", f"{ALICE}/facts", None),
        ("GET", f"{ALICE}/context", None),
        ("POST", f"{ALICE}/facts", {"content": "planted by a web page"}),
        ("PUT", f"{ALICE}/document", {"facts": []}),
    ]
    for host in REFUSED_HOSTS:
        for method, path, body in requests:
            response = client.request(method, path, json=body, headers={"Host": host})
            problem = assert_problem(response, 421, "host-not-allowed")
            assert not host or host not in problem["detail"]
    assert open_server.store.facts("alice", "coder") == {}
    # Its own names, with any port, or none.
    port = urlsplit(open_server.url).port
    for number, host in enumerate(OWN_HOSTS):
        for name in (host, f"{host}:{port}", f"{host}:1"):
            content = f"note {number} via {name}"
            response = client.post(
                f"{ALICE}/facts", json={"content": content}, headers={"Host": name}
            )
            assert response.status_code == 201, response.text
    assert len(open_server.store.facts("alice", "coder")) == 3 * len(OWN_HOSTS)


def test_configured_host_names_are_answered_too(store: ServedStore) -> None:
    """Behind a reverse proxy that forwards its own name, the operator names it."""
    with live_server(store, allowed_hosts=("memory.example.com", "api.example.com:8443")) as (
        server,
        _,
    ):
        client = server.client()
        for host, status in [
            ("memory.example.com", 200),
            ("MEMORY.example.com:443", 200),  # any port: none was given
            ("api.example.com:8443", 200),
            ("api.example.com:8444", 421),  # that port only
            ("api.example.com", 421),
            ("localhost:5", 200),  # still a loopback server
            ("attacker.example", 421),
        ]:
            assert client.get(f"{ALICE}/facts", headers={"Host": host}).status_code == status, host


FOREIGN_ORIGINS = [
    "http://attacker.example",
    "https://attacker.example:8765",
    "http://localhost.attacker.example",
    "null",  # a sandboxed frame or a local file
    "file://",
    "chrome-extension://abcdefghijklmnop",
]


def test_a_browser_request_from_another_origin_changes_nothing(open_server: LiveServer) -> None:
    """CSRF: a form or fetch from another site names the right host but its own origin."""
    client = open_server.client()
    created = client.post(f"{ALICE}/facts", json={"content": "Alice uses uv"})
    assert created.status_code == 201
    fact_id = created.json()["factId"]
    before = open_server.store.facts("alice", "coder")
    for origin in FOREIGN_ORIGINS:
        headers = {"Origin": origin}
        attempts = [
            client.post(f"{ALICE}/facts", json={"content": "planted"}, headers=headers),
            client.patch(f"{ALICE}/facts/{fact_id}", json={"content": "x"}, headers=headers),
            client.delete(f"{ALICE}/facts/{fact_id}", headers=headers),
            client.put(f"{ALICE}/document", json={"facts": []}, headers=headers),
            client.post(
                f"{ALICE}/conversations",
                json={"threadId": "t", "messages": [{"role": "user", "content": "hi"}]},
                headers=headers,
            ),
            client.get(f"{ALICE}/facts", headers=headers),  # a cross-origin read, too
        ]
        for response in attempts:
            assert_problem(response, 403, "origin-not-allowed")
    assert open_server.store.facts("alice", "coder") == before
    # An image or a script another site's page loads carries no Origin, but says where it
    # comes from: it cannot count a search's results as recalls either.
    why = client.get(f"{ALICE}/facts/{fact_id}/why")
    assert why.status_code == 200
    heat = why.json()
    for mode in ("no-cors", "cors"):
        foreign = {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": mode}
        response = client.get(f"{ALICE}/search", params={"q": "uv"}, headers=foreign)
        assert_problem(response, 403, "origin-not-allowed")
    assert client.get(f"{ALICE}/facts/{fact_id}/why").json() == heat
    followed = {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"}  # a link
    assert client.get(f"{ALICE}/facts", headers=followed).status_code == 200
    local = {"Sec-Fetch-Site": "same-site", "Sec-Fetch-Mode": "no-cors"}  # localhost:3000
    assert client.get(f"{ALICE}/facts", headers=local).status_code == 200
    # The OpenAPI page (/docs) and local tools send the server's own origin.
    for origin in (open_server.url, "http://localhost:3000", "https://[::1]"):
        response = client.post(
            f"{ALICE}/facts", json={"content": f"from {origin}"}, headers={"Origin": origin}
        )
        assert response.status_code == 201, response.text


def test_an_allowed_host_that_is_not_a_host_name_stops_the_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--root", str(tmp_path), "init"]) == 0
    for wrong in ("http://memory.example.com", "*", "memory.example.com/path", "host:99999"):
        code = main(["--root", str(tmp_path), "serve", "--allowed-host", wrong, "--port", "1"])
        assert code == 1, wrong
        error = capsys.readouterr().err
        assert f"--allowed-host {wrong!r}" in error
        assert "Traceback" not in error


@pytest.mark.parametrize(
    "names",
    [
        "memory.example.com,api.example.com:8443",  # configuration.md's list forms
        '["memory.example.com", "api.example.com:8443"]',
        "memory.example.com api.example.com:8443",  # the form click read before
    ],
)
def test_the_allowed_hosts_variable_takes_a_list_as_every_list_variable(
    tmp_path: Path, names: str
) -> None:
    """`DEERMEM_ALLOWED_HOSTS=a,b` was one bad name, refused as `--allowed-host 'a,b'`."""
    assert main(["--root", str(tmp_path), "init"]) == 0
    environ = {**os.environ, "DEERMEM_ALLOWED_HOSTS": names}
    command = deermem("--root", str(tmp_path), "serve")
    with serving(command, tmp_path / "serve.log", env=environ) as url:
        port = urlsplit(url).port
        for host, status in (
            ("memory.example.com", 200),
            ("api.example.com:8443", 200),
            (f"api.example.com:{port}", 421),
            ("attacker.example", 421),
        ):
            response = httpx.get(f"{url}/v1/health", headers={"Host": host}, timeout=30)
            assert response.status_code == status, host


@pytest.mark.parametrize(
    ("names", "said"),
    [
        (
            "memory.example.com,http://x.example",
            "DEERMEM_ALLOWED_HOSTS 'http://x.example': expected",
        ),
        ('["memory.example.com", 5]', "DEERMEM_ALLOWED_HOSTS: expected host names separated by"),
        ('["memory.example.com"', "DEERMEM_ALLOWED_HOSTS: expected host names separated by"),
    ],
)
@pytest.mark.parametrize("command", [("serve",), ("mcp", "--transport", "http")])
def test_a_bad_allowed_hosts_variable_is_named(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    names: str,
    said: str,
    command: tuple[str, ...],
) -> None:
    assert main(["--root", str(tmp_path), "init"]) == 0
    capsys.readouterr()
    monkeypatch.setenv("DEERMEM_ALLOWED_HOSTS", names)
    assert main(["--root", str(tmp_path), *command, "--port", "1"]) == 1
    error = capsys.readouterr().err
    assert error.startswith(f"error: invalid configuration: {said}"), error
    assert "--allowed-host" not in error


@pytest.fixture
def mcp_store(tmp_path: Path) -> Iterator[ServedStore]:
    with ServedStore("markdown", tmp_path) as served:
        yield served


def initialize(server: HttpServer, **headers: str) -> httpx.Response:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "doors-test", "version": "0"},
        },
    }
    accept = {"Accept": "application/json, text/event-stream"}
    return httpx.post(server.url, json=body, headers={**accept, **headers}, timeout=30)


def test_the_mcp_server_keeps_the_same_doors(mcp_store: ServedStore, tmp_path: Path) -> None:
    """One rule for both servers: the names, the answers, and --allowed-host."""
    with http_server(
        mcp_store,
        "--user",
        "alice",
        log=tmp_path / "mcp.log",
        mcp_args=("--allowed-host", "memory.test"),
    ) as server:
        port = urlsplit(server.url).port
        assert_problem(initialize(server, Host="attacker.example"), 421, "host-not-allowed")
        assert_problem(
            initialize(server, Origin="http://attacker.example"), 403, "origin-not-allowed"
        )
        for host in ("memory.test", f"memory.test:{port}", f"localhost:{port}"):
            assert initialize(server, Host=host).status_code == 200, host


# --- 5: once auth is on, it stays on ----------------------------------------------------------


def test_revoking_the_last_token_never_reopens_the_server(store: ServedStore) -> None:
    with live_server(store) as (server, _):
        anonymous = server.client()
        assert anonymous.get(f"{ALICE}/facts").status_code == 200  # open: no token yet
        issued = server.tokens.add(users=["alice"], now=NOW)
        assert anonymous.get(f"{ALICE}/facts").status_code == 401
        server.tokens.revoke(issued.record.token_id)
        assert server.tokens.records() == ()
        for method, path in [("GET", f"{ALICE}/facts"), ("POST", f"{ALICE}/facts")]:
            response = anonymous.request(method, path, json={"content": "x"})
            assert assert_problem(response, 401, "unauthorized")["reason"] == "missing"
        assert server.client(issued.token).get(f"{ALICE}/facts").status_code == 401
    # Nor does a restart: the tokens file says tokens are in use.
    with live_server(store) as (server, _):
        assert server.client().get(f"{ALICE}/facts").status_code == 401
        fresh = server.tokens.add(users=["alice"], now=NOW).token
        assert server.client(fresh).get(f"{ALICE}/facts").status_code == 200
    assert store.facts("alice", "coder") == {}


# --- 6: deep nesting and oversized unknown fields -----------------------------------------------


def nested(depth: int) -> object:
    value: object = "leaf"
    for _ in range(depth):
        value = [value]
    return value


def nested_json(depth: int) -> str:
    """``nested(depth)`` as JSON text (json.dumps itself stops at Python's recursion limit)."""
    return "[" * depth + '"leaf"' + "]" * depth


def no_stack_trace(records: list[logging.LogRecord]) -> None:
    for record in records:
        text = record.getMessage()
        assert "RecursionError" not in text
        assert "Traceback" not in text
        assert 'File "' not in text
        assert len(text) < 2000


@on_both_stores
@pytest.mark.parametrize("depth", [33, 400, 5000])
def test_a_deeply_nested_unknown_field_is_refused_on_both_stores(
    open_server: LiveServer, depth: int, caplog: pytest.LogCaptureFixture
) -> None:
    client = open_server.client()
    kept = {"facts": [{"id": "fact_keep", "content": "Alice uses uv"}]}
    assert client.put(f"{ALICE}/document", json=kept).status_code == 200
    before = open_server.store.holdings("alice")
    document = '{"facts": [{"id": "fact_deep", "content": "deep", "shape": %s}]}'
    with caplog.at_level(logging.INFO):
        response = client.put(
            f"{ALICE}/document",
            content=document % nested_json(depth),
            headers={"content-type": "application/json"},
        )
    problem = response.json()
    assert response.status_code == 422, response.text
    assert "nested" in problem["detail"]
    assert "32" in problem["detail"]
    no_stack_trace(caplog.records)
    assert open_server.store.holdings("alice") == before
    assert client.get(f"{ALICE}/facts").json()["facts"][0]["id"] == "fact_keep"
    # Up to the bound, a value is kept, and comes back as it went in.
    fact = {"id": "fact_nested", "content": "nested", "shape": nested(31), "table": {"a": [1]}}
    assert client.put(f"{ALICE}/document", json={"facts": [fact]}).status_code == 200
    exported = client.get(f"{ALICE}/document").json()["facts"][0]
    assert exported["shape"] == fact["shape"]
    assert client.put(f"{ALICE}/document", json={"facts": [exported]}).status_code == 200


@pytest.mark.parametrize("where", ["facts", "document"])
def test_a_number_past_the_json_readers_digits_is_refused_naming_the_limit(
    open_server: LiveServer, where: str, caplog: pytest.LogCaptureFixture
) -> None:
    """svc-02: valid JSON (RFC 8259 sets no limit on digits) that the server's JSON reader
    refuses is answered as a too-deep body is: 422 invalid-request at `body`, saying which
    limit — not FastAPI's 400 http-error, which no document lists."""
    client = open_server.client()
    number = "1" + "0" * 5_000
    bodies = {
        "facts": ("post", "/facts", '{"content": "x", "confidence": ' + number + "}"),
        "document": (
            "put",
            "/document",
            '{"facts": [{"id": "fact_big", "content": "big", "n": ' + number + "}]}",
        ),
    }
    method, path, body = bodies[where]
    with caplog.at_level(logging.INFO):
        response = client.request(
            method, ALICE + path, content=body, headers={"content-type": "application/json"}
        )
    problem = assert_problem(response, 422, "invalid-request")
    assert [error["location"] for error in problem["errors"]] == ["body"]
    assert "4,300 digits" in problem["detail"]
    assert number[:100] not in response.text
    no_stack_trace(caplog.records)
    assert open_server.store.facts("alice", "coder") == {}


NOT_JSON_BODIES = {
    "a summary": ("put", "/document", '{"facts": [], "user": {"workContext": {"summary": NaN}}}'),
    "a section's key": (
        "put",
        "/document",
        '{"facts": [], "user": {"workContext": {"summary": "s", "n": Infinity}}}',
    ),
    "a fact's key": (
        "put",
        "/document",
        '{"facts": [{"id": "fact_odd", "content": "odd", "n": [1, -Infinity]}]}',
    ),
    "a confidence": ("post", "/facts", '{"content": "x", "confidence": NaN}'),
    "a mem0 message": (
        "post",
        "/v3/memories/add/",
        '{"messages": [{"role": "user", "content": "hi", "n": NaN}], "user_id": "alice", '
        '"agent_id": "coder", "infer": false}',
    ),
}


@pytest.mark.parametrize("where", NOT_JSON_BODIES)
def test_nan_and_infinity_in_a_body_are_refused_as_not_json(
    open_server: LiveServer, where: str, caplog: pytest.LogCaptureFixture
) -> None:
    """svc7-02: Python's JSON reader takes NaN and Infinity, JSON has neither (RFC 8259).
    Stored, a summary's NaN made every later read of the user's summaries, document and
    export a 500; refused at the door, they are a 422 at `body` and nothing changes."""
    client = open_server.client()
    method, path, body = NOT_JSON_BODIES[where]
    url = path if path.startswith("/v3/") else ALICE + path
    with caplog.at_level(logging.INFO):
        response = client.request(
            method, url, content=body, headers={"content-type": "application/json"}
        )
    problem = assert_problem(response, 422, "invalid-request")
    assert [error["location"] for error in problem["errors"]] == ["body"]
    assert "not JSON" in problem["detail"]
    no_stack_trace(caplog.records)
    assert open_server.store.facts("alice", "coder") == {}
    summaries = client.get("/v1/users/alice/summaries")
    assert summaries.status_code == 200
    assert summaries.json()["user"]["workContext"] == {"summary": "", "updatedAt": ""}


def test_a_nan_another_writer_stored_is_answered_as_null(open_server: LiveServer) -> None:
    """svc7-02: a NaN that came in another way (`deermem import` reads Python's JSON, a file
    edited by hand) is answered as `null`, as the lists already write it — not a 500 on
    every read of that fact, the document, the summaries or the export."""
    memory = open_server.memory.scoped(user="alice", agent="coder")
    nan = float("nan")
    memory.import_document(
        {
            "facts": [{"id": "fact_nan", "content": "Alice keeps odd numbers", "n": [1, nan]}],
            "user": {"workContext": {"summary": nan}},
        }
    )
    client = open_server.client()
    for path in [
        f"{ALICE}/facts/fact_nan",
        f"{ALICE}/document",
        "/v1/users/alice/summaries",
        "/v1/users/alice/export",
        f"{ALICE}/facts",
    ]:
        response = client.get(path)
        assert response.status_code == 200, (path, response.text)
        assert "NaN" not in response.text
        json.loads(response.text, parse_constant=lambda word: pytest.fail(word))
    assert client.get(f"{ALICE}/facts/fact_nan").json()["n"] == [1, None]


@on_both_stores
def test_a_summary_section_nested_too_deep_is_refused(open_server: LiveServer) -> None:
    client = open_server.client()
    document = {
        "facts": [],
        "user": {"workContext": {"summary": "Works on deermem", "notes": nested(40)}},
    }
    problem = assert_problem(client.put(f"{ALICE}/document", json=document), 422, "invalid-fact")
    assert problem["field"].startswith("user.workContext.notes")
    assert client.get("/v1/users/alice/summaries").json()["user"]["workContext"]["summary"] == ""


@on_both_stores
@pytest.mark.parametrize(
    "fact",
    [
        # One unknown field too large, several that are together, a source that keeps too much.
        {"blob": "x" * 70_000},
        {f"k{n}": "y" * 10_000 for n in range(7)},
        {"source": {"type": "import", "attachment": ["z" * 1_000] * 70}},
        {"many": list(range(70_000))},
    ],
)
def test_unknown_fields_past_their_size_are_refused(
    open_server: LiveServer, fact: dict[str, object]
) -> None:
    client = open_server.client()
    document = {"facts": [{"id": "fact_big", "content": "big", **fact}]}
    problem = assert_problem(client.put(f"{ALICE}/document", json=document), 422, "invalid-fact")
    assert "65,536" in problem["allowed"]
    assert "x" * 100 not in json.dumps(problem)  # the value never travels back
    assert open_server.store.facts("alice", "coder") == {}


def test_a_fact_file_nested_too_deep_is_a_corrupt_file_never_a_recursion(
    tmp_path: Path,
) -> None:
    """A file written by hand (or by another tool) is read back under the same bound."""
    memory = Memory.open(tmp_path, MemoryConfig(), user="alice", agent="coder")
    fact_id = memory.create_fact("Alice uses uv").fact_id
    assert fact_id is not None
    (path,) = (tmp_path / "users" / "alice" / "agents" / "coder" / "facts").rglob("*.md")
    block = "".join("  " * (level + 1) + "-\n" for level in range(900))
    text = path.read_text("utf-8").replace("\n---\n", f"\nshape:\n{block}{'  ' * 901}- 1\n---\n", 1)
    path.write_text(text, "utf-8")
    with pytest.raises(CorruptMemoryFile) as refused:
        memory.reload()
    assert str(path) in str(refused.value)
    assert "nested at most 32 deep" in str(refused.value)


# --- 7: an id no fact can have is not found, on both stores ------------------------------------


@pytest.fixture
def each_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[list[ServedStore]]:
    """A Markdown store and a PostgreSQL one, for a test that must see both answer alike."""
    stores = [ServedStore.make(kind, tmp_path / kind, request) for kind in KINDS]
    try:
        yield stores
    finally:
        for served in stores:
            served.close()


def test_an_id_no_fact_can_have_is_not_found_on_both_stores(each_store: list[ServedStore]) -> None:
    """A NUL (or another character no id holds) never reaches a store: 404 on both."""
    for served in each_store:
        with live_server(served) as (server, _):
            client = server.client()
            assert client.post(f"{ALICE}/facts", json={"content": "Alice uses uv"}).is_success
            for fact_id in ("fact_%00", "%00", "fact_%00x", "fact%0A", "fact_%E2%80%AE"):
                for method, path in [
                    ("GET", f"{ALICE}/facts/{fact_id}"),
                    ("PATCH", f"{ALICE}/facts/{fact_id}"),
                    ("DELETE", f"{ALICE}/facts/{fact_id}"),
                    ("GET", f"{ALICE}/facts/{fact_id}/why"),
                    ("POST", f"{ALICE}/archive/{fact_id}/restore"),
                    ("DELETE", f"{ALICE}/archive/{fact_id}"),
                ]:
                    body = {"content": "x"} if method == "PATCH" else None
                    response = client.request(method, path, json=body)
                    where = (served.kind, method, path, response.text)
                    assert response.status_code == 404, where
                    assert response.json()["type"] == "urn:deermem:problem:fact-not-found", where
            # A NUL anywhere else is refused or not found, never a server error.
            for path, params in [
                (f"{ALICE}/search", {"q": "uv\x00"}),
                (f"{ALICE}/facts", {"category": "a\x00b"}),
                (f"{ALICE}/facts", {"cursor": "\x00"}),
                (f"{ALICE}/archive", {"cursor": "\x00\x00"}),
            ]:
                assert client.get(path, params=params).status_code < 500, (served.kind, params)
            bodies: list[dict[str, object]] = [
                {"content": "nul\x00inside"},
                {"content": "ok", "topics": ["\x00"]},
            ]
            for refused in bodies:
                assert client.post(f"{ALICE}/facts", json=refused).status_code == 422


# --- 8: the 401's reason -----------------------------------------------------------------------


@pytest.fixture
def guarded(store: ServedStore) -> Iterator[tuple[LiveServer, dict[str, str]]]:
    with live_server(store, tokens={"alice": {"users": ["alice"]}}) as running:
        yield running


def test_a_tokens_file_broken_after_start_is_named_in_the_log(
    guarded: tuple[LiveServer, dict[str, str]], caplog: pytest.LogCaptureFixture
) -> None:
    """svc7-05: the answer says "its log has the details"; the log line named only the
    exception's class, not the file nor what is wrong in it (as the MCP server's does)."""
    server, tokens = guarded
    server.tokens.path.write_text('{"version": 1, "tokens": [{"id": 7}]}', "utf-8")
    with caplog.at_level(logging.INFO):
        response = server.client(tokens["alice"]).get(f"{ALICE}/facts")
    assert_problem(response, 500, "server-misconfigured")
    [line] = [r.getMessage() for r in caplog.records if "server-misconfigured" in r.getMessage()]
    assert str(server.tokens.path) in line
    assert "tokens[0]" in line
    assert tokens["alice"] not in caplog.text


def raw_get(url: str, path: str, header: str | None) -> httpx.Response:
    """GET with an ``Authorization`` line sent byte for byte (httpx refuses to send
    ``Bearer `` with its trailing space), read back as an httpx response."""
    parts = urlsplit(url)
    lines = [f"GET {path} HTTP/1.1", f"Host: {parts.netloc}", "Connection: close"]
    if header is not None:
        lines.append(f"Authorization:{header}")
    with socket.create_connection((parts.hostname or "", parts.port or 0), timeout=30) as raw:
        raw.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        received = b""
        while chunk := raw.recv(65536):
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = [(name, value) for name, _, value in (line.partition(": ") for line in header_lines)]
    return httpx.Response(int(status_line.split()[1]), headers=headers, content=body)


REASONS = [
    ("Bearer", "malformed"),
    ("Bearer ", "malformed"),
    ("Bearer    ", "malformed"),
    ("bearer", "malformed"),
    ("", "malformed"),  # the header is there, but empty
    ("Basic YWxpY2U6cHc=", "malformed"),
    ("Token dmt_0123456789ab_" + "A" * 43, "malformed"),  # mem0's scheme: its routes alone
    ("dmt_0123456789ab_" + "A" * 43, "malformed"),  # a bare token
    ("Bearer dmt_0123456789ab_" + "A" * 43, "invalid"),
    ("Bearer not-a-token", "invalid"),
    (None, "missing"),
]


def test_every_401_says_why(guarded: tuple[LiveServer, dict[str, str]]) -> None:
    server, _ = guarded
    for authorization, reason in REASONS:
        # As sent: one space after the colon, and then the value byte for byte.
        header = None if authorization is None else f" {authorization}"
        response = raw_get(server.url, f"{ALICE}/facts", header)
        problem = assert_problem(response, 401, "unauthorized")
        assert problem["reason"] == reason, authorization
        challenge = response.headers["www-authenticate"]
        assert ('error="invalid_token"' in challenge) is (reason != "missing")
        assert "A" * 43 not in response.text


def test_a_bare_valid_token_is_malformed_not_accepted(
    guarded: tuple[LiveServer, dict[str, str]],
) -> None:
    server, tokens = guarded
    bare = httpx.get(
        f"{server.url}{ALICE}/facts", headers={"Authorization": tokens["alice"]}, timeout=30
    )
    assert assert_problem(bare, 401, "unauthorized")["reason"] == "malformed"
    assert tokens["alice"] not in bare.text
    assert server.client(tokens["alice"]).get(f"{ALICE}/facts").status_code == 200


# --- 9: strict types, the database away, expiring tokens, slow headers --------------------------


WRONG_TYPES = [
    ({"content": "x", "confidence": "0.5"}, "body.confidence"),
    ({"content": "x", "confidence": True}, "body.confidence"),
    ({"content": "x", "confidence": None}, "body.confidence"),
    ({"content": "x", "confidence": [0.5]}, "body.confidence"),
    ({"content": 42}, "body.content"),
    ({"content": "x", "category": 7}, "body.category"),
    ({"content": "x", "topics": "uv"}, "body.topics"),
    ({"content": "x", "expectedValidDays": "30"}, "body.expectedValidDays"),
    ({"content": "x", "expectedValidDays": True}, "body.expectedValidDays"),
    ({"content": "x", "expectedValidDays": 30.5}, "body.expectedValidDays"),
]


def test_values_of_the_wrong_type_are_refused_not_converted(open_server: LiveServer) -> None:
    client = open_server.client()
    for body, location in WRONG_TYPES:
        problem = assert_problem(client.post(f"{ALICE}/facts", json=body), 422, "invalid-request")
        assert problem["errors"][0]["location"] == location, body
    assert open_server.store.facts("alice", "coder") == {}


def test_a_change_of_the_wrong_type_is_refused(open_server: LiveServer) -> None:
    client = open_server.client()
    created = client.post(f"{ALICE}/facts", json={"content": "x", "confidence": 1})  # a number
    assert created.status_code == 201
    assert client.post(
        f"{ALICE}/facts", json={"content": "y", "expectedValidDays": 30.0}
    ).is_success
    fact_id = created.json()["factId"]
    for body in (
        {"confidence": "0.9"},
        {"confidence": False},
        {"expectedRevision": "1", "content": "z"},
    ):
        response = client.patch(f"{ALICE}/facts/{fact_id}", json=body)
        assert_problem(response, 422, "invalid-request")
    assert client.get(f"{ALICE}/facts/{fact_id}").json()["confidence"] == 1.0
    conversation = {"threadId": 7, "messages": [{"role": "user", "content": "hi"}]}
    assert_problem(client.post(f"{ALICE}/conversations", json=conversation), 422, "invalid-request")


def test_the_mcp_tools_refuse_a_confidence_of_the_wrong_type(
    mcp_store: ServedStore, tmp_path: Path
) -> None:
    with http_server(mcp_store, "--user", "alice", log=tmp_path / "mcp.log") as server:

        async def scenario() -> None:
            async with http_session(server.url) as client:
                for confidence in ("0.5", True, "high"):
                    arguments = {
                        "content": f"Alice uses uv ({confidence!r})",
                        "confidence": confidence,
                    }
                    result = await client.call_tool("memory_add", arguments)
                    assert result.is_error, (confidence, text_of(result))
                    assert "confidence" in text_of(result)
                added = await call(client, "memory_add", content="Alice uses uv", confidence=1)
                assert added["factId"] is not None

        anyio.run(scenario)
    assert [fact for fact in mcp_store.facts("alice").values() if "uses uv (" in fact] == []


@contextmanager
def database_away(url: str) -> Iterator[None]:
    """The database refuses every connection, and those it had are gone (an outage)."""
    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    admin = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS false')
        connection.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,)
        )
    try:
        yield
    finally:
        with psycopg.connect(admin, autocommit=True) as connection:
            connection.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS true')


@pytest.mark.parametrize("store", ["postgres"], indirect=True)
def test_while_the_database_is_away_the_answer_is_503_with_retry_after(
    open_server: LiveServer, caplog: pytest.LogCaptureFixture
) -> None:
    client = open_server.client()
    assert client.post(f"{ALICE}/facts", json={"content": "Alice uses uv"}).status_code == 201
    assert open_server.store.url is not None
    with caplog.at_level(logging.INFO), database_away(open_server.store.url):
        response = client.get(f"{ALICE}/facts")
        problem = assert_problem(response, 503, "store-unavailable")
        assert int(response.headers["retry-after"]) > 0
        assert PASSWORD not in response.text
        assert "127.0.0.1" not in response.text  # the database's address stays in the log
    no_stack_trace(caplog.records)
    assert PASSWORD not in caplog.text
    assert "nothing was changed" in problem["detail"]
    # And it is passing: once the database is back, so is the memory.
    assert [f["content"] for f in client.get(f"{ALICE}/facts").json()["facts"]] == ["Alice uses uv"]


def test_an_expired_token_is_refused_as_expired(store: ServedStore) -> None:
    clock = Clock(NOW)
    with live_server(store, clock=clock) as (server, _):
        issued = server.tokens.add(users=["alice"], now=NOW, expires_at=NOW + timedelta(hours=1))
        client = server.client(issued.token)
        assert client.get(f"{ALICE}/facts").status_code == 200
        clock.now = NOW + timedelta(minutes=59, seconds=59)
        assert client.get(f"{ALICE}/facts").status_code == 200
        clock.now = NOW + timedelta(hours=1)
        for method, path in [("GET", f"{ALICE}/facts"), ("POST", f"{ALICE}/facts")]:
            response = client.request(method, path, json={"content": "late"})
            problem = assert_problem(response, 401, "unauthorized")
            assert problem["reason"] == "expired"
            assert "expired" in problem["detail"]
    assert store.facts("alice", "coder") == {}


def test_token_add_expires_and_list_says_when(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = ["--root", str(tmp_path)]
    assert main([*root, "init"]) == 0
    capsys.readouterr()
    for when, delta in (("12h", timedelta(hours=12)), ("30d", timedelta(days=30))):
        assert main([*root, "token", "add", "--user", "alice", "--expires", when, "--json"]) == 0
        added = json.loads(capsys.readouterr().out)
        created = datetime.fromisoformat(added["createdAt"])
        assert datetime.fromisoformat(added["expiresAt"]) - created == delta
    assert main([*root, "token", "add", "--admin", "--expires", "2999-01-31", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["expiresAt"] == "2999-01-31T00:00:00Z"
    for wrong, says in (
        ("2020-01-01", "not in the future"),
        ("0h", "not in the future"),
        ("tomorrow", "12h, 30d, 4w"),
        ("-3d", "12h, 30d, 4w"),
    ):
        assert main([*root, "token", "add", "--user", "alice", "--expires", wrong]) == 2, wrong
        error = " ".join(capsys.readouterr().err.replace("│", " ").split())
        assert says in error, (wrong, error)
    # One token that expired already, made as the library makes it.
    tokens = TokenFile(tmp_path / ".server" / "tokens.json")
    old = datetime(2020, 1, 1, tzinfo=UTC)
    gone = tokens.add(users=["bob"], now=old, expires_at=old + timedelta(days=1)).record
    assert main([*root, "token", "list", "--json"]) == 0
    listed = {entry["id"]: entry for entry in json.loads(capsys.readouterr().out)}
    assert listed[gone.token_id]["expiresAt"] == "2020-01-02T00:00:00Z"
    assert listed[gone.token_id]["expired"] is True
    assert sum(entry["expired"] for entry in listed.values()) == 1
    assert main([*root, "token", "list"]) == 0
    table = capsys.readouterr().out
    assert "expires" in table
    assert "2020-01-02" in table
    assert table.count("(expired)") == 1
    assert "never" not in table  # every token here has an expiry


def test_the_mcp_server_refuses_an_expired_token_as_expired(
    mcp_store: ServedStore, tmp_path: Path
) -> None:
    tokens = TokenFile(mcp_store.tokens_file)
    old = datetime(2020, 1, 1, tzinfo=UTC)
    expired = tokens.add(users=["alice"], now=old, expires_at=old + timedelta(days=1)).token
    valid = tokens.add(users=["alice"], now=old, expires_at=datetime(2999, 1, 1, tzinfo=UTC)).token
    with http_server(mcp_store, "--agent", "coder", log=tmp_path / "mcp.log") as server:
        refused = initialize(server, Authorization=f"Bearer {expired}")
        assert assert_problem(refused, 401, "unauthorized")["reason"] == "expired"
        bare = initialize(server, Authorization=valid)
        assert assert_problem(bare, 401, "unauthorized")["reason"] == "malformed"
        assert initialize(server, Authorization=f"Bearer {valid}").status_code == 200


def closed_by_server(connection: socket.socket, *, trickle: bytes, rounds: int) -> bool:
    """Send ``trickle`` a byte at a time, 0.2 s apart; whether the server closed the
    connection (without answering) before ``rounds`` bytes went out."""
    for round_ in range(rounds):
        readable, _, _ = select.select([connection], [], [], 0.2)
        if readable:
            try:
                return connection.recv(4096) == b""
            except ConnectionResetError:
                # Closed with bytes of ours unread: the server's kernel answers with a reset.
                return True
        if not trickle:
            continue
        at = round_ % len(trickle)
        try:
            connection.sendall(trickle[at : at + 1])
        except (BrokenPipeError, ConnectionResetError):
            return True
    return False


def test_a_client_that_trickles_its_headers_is_cut_off(tmp_path: Path) -> None:
    """Slowloris: a header byte now and then would hold a connection for ever."""
    log = tmp_path / "serve.log"
    assert main(["--root", str(tmp_path / "store"), "init"]) == 0
    args = deermem("--root", str(tmp_path / "store"), "serve", "--header-timeout", "1")
    with serving(args, log) as url:
        address = (urlsplit(url).hostname or "", urlsplit(url).port or 0)
        with socket.create_connection(address, timeout=30) as slow:
            slow.sendall(b"GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            assert closed_by_server(slow, trickle=b"X-Padding: aaaa\r\n", rounds=150)
        with socket.create_connection(address, timeout=30) as silent:  # sends nothing at all
            assert closed_by_server(silent, trickle=b"", rounds=150)
        with socket.create_connection(address, timeout=30) as kept:
            # A kept-alive connection gets the same time for each request's headers ...
            kept.sendall(b"GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            answer = b""
            while not answer.endswith(b"}"):  # the head and the JSON body
                answer += kept.recv(4096)
            assert answer.startswith(b"HTTP/1.1 200 OK")
            kept.sendall(b"GET /v1/health HTTP/1.1\r\n")
            assert closed_by_server(kept, trickle=b"X-Padding: aaaa\r\n", rounds=150)
        # ... and a client that sends its request at once is served as before.
        assert httpx.get(f"{url}/v1/health", timeout=30).status_code == 200
        assert "Traceback" not in log.read_text()


def test_a_body_that_is_not_utf8_is_an_invalid_request_naming_the_rule(
    open_server: LiveServer,
) -> None:
    client = open_server.client()
    response = client.post(
        f"{ALICE}/facts",
        content=b'{"content": "caf\xe9"}',  # Latin-1, not UTF-8
        headers={"content-type": "application/json"},
    )
    problem = assert_problem(response, 422, "invalid-request")
    assert "UTF-8" in str(problem["detail"])
    assert open_server.store.facts("alice", "coder") == {}


def test_a_blank_category_filter_is_refused_not_ignored(open_server: LiveServer) -> None:
    client = open_server.client()
    assert client.post(f"{ALICE}/facts", json={"content": "Alice uses uv"}).status_code == 201
    response = client.get(f"{ALICE}/search", params={"q": "uv", "category": "\n"})
    problem = assert_problem(response, 422, "invalid-fact")
    assert problem["field"] == "category"
    infer = {"messages": [{"role": "user", "content": "hi"}], "user_id": "alice", "infer": "yes"}
    assert client.post("/v3/memories/add/", json=infer).status_code == 422
