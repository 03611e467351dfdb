"""What a commit keeps besides facts, on both stores: recall counts, receipts, thread marks.

The files these live in on the Markdown store (and what a malformed file
does) are tested in tests/test_store_sidecars.py.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from deermem import Memory, MemoryConfig
from deermem.cli.demo import seed_scenarios
from deermem.model import Scope
from deermem.store import ChangeSet
from deermem.store.records import UsageEntry
from tests.store_contract.conftest import Stores

NOW = datetime(2026, 8, 13, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> datetime:
        return self.now


def open_memory(stores: Stores, clock: Clock | None = None, **settings: object) -> Memory:
    return stores.memory(MemoryConfig(**settings), clock=clock or Clock())


def test_recall_heat_decays_then_adds_one_and_never_touches_the_fact(stores: Stores) -> None:
    clock = Clock()
    memory = open_memory(stores, clock, fact_eviction_policy="hybrid-v1")
    fact_id = memory.create_fact("Uses uv").fact_id
    assert fact_id is not None
    before = memory.get_fact(fact_id)
    assert memory.record_access([fact_id])
    clock.now = NOW + timedelta(days=30)  # one half-life later
    assert memory.record_access([fact_id, "fact_unknown", "not an id"])
    assert memory.store.usage(memory.scope) == {
        fact_id: UsageEntry(
            access_heat=1.5, access_count=2, last_accessed_at="2026-09-12T00:00:00Z"
        )
    }
    assert memory.reload().get(fact_id) == before


def test_a_deleted_fact_is_never_recorded_again(stores: Stores) -> None:
    memory = open_memory(stores, fact_eviction_policy="hybrid-v1")
    fact_id = memory.create_fact("Uses uv").fact_id
    assert fact_id is not None
    memory.record_access([fact_id])
    memory.delete_fact(fact_id)
    assert memory.store.usage(memory.scope) == {}
    memory.record_access([fact_id])
    assert memory.store.usage(memory.scope) == {}


def test_receipts_are_bounded_and_hold_no_content(stores: Stores) -> None:
    memory = open_memory(stores, max_facts=10, eviction_audit_max_entries=2)
    for number in range(13):
        memory.create_fact(f"Secret number {number} of the user", confidence=0.5 + number / 100)
    receipts = memory.audit()
    assert len(receipts) == 2  # the newest two of three
    assert [r.occupancy for r in receipts] == [11, 11]
    event = receipts[-1].to_dict()
    assert (event["reason"], event["trigger"], event["maxFacts"]) == ("capacity", "manual", 10)
    assert "Secret" not in repr(event)


def test_no_receipts_are_written_with_a_bound_of_zero(stores: Stores) -> None:
    memory = open_memory(stores, max_facts=10, eviction_audit_max_entries=0)
    for number in range(11):
        memory.create_fact(f"Fact {number}")
    assert memory.audit() == ()
    [entry] = memory.list_archived()  # the archive still knows why
    assert entry.eviction is not None


def test_delete_mode_strips_deleted_ids_from_receipts(stores: Stores) -> None:
    memory = open_memory(
        stores, max_facts=10, eviction_mode="delete", fact_eviction_shadow_enabled=True
    )
    stale, _ = seed_scenarios(NOW)
    memory.import_document({"facts": [dict(f) for f in stale.facts]})
    [receipt] = memory.audit()
    assert receipt.fact_ids == ("fact_confirm",)
    assert receipt.shadow is not None
    assert receipt.shadow.would_evict == ("fact_stale90",)
    assert memory.list_archived() == ()  # delete mode: evicted facts are gone
    memory.delete_fact("fact_stale90")
    receipt, deleted = memory.audit()
    assert receipt.shadow is not None
    assert receipt.shadow.would_evict == ()  # stripped from the earlier receipt ...
    assert receipt.shadow.disagrees
    assert (deleted.reason, deleted.fact_ids) == ("deleted", ("fact_stale90",))  # ... its own
    remaining = {f.id for f in memory.list_facts()}
    memory.import_document({"facts": []})  # every fact deleted: each in one receipt of its own
    *earlier, replaced = memory.audit()
    assert [r.fact_ids for r in earlier] == [("fact_confirm",), ("fact_stale90",)]
    assert replaced.reason == "replaced"
    assert set(replaced.fact_ids) == remaining


def test_thread_marks_are_kept_per_conversation_and_scope(stores: Stores) -> None:
    store = stores()
    coder, writer = Scope.of("alice", "coder"), Scope.of("alice", "writer")
    assert store.watermark(coder, "thread-1") is None
    first = store.commit(coder, ChangeSet(now=NOW, watermarks={"thread-1": "m1", "线程 ☕": "m2"}))
    assert not first.changed  # a mark alone is no new revision
    assert store.watermark(coder, "thread-1") == "m1"
    assert store.watermark(coder, "线程 ☕") == "m2"
    assert store.watermark(writer, "thread-1") is None
    store.commit(coder, ChangeSet(now=NOW, watermarks={"thread-1": "m3"}))
    assert store.watermark(coder, "thread-1") == "m3"
    assert stores().watermark(coder, "thread-1") == "m3"  # another instance reads it too


def test_a_restored_fact_brings_its_recall_counts_back(stores: Stores) -> None:
    memory = open_memory(stores, fact_eviction_policy="hybrid-v1")
    fact_id = memory.create_fact("Recalled often", confidence=0.6).fact_id
    assert fact_id is not None
    memory.record_access([fact_id, fact_id])
    memory.delete_fact(fact_id)
    assert memory.store.usage(memory.scope) == {}
    assert memory.restore(fact_id).restored
    assert memory.store.usage(memory.scope)[fact_id].access_count == 1
