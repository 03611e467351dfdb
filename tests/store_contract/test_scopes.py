"""The store as a whole, on both stores: every scope it holds, and rebuilding the search index."""

from __future__ import annotations

from datetime import UTC, datetime

from deermem import MemoryConfig
from deermem.model import Scope
from tests.store_contract.conftest import Stores

NOW = datetime(2026, 8, 13, tzinfo=UTC)


def test_the_store_lists_every_scope_and_memory_counts_them(stores: Stores) -> None:
    config = MemoryConfig(max_facts=10)
    alice = stores.memory(config, clock=lambda: NOW)
    assert alice.store.scopes() == ()
    for number in range(11):  # one over the cap: one archived
        alice.create_fact(f"Fact number {number}", confidence=0.5 + number / 100)
    alice.scoped(user="alice", agent="coder").create_fact("Uses vim")
    alice.scoped(user="bob@example.com", agent=None).create_fact("Plays chess")
    alice.scoped(user=None, agent="solo").create_fact("The single-user layout")
    assert alice.store.scopes() == (
        Scope(None, "solo"),
        Scope("alice", "__default__"),
        Scope("alice", "coder"),
        Scope("bob@example.com", "__default__"),
    )
    counts = {(s.scope.user_id, s.scope.agent): (s.facts, s.archived) for s in alice.scopes()}
    assert counts == {
        (None, "solo"): (1, 0),
        ("alice", "__default__"): (10, 1),
        ("alice", "coder"): (1, 0),
        ("bob@example.com", "__default__"): (1, 0),
    }


def test_reindex_leaves_search_answering_as_before(stores: Stores) -> None:
    alice = stores.memory(clock=lambda: NOW)
    alice.create_fact("Drinks green tea every morning", confidence=0.8)
    alice.scoped(user="bob", agent=None).create_fact("Drinks black coffee", confidence=0.6)
    before = [hit.fact_id for hit in alice.search("drinks", record=False)]
    report = alice.reindex()
    if stores.kind == "postgres":  # each replica keeps its index in memory; the vectors are
        assert (report.location, report.scopes, report.facts) == (None, 2, 2)  # in the database
    else:
        assert (report.scopes, report.facts) == (2, 2)
    assert [hit.fact_id for hit in alice.search("drinks", record=False)] == before


USERS = ["bob", "Alice", "alice", "Zoe", "émile"]
# By user id's code points (the single-user layout first), then by agent: not by directory
# name (`émile`'s is derived from it) nor by any collation.
LISTED = [
    Scope(None, "__default__"),
    *(
        Scope(user, agent)
        for user in ("Alice", "Zoe", "alice", "bob", "émile")
        for agent in ("__default__", "coder")
    ),
]


def fill_users(stores: Stores) -> None:
    memory = stores.memory(user=None, clock=lambda: NOW)
    memory.create_fact("The single-user layout")
    for user in USERS:
        for agent in ("coder", None):
            memory.scoped(user=user, agent=agent).create_fact(f"{user} likes tea")


def test_scopes_are_listed_by_user_id_then_agent_by_code_point(stores: Stores) -> None:
    fill_users(stores)
    assert list(stores().scopes()) == LISTED
