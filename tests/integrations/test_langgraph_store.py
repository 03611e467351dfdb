"""DeerMemStore as a LangGraph ``BaseStore``: its public methods, ``batch``/``abatch``, and
LangMem's two tools on it — on the Markdown store and on PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain.agents.middleware import ToolErrorMiddleware
from langchain_core.messages import AIMessage
from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchOp,
)
from langmem import create_manage_memory_tool, create_search_memory_tool
from pydantic import ValidationError

from deermem import (
    ArchivedFactError,
    DeerMemError,
    DuplicateFactError,
    FactValidationError,
    Memory,
    MemoryConfig,
)
from deermem.integrations.langgraph import (
    DeerMemStore,
    EvictedOnPutError,
    agent_of,
    labels_of,
    namespace_of,
    scope_of,
)
from deermem.model import Scope
from tests.integrations.test_langchain_middleware import ScriptedAgentModel
from tests.wire_support import Clock

ALICE = ("memories", "alice")
SECRET = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789ABCD"
UUID = "3f1c8a9e-2b7d-4c1e-9a55-0d6f2b8e7c41"


class Opened:
    """Opens stores and memories over one backing store (a directory or a database)."""

    def __init__(self, root: Path, url: str | None) -> None:
        self.root, self.url = root, url
        self.clock = Clock()
        self.stores: list[DeerMemStore] = []

    def config(self, **settings: Any) -> MemoryConfig:
        return MemoryConfig(store=self.url or "", **settings)

    def memory(self, **settings: Any) -> Memory:
        root = None if self.url else self.root
        return Memory.open_unscoped(root, self.config(**settings), clock=self.clock)

    def store(self, **settings: Any) -> DeerMemStore:
        store = DeerMemStore(self.memory(**settings))
        self.stores.append(store)
        return store


@pytest.fixture(params=["markdown", "postgres"])
def opened(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opened]:
    url = request.getfixturevalue("postgres_url") if request.param == "postgres" else None
    backing = Opened(tmp_path / "store", url)
    yield backing
    for store in backing.stores:
        store.close()


@pytest.fixture
def store(opened: Opened) -> DeerMemStore:
    return opened.store()


def test_put_get_update_delete(store: DeerMemStore, opened: Opened) -> None:
    store.put(ALICE, "k1", {"content": "Prefers uv", "category": "preference"})
    item = store.get(ALICE, "k1")
    assert item is not None
    assert (item.namespace, item.key) == (ALICE, "k1")
    assert item.value == {"content": "Prefers uv", "category": "preference", "confidence": 0.5}
    assert item.created_at == item.updated_at == datetime(2026, 8, 13, 12, tzinfo=UTC)

    opened.clock.advance(hours=1)
    store.put(ALICE, "k1", {"content": "Prefers uv, always", "confidence": 0.9})
    item = store.get(ALICE, "k1")
    assert item is not None
    assert item.value == {
        "content": "Prefers uv, always",
        "category": "preference",
        "confidence": 0.9,
    }
    assert item.created_at < item.updated_at == opened.clock.now

    store.delete(ALICE, "k1")
    assert store.get(ALICE, "k1") is None
    scoped = opened.memory().scoped(user="alice", agent=agent_of(("memories",)))
    entry = scoped.get_archived("k1")
    assert entry.fact.content == "Prefers uv, always"
    assert scoped.audit()[-1].reason == "deleted"
    store.delete(ALICE, "k1")  # a missing key: nothing to do
    store.batch([PutOp(ALICE, "never", None)])


def test_what_get_returns_can_be_put_back_whatever_redaction_did(store: DeerMemStore) -> None:
    # A 3,991-character note ending in a short password was accepted and read back as
    # 4,003 characters: a put of get's value (a LangMem read-modify-write) was refused.
    # Now a text its markers would carry past the limit is refused at the first put, before
    # any op of the batch, and what fits is put back as it reads.
    near = ("Billing notes: " + "x" * 3960 + " db pwd=Xk9mQ2vL")[:4000]
    with pytest.raises(FactValidationError, match="found 4,003"):
        store.batch(
            [PutOp(ALICE, "k0", {"content": "first"}), PutOp(ALICE, "k1", {"content": near})]
        )
    assert store.get(ALICE, "k0") is None  # nothing of the batch ran
    written = near[:3970] + " db pwd=Xk9mQ2vL"
    store.put(ALICE, "k1", {"content": written})
    item = store.get(ALICE, "k1")
    assert item is not None
    assert len(item.value["content"]) == len(written) + 12  # its marker is longer than the secret
    store.put(ALICE, "k1", {**item.value, "confidence": 0.9})
    again = store.get(ALICE, "k1")
    assert again is not None
    assert again.value == {**item.value, "confidence": 0.9}


def test_a_put_after_a_delete_restores_the_fact_then_sets_the_value(
    store: DeerMemStore, opened: Opened
) -> None:
    store.put(ALICE, "k1", {"content": "Uses pip"})
    store.delete(ALICE, "k1")
    store.put(ALICE, "k1", {"content": "Uses uv"})
    item = store.get(ALICE, "k1")
    assert item is not None
    assert item.value["content"] == "Uses uv"
    scoped = opened.memory().scoped(user="alice", agent=agent_of(("memories",)))
    explanation = scoped.why("k1")
    assert explanation.status == "active"
    assert [r.reason for r in explanation.receipts] == ["deleted"]


def test_a_put_after_a_delete_lands_when_another_key_now_says_the_archived_text(
    store: DeerMemStore, opened: Opened
) -> None:
    """put is an upsert: the deleted key's old text, which another key says now, cannot come
    back, but the put replaces it anyway; a new text that is itself a duplicate stays refused."""
    store.put(ALICE, "k1", {"content": "Lives in Berlin"})
    store.delete(ALICE, "k1")
    store.put(ALICE, "k2", {"content": "Works remotely"})
    store.put(ALICE, "k2", {"content": "Lives in Berlin"})
    with pytest.raises(DuplicateFactError, match="'k2'"):
        store.put(ALICE, "k1", {"content": "lives in berlin"})
    scoped = opened.memory().scoped(user="alice", agent=agent_of(("memories",)))
    assert scoped.get_archived("k1").fact.content == "Lives in Berlin"  # refused: unchanged
    store.put(ALICE, "k1", {"content": "Lives in Oslo"})
    values = {item.key: item.value["content"] for item in store.search(ALICE)}
    assert values == {"k1": "Lives in Oslo", "k2": "Lives in Berlin"}
    assert scoped.list_archived() == ()
    assert [r.reason for r in scoped.why("k1").receipts] == ["deleted"]  # the receipt stays


def test_namespaces_are_separate_scopes_listed_as_written(store: DeerMemStore) -> None:
    written = [
        ("memories", "alice"),
        ("notes", "alice"),
        ("memories", "bob"),
        ("Work Notes", "a_b%25c", "alice"),
        ("x*%_", "carol"),
        ("alice",),
    ]
    for number, namespace in enumerate(written):
        store.put(namespace, f"k{number}", {"content": f"fact {number} of {namespace}"})
    assert store.list_namespaces() == sorted(written)
    assert [i.key for i in store.search(("memories", "alice"))] == ["k0"]
    assert [i.key for i in store.search(("notes", "alice"))] == ["k1"]
    memories = [("memories", "alice"), ("memories", "bob")]
    assert store.list_namespaces(prefix=("memories",)) == memories
    assert store.list_namespaces(suffix=("alice",)) == [
        ("Work Notes", "a_b%25c", "alice"),
        ("alice",),
        ("memories", "alice"),
        ("notes", "alice"),
    ]
    assert store.list_namespaces(suffix=("lice",)) == []
    assert store.list_namespaces(prefix=("*", "alice")) == [
        ("memories", "alice"),
        ("notes", "alice"),
    ]
    assert store.list_namespaces(max_depth=1) == [
        ("Work Notes",),
        ("alice",),
        ("memories",),
        ("notes",),
        ("x*%_",),
    ]
    assert store.list_namespaces(limit=2, offset=1) == sorted(written)[1:3]
    store.delete(("notes", "alice"), "k1")  # emptied: no longer listed
    assert ("notes", "alice") not in store.list_namespaces()


def test_a_namespace_maps_to_a_scope_and_back() -> None:
    assert scope_of(("alice",)) == Scope.of("alice", None)
    assert scope_of(("memories", "alice")) == Scope.of("alice", "ns--memories")
    assert scope_of(("a", "B-c", "alice%2Eexample%2Ecom")) == Scope.of(
        "alice.example.com", "ns--a---000042-00002dc"
    )
    for namespace in [("M", "m", "alice"), ("x--y", "u%25%2E"), ("日本", "u")]:
        assert namespace_of(scope_of(namespace)) == namespace
    assert labels_of("writer") is None  # a bucket no namespace names
    assert labels_of("ns--a-zz") is None
    with pytest.raises(InvalidNamespaceError, match=r"write '\.' as '%2E'"):
        scope_of(("memories", "100%"))
    with pytest.raises(InvalidNamespaceError, match="at least one label"):
        scope_of(())


@pytest.mark.parametrize(
    "labels", [("a" * 1021,), ("日本語" * 50,), ("a" * 600, "b" * 600)], ids=["ascii", "cjk", "two"]
)
def test_labels_too_long_for_a_bucket_are_refused_as_the_namespace(
    store: DeerMemStore, labels: tuple[str, ...]
) -> None:
    """The bucket's name is deermem's encoding of the labels: the refusal is about the labels
    the caller wrote, never an "agent name" it did not, and quotes none of them."""
    for call in (
        lambda: store.put((*labels, "alice"), "k1", {"content": "Prefers uv"}),
        lambda: store.get((*labels, "alice"), "k1"),
    ):
        with pytest.raises(InvalidNamespaceError, match="labels before the user") as refused:
            call()
        assert "agent name" not in str(refused.value)
        assert labels[0][:10] not in str(refused.value)
    assert scope_of(("a" * 1020, "alice")).agent == "ns--" + "a" * 1020  # the longest that fits
    assert store.list_namespaces() == []


def test_a_user_id_with_a_period_is_written_with_an_escape(
    store: DeerMemStore, opened: Opened
) -> None:
    store.put(("memories", "alice%2Eexample%2Ecom"), "k1", {"content": "Prefers uv"})
    store.put(("alice%2Eexample%2Ecom",), "k2", {"content": "Likes tea"})
    memory = opened.memory()
    scoped = memory.scoped(user="alice.example.com", agent=agent_of(("memories",)))
    assert [f.content for f in scoped.list_facts()] == ["Prefers uv"]
    default = memory.scoped(user="alice.example.com", agent=None)
    assert [f.content for f in default.list_facts()] == ["Likes tea"]
    with pytest.raises(InvalidNamespaceError, match="periods"):
        store.put(("memories", "alice.example.com"), "k1", {"content": "x"})
    with pytest.raises(InvalidNamespaceError, match="'%2E'"):
        store.put(("memories", "50%off"), "k1", {"content": "x"})


def test_search_by_prefix_query_and_filter(store: DeerMemStore, opened: Opened) -> None:
    store.put(("memories", "alice"), "a1", {"content": "Uses uv for Python", "confidence": 0.9})
    opened.clock.advance(minutes=1)
    store.put(("memories", "bob"), "b1", {"content": "Uses pip for Python", "confidence": 0.4})
    opened.clock.advance(minutes=1)
    store.put(("memories", "bob"), "b2", {"content": "Likes tea", "category": "preference"})
    store.put(("notes", "alice"), "n1", {"content": "Python notes"})

    # without a query: most recently updated first
    assert [i.key for i in store.search(("memories",))] == ["b2", "b1", "a1"]
    assert store.search(("memories", "ali")) == []
    assert {i.key for i in store.search(())} == {"a1", "b1", "b2", "n1"}
    assert all(i.score is None for i in store.search(()))

    hits = store.search(("memories",), query="python")
    assert [i.key for i in hits] == ["a1", "b1"]
    assert all(i.score is not None and 0 < i.score <= 1 for i in hits)
    assert hits[0].namespace == ("memories", "alice")

    assert [i.key for i in store.search((), filter={"category": "preference"})] == ["b2"]
    high = store.search((), filter={"confidence": {"$gte": 0.8}})
    assert [i.key for i in high] == ["a1"]
    assert [i.key for i in store.search(("memories",), limit=1, offset=1)] == ["b1"]
    # a key the filter does not know is the caller's text: described, never quoted (prv-02)
    token = "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    with pytest.raises(ValueError, match=r"^filter key \(a name of 40 characters\): ") as key:
        store.search((), filter={token: "red"})
    assert token not in str(key.value)
    with pytest.raises(ValueError, match=r"unknown operator \(a name of 3 characters\) "):
        store.search((), filter={"confidence": {"$in": [1]}})
    with pytest.raises(ValueError, match=r"unknown operator \(a name of 40 characters\) "):
        store.search((), filter={"confidence": {token: 1}})


def test_a_search_counts_a_recall_for_each_item_it_returns(opened: Opened) -> None:
    store = opened.store(fact_eviction_policy="hybrid-v1")  # recalls rank facts at the cap
    for number, kind in enumerate(["green", "black", "oolong", "mint"]):
        store.put(ALICE, f"k{number}", {"content": f"Likes {kind} tea"})
    store.put(("notes", "alice"), "n1", {"content": "Likes jasmine tea"})

    def recalls() -> dict[str, int]:
        counts: dict[str, int] = {}
        for namespace in (ALICE, ("notes", "alice")):
            usage = store.memory.store.usage(scope_of(namespace))
            counts.update({key: entry.access_count for key, entry in usage.items()})
        return counts

    first = store.search((), query="tea", limit=1)
    assert recalls() == {first[0].key: 1}
    second = store.search((), query="tea", limit=2, offset=1)
    assert recalls() == {item.key: 1 for item in [*first, *second]}
    assert store.search(ALICE, query="tea", filter={"content": "nothing has this text"}) == []
    store.search(ALICE)  # a listing recalls nothing
    assert sum(recalls().values()) == 3


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"content": "x", "data": 1}, "only 'content', 'category' and 'confidence'"),
        ({"content": {"text": "x"}}, "value.content"),
        ({"category": "goal"}, "value.content"),
        ({"content": "x", "confidence": "high"}, "value.confidence"),
        ({"content": "x", "confidence": 2}, "'value.confidence'"),  # as the caller wrote it
        ({"content": "   "}, "'value.content' .*not blank"),
        ({"content": "x", "category": "preferences"}, "'value.category' .*'preference'"),
    ],
)
def test_a_value_that_is_not_one_fact_is_refused(
    store: DeerMemStore, value: dict[str, Any], message: str
) -> None:
    with pytest.raises(FactValidationError, match=message):
        store.put(ALICE, "k1", value)
    assert store.search(()) == []


def test_a_refused_value_is_named_without_its_text(store: DeerMemStore) -> None:
    # Its message reaches the model through ToolErrorMiddleware, and logs (docs/privacy.md).
    secret = "key ghp_aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5 \x00"
    for value in ({"content": secret}, {"content": secret[:-1] * 100}):
        with pytest.raises(FactValidationError) as caught:
            store.put(ALICE, "k1", value)
        assert "ghp_" not in str(caught.value)
        assert "field 'value.content' has a text of" in str(caught.value)
    assert store.search(()) == []


def test_a_refused_category_is_named_without_its_text(store: DeerMemStore) -> None:
    category = "ci sk" + "-proj-Ab3dEf7hIjKlMn0pQrStUvWxYz12345678 " + "y" * 40
    with pytest.raises(FactValidationError) as caught:
        store.put(ALICE, "k1", {"content": "alice likes jazz", "category": category})
    assert "Ab3dEf7hIjKl" not in str(caught.value)
    assert f"field 'value.category' has a text of {len(category)} characters" in str(caught.value)
    assert store.search(()) == []


@pytest.mark.parametrize("key", ["a.b", "has space", "", "x" * 251, "a/b"])
def test_a_key_outside_the_fact_id_rule_is_refused(store: DeerMemStore, key: str) -> None:
    with pytest.raises(FactValidationError, match="letters, digits"):
        store.put(ALICE, key, {"content": "x"})
    assert store.get(ALICE, key) is None


def test_a_batch_with_one_bad_op_writes_nothing(store: DeerMemStore) -> None:
    ops = [
        PutOp(ALICE, "k1", {"content": "good"}),
        PutOp(("memories", "a.b"), "k2", {"content": "bad label"}),
    ]
    with pytest.raises(InvalidNamespaceError):
        store.batch(ops)
    with pytest.raises(NotImplementedError, match="ttl"):
        store.batch([PutOp(ALICE, "k1", {"content": "good"}, ttl=5.0)])
    with pytest.raises(NotImplementedError):
        store.put(ALICE, "k1", {"content": "good"}, ttl=5.0)
    assert store.search(()) == []


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"content": "x" * 5000}, "expected at most 4,000"),
        ({"content": "second fact", "confidence": 1.5}, "confidence"),
        ({"content": "second fact", "category": "c" * 100}, "category"),
        ({"content": "second \x00 fact"}, "content"),
    ],
)
def test_a_batch_whose_later_value_breaks_a_fact_rule_writes_nothing(
    store: DeerMemStore, value: dict[str, Any], message: str
) -> None:
    store.put(ALICE, "k0", {"content": "Stays as it is"})
    ops = [
        PutOp(ALICE, "k1", {"content": "First fact"}),
        PutOp(ALICE, "k0", None),
        PutOp(ALICE, "k2", value),
    ]
    with pytest.raises(FactValidationError, match=message):
        store.batch(ops)
    assert [i.key for i in store.search(())] == ["k0"]


def test_a_batch_whose_puts_say_one_thing_twice_writes_nothing(
    store: DeerMemStore, opened: Opened
) -> None:
    store.put(ALICE, "k0", {"content": "Prefers uv"})
    # two puts of the batch, compared as stored: trimmed, case-folded, secrets redacted
    with pytest.raises(FactValidationError, match="the batch's put of 'k1' says the same") as twice:
        store.batch(
            [
                PutOp(ALICE, "k1", {"content": f"Token {SECRET}"}),
                PutOp(ALICE, "k2", {"content": f"  token {SECRET[:-1]}X "}),
            ]
        )
    assert SECRET[:12] not in str(twice.value)
    # a put and a fact that stays
    with pytest.raises(DuplicateFactError, match="already stored as 'k0'"):
        store.batch(
            [
                PutOp(ALICE, "k1", {"content": "Likes tea"}),
                PutOp(ALICE, "k2", {"content": "PREFERS UV"}),
            ]
        )
    # a put and what an earlier put of the batch changed a stored fact into
    with pytest.raises(FactValidationError, match="the batch's put of 'k0' says the same"):
        store.batch(
            [
                PutOp(ALICE, "k0", {"content": "Likes tea"}),
                PutOp(ALICE, "k1", {"content": "likes tea"}),
            ]
        )
    assert [i.value["content"] for i in store.search(())] == ["Prefers uv"]
    # what the batch's own ops free or make its own is no duplicate: it runs as it would one by one
    store.batch(
        [
            PutOp(ALICE, "k0", {"content": "Prefers pip"}),
            PutOp(ALICE, "k1", {"content": "prefers uv"}),
            PutOp(ALICE, "k1", {"content": "Prefers UV"}),
            PutOp(("notes", "alice"), "k2", {"content": "Prefers uv"}),
            PutOp(ALICE, "k0", None),
            PutOp(ALICE, "k3", {"content": "Prefers pip!"}),
        ]
    )
    found = {(i.namespace, i.key): i.value["content"] for i in store.search(())}
    assert found == {
        (ALICE, "k1"): "Prefers UV",
        (ALICE, "k3"): "Prefers pip!",
        (("notes", "alice"), "k2"): "Prefers uv",
    }


def test_a_batch_runs_its_ops_in_order(store: DeerMemStore) -> None:
    results = store.batch(
        [
            PutOp(ALICE, "k1", {"content": "Prefers uv"}),
            GetOp(ALICE, "k1"),
            SearchOp(("memories",), query="uv"),
            ListNamespacesOp((MatchCondition("prefix", ("memories",)),)),
            PutOp(ALICE, "k1", None),
            GetOp(ALICE, "k1"),
        ]
    )
    assert results[0] is None
    assert getattr(results[1], "key", None) == "k1"
    assert [i.key for i in results[2]] == ["k1"]  # type: ignore[union-attr]
    assert results[3] == [ALICE]
    assert results[4:] == [None, None]


def test_the_async_methods_go_through_abatch(store: DeerMemStore) -> None:
    async def session() -> tuple[Any, ...]:
        await store.aput(ALICE, UUID, {"content": "Prefers uv"})
        got = await store.aget(ALICE, UUID)
        hits = await store.asearch(("memories",), query="uv")
        listed = await store.alist_namespaces()
        await store.adelete(ALICE, UUID)
        return got, hits, listed, await store.aget(ALICE, UUID)

    got, hits, listed, gone = asyncio.run(session())
    assert got.value["content"] == "Prefers uv"
    assert [h.key for h in hits] == [UUID]
    assert listed == [ALICE]
    assert gone is None


def test_the_capacity_gate_speaks_up_on_put(opened: Opened) -> None:
    store = opened.store(max_facts=10)
    for number in range(9):
        store.put(ALICE, f"strong{number}", {"content": f"strong fact {number}", "confidence": 1})
    store.put(ALICE, "weak", {"content": "a weak guess", "confidence": 0.2})
    # a stronger fact evicts the weak one: it leaves get and search, and is archived
    store.put(ALICE, "new", {"content": "a sure thing", "confidence": 0.95})
    assert store.get(ALICE, "weak") is None
    assert "weak" not in {i.key for i in store.search(ALICE)}
    scoped = opened.memory().scoped(user="alice", agent=agent_of(("memories",)))
    assert scoped.audit()[-1].fact_ids == ("weak",)
    assert scoped.get_archived("weak").fact.content == "a weak guess"
    # a fact weaker than all: archived at once, and the put raises with the receipt
    with pytest.raises(EvictedOnPutError, match="archived 'weakest' at once") as raised:
        store.put(ALICE, "weakest", {"content": "a wild guess", "confidence": 0.0})
    assert raised.value.key == "weakest"
    assert [r.fact_ids for r in raised.value.receipts] == [("weakest",)]
    assert "wild guess" not in str(raised.value)
    assert store.get(ALICE, "weakest") is None


def test_under_eviction_mode_delete_a_put_dropped_at_once_says_deleted(opened: Opened) -> None:
    store = opened.store(max_facts=10, eviction_mode="delete")
    for number in range(10):
        store.put(ALICE, f"strong{number}", {"content": f"strong fact {number}", "confidence": 1})
    with pytest.raises(EvictedOnPutError, match="deleted 'weakest' at once") as raised:
        store.put(ALICE, "weakest", {"content": "a wild guess", "confidence": 0.0})
    assert "archive" not in str(raised.value)  # nothing to restore: never said to be archived
    scoped = opened.memory().scoped(user="alice", agent=agent_of(("memories",)))
    assert scoped.list_archived() == ()


def test_content_an_archived_fact_says_is_refused_under_another_key(store: DeerMemStore) -> None:
    store.put(ALICE, "k1", {"content": "Prefers uv"})
    store.delete(ALICE, "k1")
    key = "a-much-longer-second-key-of-40-chars-xyz"
    with pytest.raises(FactValidationError, match="archived fact 'k1' says the same") as refused:
        store.put(ALICE, key, {"content": "prefers UV"})
    # the error describes the content (by its length), not the key
    assert str(refused.value).startswith("field 'value.content' has a text of 10 characters;")
    assert refused.value.value == "prefers UV"
    assert store.get(ALICE, key) is None


def test_content_an_archived_fact_says_once_redacted_is_refused_under_another_key(
    store: DeerMemStore, opened: Opened
) -> None:
    # Stored, the secret is a marker: the archived fact says what the new value will say,
    # so relearning would bring "k1" back and leave "k2" empty while put reported success.
    secret = f"My deploy token is {SECRET}"
    store.put(ALICE, "k1", {"content": secret})
    store.delete(ALICE, "k1")
    scoped = opened.memory().scoped(user="alice", agent=agent_of(("memories",)))
    receipts = scoped.audit()
    with pytest.raises(FactValidationError, match="archived fact 'k1' says the same"):
        store.put(ALICE, "k2", {"content": secret})
    assert store.get(ALICE, "k2") is None
    assert store.get(ALICE, "k1") is None  # still archived: nothing was written
    assert [e.fact_id for e in scoped.list_archived()] == ["k1"]
    assert scoped.audit() == receipts


def test_a_keyed_create_refuses_what_an_archived_fact_says(opened: Opened) -> None:
    memory = opened.memory().scoped(user="alice", agent=None)
    memory.create_fact(f"Token {SECRET}", fact_id="k1")
    memory.delete_fact("k1")
    with pytest.raises(ArchivedFactError, match="'k1' is in the archive") as refused:
        memory.create_fact(f"token {SECRET}", fact_id="k2")
    assert refused.value.fact_id == "k1"
    assert memory.list_facts() == ()
    assert [e.fact_id for e in memory.list_archived()] == ["k1"]
    # without an id of its own, the fact is relearned as before
    assert memory.create_fact(f"token {SECRET}").relearned == "k1"


@pytest.mark.parametrize("step", ["create_fact", "update_fact", "delete_fact"])
def test_a_put_whose_key_another_put_changes_after_its_read_still_lands(
    store: DeerMemStore, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    """LangGraph's put is an upsert: a concurrent put of the key wins or loses, never raises.

    The other writer's put runs between this put's read and its write (deterministically,
    where the threads of the test below only make it likely).
    """
    if step != "create_fact":
        store.put(ALICE, "k1", {"content": "Uses pip", "category": "preference"})
    original = getattr(Memory, step)
    interleaved: list[str] = []

    def other_writer_first(memory: Memory, *args: Any, **kwargs: Any) -> Any:
        if not interleaved:
            interleaved.append(step)
            store.put(ALICE, "k1", {"content": "Uses conda", "category": "context"})
        return original(memory, *args, **kwargs)

    monkeypatch.setattr(Memory, step, other_writer_first)
    value = None if step == "delete_fact" else {"content": "Uses uv", "confidence": 0.9}
    store.batch([PutOp(ALICE, "k1", value)])
    assert interleaved == [step]
    item = store.get(ALICE, "k1")
    if value is None:
        assert item is None
    else:  # the last put wins; the field it leaves out keeps the other put's value
        assert item is not None
        assert item.value == {"content": "Uses uv", "category": "context", "confidence": 0.9}


@pytest.mark.parametrize("deletes", [False, True])
def test_concurrent_puts_of_one_key_all_succeed_and_the_last_wins(
    store: DeerMemStore, deletes: bool
) -> None:
    writers, rounds = 4, 8
    start = threading.Barrier(writers)
    errors: list[Exception] = []

    def write(writer: int) -> None:
        start.wait()
        for number in range(rounds):
            try:
                store.put(ALICE, "profile", {"content": f"Profile {number} by writer {writer}"})
                if deletes and number % 2 == 1:
                    store.delete(ALICE, "profile")
            except Exception as error:  # every writer's error is reported, not only the first
                errors.append(error)

    threads = [threading.Thread(target=write, args=(writer,)) for writer in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    item = store.get(ALICE, "profile")
    if deletes:  # every writer ended with a delete
        assert item is None
    else:  # the put that came last is the last one of its writer
        assert item is not None
        last = {f"Profile {rounds - 1} by writer {writer}" for writer in range(writers)}
        assert item.value["content"] in last


def test_open_takes_a_directory_or_a_database_url(opened: Opened) -> None:
    store = DeerMemStore.open(opened.url or opened.root)
    opened.stores.append(store)
    store.put(ALICE, "k1", {"content": "Prefers uv"})
    assert [i.key for i in opened.store().search(())] == ["k1"]


# --- LangMem's tools ------------------------------------------------------------------------

CONFIG = {"configurable": {"langgraph_user_id": "alice%2Eexample%2Ecom"}}
NAMESPACE = ("memories", "{langgraph_user_id}")
NAMESPACE_ALICE = ("memories", "alice")
SECRET = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789ABCD"


def test_langmem_manages_and_searches_memories(store: DeerMemStore, opened: Opened) -> None:
    manage = create_manage_memory_tool(namespace=NAMESPACE, store=store)
    search = create_search_memory_tool(namespace=NAMESPACE, store=store)

    created = manage.invoke({"content": "Prefers uv over pip"}, config=CONFIG)
    key = created.removeprefix("created memory ")
    found = json.loads(search.invoke({"query": "uv"}, config=CONFIG))
    assert [(f["key"], f["value"]["content"]) for f in found] == [(key, "Prefers uv over pip")]
    assert found[0]["namespace"] == ["memories", "alice%2Eexample%2Ecom"]
    assert 0 < found[0]["score"] <= 1

    updated = manage.invoke(
        {"action": "update", "id": key, "content": "Prefers uv, never pip"}, config=CONFIG
    )
    assert updated == f"updated memory {key}"
    assert manage.invoke({"action": "delete", "id": key}, config=CONFIG) == (
        f"Deleted memory {key}"
    )
    assert json.loads(search.invoke({"query": "uv"}, config=CONFIG)) == []
    scoped = opened.memory().scoped(user="alice.example.com", agent=agent_of(("memories",)))
    assert scoped.get_archived(key).fact.content == "Prefers uv, never pip"


def test_langmem_async_tools(store: DeerMemStore) -> None:
    manage = create_manage_memory_tool(namespace=NAMESPACE, store=store)
    search = create_search_memory_tool(namespace=NAMESPACE, store=store)

    async def session() -> Any:
        await manage.ainvoke({"content": "Works on billing"}, config=CONFIG)
        return json.loads(await search.ainvoke({"query": "billing"}, config=CONFIG))

    assert [f["value"]["content"] for f in asyncio.run(session())] == ["Works on billing"]


def test_langmem_finds_facts_made_elsewhere_but_cannot_name_them(
    store: DeerMemStore, opened: Opened
) -> None:
    """LangMem types ids as UUIDs: a deermem id (fact_1a2b3c4d) is found, not updated."""
    scoped = opened.memory().scoped(user="alice.example.com", agent=agent_of(("memories",)))
    made = scoped.create_fact("Deploys on Fridays", fact_id="fact_1a2b3c4d")
    assert made.fact_id == "fact_1a2b3c4d"
    search = create_search_memory_tool(namespace=NAMESPACE, store=store)
    found = json.loads(search.invoke({"query": "Fridays"}, config=CONFIG))
    assert [f["key"] for f in found] == ["fact_1a2b3c4d"]
    manage = create_manage_memory_tool(namespace=NAMESPACE, store=store)
    with pytest.raises(ValidationError, match="UUID"):
        manage.invoke({"action": "delete", "id": "fact_1a2b3c4d"}, config=CONFIG)


def test_create_fact_refuses_an_id_in_use(opened: Opened) -> None:
    memory = opened.memory().scoped(user="alice", agent=None)
    memory.create_fact("Prefers uv", fact_id="k1")
    with pytest.raises(Exception, match="'k1' already exists"):
        memory.create_fact("Likes tea", fact_id="k1")
    memory.delete_fact("k1")
    with pytest.raises(ArchivedFactError, match="'k1' is in the archive"):
        memory.create_fact("Likes tea", fact_id="k1")
    with pytest.raises(FactValidationError, match="letters, digits"):
        memory.create_fact("Likes tea", fact_id="../k1")
    assert memory.list_facts() == ()


def test_labels_match_whole_exact_and_literal(store: DeerMemStore) -> None:
    """LangGraph's own store tests check these on values deermem refuses (not one fact each):
    the same properties, on facts."""
    written = [("foo", "u"), ("foobar", "u"), ("Foo", "u"), ("foo\n", "u"), ("f%o_*", "u")]
    for number, namespace in enumerate(written):
        store.put(namespace, f"k{number}", {"content": f"fact {number}"})
    assert [i.key for i in store.search(("foo",))] == ["k0"]
    assert [i.key for i in store.search(("Foo",))] == ["k2"]
    assert [i.key for i in store.search(("foo\n",))] == ["k3"]
    assert [i.key for i in store.search(("f%o_*",))] == ["k4"]
    assert store.search(("f%",)) == []
    assert store.list_namespaces(prefix=("foo",)) == [("foo", "u")]


@pytest.mark.parametrize(
    "op",
    [
        GetOp(("a.b", "u"), "k"),
        SearchOp(("a.b",)),
        ListNamespacesOp((MatchCondition("suffix", ("a.b",)),)),
        PutOp(("a", ""), "k", None),
    ],
    ids=["get", "search", "list", "delete"],
)
def test_an_invalid_label_sent_straight_to_batch_is_refused(store: DeerMemStore, op: Any) -> None:
    with pytest.raises(InvalidNamespaceError):
        store.batch([PutOp(ALICE, "k1", {"content": "never written"}), op])
    assert store.search(()) == []


_LABELS = st.text(min_size=1, max_size=12).filter(
    lambda label: "." not in label and "\0" not in label
)
_USERS = st.text(
    alphabet=st.characters(
        blacklist_categories=("Cc", "Cs"),
        blacklist_characters="\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069",
    ),
    min_size=1,
    max_size=12,
)


@given(labels=st.lists(_LABELS, max_size=4), user=_USERS)
def test_every_namespace_is_one_scope_and_back(labels: list[str], user: str) -> None:
    label = user.replace("%", "%25").replace(".", "%2E")
    namespace = (*labels, label)
    scope = scope_of(namespace)
    assert scope.user_id == user
    assert labels_of(scope.agent) == tuple(labels)
    assert namespace_of(scope) == namespace


def test_inside_an_agent_an_eviction_at_once_reaches_the_model(opened: Opened) -> None:
    """LangMem's tools leave store errors alone; with ToolErrorMiddleware (as docs/integrations.md
    shows) the model reads deermem's refusal as a tool error and the run goes on."""
    store = opened.store(max_facts=10)
    for number in range(10):
        store.put(NAMESPACE_ALICE, f"s{number}", {"content": f"sure {number}", "confidence": 1})
    call = {"name": "manage_memory", "id": "call_1", "args": {"content": "a passing thought"}}
    model = ScriptedAgentModel(
        messages=iter([AIMessage(content="", tool_calls=[call]), AIMessage(content="Ok.")])
    )
    guard = ToolErrorMiddleware(
        on_error=lambda error, request: str(error) if isinstance(error, DeerMemError) else None
    )
    agent = create_agent(
        model,
        tools=[create_manage_memory_tool(namespace=NAMESPACE)],
        middleware=[guard],
        store=store,
    )
    agent.invoke(
        {"messages": [{"role": "user", "content": "remember this"}]},
        {"configurable": {"langgraph_user_id": "alice"}},
    )
    tool_message = model.calls[1][-1]
    assert tool_message.type == "tool"
    assert "archived" in tool_message.text
    assert "at once" in tool_message.text
    assert "passing thought" not in tool_message.text
    assert len(store.search(NAMESPACE_ALICE)) == 10
