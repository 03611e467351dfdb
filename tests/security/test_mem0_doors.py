"""The mem0-compatible routes, tried as an attacker would: a token never reaches another user's
memories through any of them (404, no data) — ``add`` naming another user included — and
mem0's ``Token`` scheme is accepted beside ``Bearer``, with the same checks. Both stores."""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from ..mem0_env import MEM0_DIR

os.environ["MEM0_TELEMETRY"] = "False"  # before mem0 is imported: no PostHog
os.environ["MEM0_DIR"] = MEM0_DIR

from mem0 import MemoryClient
from mem0.exceptions import MemoryNotFoundError

from ..integrations.conftest import loopback_only as loopback_only
from ..served_store import ServedStore, on_both_stores
from ..server.conftest import LiveServer, start_server
from ..server.conftest import store as store

_CLIENTS: list[MemoryClient] = []


@pytest.fixture
def served(store: ServedStore) -> Iterator[tuple[LiveServer, dict[str, str]]]:
    server, tokens = start_server(
        store, tokens={"alice": {"users": ["alice"]}, "bob": {"users": ["bob"]}}
    )
    yield server, tokens
    while _CLIENTS:
        _CLIENTS.pop().client.close()
    server.stop()


def mem0(live: LiveServer, token: str) -> MemoryClient:
    client = MemoryClient(api_key=token, host=live.url)
    _CLIENTS.append(client)
    return client


@on_both_stores
def test_a_token_never_reaches_another_users_memories(
    served: tuple[LiveServer, dict[str, str]], store: ServedStore
) -> None:
    live, tokens = served
    bob = mem0(live, tokens["bob"])
    secret = bob.add("Bob's secret: the vault code is 4711", user_id="bob", infer=False)
    bob_fact = secret["results"][0]["id"]
    before = store.everything()

    alice = mem0(live, tokens["alice"])
    attempts: list[Any] = [
        lambda: alice.add("planted", user_id="bob", infer=False),
        lambda: alice.add("planted", filters={"user_id": "bob"}, infer=False),
        lambda: alice.search("vault", filters={"user_id": "bob"}),
        lambda: alice.get_all(filters={"user_id": "bob"}),
        lambda: alice.get(bob_fact),
        lambda: alice.update(bob_fact, text="overwritten"),
        lambda: alice.delete(bob_fact),
        lambda: alice.history(bob_fact),
        lambda: alice.delete_all(user_id="bob"),
    ]
    for attempt in attempts:
        with pytest.raises(MemoryNotFoundError) as refused:
            attempt()
        assert "vault" not in str(refused.value)
        # The code with its words: alone, "4711" may turn up in a request's random hex id.
        assert "code is 4711" not in str(refused.value)
    assert store.everything() == before
    assert bob.get(bob_fact)["memory"] == "Bob's secret: the vault code is 4711"


@on_both_stores
def test_another_users_event_is_not_found(
    served: tuple[LiveServer, dict[str, str]], store: ServedStore
) -> None:
    live, tokens = served
    with httpx.Client(base_url=live.url) as http:
        for scheme in ("Token", "Bearer"):
            answer = http.get(
                "/v1/event/job_0123456789abcdef0123456789abcdef/",
                headers={"Authorization": f"{scheme} {tokens['alice']}"},
            )
            assert answer.status_code == 404


@pytest.mark.parametrize(
    ("header", "status", "reason"),
    [
        (None, 401, "missing"),
        ("Token", 401, "malformed"),
        ("Token not-a-token", 401, "invalid"),
        ("Basic dXNlcjpwYXNz", 401, "malformed"),
    ],
)
def test_the_token_scheme_has_the_bearer_checks(
    served: tuple[LiveServer, dict[str, str]], header: str | None, status: int, reason: str
) -> None:
    live, tokens = served
    headers = {} if header is None else {"Authorization": header}
    with httpx.Client(base_url=live.url) as http:
        answer = http.get("/v1/ping/", headers=headers)
        assert (answer.status_code, answer.json()["reason"]) == (status, reason)
        good = http.get("/v1/ping/", headers={"Authorization": f"Token {tokens['alice']}"})
        assert good.status_code == 200
        native = http.get(  # mem0's scheme on mem0's routes alone (docs/server.md)
            "/v1/users/alice/agents/__default__/facts",
            headers={"Authorization": f"Token {tokens['alice']}"},
        )
        assert (native.status_code, native.json()["reason"]) == (401, "malformed")


# mem0's client leaves its HTTP connection open when its construction fails.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_client_with_a_bad_token_fails_at_construction(
    served: tuple[LiveServer, dict[str, str]],
) -> None:
    live, _ = served
    with pytest.raises(ValueError, match=r"Error: .*token"):
        MemoryClient(api_key="not-a-token", host=live.url)
    gc.collect()  # its socket is reclaimed here, inside this test
