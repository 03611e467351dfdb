"""The HTTP API end to end: every endpoint over real HTTP, what the gate did as data,
RFC 9457 problems, and the bounds."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client

from deermem.cli import main
from deermem.service.http.app import create_app
from deermem.service.mcp import create_mcp_server
from deermem.service.settings import ServerLimits, ServerSettings

from ..postgres_plugin import client_connections
from ..served_store import PASSWORD, ServedStore, on_both_stores
from .conftest import LiveServer, free_port, run_in_thread, start_server

ALICE = "/v1/users/alice/agents/coder"
PROBLEM = "application/problem+json"


def add(client: httpx.Client, content: str, **fields: object) -> httpx.Response:
    return client.post(f"{ALICE}/facts", json={"content": content, **fields})


def assert_problem(response: httpx.Response, status: int, slug: str) -> dict[str, object]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    body = response.json()
    assert body["type"] == f"urn:deermem:problem:{slug}"
    assert body["status"] == status
    assert body["title"]
    assert body["detail"]
    assert body["requestId"] == response.headers["x-request-id"]
    return dict(body)


@on_both_stores
def test_health_and_config(live: LiveServer) -> None:
    client = live.client()
    assert client.get("/v1/health").json() == {"status": "ok", "version": "0.1.0"}
    response = client.get("/v1/config")
    config = response.json()
    assert config["memory"]["max_facts"] == 10
    assert config["server"]["limits"]["maxTopK"] == 50
    assert config["server"]["authRequired"] is False
    if live.store.url:  # the database is named, its password never shown
        assert config["memory"]["store"].startswith("postgresql://deermem:***@127.0.0.1:")
    assert PASSWORD not in response.text


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("PUT", f"{ALICE}/facts/fact_1", "DELETE, GET, PATCH"),
        ("DELETE", f"{ALICE}/facts", "GET, POST"),
        ("POST", f"{ALICE}/archive/fact_1", "DELETE, GET"),
        ("POST", "/v1/users/org%2Falice", "DELETE"),
        ("DELETE", "/v1/health", "GET"),
    ],
)
def test_a_method_the_path_does_not_take_is_a_405_naming_every_method_it_does(
    live: LiveServer, method: str, path: str, allowed: str
) -> None:
    """svc7-03: `Allow` lists the methods of the path (RFC 9110), not the one method of the
    first route FastAPI made for it."""
    response = live.client().request(method, path)
    assert_problem(response, 405, "http-error")
    assert response.headers["allow"] == allowed


@on_both_stores
def test_a_fact_round_trip(live: LiveServer) -> None:
    client = live.client()
    created = add(client, "  Prefers uv over pip  ", category="preference", confidence=0.8)
    assert created.status_code == 201
    result = created.json()
    assert result["kept"] is True
    assert result["evicted"] == []
    assert result["receipts"] == []
    fact_id = result["factId"]
    assert created.headers["location"] == f"{ALICE}/facts/{fact_id}"
    fact = client.get(f"{ALICE}/facts/{fact_id}").json()
    assert fact["content"] == "Prefers uv over pip"
    assert fact["revision"] == 1
    # The store holds what the API says: the same memory, read directly.
    stored = live.memory.scoped(user="alice", agent="coder").get_fact(fact_id)
    assert stored.content == "Prefers uv over pip"
    assert "Prefers uv over pip" in live.store.facts("alice", "coder")[fact_id]

    patched = client.patch(f"{ALICE}/facts/{fact_id}", json={"confidence": 0.95})
    assert patched.status_code == 200
    assert patched.json()["confidence"] == 0.95
    assert patched.json()["revision"] == 2
    stale = client.patch(
        f"{ALICE}/facts/{fact_id}", json={"confidence": 0.1, "expectedRevision": 1}
    )
    body = assert_problem(stale, 409, "revision-conflict")
    assert (body["expected"], body["actual"], body["factId"]) == (1, 2, fact_id)

    why = client.get(f"{ALICE}/facts/{fact_id}/why").json()
    assert why["status"] == "active"
    assert why["standing"]["rank"] == 1

    removed = client.delete(f"{ALICE}/facts/{fact_id}")
    assert removed.json() == {"factId": fact_id, "archived": True}
    assert_problem(client.get(f"{ALICE}/facts/{fact_id}"), 404, "fact-not-found")
    archive = client.get(f"{ALICE}/archive").json()
    assert [entry["fact"]["id"] for entry in archive["entries"]] == [fact_id]
    assert archive["entries"][0]["reason"] == "deleted"

    restored = client.post(f"{ALICE}/archive/{fact_id}/restore")
    assert restored.json()["restored"] is True
    assert client.get(f"{ALICE}/facts/{fact_id}").status_code == 200
    client.delete(f"{ALICE}/facts/{fact_id}")
    assert client.delete(f"{ALICE}/archive/{fact_id}").json() == {
        "factId": fact_id,
        "purged": True,
    }
    assert client.get(f"{ALICE}/facts/{fact_id}/why").json()["status"] == "gone"
    assert_problem(client.delete(f"{ALICE}/archive/{fact_id}"), 404, "fact-not-found")
    gone = assert_problem(client.get(f"{ALICE}/archive/{fact_id}"), 404, "fact-not-found")
    assert gone["where"] == "archive"
    assert_problem(client.get(f"{ALICE}/archive/fact_unknown"), 404, "fact-not-found")


@on_both_stores
def test_create_returns_what_the_capacity_gate_did(live: LiveServer) -> None:
    client = live.client()
    for number in range(10):  # the cap is 10
        assert add(client, f"fact number {number}", confidence=0.5 + number / 100).json()["kept"]
    strong = add(client, "a confident newcomer", confidence=0.99).json()
    assert strong["kept"] is True
    assert len(strong["evicted"]) == 1
    evicted = strong["evicted"][0]
    receipt = strong["receipts"][0]
    assert receipt["reason"] == "capacity"
    assert receipt["trigger"] == "manual"
    assert [entry["factId"] for entry in receipt["evicted"]] == [evicted]
    assert "content" not in json.dumps(receipt["evicted"])  # receipts carry no content

    weak = add(client, "a doubtful newcomer", confidence=0.01)
    assert weak.status_code == 201
    body = weak.json()
    assert body["kept"] is False
    assert body["factId"] is None
    assert body["message"].startswith("NOT KEPT: memory is full")  # in plain words (issue 24)
    assert (
        strong["message"]
        == f"stored as {strong['factId']}; to make room, {evicted} went to the archive"
    )
    assert body["evicted"] == [body["proposedFactId"]]  # never a silent drop
    assert weak.headers["location"].endswith(f"/archive/{body['proposedFactId']}")
    # svc-04: the Location can be followed; it holds the entry the archive's page lists
    followed = client.get(weak.headers["location"])
    assert followed.status_code == 200, followed.text
    page = client.get(f"{ALICE}/archive").json()["entries"]
    assert followed.json() == next(e for e in page if e["fact"]["id"] == body["proposedFactId"])
    assert followed.json()["fact"]["content"] == "a doubtful newcomer"
    assert len(client.get(f"{ALICE}/facts", params={"limit": 200}).json()["facts"]) == 10
    audit = client.get(f"{ALICE}/audit").json()["receipts"]
    assert len(audit) == 2
    assert audit[0]["occurredAt"] >= audit[1]["occurredAt"]

    restored = client.post(f"{ALICE}/archive/{body['proposedFactId']}/restore").json()
    assert restored["restored"] is False  # still the weakest: the gate evicts it again
    assert restored["evicted"] == [body["proposedFactId"]]


@on_both_stores
def test_pages_walk_every_fact_once(live: LiveServer) -> None:
    client = live.client()
    ids = {add(client, f"paged fact {n}").json()["factId"] for n in range(7)}
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        params: dict[str, str | int] = {"limit": 3}
        if cursor is not None:
            params["cursor"] = cursor
        page = client.get(f"{ALICE}/facts", params=params).json()
        seen += [fact["id"] for fact in page["facts"]]
        pages += 1
        cursor = page["nextCursor"]
        if cursor is None:
            break
    assert pages == 3
    assert sorted(seen) == sorted(ids)
    assert len(seen) == len(ids)
    assert_problem(
        client.get(f"{ALICE}/facts", params={"cursor": "not-a-cursor"}), 422, "invalid-cursor"
    )
    over = client.get(f"{ALICE}/facts", params={"limit": 201})
    body = assert_problem(over, 422, "invalid-request")
    assert "200" in str(body["detail"])
    assert "query.limit" in str(body["detail"])


@on_both_stores
def test_context_and_search(live: LiveServer) -> None:
    client = live.client()
    add(client, "Don't use pip here; use uv.", category="correction", confidence=0.7)
    for n in range(6):
        add(client, f"Likes tea number {n} with a rather long description", confidence=0.9)
    context = client.get(f"{ALICE}/context").json()
    assert context["block"].startswith("<memory>")
    assert "use uv" in context["text"]
    assert context["manifest"] is None
    small = client.get(f"{ALICE}/context", params={"max_tokens": 30, "explain": True}).json()
    manifest = small["manifest"]
    assert manifest["maxTokens"] == 30
    assert manifest["omitted"]
    assert manifest["injected"][0]["pool"] == "guaranteed"  # the correction holds its place
    add(client, "Drinks coffee black in the morning", confidence=0.5)
    budget = {"max_tokens": 46, "explain": True}  # the block: its <memory> lines count too
    assert "coffee" not in client.get(f"{ALICE}/context", params=budget).json()["text"]
    asked = client.get(f"{ALICE}/context", params={**budget, "query": "coffee"}).json()
    assert "coffee" in asked["text"]  # the question's fact, preferred within the same budget
    assert asked["manifest"]["injected"][0]["pool"] == "guaranteed"
    hostile = client.get(f"{ALICE}/context?query=%FF%27%20OR%201%3D1%20%2A")  # not UTF-8, SQL
    assert hostile.status_code == 200
    long_question = client.get(f"{ALICE}/context", params={"query": "q" * 1001})
    assert "query" in str(assert_problem(long_question, 422, "invalid-request")["detail"])
    hits = client.get(f"{ALICE}/search", params={"q": "pip uv", "top_k": 2}).json()["results"]
    assert hits[0]["fact"]["category"] == "correction"
    assert len(hits) <= 2
    over = client.get(f"{ALICE}/search", params={"q": "tea", "top_k": 51})
    assert "50" in str(assert_problem(over, 422, "invalid-request")["detail"])
    assert_problem(client.get(f"{ALICE}/search"), 422, "invalid-request")  # q is required
    for blank in ({"q": "   "}, {"q": "\t"}):  # nothing to look for, as an empty q
        refused = assert_problem(
            client.get(f"{ALICE}/search", params=blank), 422, "invalid-request"
        )
        assert "not only spaces" in str(refused["detail"])
    blank_question = client.get(f"{ALICE}/context", params={"query": " \u3000 "})
    assert "not only spaces" in str(
        assert_problem(blank_question, 422, "invalid-request")["detail"]
    )


@on_both_stores
def test_document_export_and_import_return_what_the_gate_did(live: LiveServer) -> None:
    client = live.client()
    add(client, "kept through the round trip", confidence=0.9)
    document = client.get(f"{ALICE}/document").json()
    assert [fact["content"] for fact in document["facts"]] == ["kept through the round trip"]
    document["facts"] += [
        {"content": f"imported {n}", "category": "context", "confidence": 0.5} for n in range(12)
    ]
    result = client.put(f"{ALICE}/document", json=document).json()
    assert len(result["kept"]) == 10
    assert len(result["evicted"]) == 3
    assert result["receipts"][0]["trigger"] == "import"
    assert_problem(client.put(f"{ALICE}/document", json={"user": {}}), 422, "invalid-fact")
    summaries = client.get("/v1/users/alice/summaries").json()
    assert set(summaries) >= {"user", "history", "revision"}


@on_both_stores
def test_importing_an_archived_facts_id_is_a_conflict_naming_the_fact(
    live: LiveServer, caplog: pytest.LogCaptureFixture
) -> None:
    """svc-01: the id of an archived fact with another text is the caller's to fix (restore
    or purge it), a 409 naming the fact — not a 500 the log calls a server failure."""
    client = live.client()
    fact_id = add(client, "Alice likes green tea").json()["factId"]
    client.delete(f"{ALICE}/facts/{fact_id}")  # to the archive
    kept = add(client, "Alice walks to work").json()["factId"]
    document = {"facts": [{"id": fact_id, "content": "Alice likes black coffee"}]}
    with caplog.at_level("INFO", logger="deermem"):
        refused = client.put(f"{ALICE}/document", json=document)
    problem = assert_problem(refused, 409, "archived-fact")
    assert problem["factId"] == fact_id
    assert "restore" in str(problem["detail"])
    assert "purge" in str(problem["detail"])
    assert "coffee" not in refused.text
    assert not [record for record in caplog.records if record.levelname == "ERROR"]
    facts = client.get(f"{ALICE}/facts").json()["facts"]
    assert [fact["id"] for fact in facts] == [kept]  # nothing was imported
    assert client.get(f"{ALICE}/facts/{fact_id}/why").json()["status"] == "archived"


@on_both_stores
def test_errors_are_problems_with_typed_fields_and_no_values(live: LiveServer) -> None:
    client = live.client()
    add(client, "the one and only")
    duplicate = assert_problem(add(client, "THE ONE AND ONLY"), 409, "duplicate-fact")
    assert str(duplicate["existingId"]).startswith("fact_")
    blank = assert_problem(add(client, "   "), 422, "invalid-fact")
    assert blank["field"] == "content"
    assert "value" not in blank
    bad_agent = client.get("/v1/users/alice/agents/Bad_Agent!/facts")
    assert "path.agent" in str(assert_problem(bad_agent, 422, "invalid-request")["detail"])
    typo = client.post(f"{ALICE}/facts", json={"content": "x", "confidnce": 0.4})
    # a name the API does not declare is the caller's text: described, never quoted (prv-02)
    assert assert_problem(typo, 422, "invalid-request")["errors"] == [
        {
            "location": "body.(a name of 9 characters)",
            "message": "Extra inputs are not permitted",
            "rule": "extra_forbidden",
        }
    ]
    assert_problem(client.get("/v1/nowhere"), 404, "not-found")
    empty = client.patch(f"{ALICE}/facts/fact_00000000", json={})
    assert "at least one of" in str(assert_problem(empty, 422, "invalid-request")["detail"])
    not_json = client.post(
        f"{ALICE}/facts", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert_problem(not_json, 422, "invalid-request")


@on_both_stores
def test_a_secret_sent_as_a_field_name_is_not_in_the_refusal(live: LiveServer) -> None:
    """prv-02: a key pasted where a field name belongs comes back to no log and no model;
    declared names and list indexes are still named as they are."""
    token = "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    client = live.client()
    refusals = [
        client.post(f"{ALICE}/facts", json={"content": "ok", token: 1}),
        client.post(f"{ALICE}/facts", json={"content": "ok", "topics": ["a", 3], token: 1}),
        client.post(
            "/v3/memories/add/",
            json={"messages": [{"role": "user", "content": "ok"}], "filters": {token: 1}},
        ),
    ]
    for refused in refusals:
        assert_problem(refused, 422, "invalid-request")
        assert token not in refused.text
    assert refusals[0].json()["detail"] == (
        "body.(a name of 40 characters): Extra inputs are not permitted"
    )
    locations = [e["location"] for e in refusals[1].json()["errors"]]
    assert sorted(locations) == ["body.(a name of 40 characters)", "body.topics.1"]
    assert refusals[2].json()["errors"][0]["location"] == ("body.filters.(a name of 40 characters)")
    assert client.get(f"{ALICE}/facts").json()["facts"] == []


@on_both_stores
def test_a_user_id_with_a_control_character_is_refused_as_invalid_input(
    live: LiveServer,
) -> None:
    """One rule for user ids on both stores (issue 20): a NUL is a control character,
    refused as a 422, never stored (the Markdown store used to keep it) and never a 500."""
    client = live.client()
    nul_user = "/v1/users/ann%00e/agents/coder"
    created = client.post(f"{nul_user}/facts", json={"content": "Stored under a NUL id"})
    listed = client.get(f"{nul_user}/facts")
    for response in (created, listed, client.get(f"{nul_user}/search", params={"q": "x"})):
        body = assert_problem(response, 422, "invalid-identifier")
        assert body["kind"] == "user id"
        assert "control character" in str(body["reason"])
    assert "Stored under a NUL id" not in live.store.everything()


def test_request_ids_are_returned_and_a_callers_own_is_kept(live: LiveServer) -> None:
    client = live.client()
    mine = client.get("/v1/health", headers={"X-Request-ID": "trace-1234abcd"})
    assert mine.headers["x-request-id"] == "trace-1234abcd"
    unsafe = client.get("/v1/health", headers={"X-Request-ID": "bad id\twith tab"})
    assert unsafe.headers["x-request-id"] != "bad id\twith tab"
    assert len(unsafe.headers["x-request-id"]) == 32


def test_bodies_over_the_limit_are_413_naming_it(store: ServedStore) -> None:
    server, _ = start_server(store, limits=ServerLimits(max_body_bytes=1000))
    try:
        client = server.client()
        declared = client.post(f"{ALICE}/facts", json={"content": "x" * 2000})
        body = assert_problem(declared, 413, "body-too-large")
        assert (body["limit"], body["limitName"]) == (1000, "max_body_bytes")

        def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it streams
            yield b'{"content": "'
            for _ in range(20):
                yield b"y" * 100
            yield b'"}'

        streamed = client.post(
            f"{ALICE}/facts", content=chunks(), headers={"content-type": "application/json"}
        )
        assert_problem(streamed, 413, "body-too-large")
        assert server.memory.scoped(user="alice", agent="coder").list_facts() == ()
        assert client.post(f"{ALICE}/facts", json={"content": "small"}).status_code == 201
    finally:
        server.stop()


@on_both_stores
def test_under_eviction_mode_delete_a_deleted_fact_is_explained_by_its_receipt(
    store: ServedStore,
) -> None:
    server, _ = start_server(store, eviction_mode="delete")
    try:
        client = server.client()
        fact_id = add(client, "SECRET-e41 the door code is 4711", category="context").json()[
            "factId"
        ]
        assert "SECRET-e41" in store.everything()  # where the check below looks
        removed = client.delete(f"{ALICE}/facts/{fact_id}")
        assert removed.json() == {"factId": fact_id, "archived": False}
        why = client.get(f"{ALICE}/facts/{fact_id}/why")
        assert why.status_code == 200, why.text
        explained = why.json()
        assert (explained["status"], explained["fact"], explained["archive"]) == (
            "gone",
            None,
            None,
        )
        [receipt] = explained["receipts"]
        assert (receipt["reason"], receipt["trigger"]) == ("deleted", "manual")
        assert receipt["evicted"] == [{"factId": fact_id, "category": "context"}]
        [listed] = client.get(f"{ALICE}/audit").json()["receipts"]
        assert listed == receipt
        assert client.get(f"{ALICE}/archive").json()["entries"] == []
        assert "SECRET-e41" not in why.text
        assert "SECRET-e41" not in store.everything()  # no file, no row, no job record
    finally:
        server.stop()


def test_the_openapi_document_is_served(live: LiveServer) -> None:
    document = live.client().get("/v1/openapi.json").json()
    paths = document["paths"]
    scope = "/v1/users/{user}/agents/{agent}"
    expected = {
        "/v1/health": {"get"},
        "/v1/config": {"get"},
        f"{scope}/facts": {"get", "post"},
        f"{scope}/facts/{{fact_id}}": {"get", "patch", "delete"},
        f"{scope}/facts/{{fact_id}}/why": {"get"},
        f"{scope}/context": {"get"},
        f"{scope}/search": {"get"},
        f"{scope}/conversations": {"post"},
        "/v1/jobs/{job_id}": {"get"},
        f"{scope}/audit": {"get"},
        f"{scope}/archive": {"get"},
        f"{scope}/archive/{{fact_id}}/restore": {"post"},
        f"{scope}/archive/{{fact_id}}": {"get", "delete"},
        f"{scope}/document": {"get", "put"},
        "/v1/users/{user}/summaries": {"get"},
        "/v1/users/{user}/export": {"get"},  # issue 26
        "/v1/users/{user}": {"delete"},  # issue 26
    }
    assert {path: set(ops) for path, ops in paths.items()} == expected
    search = paths[f"{scope}/search"]["get"]
    top_k = next(p for p in search["parameters"] if p["name"] == "top_k")
    assert top_k["schema"]["maximum"] == 50
    assert "application/problem+json" in search["responses"]["422"]["content"]


def test_a_server_that_opened_its_database_closes_it_when_it_stops(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker opens the store its configuration names, and releases its connections on
    shutdown (a memory handed in is its owner's to close: see ``start_server``)."""

    monkeypatch.setenv("DEERMEM_DATABASE_URL", postgres_url)
    settings = ServerSettings(port=free_port(), state_dir=str(tmp_path / "state"))
    server, thread = run_in_thread(create_app(settings), settings.port)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{settings.port}") as client:
            assert client.post(f"{ALICE}/facts", json={"content": "kept"}).status_code == 201
        assert client_connections(postgres_url) >= 1  # the worker's pool
    finally:
        server.should_exit = True
        thread.join(timeout=30)
    assert client_connections(postgres_url, settle=10) == 0


def test_http_mcp_and_the_cli_answer_with_one_description(
    live: LiveServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each record is described once (deermem.results): the HTTP API, the MCP tools and
    ``--json`` give the same JSON for the same answer — every field of the fact, the
    receipt as the audit file holds it."""
    client = live.client()
    fact_id = add(client, "Prefers tabs", category="preference", topics=["style"]).json()["factId"]
    add(client, "Writes Rust at work", confidence=0.9)
    assert client.delete(f"{ALICE}/facts/{fact_id}").status_code == 200
    memory = live.memory.scoped(user="alice", agent="coder")

    async def over_mcp() -> tuple[dict[str, Any], dict[str, Any]]:
        async with Client(create_mcp_server(memory)) as session:
            why = await session.call_tool("memory_why", {"fact_id": fact_id})
            found = await session.call_tool("memory_search", {"query": "rust"})
            assert why.structured_content is not None
            assert found.structured_content is not None
            return why.structured_content, found.structured_content

    def on_the_cli(*args: str) -> Any:
        root = ["--root", str(live.store.root), "--user", "alice", "--agent", "coder"]
        assert main([*root, *args, "--json"]) == 0
        return json.loads(capsys.readouterr().out)

    why, found = anyio.run(over_mcp)
    assert why == client.get(f"{ALICE}/facts/{fact_id}/why").json() == on_the_cli("why", fact_id)
    assert found == client.get(f"{ALICE}/search", params={"q": "rust"}).json()
    assert found["results"] == on_the_cli("search", "rust", "--no-record")
    assert why["fact"]["topics"] == ["style"]
    assert why["fact"]["source"] == {"type": "manual", "threadId": None}  # every field
    (receipt,) = why["receipts"]
    assert (receipt["reason"], receipt["trigger"]) == ("deleted", "manual")
    assert "shadow" not in receipt  # as the audit file holds it: no shadow, no key


def test_the_fact_body_is_the_memorys_input_model(live: LiveServer) -> None:
    """The body of ``POST …/facts`` is NewFact and that of ``PATCH`` FactPatch, the models
    the memory checks every write with: one rule, stated once."""
    document = live.client().get("/v1/openapi.json").json()
    operations = document["paths"]["/v1/users/{user}/agents/{agent}/facts"]
    post = operations["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert post == {"$ref": "#/components/schemas/NewFact"}
    patch = document["paths"]["/v1/users/{user}/agents/{agent}/facts/{fact_id}"]["patch"]
    body = patch["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/FactPatch"}
    client = live.client()
    # A blank category means the default, as for the memory (and the CLI's -c "").
    created = add(client, "Blank category", category="")
    assert created.status_code == 201, created.text
    fact = client.get(f"{ALICE}/facts/{created.json()['factId']}").json()
    assert fact["category"] == "context"


@on_both_stores
def test_every_user_id_and_fact_id_the_library_takes_is_reachable(live: LiveServer) -> None:
    # A user id may have up to 1,024 bytes and a fact id 250 characters (a LangGraph key):
    # what the CLI and the library can write, the API can read and erase.
    client = live.client()
    user = "u" * 1000
    created = client.post(f"/v1/users/{user}/agents/coder/facts", json={"content": "Likes tea"})
    assert created.status_code == 201, created.text
    keyed = live.memory.scoped(user=user, agent="coder")
    fact_id = "k" * 250
    keyed.create_fact("Named by its host", fact_id=fact_id)
    fact = client.get(f"/v1/users/{user}/agents/coder/facts/{fact_id}")
    assert fact.status_code == 200, fact.text
    assert fact.json()["content"] == "Named by its host"
    assert client.delete(f"/v1/users/{user}").status_code == 200
    assert live.memory.scoped(user=user, agent="coder").list_facts() == ()
    too_long = client.get(f"/v1/users/{'u' * 1025}/agents/coder/facts")
    assert too_long.status_code == 422
