"""Clearing a scope or a user (what every host of a Memory needs), on both stores."""

from __future__ import annotations

from deermem import Memory, MemoryConfig
from tests.store_contract.conftest import Stores
from tests.wire_support import NOW, seed, stored_fact


def plain_memory(stores: Stores, *, user: str | None = "alice", **settings: object) -> Memory:
    return stores.memory(MemoryConfig(**settings), user=user, clock=lambda: NOW)


def test_clear_archives_every_fact_of_the_scope_and_keeps_the_summaries(stores: Stores) -> None:
    memory = plain_memory(stores)
    writer = memory.scoped(user="alice", agent="writer")
    seed(writer, stored_fact("fact_w"))
    seed(memory, stored_fact("fact_a"), stored_fact("fact_b"), workContext="Backend engineer")

    assert sorted(memory.clear()) == ["fact_a", "fact_b"]

    assert memory.list_facts() == ()
    assert memory.summaries().user["workContext"].summary == "Backend engineer"
    assert [f.id for f in writer.list_facts()] == ["fact_w"]
    assert sorted(entry.fact.id for entry in memory.list_archived()) == ["fact_a", "fact_b"]
    (receipt,) = [r for r in memory.audit() if r.reason == "deleted"]
    assert sorted(receipt.fact_ids) == ["fact_a", "fact_b"]
    assert memory.restore("fact_a").restored
    assert memory.clear() == ("fact_a",)
    assert memory.clear() == ()


def test_clear_under_delete_mode_removes_the_facts_for_good(stores: Stores) -> None:
    memory = plain_memory(stores, eviction_mode="delete")
    seed(memory, stored_fact("fact_a"))
    assert memory.clear() == ("fact_a",)
    assert memory.list_archived() == ()
    gone = memory.why("fact_a")  # the content is gone; the receipt says what became of it
    assert (gone.status, gone.fact) == ("gone", None)
    assert [(r.reason, r.trigger) for r in gone.receipts] == [("deleted", "manual")]


def test_clear_user_removes_every_agent_and_the_summaries_of_one_user_only(stores: Stores) -> None:
    alice = plain_memory(stores)
    bob = plain_memory(stores, user="bob")
    for view, prefix in ((alice, "a"), (bob, "b")):
        seed(view.scoped(user=view.scope.user_id, agent="writer"), stored_fact(f"fact_{prefix}w"))
        seed(view, stored_fact(f"fact_{prefix}d"), workContext=f"{prefix} works")

    assert sorted(alice.clear_user()) == ["fact_ad", "fact_aw"]

    assert alice.list_facts() == ()
    assert alice.scoped(user="alice", agent="writer").list_facts() == ()
    assert all(section.summary == "" for section in alice.summaries().user.values())
    assert all(section.summary == "" for section in alice.summaries().history.values())
    assert [f.id for f in bob.list_facts()] == ["fact_bd"]
    assert bob.summaries().user["workContext"].summary == "b works"
    assert alice.scoped(user="alice", agent="writer").list_archived()[0].fact.id == "fact_aw"


def test_a_user_without_memory_has_no_agents_and_clearing_it_changes_nothing(
    stores: Stores,
) -> None:
    memory = plain_memory(stores, user="nobody")
    assert memory.store.agents("nobody") == ()
    assert memory.clear_user() == ()
    assert memory.store.load(memory.scope).revision == 0


def test_the_store_lists_the_agents_a_user_has(stores: Stores) -> None:
    alice = plain_memory(stores)
    for agent in ("writer", "coder"):
        alice.scoped(user="alice", agent=agent).create_fact(f"A fact of {agent}")
    alice.create_fact("A fact of the default agent")
    plain_memory(stores, user=None).scoped(user=None, agent="solo").create_fact("Solo")
    assert alice.store.agents("alice") == ("__default__", "coder", "writer")
    assert alice.store.agents(None) == ("solo",)
    assert alice.store.agents("bob") == ()
