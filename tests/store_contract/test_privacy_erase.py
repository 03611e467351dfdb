"""Erasing a user, on both stores: nothing of them stays anywhere (issue 26, item 1).

After an erase, the whole store is read past deermem — every file under the
Markdown root (the search index, journals, temporary files included), every
row of every table and ``pg_dump`` — and neither the user's id nor anything
they said may be in it; the other users are unchanged and searchable.
"""

from __future__ import annotations

from datetime import UTC, datetime

from deermem import Memory, MemoryConfig
from deermem.model import Scope
from deermem.store import ChangeSet
from deermem.store.records import RegretEvent
from tests.privacy.stored import store_text
from tests.store_contract.conftest import Stores

NOW = datetime(2026, 8, 13, tzinfo=UTC)
ERIN = "erin-kqzwxv"  # the user erased: an id no other text contains (not hex: vectors are
# dumped as hex)
FRANK = "frank-mjrtyp"


def words(user: str, number: int) -> str:
    """A fact's content: words that exist nowhere else (a scan finds them or not)."""
    return f"{user} says quokka{number:03d}{user[-6:]} lives in marmalade{number:03d}{user[-6:]}"


def populate(stores: Stores, user: str, *, agents: tuple[str, ...] = ("coder", "writer")) -> Memory:
    """Facts, summaries, archive entries, receipts, usage, marks and index rows for ``user``."""
    config = MemoryConfig(max_facts=10)
    memory = stores.memory(config, user=user, clock=lambda: NOW)
    for agent in agents:
        view = memory.scoped(user=user, agent=agent)
        for number in range(12):  # two more than the cap: evictions, receipts, archive
            view.create_fact(words(user, number) + f" for {agent}", confidence=0.9)
        view.delete_fact(view.list_facts()[0].id)
        view.search(f"quokka005{user[-6:]}")  # index rows (library and archive)
        view.store.record_access(view.scope, [f.id for f in view.list_facts()[:2]], NOW)
        stores().commit(
            Scope.of(user, agent), ChangeSet(now=NOW, watermarks={f"thread of {user}": "m-1"})
        )
    memory.store.commit(
        Scope.of(user),
        ChangeSet(now=NOW, summaries={("user", "workContext"): f"{user} works on otters{user}"}),
    )
    return memory


def test_erase_removes_every_trace_of_the_user_and_keeps_the_others(stores: Stores) -> None:
    erin = populate(stores, ERIN)
    frank = populate(stores, FRANK, agents=("coder",))
    before = store_text(stores.kind, stores.root, stores.url)
    assert ERIN in before
    assert "quokka003" + ERIN[-6:] in before

    result = Memory(stores(), MemoryConfig(), None, clock=lambda: NOW).erase_user(ERIN)

    assert result.erased
    counts = result.counts
    assert counts["agents"] == 2
    assert counts["facts"] == 2 * 9
    assert counts["archived"] == 2 * 3
    assert counts["events"] >= 2 * 3
    assert counts["marks"] == 2
    assert counts["usage"] == 2 * 2
    after = store_text(stores.kind, stores.root, stores.url)
    assert ERIN not in after
    assert ERIN[-6:] not in after, "a word the user said is still stored"
    assert "otters" + ERIN not in after
    # The others are unchanged and searchable.
    assert "quokka003" + FRANK[-6:] in after
    coder = frank.scoped(user=FRANK, agent="coder")
    assert len(coder.list_facts()) == 9
    # A fact the gate kept (which ones it kept depends on the random ids' tie-break), found by
    # the word only it holds among its near-identical neighbours, all of which may rank too.
    kept = coder.list_facts()[0]
    hits = coder.search(kept.content.split()[2], top_k=len(coder.list_facts()), record=False)
    assert kept.content in [hit.fact.content for hit in hits]
    # The erased user reads as empty, from this memory and from a new one.
    assert erin.scoped(user=ERIN, agent="coder").list_facts() == ()
    assert erin.scoped(user=ERIN, agent="coder").search("quokka003" + ERIN[-6:]) == ()
    fresh = stores.memory(MemoryConfig(), user=ERIN, agent="writer")
    assert fresh.list_facts() == ()
    assert fresh.list_archived() == ()
    assert fresh.audit() == ()


def test_the_store_holds_a_user_from_the_first_write_until_the_erase(stores: Stores) -> None:
    store = stores()
    assert not store.holds_user(ERIN)
    populate(stores, ERIN, agents=("coder",))
    assert store.holds_user(ERIN)
    assert not store.holds_user(FRANK)
    Memory(store, MemoryConfig(), None, clock=lambda: NOW).erase_user(ERIN)
    assert not store.holds_user(ERIN)


def test_searching_an_erased_user_leaves_no_trace_of_them(stores: Stores) -> None:
    """A search names its user; of a user with no memory — erased, or never seen — the
    search index keeps no row: it is not a list of who was asked about."""
    erin = populate(stores, ERIN, agents=("coder",))
    assert Memory(stores(), MemoryConfig(), None, clock=lambda: NOW).erase_user(ERIN).erased
    for memory in (
        erin.scoped(user=ERIN, agent="coder"),
        stores.memory(MemoryConfig(), user=ERIN, agent="writer", clock=lambda: NOW),
    ):
        assert memory.search("quokka003" + ERIN[-6:]) == ()
        assert memory.search("quokka003" + ERIN[-6:]) == ()  # the second search as the first
        assert memory.context() is not None
    assert ERIN not in store_text(stores.kind, stores.root, stores.url)
    # A user's first fact still makes its scope, and a search finds it.
    again = stores.memory(MemoryConfig(), user=ERIN, agent="coder", clock=lambda: NOW)
    again.create_fact("quokka777 lives in a new burrow")
    assert [hit.fact.content for hit in again.search("quokka777")] == [
        "quokka777 lives in a new burrow"
    ]


def test_the_text_of_facts_deleted_before_the_erase_is_scrubbed_too(stores: Stores) -> None:
    """The index's rows of facts deleted and purged before were gone already, but their text
    stayed in the file's free pages and log: the erase scrubs the file even so."""
    erin = stores.memory(MemoryConfig(max_facts=20), user=ERIN, clock=lambda: NOW)
    made = [erin.create_fact(words(ERIN, number)).fact_id for number in range(12)]
    erin.search("quokka003" + ERIN[-6:])  # the index holds her rows
    for fact_id in made:
        assert fact_id is not None
        erin.delete_fact(fact_id)
        erin.purge(fact_id)
    erin.search("quokka003" + ERIN[-6:])  # the index follows: her rows go, not their text
    result = Memory(stores(), MemoryConfig(), None, clock=lambda: NOW).erase_user(ERIN)
    assert result.counts["searchRows"] == 0
    assert ERIN[-6:] not in store_text(stores.kind, stores.root, stores.url)


def test_erasing_an_unknown_user_erases_nothing_and_says_so(stores: Stores) -> None:
    frank = populate(stores, FRANK, agents=("coder",)).scoped(user=FRANK, agent="coder")
    before = (frank.list_facts(), frank.list_archived(), frank.audit(), frank.summaries())
    result = Memory(stores(), MemoryConfig(), None, clock=lambda: NOW).erase_user("nobody-here")
    assert not result.erased
    assert set(result.counts.values()) == {0}
    frank.reload()
    assert (frank.list_facts(), frank.list_archived(), frank.audit(), frank.summaries()) == before


def test_a_user_erased_can_start_again_from_nothing(stores: Stores) -> None:
    populate(stores, ERIN, agents=("coder",))
    memory = Memory(stores(), MemoryConfig(), None, clock=lambda: NOW)
    assert memory.erase_user(ERIN).erased
    again = stores.memory(MemoryConfig(), user=ERIN, agent="coder", clock=lambda: NOW)
    created = again.create_fact("a new beginning")
    assert [fact.id for fact in again.list_facts()] == [created.fact_id]
    assert memory.erase_user(ERIN).counts["facts"] == 1


def test_a_search_recorded_after_its_user_was_erased_records_nothing(stores: Stores) -> None:
    # A search reads, then counts its recalls and missed recalls under the user's lock; an
    # erase that lands between the two leaves nothing to count, nor to bring back.
    erin = populate(stores, ERIN, agents=("coder",))
    coder = erin.scoped(user=ERIN, agent="coder")
    recalled = [fact.id for fact in coder.list_facts()[:2]]
    [entry, *_] = coder.list_archived()
    missed = RegretEvent(
        kind="missed_recall",
        occurred_at="2026-08-13T00:00:00Z",
        fact_id=entry.fact_id,
        category=entry.fact.category,
        policy_version="confidence-v1",
        role="active",
        evicted_at=entry.archived_at,
        receipt_id=None,
        reason="capacity",
        trigger="search",
        query_digest="sha256:0000000000000000",
        rank=1,
    )
    assert Memory(stores(), MemoryConfig(), None, clock=lambda: NOW).erase_user(ERIN).erased
    stores().record_access(Scope.of(ERIN, "coder"), recalled, NOW, regret=[missed])
    assert ERIN not in store_text(stores.kind, stores.root, stores.url)
