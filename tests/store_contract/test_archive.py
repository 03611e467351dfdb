"""The reversible archive on both stores: eviction into it, restore, purge, bounds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from deermem import (
    ArchivedFactError,
    DuplicateFactError,
    FactNotFoundError,
    Memory,
    MemoryConfig,
)
from deermem.cli.demo import seed_scenarios
from deermem.library import Proposal
from tests.store_contract.conftest import Stores

NOW = datetime(2026, 8, 13, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> datetime:
        return self.now


def open_memory(stores: Stores, clock: Clock | None = None, **settings: object) -> Memory:
    return stores.memory(MemoryConfig(max_facts=10, **settings), clock=clock or (lambda: NOW))


def stale_vs_confirmed() -> dict[str, object]:
    return {"facts": [dict(f) for f in seed_scenarios(NOW)[0].facts]}


def state(memory: Memory) -> tuple[object, ...]:
    """Everything a store holds for the memory's scope."""
    return (
        memory.export_document(),
        memory.audit(),
        memory.store.archive(memory.scope, NOW),
        dict(memory.store.usage(memory.scope)),
    )


def test_an_evicted_fact_is_archived_with_a_reference_to_its_receipt(stores: Stores) -> None:
    memory = open_memory(stores)
    memory.import_document(stale_vs_confirmed())
    [receipt] = memory.audit()
    [entry] = memory.list_archived()
    assert entry.fact_id == "fact_confirm"
    assert (entry.reason, entry.trigger, entry.receipt_id) == (
        "capacity",
        "import",
        receipt.receipt_id,
    )
    assert entry.eviction == receipt.evicted[0]
    assert entry.fact.lastConfirmedAt is not None  # the fact as it was, every field
    assert entry.fact.content.startswith("The user wants short commit messages")


def test_restore_under_hybrid_brings_the_fact_back_and_evicts_another(stores: Stores) -> None:
    open_memory(stores).import_document(stale_vs_confirmed())
    hybrid = open_memory(stores, fact_eviction_policy="hybrid-v1")
    result = hybrid.restore("fact_confirm")
    assert result.restored
    assert result.evicted == ("fact_stale90",)
    restored = hybrid.get_fact("fact_confirm")
    original = next(f for f in seed_scenarios(NOW)[0].facts if f["id"] == "fact_confirm")
    assert restored.lastConfirmedAt == original["lastConfirmedAt"]
    assert restored.createdAt == original["createdAt"]
    assert [e.fact_id for e in hybrid.list_archived()] == ["fact_stale90"]
    assert hybrid.store.archived(hybrid.scope, "fact_confirm") is None


def test_restore_refuses_unknown_and_duplicate_facts(stores: Stores) -> None:
    memory = open_memory(stores)
    fact_id = memory.create_fact("Lives in Lisbon").fact_id
    assert fact_id is not None
    with pytest.raises(FactNotFoundError, match="in the archive"):
        memory.restore("fact_nothere")
    memory.delete_fact(fact_id)
    # Created with this text the archived fact would come back (relearned);
    # an edit makes an equal fact active without the gate.
    other = memory.create_fact("Lives in Porto").fact_id
    assert other is not None
    memory.update_fact(other, content="lives in lisbon")
    before = state(memory)
    with pytest.raises(DuplicateFactError):
        memory.restore(fact_id)
    assert state(memory) == before


def test_purge_deletes_the_content_and_keeps_the_receipt(stores: Stores) -> None:
    memory = open_memory(stores)
    memory.import_document(stale_vs_confirmed())
    memory.purge("fact_confirm")
    assert memory.list_archived() == ()
    assert memory.store.archived(memory.scope, "fact_confirm") is None
    assert memory.audit()[0].fact_ids == ("fact_confirm",)
    with pytest.raises(FactNotFoundError):
        memory.purge("fact_confirm")


def test_the_archive_is_bounded_by_count(stores: Stores) -> None:
    clock = Clock()
    memory = open_memory(stores, clock, archive_max_entries=2)
    ids = []
    for number in range(5):
        clock.now = NOW + timedelta(minutes=number)
        fact_id = memory.create_fact(f"Fact {number}").fact_id
        assert fact_id is not None
        ids.append(fact_id)
        memory.delete_fact(fact_id)
    assert [e.fact_id for e in memory.list_archived()] == [ids[4], ids[3]]  # newest first
    assert [memory.store.archived(memory.scope, i) is not None for i in ids] == [
        False,
        False,
        False,
        True,
        True,
    ]
    assert len(memory.audit()) == 5  # receipts outlive their archive entries


def test_the_archive_is_bounded_by_age(stores: Stores) -> None:
    clock = Clock()
    memory = open_memory(stores, clock, archive_max_age_days=30)
    old = memory.create_fact("Old").fact_id
    assert old is not None
    memory.delete_fact(old)
    clock.now = NOW + timedelta(days=31)
    assert memory.list_archived() == ()  # expired: not listed
    with pytest.raises(FactNotFoundError):
        memory.restore(old)
    assert memory.store.archived(memory.scope, old) is not None  # still stored
    newer = memory.create_fact("Newer").fact_id
    assert newer is not None
    memory.delete_fact(newer)  # the next archiving commit prunes
    assert memory.store.archived(memory.scope, old) is None
    assert [e.fact_id for e in memory.list_archived()] == [newer]


def test_an_archived_fact_named_by_its_id_comes_back_as_itself_beside_a_copy(
    stores: Stores,
) -> None:
    # A document that may repeat itself (allow_duplicates, DeerFlow's import) says an
    # archived fact twice: first without an id, then with its own. The first took the
    # archived fact, and the second, its own id, was refused as "in the archive".
    memory = open_memory(stores)
    for number in range(11):
        memory.create_fact(f"Fact {number}", confidence=0.5 + number / 100)
    [archived] = memory.list_archived()
    document = memory.export_document()
    facts = document["facts"]
    assert isinstance(facts, list)
    text = archived.fact.content
    document["facts"] = [
        *facts[:8],
        {"content": text, "confidence": 0.9},
        {"id": archived.fact_id, "content": text, "confidence": 0.5},
    ]
    result = memory.import_document(document, allow_duplicates=True)
    assert archived.fact_id in result.kept
    assert memory.store.archived(memory.scope, archived.fact_id) is None
    assert [f.content for f in memory.list_facts()].count(text) == 2


def test_importing_an_export_whose_fact_was_evicted_relearns_it(stores: Stores) -> None:
    memory = open_memory(stores)
    memory.import_document(stale_vs_confirmed())  # at the cap: fact_confirm is archived
    export = memory.export_document()
    exported = {fact.id for fact in memory.list_facts()}
    for number in range(3):  # evict more of the exported facts
        memory.create_fact(f"A confident fact {number}", confidence=0.99)
    evicted = {e.fact_id for e in memory.list_archived()} - {"fact_confirm"}
    assert evicted
    assert evicted <= exported
    facts = export["facts"]
    assert isinstance(facts, list)
    # Another text for each (one text for all would be refused as a duplicate first).
    changed = [
        {**f, "content": f"Another text {f['id']}"} if f["id"] in evicted else f for f in facts
    ]
    before = state(memory)
    with pytest.raises(ArchivedFactError, match="is in the archive") as refused:
        memory.import_document({**export, "facts": changed})  # an archived id, another text
    assert refused.value.fact_id in evicted
    assert state(memory) == before
    result = memory.import_document(export)  # the same texts: the archived facts come back
    assert set(result.kept) | set(result.evicted) >= exported
    library = {f.id for f in memory.list_facts()}
    assert not library & {e.fact_id for e in memory.list_archived()}  # nothing lives twice
    contents = [f.content for f in memory.list_facts()]
    assert len(contents) == len(set(contents))  # and nothing twice in the library


def test_restore_goes_through_the_gate_and_may_be_evicted_again(stores: Stores) -> None:
    memory = open_memory(stores)
    memory.import_document(stale_vs_confirmed())
    first_receipt = memory.list_archived()[0].receipt_id
    result = memory.restore("fact_confirm")  # still confidence: 0.7 loses again
    assert not result.restored
    assert result.evicted == ("fact_confirm",)
    assert result.receipts[0].trigger == "restore"
    [entry] = memory.list_archived()
    assert entry.fact_id == "fact_confirm"
    assert entry.trigger == "restore"
    assert entry.receipt_id != first_receipt
    assert "fact_confirm" not in {f.id for f in memory.list_facts()}


def test_restore_brings_back_the_recall_history(stores: Stores) -> None:
    memory = open_memory(stores, fact_eviction_policy="hybrid-v1")
    fact_id = memory.create_fact("Recalled often", confidence=0.6).fact_id
    assert fact_id is not None
    memory.record_access([fact_id, fact_id])
    memory.record_access([fact_id])
    memory.delete_fact(fact_id)
    assert memory.store.usage(memory.scope) == {}
    assert memory.list_archived()[0].usage is not None
    assert memory.restore(fact_id).restored
    assert memory.store.usage(memory.scope)[fact_id].access_count == 2


def test_equal_archive_times_keep_their_arrival_order(stores: Stores) -> None:
    memory = open_memory(stores, archive_max_entries=2)  # one fixed clock: equal times
    ids = []
    for number in range(4):
        fact_id = memory.create_fact(f"Fact {number}").fact_id
        assert fact_id is not None
        memory.delete_fact(fact_id)
        ids.append(fact_id)
    assert {e.fact_id for e in memory.list_archived()} == set(ids[2:])


def test_the_gate_refuses_a_new_fact_with_an_archived_id(stores: Stores) -> None:
    memory = open_memory(stores)
    fact_id = memory.create_fact("Lives in Lisbon").fact_id
    assert fact_id is not None
    memory.delete_fact(fact_id)
    entry = memory.get_archived(fact_id)
    again = entry.fact.replace(content="Lives in Porto")  # another text, the same id
    with memory.store.transaction(memory.scope) as transaction, pytest.raises(ArchivedFactError):
        memory.gate.apply(transaction, Proposal(new_facts=(again,)), trigger="manual", now=NOW)
    assert memory.list_facts() == ()
    assert memory.get_archived(fact_id) == entry  # its archived version is untouched
    assert memory.restore(fact_id).restored  # back by a restore (or by saying it again)
    assert memory.list_archived() == ()


def test_a_page_of_the_archive_is_the_listing_order_and_reads_only_that_page(
    stores: Stores,
) -> None:
    clock = Clock()
    memory = open_memory(stores, clock, archive_max_age_days=30)
    for number in range(7):
        clock.now = NOW + timedelta(minutes=number % 3, seconds=number)
        fact_id = memory.create_fact(f"Fact {number}").fact_id
        assert fact_id is not None
        memory.delete_fact(fact_id)
    everything = memory.list_archived()
    pages = [memory.archive_page(start, 3) for start in (0, 3, 6, 9)]
    assert [total for _, total in pages] == [7, 7, 7, 7]
    assert [entry for entries, _ in pages for entry in entries] == list(everything)
    assert memory.archive_page(0, 0) == ((), 7)
    # the store-wide summary counts the same archive
    (summary,) = memory.scopes()
    assert (summary.facts, summary.archived) == (0, 7)
    clock.now = NOW + timedelta(days=31)  # expired entries are neither listed nor counted
    assert memory.archive_page(0, 10) == ((), 0)
    assert memory.scopes()[0].archived == 0


@pytest.mark.parametrize("fact_id", ["a" * 251, "a" * 4096, "../fact_1", "fact 1", ""])
def test_an_id_no_fact_can_have_is_not_found_by_every_call_that_takes_one(
    stores: Stores, fact_id: str
) -> None:
    # A Markdown store names files by ids: one past the rule's 250 characters is past the
    # file system's name limit too, and must be "not found", never the OSError of a name.
    memory = open_memory(stores)
    kept = memory.create_fact("Lives in Lisbon").fact_id
    assert kept is not None
    memory.delete_fact(kept)  # the archive exists
    before = state(memory)
    for call in (memory.why, memory.restore, memory.get_archived, memory.purge, memory.get_fact):
        with pytest.raises(FactNotFoundError):
            call(fact_id)
    with pytest.raises(FactNotFoundError):
        memory.delete_fact(fact_id)
    assert state(memory) == before
