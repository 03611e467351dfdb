"""Authentication and isolation: a token reaches its own users and learns nothing of others."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio.to_thread
import httpx
import pytest

from deermem.service.http.app import create_app
from deermem.service.settings import ServerSettings

from ..served_store import ServedStore, on_both_stores
from .conftest import LiveServer, start_server

BOB = "/v1/users/bob/agents/coder"
ALICE = "/v1/users/alice/agents/coder"


@pytest.fixture
def guarded(store: ServedStore) -> Iterator[tuple[LiveServer, dict[str, str]]]:
    server, tokens = start_server(
        store,
        tokens={
            "alice": {"users": ["alice"], "name": "alice's laptop"},
            "bob": {"users": ["bob"]},
            "admin": {"admin": True},
        },
    )
    yield server, tokens
    server.stop()


def without_request_id(response: httpx.Response) -> tuple[int, str, dict[str, object]]:
    body = dict(response.json())
    body.pop("requestId")
    return response.status_code, response.headers["content-type"], body


def test_every_route_needs_a_valid_token(guarded: tuple[LiveServer, dict[str, str]]) -> None:
    server, tokens = guarded
    anonymous = server.client()
    assert anonymous.get("/v1/health").status_code == 200  # health needs none
    missing = anonymous.get(f"{ALICE}/facts")
    assert missing.status_code == 401
    assert missing.headers["www-authenticate"] == 'Bearer realm="deermem"'
    assert missing.json()["reason"] == "missing"
    assert anonymous.get("/v1/config").status_code == 401
    forged = tokens["alice"][:-4] + "AAAA"
    invalid = server.client(forged).get(f"{ALICE}/facts")
    assert invalid.status_code == 401
    assert invalid.json()["reason"] == "invalid"
    assert 'error="invalid_token"' in invalid.headers["www-authenticate"]
    assert server.client("not-a-token").get(f"{ALICE}/facts").status_code == 401
    assert server.client(tokens["alice"]).get(f"{ALICE}/facts").status_code == 200


@on_both_stores
def test_alices_token_cannot_read_write_search_or_learn_of_bob(
    guarded: tuple[LiveServer, dict[str, str]],
) -> None:
    server, tokens = guarded
    bob = server.client(tokens["bob"])
    secret = bob.post(f"{BOB}/facts", json={"content": "Bob's secret plan"}).json()["factId"]
    bob.delete(f"{BOB}/facts/{secret}")  # one archived fact and a receipt
    kept = bob.post(f"{BOB}/facts", json={"content": "Bob keeps this"}).json()["factId"]
    bobs_before = server.store.holdings("bob")
    alice = server.client(tokens["alice"])
    nowhere = without_request_id(alice.get("/v1/nowhere"))
    attempts = [
        alice.get(f"{BOB}/facts"),
        alice.get(f"{BOB}/facts/{kept}"),
        alice.get(f"{BOB}/facts/{kept}/why"),
        alice.patch(f"{BOB}/facts/{kept}", json={"content": "hijacked"}),
        alice.delete(f"{BOB}/facts/{kept}"),
        alice.post(f"{BOB}/facts", json={"content": "planted"}),
        alice.get(f"{BOB}/search", params={"q": "secret"}),
        alice.get(f"{BOB}/context"),
        alice.get(f"{BOB}/context?query=secret%20plan%FF%27%20OR%201%3D1"),  # not UTF-8
        alice.get(f"{BOB}/audit"),
        alice.get(f"{BOB}/archive"),
        alice.get(f"{BOB}/archive/{secret}"),
        alice.post(f"{BOB}/archive/{secret}/restore"),
        alice.delete(f"{BOB}/archive/{secret}"),
        alice.get(f"{BOB}/document"),
        alice.put(f"{BOB}/document", json={"facts": []}),
        alice.get("/v1/users/bob/summaries"),
        alice.post(
            f"{BOB}/conversations",
            json={"threadId": "t", "messages": [{"role": "user", "content": "hi"}]},
        ),
        # A user who has no memory at all answers exactly the same.
        alice.get("/v1/users/nobody-at-all/agents/coder/facts"),
    ]
    for response in attempts:
        assert without_request_id(response) == nowhere, response.request.url
    # Nothing of Bob's changed, nothing was planted.
    bob_memory = server.memory.scoped(user="bob", agent="coder")
    assert [fact.content for fact in bob_memory.list_facts()] == ["Bob keeps this"]
    assert [entry.fact_id for entry in bob_memory.list_archived()] == [secret]
    assert server.store.holdings("bob") == bobs_before
    assert server.store.facts("bob", "coder").keys() == {kept}
    jobs = server.store.state_dir / "jobs"
    assert not jobs.exists() or not any(jobs.iterdir())
    # And Alice's own memory works with the same token.
    assert alice.post(f"{ALICE}/facts", json={"content": "Alice's note"}).status_code == 201


def test_an_admin_token_reaches_every_user(guarded: tuple[LiveServer, dict[str, str]]) -> None:
    server, tokens = guarded
    admin = server.client(tokens["admin"])
    for user in ("alice", "bob", "carol@example.com"):
        created = admin.post(f"/v1/users/{user}/agents/coder/facts", json={"content": "hello"})
        assert created.status_code == 201, created.text
    assert server.memory.scoped(user="carol@example.com", agent="coder").list_facts()


def test_a_revoked_token_stops_working_without_a_restart(
    guarded: tuple[LiveServer, dict[str, str]],
) -> None:
    server, tokens = guarded
    alice = server.client(tokens["alice"])
    assert alice.get(f"{ALICE}/facts").status_code == 200
    token_id = tokens["alice"].split("_")[1]
    server.tokens.revoke(token_id)
    assert alice.get(f"{ALICE}/facts").status_code == 401
    # A token added while the server runs works at once.
    fresh = server.tokens.add(users=["alice"], now=server.memory.now()).token
    assert server.client(fresh).get(f"{ALICE}/facts").status_code == 200


def test_revoking_every_token_never_opens_the_server(
    guarded: tuple[LiveServer, dict[str, str]],
) -> None:
    server, _ = guarded
    for record in server.tokens.records():
        server.tokens.revoke(record.token_id)
    assert server.client().get(f"{ALICE}/facts").status_code == 401


def test_a_token_added_to_an_open_loopback_server_closes_it(live: LiveServer) -> None:
    open_client = live.client()
    assert open_client.get(f"{ALICE}/facts").status_code == 200
    issued = live.tokens.add(users=["alice"], now=live.memory.now())
    assert open_client.get(f"{ALICE}/facts").status_code == 401
    assert live.client(issued.token).get(f"{ALICE}/facts").status_code == 200


def test_a_request_hands_the_thread_pool_only_its_routes_work(
    guarded: tuple[LiveServer, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 23, point 5: the bearer check and the scope run on the event loop, as the MCP
    server's bearer check does; only the route's own work, which reads and writes files,
    goes to a worker thread (a hop there and back costs more CPU than either check)."""
    server, tokens = guarded
    alice = server.client(tokens["alice"])
    hops: list[str] = []
    run_sync = anyio.to_thread.run_sync

    async def counted(function: Callable[..., object], *args: object, **options: Any) -> object:
        hops.append(getattr(function, "__name__", type(function).__name__))
        return await run_sync(function, *args, **options)

    monkeypatch.setattr(anyio.to_thread, "run_sync", counted)
    requests = [
        lambda: alice.post(f"{ALICE}/facts", json={"content": "Uses uv"}),
        lambda: alice.get(f"{ALICE}/context"),
        lambda: alice.get(f"{ALICE}/search", params={"q": "uv"}),
        lambda: alice.get(f"{ALICE}/facts"),
    ]
    for send in requests:
        hops.clear()
        response = send()
        assert response.status_code in (200, 201), response.text
        assert len(hops) == 1, (response.request.url, hops)
    # The checks answer as before, from the event loop: another user's scope, no token,
    # a forged one.
    nowhere = without_request_id(alice.get("/v1/nowhere"))
    assert without_request_id(alice.get(f"{BOB}/context")) == nowhere
    assert server.client().get(f"{ALICE}/search", params={"q": "uv"}).status_code == 401
    forged = server.client(tokens["alice"][:-4] + "AAAA")
    assert forged.get(f"{ALICE}/context").json()["reason"] == "invalid"
    for header in ("Bearer", f"Basic {tokens['alice']}", tokens["alice"]):
        refused = server.client().get(f"{ALICE}/context", headers={"Authorization": header})
        assert (refused.status_code, refused.json()["reason"]) == (401, "malformed"), header


def test_only_bearer_is_accepted_and_mem0s_token_only_on_its_routes(
    guarded: tuple[LiveServer, dict[str, str]],
) -> None:
    """docs/server.md: send exactly `Authorization: Bearer <token>` — the scheme in any case,
    as RFC 9110 and the MCP SDK read it. mem0's `Token <token>` is for the mem0-compatible
    routes (it was accepted on every route)."""
    server, tokens = guarded
    token = tokens["alice"]
    client = server.client()
    for scheme in ("Bearer", "bearer", "BEARER"):
        answered = client.get(f"{ALICE}/facts", headers={"Authorization": f"{scheme} {token}"})
        assert answered.status_code == 200, scheme
    for scheme in ("Token", "token", "Basic"):
        refused = client.get(f"{ALICE}/facts", headers={"Authorization": f"{scheme} {token}"})
        assert (refused.status_code, refused.json()["reason"]) == (401, "malformed"), scheme
        assert refused.json()["detail"] == "the Authorization header is not 'Bearer <token>'"
    for scheme in ("Token", "token", "Bearer"):
        mem0 = client.get("/v1/ping/", headers={"Authorization": f"{scheme} {token}"})
        assert mem0.status_code == 200, scheme
    refused = client.get("/v1/ping/", headers={"Authorization": f"Basic {token}"})
    assert refused.status_code == 401
    assert "or mem0's 'Token <token>'" in refused.json()["detail"]
    # No header at all: the mem0 routes name mem0's scheme too (they said Bearer alone).
    missing = client.get("/v1/ping/")
    assert (missing.status_code, missing.json()["reason"]) == (401, "missing")
    assert missing.json()["detail"] == (
        "send Authorization: Bearer <token> (or mem0's 'Token <token>')"
    )
    assert client.get(f"{ALICE}/facts").json()["detail"] == "send Authorization: Bearer <token>"


def test_every_route_of_a_scope_declares_the_bearer_scheme(tmp_path: Path) -> None:
    """The bearer check is the OpenAPI document's security scheme, on every route that needs
    a token (all but health)."""
    document = create_app(ServerSettings(root=str(tmp_path))).openapi()
    scheme = document["components"]["securitySchemes"]["HTTPBearer"]
    assert scheme["type"] == "http"
    assert scheme["scheme"] == "bearer"
    assert "deermem token add" in scheme["description"]
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            declared = operation.get("security")
            if path == "/v1/health":
                assert declared is None
            else:
                assert declared == [{"HTTPBearer": []}], (method, path)
