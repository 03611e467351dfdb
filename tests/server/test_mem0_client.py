"""mem0's own ``MemoryClient`` against a real ``deermem serve`` (uvicorn on 127.0.0.1), every
method the mem0-compatible routes serve, on both stores."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from ..mem0_env import MEM0_DIR

# mem0 phones PostHog and writes ~/.mem0 unless told otherwise before it is imported.
os.environ["MEM0_TELEMETRY"] = "False"
os.environ["MEM0_DIR"] = MEM0_DIR

from mem0 import AsyncMemoryClient, MemoryClient
from mem0.exceptions import MemoryError as Mem0Error
from mem0.exceptions import MemoryNotFoundError, ValidationError

from deermem.model import Scope
from deermem.testing import ScriptedChatServer

from ..integrations.conftest import loopback_only as loopback_only
from ..served_store import ServedStore, on_both_stores
from ..server.conftest import LiveServer, start_server
from ..server.conftest import store as store
from ..wire_support import answer, model_settings, new_fact

ALICE = {"user_id": "alice"}


@pytest.fixture
def live(store: ServedStore) -> Iterator[LiveServer]:
    server, _ = start_server(store, max_facts=10)
    yield server
    server.stop()


@pytest.fixture
def client(live: LiveServer) -> Iterator[MemoryClient]:
    client = MemoryClient(api_key="no-token-needed-on-loopback", host=live.url)
    yield client
    client.client.close()


def add(client: MemoryClient, *texts: str, **ids: str) -> dict[str, Any]:
    messages = [{"role": "user", "content": text} for text in texts]
    result: dict[str, Any] = client.add(messages, infer=False, **(ids or ALICE))
    return result


@on_both_stores
def test_add_search_list_get_update_delete_history(client: MemoryClient, live: LiveServer) -> None:
    added = add(client, "Prefers uv over pip", "Works on the billing service")
    assert added["status"] == "SUCCEEDED"
    ids = [r["id"] for r in added["results"] if r["event"] == "ADD"]
    assert len(ids) == 2

    found = client.search("uv", filters=ALICE, top_k=5)["results"]
    assert [r["id"] for r in found] == [ids[0]]
    assert found[0]["memory"] == "Prefers uv over pip"
    assert 0 < found[0]["score"] <= 1
    assert set(found[0]) >= {"id", "memory", "score", "metadata", "created_at", "updated_at"}

    listed = client.get_all(filters=ALICE, page=1, page_size=1)
    assert listed["count"] == 2
    assert [r["id"] for r in listed["results"]] == [ids[0]]
    assert listed["next"] is not None
    assert listed["previous"] is None

    one = client.get(ids[1])
    assert (one["memory"], one["user_id"]) == ("Works on the billing service", "alice")
    client.update(ids[1], text="Works on the payments service")
    assert client.get(ids[1])["memory"] == "Works on the payments service"

    deleted = client.delete(ids[0])
    assert deleted["receipt"]["reason"] == "deleted"
    with pytest.raises(MemoryNotFoundError):
        client.get(ids[0])
    history = client.history(ids[0])
    assert [e["event"] for e in history] == ["ADD", "DELETE"]
    assert history[1]["receipt"]["receiptId"] == deleted["receipt"]["receiptId"]
    assert [e["event"] for e in client.history(ids[1])] == ["ADD", "UPDATE"]

    cleared = client.delete_all(user_id="alice")
    assert cleared["deleted"] == [ids[1]]
    assert client.get_all(filters=ALICE)["results"] == []


@on_both_stores
def test_an_id_no_fact_can_have_is_not_found_on_every_route_that_takes_one(
    client: MemoryClient,
) -> None:
    # 251 characters: past the fact-id rule, and past a file name's limit (issue 23 hunt).
    [gone] = [r["id"] for r in add(client, "Prefers uv over pip")["results"]]
    client.delete(gone)  # the archive exists
    long_id = "a" * 251
    for call in (client.get, client.history, client.delete):
        with pytest.raises(MemoryNotFoundError):
            call(long_id)
    with pytest.raises(MemoryNotFoundError):
        client.update(long_id, text="anything")


@on_both_stores
def test_an_add_the_gate_trims_names_the_evictions(client: MemoryClient) -> None:
    first = add(client, *(f"Fact number {n} about the project" for n in range(10)))
    assert [r["event"] for r in first["results"]] == ["ADD"] * 10
    more = add(client, "One more fact about the project")
    events = [(r["event"], r.get("receipt", {}) or {}) for r in more["results"]]
    assert [kind for kind, _ in events].count("EVICT") == 1
    evicted = next(r["id"] for r in more["results"] if r["event"] == "EVICT")
    receipt = next(receipt for kind, receipt in events if kind == "EVICT")
    assert receipt["reason"] == "capacity"
    assert [e["event"] for e in client.history(evicted)][-1] == "EVICT"
    assert "memory" not in str(receipt)


def finished(url: str, event_id: str) -> dict[str, Any]:
    """The event of a queued add, once it is no longer pending or running (polled)."""
    with httpx.Client(base_url=url) as http:
        for _ in range(400):
            event: dict[str, Any] = http.get(f"/v1/event/{event_id}/").json()
            if event["status"] in ("SUCCEEDED", "FAILED"):
                return event
            time.sleep(0.05)
    raise AssertionError(f"event {event_id} did not finish")


def test_add_with_infer_queues_extraction_and_the_event_tells(store: ServedStore) -> None:
    with ScriptedChatServer() as chat:
        live, _ = start_server(store, model=model_settings(chat, max_retries=0), max_facts=10)
        try:
            chat.enqueue(answer(newFacts=[new_fact("Prefers uv over pip")]))
            client = MemoryClient(api_key="x", host=live.url)
            added = client.add(
                [
                    {"role": "user", "content": "I always use uv, never pip."},
                    {"role": "assistant", "content": "Noted."},
                ],
                user_id="alice",
            )
            assert added["status"] in ("PENDING", "RUNNING", "SUCCEEDED")
            event = finished(live.url, added["event_id"])
            assert event["status"] == "SUCCEEDED", event
            assert event["results"]["added"]
            memories = client.get_all(filters=ALICE)["results"]
            assert [m["memory"] for m in memories] == ["Prefers uv over pip"]
            assert memories[0]["id"] in str(event["results"])

            # the next add sends new messages only: they are learned whole
            chat.enqueue(answer(newFacts=[new_fact("Works on the billing service")]))
            second = client.add(
                [
                    {"role": "user", "content": "I work on the billing service."},
                    {"role": "assistant", "content": "Got it."},
                ],
                user_id="alice",
            )
            assert finished(live.url, second["event_id"])["status"] == "SUCCEEDED"
            assert "I work on the billing service." in str(chat.requests[-1].messages)
            memories = client.get_all(filters=ALICE)["results"]
            assert len(memories) == 2
            client.client.close()
        finally:
            live.stop()


def test_add_with_infer_and_no_model_names_the_setting(client: MemoryClient) -> None:
    with pytest.raises(Mem0Error, match=r"model\.model and model\.base_url"):
        client.add("I use uv", user_id="alice")


@pytest.mark.parametrize(
    ("call", "message"),
    [
        # mem0's client sends filters= as the dict's Python repr
        (lambda c: c.delete_all(filters=ALICE), "filters: mem0's client sends"),
        (lambda c: c.add("x", user_id="alice", infer=False, metadata={"a": 1}), "metadata"),
        (lambda c: c.add("x", user_id="alice", infer=False, run_id="r1"), "run_id"),
        (
            lambda c: c.add("x", infer=False, filters={"user_id": "bob"}, user_id="alice"),
            "different ids",
        ),
        (lambda c: c.add("x", infer=False), "user_id is required"),
        (lambda c: c.update("fact_00000000", text="x", metadata={"a": 1}), "metadata"),
    ],
    ids=["delete-all-filters", "metadata", "run-id", "two-users", "no-user", "update-metadata"],
)
def test_what_deermem_cannot_represent_is_refused(
    client: MemoryClient, call: Any, message: str
) -> None:
    add(client, "Prefers uv over pip")
    with pytest.raises(ValidationError, match=message):
        call(client)
    assert len(client.get_all(filters=ALICE)["results"]) == 1


@on_both_stores
@pytest.mark.parametrize(
    ("texts", "status", "names"),
    [
        (["A new thing I like", "bad \x00 one"], 422, "messages[1].content"),
        (["A new thing I like", "a NEW thing i like "], 422, "message 0 does not already say"),
        (["A new thing I like", "prefers UV over pip"], 409, "fact_"),
    ],
    ids=["invalid-text", "said-twice", "already-stored"],
)
def test_an_add_refused_for_one_message_stores_none(
    client: MemoryClient, live: LiveServer, texts: list[str], status: int, names: str
) -> None:
    add(client, "Prefers uv over pip")
    before = client.get_all(filters=ALICE)["results"]
    body = {
        "messages": [{"role": "user", "content": text} for text in texts],
        "user_id": "alice",
        "infer": False,
    }
    refused = httpx.post(f"{live.url}/v3/memories/add/", json=body)
    assert refused.status_code == status
    assert names in refused.text
    assert client.get_all(filters=ALICE)["results"] == before


@pytest.mark.parametrize("text", ["   ", "bad \x00 one", "x" * 4001], ids=["blank", "nul", "long"])
def test_an_update_refused_names_the_field_the_client_sent(
    client: MemoryClient, live: LiveServer, text: str
) -> None:
    [fact_id] = [r["id"] for r in add(client, "Prefers uv over pip")["results"]]
    refused = httpx.put(f"{live.url}/v1/memories/{fact_id}/", json={"text": text})
    assert refused.status_code == 422
    assert refused.json()["field"] == "text"  # mem0's name for it, not deermem's "content"
    assert "'content'" not in refused.json()["detail"]
    assert client.get(fact_id)["memory"] == "Prefers uv over pip"


@pytest.mark.parametrize(
    ("message", "problem", "names"),
    [
        ({"role": "USER", "content": "I deploy with uv"}, "invalid-message", "'role'"),
        ({"role": "wizard", "content": "I deploy with uv"}, "invalid-message", "'role'"),
        ({"role": "assistant", "content": 42}, "invalid-message", "'content'"),
        ({"role": "user", "content": "  "}, "invalid-fact", "messages[1].content"),
        ({"role": "user", "content": [{"type": "image_url"}]}, "invalid-fact", "not blank"),
    ],
    ids=["capitalised-role", "unknown-role", "content-of-no-shape", "blank", "no-text"],
)
def test_an_add_without_infer_refuses_a_message_it_would_drop(
    client: MemoryClient, live: LiveServer, message: dict[str, Any], problem: str, names: str
) -> None:
    body = {
        "messages": [{"role": "user", "content": "A new thing I like"}, message],
        "user_id": "alice",
        "infer": False,
    }
    refused = httpx.post(f"{live.url}/v3/memories/add/", json=body)
    assert refused.status_code == 422, refused.text
    assert refused.json()["type"].endswith(problem)
    assert names in refused.json()["detail"]
    if problem == "invalid-message":
        assert refused.json()["index"] == 1
    assert client.get_all(filters=ALICE)["results"] == []


def test_the_async_client_works_too(live: LiveServer) -> None:
    async def session() -> list[str]:
        client = AsyncMemoryClient(api_key="x", host=live.url)
        await client.add("Prefers uv", user_id="alice", infer=False)
        found = await client.search("uv", filters=ALICE)
        await client.async_client.aclose()
        return [r["memory"] for r in found["results"]]

    assert asyncio.run(session()) == ["Prefers uv"]


# --- an id more than one scope holds --------------------------------------------------------

SHARED = "Prefers short answers"


def id_routes(client: MemoryClient, fact_id: str) -> list[Any]:
    """Every mem0 route that takes a memory id alone, as the client calls it."""
    return [
        lambda: client.get(fact_id),
        lambda: client.update(fact_id, text="Prefers long, detailed answers"),
        lambda: client.delete(fact_id),
        lambda: client.history(fact_id),
    ]


@on_both_stores
def test_an_id_two_users_hold_is_refused_on_every_id_route_and_changes_nothing(
    store: ServedStore,
) -> None:
    # bob's memory starts as a copy of alice's: an import keeps the fact ids.
    live, tokens = start_server(store, tokens={"admin": {"admin": True}, "bob": {"users": ["bob"]}})
    admin = MemoryClient(api_key=tokens["admin"], host=live.url)
    bob = MemoryClient(api_key=tokens["bob"], host=live.url)
    try:
        alice_memory = live.memory.scoped(user="alice", agent=None)
        fact_id = alice_memory.create_fact(SHARED).fact_id
        assert fact_id is not None
        live.memory.scoped(user="bob", agent=None).import_document(alice_memory.export_document())
        assert admin.get_all(filters={"user_id": "bob"})["results"][0]["id"] == fact_id
        before = store.everything()

        for call in id_routes(admin, fact_id):
            with pytest.raises(ValidationError, match="2 memories this token may address"):
                call()
        assert store.everything() == before  # neither user's memory changed

        with httpx.Client(base_url=live.url) as http:
            answer = http.get(
                f"/v1/memories/{fact_id}/", headers={"Authorization": f"Token {tokens['admin']}"}
            )
        problem = answer.json()
        assert answer.status_code == 409
        assert problem["type"] == "urn:deermem:problem:ambiguous-memory-id"
        assert (problem["factId"], problem["count"]) == (fact_id, 2)
        assert problem["scopes"] == [
            {"userId": "alice", "agentId": "__default__"},
            {"userId": "bob", "agentId": "__default__"},
        ]

        # A token that reaches bob alone: the id names one memory it may address, bob's.
        bob.update(fact_id, text="Prefers long, detailed answers")
        assert bob.get(fact_id)["memory"] == "Prefers long, detailed answers"
        bob.delete(fact_id)
        assert [e["event"] for e in bob.history(fact_id)][-1] == "DELETE"
        assert [m["memory"] for m in admin.get_all(filters=ALICE)["results"]] == [SHARED]
    finally:
        admin.client.close()
        bob.client.close()
        live.stop()


@on_both_stores
def test_an_id_two_agents_of_one_user_hold_is_ambiguous_even_once_one_is_archived(
    store: ServedStore,
) -> None:
    # Ids a host chooses (a LangGraph key) repeat across agents of one user.
    live, tokens = start_server(store, tokens={"alice": {"users": ["alice"]}})
    alice = MemoryClient(api_key=tokens["alice"], host=live.url)
    try:
        default = live.memory.scoped(user="alice", agent=None)
        coder = live.memory.scoped(user="alice", agent="coder")
        default.create_fact(SHARED, fact_id="prefs")
        coder.create_fact("Prefers tabs", fact_id="prefs")
        coder.delete_fact("prefs")  # archived: its history is still reached by the id
        before = store.everything()
        for call in id_routes(alice, "prefs"):
            with pytest.raises(ValidationError, match="2 memories this token may address"):
                call()
        assert store.everything() == before
        assert default.snapshot().get("prefs") is not None
    finally:
        alice.client.close()
        live.stop()


# --- an add whose messages differ only in a secret -----------------------------------------

KEY_A = "My OpenAI key is sk-proj-AAAAbcdefghijklmnopqrstuvwxyz0123456789ABCD"
KEY_B = "My OpenAI key is sk-proj-BBBBbcdefghijklmnopqrstuvwxyz0123456789ABCD"


@on_both_stores
@pytest.mark.parametrize(
    ("held", "texts", "status", "names"),
    [
        ([], ["A new thing I like", KEY_A, KEY_B], 422, "message 1 does not already say"),
        ([KEY_A], ["A new thing I like", KEY_B], 409, "fact_"),
    ],
    ids=["said-twice-once-redacted", "stored-once-redacted"],
)
def test_an_add_whose_messages_match_once_redacted_stores_none(
    client: MemoryClient,
    live: LiveServer,
    held: list[str],
    texts: list[str],
    status: int,
    names: str,
) -> None:
    # The store redacts before its duplicate rule: two keys are one "[redacted: openai-key]".
    if held:
        add(client, *held)
    before = client.get_all(filters=ALICE)["results"]
    body = {
        "messages": [{"role": "user", "content": text} for text in texts],
        "user_id": "alice",
        "infer": False,
    }
    refused = httpx.post(f"{live.url}/v3/memories/add/", json=body)
    assert refused.status_code == status, refused.text
    assert names in refused.text
    assert client.get_all(filters=ALICE)["results"] == before


# --- history --------------------------------------------------------------------------------


@on_both_stores
def test_history_never_gives_the_add_a_text_it_did_not_have(client: MemoryClient) -> None:
    [changed, kept] = [r["id"] for r in add(client, "Lives in Berlin", "Works remotely")["results"]]
    client.update(changed, text="Lives in Oslo")
    history = client.history(changed)
    # mem0's shape: ADD (old None, new the text added), UPDATE (old, new). deermem keeps the
    # current text only: the added text is unknown, so ADD says none.
    assert [(e["event"], e["old_memory"], e["new_memory"]) for e in history] == [
        ("ADD", None, None),
        ("UPDATE", None, "Lives in Oslo"),
    ]
    assert [(e["event"], e["new_memory"]) for e in client.history(kept)] == [
        ("ADD", "Works remotely")
    ]


@on_both_stores
def test_history_says_a_memory_came_back_in_time_order(client: MemoryClient) -> None:
    """A deleted memory an add brings back (relearned, same id) is active: its history must not
    end in DELETE, and every event is in time order, each receipt's return after it."""
    [fact_id] = [r["id"] for r in add(client, "Lives in Berlin")["results"]]
    client.delete(fact_id)
    assert [r["id"] for r in add(client, "Lives in Berlin")["results"]] == [fact_id]
    assert client.get(fact_id)["memory"] == "Lives in Berlin"
    client.delete(fact_id)
    assert [r["id"] for r in add(client, "lives in berlin")["results"]] == [fact_id]
    history = client.history(fact_id)
    assert [e["event"] for e in history] == ["ADD", "DELETE", "RESTORE", "DELETE", "RESTORE"]
    assert [e["created_at"] for e in history] == sorted(e["created_at"] for e in history)
    assert [e["id"] for e in history] == [f"{fact_id}-{n}" for n in range(1, 6)]
    deletions = [e["receipt"]["receiptId"] for e in history if e["event"] == "DELETE"]
    assert [e["receipt_id"] for e in history if e["event"] == "RESTORE"] == deletions


# --- search's numbers -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [("top_k", "3"), ("top_k", True), ("top_k", 2.5), ("threshold", "0.5"), ("threshold", True)],
)
def test_search_numbers_are_the_types_the_schema_says(
    live: LiveServer, field: str, value: object
) -> None:
    body = {"query": "uv", "filters": ALICE, field: value}
    refused = httpx.post(f"{live.url}/v3/memories/search/", json=body)
    assert refused.status_code == 422
    assert f"body.{field}" in str(refused.json()["errors"])


@on_both_stores
def test_a_search_counts_a_recall_only_for_what_it_answers(store: ServedStore) -> None:
    live, _ = start_server(store, fact_eviction_policy="hybrid-v1")  # recalls rank facts
    try:
        client = MemoryClient(api_key="no-token-needed-on-loopback", host=live.url)
        add(client, "Likes green tea", "Likes black tea")
        client.client.close()
        search = f"{live.url}/v3/memories/search/"

        def recalls() -> dict[str, int]:
            usage = live.memory.store.usage(Scope.of("alice", None))
            return {fact_id: entry.access_count for fact_id, entry in usage.items()}

        body = {"query": "green tea", "filters": ALICE, "threshold": 0.5}
        [kept] = httpx.post(search, json=body).json()["results"]
        assert kept["memory"] == "Likes green tea"
        assert recalls() == {kept["id"]: 1}  # not the one under the threshold
        answered = httpx.post(search, json={**body, "threshold": 0.0}).json()["results"]
        assert len(answered) == 2
        assert sorted(recalls().values()) == [1, 2]
    finally:
        live.stop()


@on_both_stores
def test_an_exact_match_clears_a_usual_threshold(client: MemoryClient, live: LiveServer) -> None:
    """Under hybrid search a result's score was ``s / (1 + s)`` of a fused score already in
    [0, 1]: never above 0.5, so a threshold of 0.6 dropped even the fact's exact text."""
    add(client, "I deploy with uv, never pip", "My sister lives in Lisbon", "I drink green tea")
    body = {"query": "I deploy with uv, never pip", "filters": ALICE, "threshold": 0.6}
    found = httpx.post(f"{live.url}/v3/memories/search/", json=body).json()["results"]
    assert [r["memory"] for r in found] == ["I deploy with uv, never pip"]
    assert 0.9 < found[0]["score"] <= 1


def test_search_takes_whole_numbers_as_json_writes_them(
    client: MemoryClient, live: LiveServer
) -> None:
    add(client, "Prefers uv over pip")
    for extra in ({"top_k": 3.0}, {"top_k": 3, "threshold": 0}, {"threshold": 0.01}):
        body = {"query": "uv", "filters": ALICE, **extra}
        answer = httpx.post(f"{live.url}/v3/memories/search/", json=body)
        assert answer.status_code == 200, answer.text
        assert [r["memory"] for r in answer.json()["results"]] == ["Prefers uv over pip"]
