"""The capacity gate as the extraction path uses it, on both stores: one proposal, one commit."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

import pytest

from deermem import Fact, FactNotFoundError, MemoryConfig
from deermem.errors import FactRevisionConflict
from deermem.library import CapacityGate, Proposal, Removal
from deermem.model import Scope
from deermem.policy import CapacityPolicy
from deermem.store import ArchiveEntry, ChangeSet, CommitResult, ScopeSnapshot, Store, UsageEntry
from deermem.store.protocol import ScopeRecords, StoreTransaction
from deermem.store.records import ShadowMark
from tests.store_contract.conftest import Stores

NOW = datetime(2026, 8, 13, tzinfo=UTC)
SCOPE = Scope.of("alice")


def fact(fact_id: str, confidence: float, **fields: object) -> Fact:
    data: dict[str, object] = {
        "id": fact_id,
        "content": f"Content of {fact_id}",
        "confidence": confidence,
        "createdAt": "2026-08-01T00:00:00Z",
    }
    data.update(fields)
    return Fact.from_dict(data)


def seeded(stores: Stores, gate: CapacityGate, count: int = 10) -> Store:
    store = stores()
    with store.transaction(SCOPE) as transaction:
        gate.apply(
            transaction,
            Proposal(new_facts=tuple(fact(f"fact_s{i:02d}", 0.6 + i / 100) for i in range(count))),
            trigger="import",
            now=NOW,
        )
    return store


def test_an_extraction_proposal_is_decided_and_committed_at_once(stores: Stores) -> None:
    gate = CapacityGate(CapacityPolicy(), max_facts=10)
    store = seeded(stores, gate)
    revision = store.load(SCOPE).revision
    confirmed = (
        store.load(SCOPE)
        .by_id["fact_s05"]
        .replace(lastConfirmedAt="2026-08-13T00:00:00Z", confirmationCount=1)
    )
    with store.transaction(SCOPE) as transaction:
        outcome = gate.apply(
            transaction,
            Proposal(
                new_facts=(
                    fact("fact_n1", 0.95),  # a replacement that survives
                    fact("fact_n2", 0.61),  # one that the gate evicts at once
                    fact("fact_n3", 0.90),
                ),
                updates=(confirmed,),
                removals=(
                    Removal("fact_s01", "staleness"),
                    Removal("fact_s08", "contradiction", needs_kept="fact_n1"),
                    Removal("fact_s09", "contradiction", needs_kept="fact_n2"),
                ),
                summaries={("user", "topOfMind"): "Shipping the queue"},
            ),
            trigger="extraction",
            now=NOW,
        )
    snapshot = store.load(SCOPE)
    assert snapshot.revision == revision + 1  # one commit for everything
    ids = {f.id for f in snapshot.facts}
    assert len(ids) <= 10
    assert {"fact_n1", "fact_n3"} <= ids
    assert {"fact_s01", "fact_s08", "fact_n2"}.isdisjoint(ids)
    assert "fact_s09" in ids  # its replacement was evicted: the removal is skipped
    assert [r.fact_id for r in outcome.skipped_removals] == ["fact_s09"]
    assert set(outcome.removed) == {"fact_s01", "fact_s08"}
    assert snapshot.by_id["fact_s05"].confirmationCount == 1
    assert snapshot.summaries.user["topOfMind"].summary == "Shipping the queue"
    reasons = {r.reason: r for r in outcome.receipts}
    assert set(reasons) == {"capacity", "staleness", "contradiction"}
    assert all(r.trigger == "extraction" for r in outcome.receipts)
    assert "fact_n2" in reasons["capacity"].fact_ids
    assert store.audit(SCOPE)[-3:] == outcome.receipts
    archived = {e.fact_id: e for e in store.archive(SCOPE, NOW)}
    assert set(archived) == {"fact_s01", "fact_s08", *reasons["capacity"].fact_ids}
    assert archived["fact_s01"].receipt_id == reasons["staleness"].receipt_id


def test_a_removal_frees_room_before_the_gate_decides(stores: Stores) -> None:
    gate = CapacityGate(CapacityPolicy(), max_facts=10)
    store = seeded(stores, gate)
    with store.transaction(SCOPE) as transaction:
        outcome = gate.apply(
            transaction,
            Proposal(
                new_facts=(fact("fact_new", 0.1),), removals=(Removal("fact_s03", "staleness"),)
            ),
            trigger="extraction",
            now=NOW,
        )
    assert outcome.evicted == ()
    assert outcome.kept_new == ("fact_new",)


def test_remove_never_runs_the_policy(stores: Stores) -> None:
    store = seeded(stores, CapacityGate(CapacityPolicy(), max_facts=10))
    smaller = CapacityGate(CapacityPolicy(), max_facts=5)
    with store.transaction(SCOPE) as transaction:
        smaller.remove(transaction, (Removal("fact_s00", "deleted"),), trigger="manual", now=NOW)
        with pytest.raises(ValueError, match="conditional"):
            smaller.remove(
                transaction, (Removal("fact_s01", "x", needs_kept="y"),), trigger="manual", now=NOW
            )
    assert len(store.load(SCOPE).facts) == 9


@pytest.mark.parametrize(
    ("proposal", "error"),
    [
        (Proposal(new_facts=(fact("fact_s00", 0.5),)), FactRevisionConflict),
        (Proposal(updates=(fact("fact_zz", 0.5),)), FactNotFoundError),
        (Proposal(removals=(Removal("fact_zz", "staleness"),)), FactNotFoundError),
        (Proposal(updates=(fact("fact_s00", 0.9, revision=4),)), FactRevisionConflict),
    ],
)
def test_a_bad_proposal_commits_nothing_and_writes_no_receipt(
    stores: Stores, proposal: Proposal, error: type[Exception]
) -> None:
    gate = CapacityGate(CapacityPolicy(), max_facts=10)
    store = seeded(stores, gate, count=10)
    before = store.load(SCOPE)
    with store.transaction(SCOPE) as transaction, pytest.raises(error):
        gate.apply(
            transaction,
            Proposal(
                new_facts=(*proposal.new_facts, fact("fact_extra", 0.1)),
                updates=proposal.updates,
                removals=proposal.removals,
            ),
            trigger="extraction",
            now=NOW,
        )
    assert store.load(SCOPE) == before
    assert store.audit(SCOPE) == ()
    assert store.archive(SCOPE, NOW) == ()


def test_an_unknown_trigger_is_refused(stores: Stores) -> None:
    gate = CapacityGate(CapacityPolicy(), max_facts=10)
    store = stores()
    with store.transaction(SCOPE) as transaction, pytest.raises(ValueError, match="trigger"):
        gate.apply(transaction, Proposal(), trigger="cron", now=NOW)  # type: ignore[arg-type]


class CountingTransaction:
    """A transaction wrapper that counts usage reads."""

    def __init__(self, inner: StoreTransaction) -> None:
        self.inner = inner
        self.usage_reads = 0

    @property
    def snapshot(self) -> ScopeSnapshot:
        return self.inner.snapshot

    def usage(self) -> Mapping[str, UsageEntry]:
        self.usage_reads += 1
        return self.inner.usage()

    def archived(self, fact_id: str) -> ArchiveEntry | None:
        return self.inner.archived(fact_id)

    def archive(self, now: datetime) -> tuple[ArchiveEntry, ...]:
        return self.inner.archive(now)

    def records(self) -> ScopeRecords:
        return self.inner.records()

    def archived_matches(
        self, contents: Sequence[str], now: datetime
    ) -> Mapping[str, ArchiveEntry]:
        return self.inner.archived_matches(contents, now)

    def shadow_marks(self) -> Mapping[str, ShadowMark]:
        return self.inner.shadow_marks()

    def watermark(self, thread_id: str) -> str | None:
        return self.inner.watermark(thread_id)

    def commit(self, changes: ChangeSet) -> CommitResult:
        return self.inner.commit(changes)


@pytest.mark.parametrize(
    ("settings", "reads"),
    [
        ({}, 0),
        ({"fact_eviction_policy": "hybrid-v1"}, 1),
        ({"fact_eviction_shadow_enabled": True}, 1),
    ],
)
def test_usage_is_read_only_by_the_policies_that_use_it(
    stores: Stores, settings: dict[str, object], reads: int
) -> None:
    gate = CapacityGate.from_config(MemoryConfig(max_facts=10, **settings))
    store = stores()
    with store.transaction(SCOPE) as transaction:
        counting = CountingTransaction(transaction)
        gate.apply(counting, Proposal(new_facts=(fact("fact_a", 0.5),)), trigger="manual", now=NOW)
    assert counting.usage_reads == reads


def test_delete_mode_deletes_without_archive_and_with_a_receipt_for_each_fact(
    stores: Stores,
) -> None:
    gate = CapacityGate(CapacityPolicy(), max_facts=10, eviction_mode="delete")
    store = seeded(stores, gate)
    with store.transaction(SCOPE) as transaction:
        outcome = gate.apply(
            transaction,
            Proposal(
                new_facts=(fact("fact_new", 0.99),), removals=(Removal("fact_s04", "staleness"),)
            ),
            trigger="extraction",
            now=NOW,
        )
        assert outcome.archived == ()
        outcome = gate.apply(
            transaction, Proposal(new_facts=(fact("fact_new2", 0.99),)), trigger="manual", now=NOW
        )
    staleness, capacity = store.audit(SCOPE)
    assert (staleness.reason, staleness.fact_ids) == ("staleness", ("fact_s04",))
    assert (capacity.reason, capacity.fact_ids) == ("capacity", outcome.evicted)
    assert store.archive(SCOPE, NOW) == ()
    assert "fact_s04" not in store.reload(SCOPE)
    assert store.archived(SCOPE, "fact_s04") is None


@pytest.mark.parametrize("cap", [-1, True, 2.5])
def test_a_gate_refuses_a_cap_that_is_not_a_count(cap: object) -> None:
    with pytest.raises(ValueError, match="max_facts"):
        CapacityGate(CapacityPolicy(), max_facts=cap)  # type: ignore[arg-type]
