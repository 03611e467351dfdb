"""The Store protocol on both stores: commits, revisions, versions, the cache, the user's lock.

What a change set does and refuses is the same on the Markdown store and on
PostgreSQL; a second store instance on the same data stands for another
process (Markdown) or another replica (PostgreSQL).
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest

from deermem import Fact, FactNotFoundError, MemoryConfig, StoreLockTimeout
from deermem.errors import FactRevisionConflict, ManifestRevisionConflict
from deermem.model import Scope
from deermem.store import ChangeSet, FactDelete, FactWrite, Section, Store
from tests.store_contract.conftest import Stores

NOW = datetime(2026, 8, 13, tzinfo=UTC)
ALICE = Scope.of("alice", "coder")


def fact(fact_id: str, content: str | None = None, **fields: object) -> Fact:
    data: dict[str, object] = {
        "id": fact_id,
        "content": content or f"Fact {fact_id}.",
        "createdAt": "2026-08-01T00:00:00Z",
        "source": "manual",
    }
    data.update(fields)
    return Fact.from_dict(data)


def create(store: Store, scope: Scope, *facts: Fact, now: datetime = NOW) -> None:
    store.commit(scope, ChangeSet(now=now, writes=tuple(FactWrite(f, create=True) for f in facts)))


def state(store: Store, scope: Scope = ALICE) -> tuple[object, ...]:
    """Everything the store holds for a scope, read fresh."""
    snapshot = store.reload(scope)
    return (
        snapshot.summaries,
        snapshot.facts,
        store.audit(scope),
        store.archive(scope, NOW),
        dict(store.usage(scope)),
    )


def test_a_missing_scope_loads_empty(stores: Stores) -> None:
    snapshot = stores().load(ALICE)
    assert snapshot.facts == ()
    assert snapshot.summaries.version == "1.0"
    assert snapshot.revision == 0
    assert set(snapshot.summaries.user) == {"workContext", "personalContext", "topOfMind"}


def test_scopes_are_isolated_and_agents_share_the_users_document(stores: Stores) -> None:
    store = stores()
    create(store, ALICE, fact("fact_a"))
    create(store, Scope.of("alice", "writer"), fact("fact_b"))
    create(store, Scope.of("bob", "coder"), fact("fact_c"))
    create(store, Scope.of(None, "coder"), fact("fact_d"))
    assert [f.id for f in store.load(ALICE).facts] == ["fact_a"]
    assert [f.id for f in store.load(Scope.of("alice", "writer")).facts] == ["fact_b"]
    assert [f.id for f in store.load(Scope.of("bob", "coder")).facts] == ["fact_c"]
    assert [f.id for f in store.load(Scope.of(None, "coder")).facts] == ["fact_d"]
    assert store.load(ALICE).revision == 2  # one revision per commit of the user, any agent
    assert store.load(Scope.of("bob", "coder")).revision == 1
    stored = store.load(ALICE).facts[0].scope
    assert stored is not None
    assert (stored.userId, stored.agentName) == ("alice", "coder")


def test_create_update_and_delete_with_fact_revisions(stores: Stores) -> None:
    store = stores()
    create(store, ALICE, fact("fact_a"))
    stored = store.load(ALICE).get("fact_a")
    assert stored is not None
    assert stored.revision == 1
    later = NOW + timedelta(hours=1)
    result = store.commit(
        ALICE,
        ChangeSet(now=later, writes=(FactWrite(stored.replace(confidence=0.8), create=False),)),
    )
    updated = result.written[0]
    assert (updated.revision, updated.confidence) == (2, 0.8)
    assert updated.updatedAt == "2026-08-13T01:00:00Z"
    assert updated.createdAt == stored.createdAt
    # the same fact again: nothing changes, nothing is written
    again = store.commit(ALICE, ChangeSet(now=later, writes=(FactWrite(updated, create=False),)))
    assert not again.changed
    assert again.revision == result.revision
    store.commit(ALICE, ChangeSet(now=later, deletes=(FactDelete("fact_a", 2),)))
    assert store.load(ALICE).facts == ()


def test_manifest_and_fact_revisions_are_separate_preconditions(stores: Stores) -> None:
    store = stores()
    create(store, ALICE, fact("fact_a"), fact("fact_b"))
    before = state(store)
    a = store.load(ALICE).get("fact_a")
    assert a is not None
    with pytest.raises(ManifestRevisionConflict) as stale:
        store.commit(
            ALICE, ChangeSet(now=NOW, writes=(FactWrite(a, create=False),), expected_revision=0)
        )
    assert (stale.value.expected, stale.value.actual) == (0, 1)
    with pytest.raises(FactRevisionConflict) as exists:
        create(store, ALICE, fact("fact_a"))
    assert (exists.value.fact_id, exists.value.expected, exists.value.actual) == ("fact_a", None, 1)
    with pytest.raises(FactRevisionConflict) as old:
        store.commit(
            ALICE,
            ChangeSet(
                now=NOW, writes=(FactWrite(a.replace(revision=5, content="x"), create=False),)
            ),
        )
    assert (old.value.expected, old.value.actual) == (5, 1)
    with pytest.raises(FactRevisionConflict):
        store.commit(ALICE, ChangeSet(now=NOW, deletes=(FactDelete("fact_b", 7),)))
    with pytest.raises(FactNotFoundError):
        store.commit(ALICE, ChangeSet(now=NOW, deletes=(FactDelete("fact_zz"),)))
    assert state(store) == before  # refused changes write nothing


def test_a_disjoint_change_applies_over_a_newer_document_a_stale_one_does_not(
    stores: Stores,
) -> None:
    first, second = stores(), stores()
    create(first, ALICE, fact("fact_a"), fact("fact_b"))
    a = second.load(ALICE).get("fact_a")
    b = second.load(ALICE).get("fact_b")
    assert a is not None
    assert b is not None
    first.commit(
        ALICE, ChangeSet(now=NOW, writes=(FactWrite(a.replace(confidence=0.9), create=False),))
    )
    # second's view of fact_b is still current: the change applies over revision 2
    result = second.commit(
        ALICE, ChangeSet(now=NOW, writes=(FactWrite(b.replace(confidence=0.1), create=False),))
    )
    assert result.revision == 3
    # second's view of fact_a is stale: refused
    with pytest.raises(FactRevisionConflict):
        second.commit(
            ALICE, ChangeSet(now=NOW, writes=(FactWrite(a.replace(confidence=0.2), create=False),))
        )
    assert {f.id: f.confidence for f in second.load(ALICE).facts} == {"fact_a": 0.9, "fact_b": 0.1}


def test_two_stores_cannot_create_the_same_fact_id(stores: Stores) -> None:
    create(stores(), ALICE, fact("fact_a", "one"))
    with pytest.raises(FactRevisionConflict, match="already exists"):
        create(stores(), ALICE, fact("fact_a", "two"))


def test_summary_changes_keep_sibling_sections_and_refuse_stale_bases(stores: Stores) -> None:
    store = stores()
    store.commit(
        ALICE,
        ChangeSet(
            now=NOW,
            summaries={("user", "workContext"): "Payments team", ("history", "recentMonths"): "Q3"},
        ),
    )
    later = NOW + timedelta(days=1)
    store.commit(ALICE, ChangeSet(now=later, summaries={("user", "topOfMind"): "The migration"}))
    summaries = store.load(ALICE).summaries
    assert summaries.user["workContext"] == Section("Payments team", "2026-08-13T00:00:00Z")
    assert summaries.user["topOfMind"] == Section("The migration", "2026-08-14T00:00:00Z")
    assert summaries.history["recentMonths"].summary == "Q3"
    before = state(store)
    with pytest.raises(ManifestRevisionConflict):
        store.commit(
            ALICE,
            ChangeSet(now=later, summaries={("user", "topOfMind"): "stale"}, expected_revision=1),
        )
    assert state(store) == before
    with pytest.raises(ValueError, match="unknown summary section"):
        store.commit(ALICE, ChangeSet(now=later, summaries={("user", "mood"): "x"}))


def test_another_instances_commit_invalidates_the_cache(stores: Stores) -> None:
    mine, theirs = stores(), stores()
    create(mine, ALICE, fact("fact_a"))
    assert len(mine.load(ALICE).facts) == 1
    create(theirs, ALICE, fact("fact_b"))
    assert {f.id for f in mine.load(ALICE).facts} == {"fact_a", "fact_b"}


def test_snapshots_cannot_be_changed_by_callers(stores: Stores) -> None:
    store = stores()
    create(store, ALICE, fact("fact_a", custom={"nested": 1}))
    snapshot = store.load(ALICE)
    with pytest.raises(TypeError):
        snapshot.by_id["fact_x"] = snapshot.facts[0]  # type: ignore[index]
    with pytest.raises(TypeError):
        snapshot.facts[0].extra["custom"] = 2  # type: ignore[index]
    with pytest.raises(AttributeError):
        snapshot.facts[0].content = "changed"  # type: ignore[misc]
    assert store.load(ALICE) is snapshot  # served from the cache, unchanged


def test_concurrent_loads_and_commits_from_threads(stores: Stores) -> None:
    store = stores()
    create(store, ALICE, fact("fact_seed"))
    errors: list[BaseException] = []

    def reader() -> None:
        try:
            for _ in range(50):
                facts = store.load(ALICE).facts
                assert facts
                assert all(isinstance(f, Fact) for f in facts)
        except BaseException as error:  # collected, then re-raised by the test
            errors.append(error)

    def writer(number: int) -> None:
        try:
            for i in range(3):
                create(store, ALICE, fact(f"fact_w{number}_{i}"))
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=reader) for _ in range(8)]
    threads += [threading.Thread(target=writer, args=(n,)) for n in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(store.reload(ALICE).facts) == 7


def test_a_lock_held_by_another_thread_times_out(stores: Stores) -> None:
    store = stores(MemoryConfig(file_lock_timeout_seconds=1))
    held = threading.Event()
    release = threading.Event()

    def holder() -> None:
        with store.transaction(ALICE):
            held.set()
            release.wait(5)

    thread = threading.Thread(target=holder)
    thread.start()
    held.wait(5)
    try:
        with pytest.raises(StoreLockTimeout):
            create(store, ALICE, fact("fact_a"))
    finally:
        release.set()
        thread.join()
    create(store, ALICE, fact("fact_a"))


def test_the_version_token_changes_with_every_commit_only(stores: Stores) -> None:
    store = stores()
    empty = store.version(ALICE)
    create(store, ALICE, fact("fact_a"))
    first = store.version(ALICE)
    assert first != empty
    assert store.version(ALICE) == first == store.load(ALICE).version
    create(store, Scope.of("alice", "writer"), fact("fact_b"))
    assert store.version(ALICE) != first  # another agent of the user: may have changed
