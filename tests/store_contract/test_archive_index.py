"""The search index's archive rows follow this process's commits, on both stores.

While missed-recall detection is on, the archive is indexed beside the library.
A commit reports what it did to the archive (the entries it wrote, the ids it
removed, the bounds' drops among them), and the committer applies just that
to rows that were current before it, so the index's part of a create at the
cap grows with what the commit touched, not with the archive. The rows must then be what a full
listing of the archive would have made them; when another commit came
between, the archive is listed as before.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime, timedelta

import pytest

from deermem import Memory, MemoryConfig
from deermem.model import Scope
from deermem.testing import ScriptedChatServer
from tests.store_contract.conftest import Stores
from tests.wire_support import CHAT, answer, model_settings, new_fact

NOW = datetime(2026, 8, 13, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> datetime:
        self.now += timedelta(minutes=1)  # every commit at its own time
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def server() -> Iterator[ScriptedChatServer]:
    with ScriptedChatServer() as running:
        yield running


@pytest.fixture
def memory(stores: Stores, clock: Clock, server: ScriptedChatServer) -> Iterator[Memory]:
    """Ten facts at a cap of ten, an archive of at most three entries for at most 30 days,
    a scripted model to learn from, and a search that opened the index."""
    config = MemoryConfig(
        max_facts=10,
        archive_max_entries=3,
        archive_max_age_days=30,
        search_mode="keyword",
        model=model_settings(server),
    )
    memory = stores.memory(config, clock=clock)
    for n in range(10):
        memory.create_fact(f"A note number {n}", confidence=0.5 + n / 100)
    memory.search("note")  # opens the index, with the archive's rows
    yield memory
    memory.close()  # the model's client, if a test learned


class CountedListing:
    """The store's archive listing, counted: how often the index had to list the archive."""

    def __init__(self, memory: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
        self.listing: Callable[[Scope, datetime], Mapping[str, str]] = memory.store.archive_listing
        self.calls = 0
        monkeypatch.setattr(memory.store, "archive_listing", self)

    def __call__(self, scope: Scope, now: datetime) -> Mapping[str, str]:
        self.calls += 1
        return self.listing(scope, now)


@pytest.fixture
def listed(memory: Memory, monkeypatch: pytest.MonkeyPatch) -> CountedListing:
    return CountedListing(memory, monkeypatch)


def assert_rows_follow_the_archive(memory: Memory, listed: CountedListing) -> None:
    """The index's archive rows are current at the store's version and hold exactly the
    listed entries."""
    index = memory._search_index.get(memory.store)
    assert index is not None
    scope = memory.scope
    assert index.is_archive_current(scope.user_id, scope.agent, memory.store.version(scope))
    hits = index.search(scope.user_id, scope.agent, "note", now=NOW, top_k=50, with_archive=True)
    listing = listed.listing(scope, memory.now())
    assert {hit.fact_id for hit in hits if hit.archived} == set(listing)


def test_the_archive_rows_follow_each_commit_that_archives_without_listing_the_archive(
    memory: Memory, listed: CountedListing
) -> None:
    for n in range(10, 14):  # each evicts one; beyond three entries the oldest are dropped
        memory.create_fact(f"A note number {n}", confidence=0.9)
        assert_rows_follow_the_archive(memory, listed)
    assert len(memory.list_archived()) == 3
    kept = memory.list_facts()[-1].id
    memory.delete_fact(kept)  # into the archive, dropping its oldest entry
    assert_rows_follow_the_archive(memory, listed)
    assert listed.calls == 0


def test_a_commit_that_archives_nothing_lists_the_archive_whose_entries_may_have_aged_out(
    memory: Memory, listed: CountedListing, clock: Clock
) -> None:
    """Only a commit that archives something applies the archive's bounds; after any
    other, an entry may have aged out since, which the listing leaves out."""
    aged = memory.create_fact("A note that evicts", confidence=0.9).evicted
    assert [entry.fact_id for entry in memory.list_archived()] == list(aged)
    assert listed.calls == 0
    clock.now += timedelta(days=31)  # past the age limit
    kept = memory.list_facts()[-1].id
    memory.update_fact(kept, content="A note changed a month later")  # the archive untouched
    assert listed.calls == 1
    assert_rows_follow_the_archive(memory, listed)  # the aged-out entry is not in the rows
    evicted = memory.create_fact("A note a month later", confidence=0.95).evicted
    assert [entry.fact_id for entry in memory.list_archived()] == list(evicted)  # aged: dropped
    assert listed.calls == 1
    assert_rows_follow_the_archive(memory, listed)


def test_a_commit_by_another_process_between_lists_the_archive_again(
    memory: Memory, listed: CountedListing, stores: Stores, clock: Clock
) -> None:
    other = Memory(
        stores(memory.config), memory.config, memory.scope, clock=clock
    )  # another process or replica, which never searched
    other.create_fact("A note from elsewhere", confidence=0.9)  # evicts one
    memory.create_fact("A note from here", confidence=0.91)  # on top of a change the rows missed
    assert listed.calls == 1
    assert_rows_follow_the_archive(memory, listed)
    memory.create_fact("Another note from here", confidence=0.92)
    assert listed.calls == 1  # in step again: followed by its change
    assert_rows_follow_the_archive(memory, listed)


def test_a_purge_between_makes_the_next_commit_list_the_archive(
    memory: Memory, listed: CountedListing
) -> None:
    evicted = memory.create_fact("A note that evicts", confidence=0.9).evicted
    assert evicted
    memory.purge(evicted[0])
    memory.create_fact("A note after the purge", confidence=0.91)
    assert listed.calls == 1
    assert_rows_follow_the_archive(memory, listed)


def assert_in_step(memory: Memory) -> None:
    """The index's library and archive rows are current at the store's state: the next
    search syncs nothing."""
    index = memory._search_index.opened()
    assert index is not None
    snapshot = memory.store.load(memory.scope)
    user, agent = memory.scope.user_id, memory.scope.agent
    assert index.is_current(user, agent, memory._search_index.version_of(snapshot))
    assert index.is_archive_current(user, agent, snapshot.version)


@pytest.mark.parametrize("change", ["restore", "import", "clear", "learn"])
def test_every_commit_of_the_memory_leaves_the_index_in_step(
    memory: Memory, server: ScriptedChatServer, change: str
) -> None:
    """Not only a create, an update and a delete: each way a memory commits keeps the
    index of the process that committed in step, so the agent's next search finds it so."""
    [evicted] = memory.create_fact("A note that evicts", confidence=0.9).evicted
    assert_in_step(memory)
    if change == "restore":
        memory.restore(evicted)
    elif change == "import":
        document = memory.export_document()
        facts = document["facts"]
        assert isinstance(facts, list)
        memory.import_document({**document, "facts": facts[:5]})  # the other five are replaced
    elif change == "clear":
        memory.clear()
    else:
        server.enqueue(answer(newFacts=[new_fact("The user writes notes in Markdown.")]))
        assert memory.learn("thread-1", CHAT).report.outcome == "applied"
    assert_in_step(memory)
