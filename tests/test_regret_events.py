"""Regret events through every path that can cause them, both policies, shadow on and off.

Each test drives a real :class:`~deermem.Memory` on a Markdown store (and,
for extraction, a ScriptedChatServer over real HTTP) and checks the events
the store holds afterwards, and that they were committed with their cause.

The shadow scenario: ten facts, nine fresh ones of confidence 0.70–0.78 and
one old one (400 days, confidence 0.80, "Emacs"). At the cap, ``confidence``
evicts the weakest fresh fact; ``hybrid-v1`` would evict the old one, whose
freshness has decayed — so in shadow mode the old fact carries a shadow mark.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from deermem import ArchivedFactError, CorruptMemoryFile, Memory, MemoryConfig
from deermem.context import SearchIndex
from deermem.store import Scope, journal
from deermem.store.regret_records import RegretEvent, query_digest
from deermem.testing import ScriptedChatServer
from tests.wire_support import (
    NOW,
    Clock,
    answer,
    close_memories,  # noqa: F401 (autouse fixture)
    conversation,
    new_fact,
    open_memory,
    reinforce,
    removal,
    seed,
    stored_fact,
    tree,
)

OLD = "fact_old"
OLD_TEXT = "The user's favourite editor is Emacs"
CONFIRMING = conversation("Emacs again for this one.", "Opened it in Emacs.", "Perfect!", "Bye.")
CHATTING = conversation("Let us talk about editors.", "Sure, editors it is.")
POLICIES = ("confidence", "hybrid-v1")


@pytest.fixture
def server() -> Iterator[ScriptedChatServer]:
    with ScriptedChatServer() as running:
        yield running


def library() -> list[dict[str, Any]]:
    fresh = [
        stored_fact(f"fact_f{n:02d}", f"Fresh fact number {n}", confidence=0.70 + n / 100)
        for n in range(9)
    ]
    return [stored_fact(OLD, OLD_TEXT, confidence=0.80, age_days=400), *fresh]


def opened(
    root: Path,
    server: ScriptedChatServer,
    clock: Clock,
    *,
    policy: str = "confidence",
    shadow: bool = False,
    **settings: Any,
) -> Memory:
    memory = open_memory(
        root,
        server,
        clock=clock,
        max_facts=10,
        fact_eviction_policy=policy,
        fact_eviction_shadow_enabled=shadow,
        **settings,
    )
    seed(memory, *library())
    return memory


def events(memory: Memory) -> list[RegretEvent]:
    return list(memory.store.regret_events(memory.scope))


def kinds(memory: Memory) -> list[tuple[str, str, str, str]]:
    return [(e.kind, e.role, e.policy_version, e.fact_id) for e in events(memory)]


def evict_one(memory: Memory, clock: Clock, text: str = "A confident new fact") -> str:
    clock.advance(hours=1)
    result = memory.create_fact(text, confidence=0.85)
    [evicted] = result.evicted
    return evicted


# --- relearned ---------------------------------------------------------------------


@pytest.mark.parametrize("policy", POLICIES)
def test_a_manual_create_relearns_an_evicted_fact_with_its_history(
    tmp_path: Path, server: ScriptedChatServer, policy: str
) -> None:
    clock = Clock()
    memory = opened(tmp_path, server, clock, policy=policy)
    memory.record_access(["fact_f00", OLD])  # recalls (counted under hybrid-v1 only)
    evicted = evict_one(memory, clock)
    entry = memory.get_archived(evicted)
    clock.advance(days=3)
    memory.delete_fact("fact_f08")  # room for it to stay
    result = memory.create_fact(f"  {entry.fact.content.upper()} ")  # the duplicate rule
    assert (result.fact_id, result.relearned) == (evicted, evicted)
    back = memory.get_fact(evicted)
    assert back == entry.fact  # its own id, confidence, creation time: no second copy
    assert [f.content for f in memory.list_facts()].count(entry.fact.content) == 1
    if policy == "hybrid-v1":
        assert memory.store.usage(memory.scope)[evicted].access_count == 1  # recalls kept
    [event] = [e for e in events(memory) if e.fact_id == evicted]
    assert (event.kind, event.role, event.policy_version) == ("relearned", "active", policy)
    assert (event.trigger, event.reason) == ("manual", "capacity")
    assert (event.evicted_at, event.receipt_id) == (entry.archived_at, entry.receipt_id)
    assert event.occurred_at == "2026-08-16T13:00:00Z"
    assert event.query_digest is None
    assert not memory.store.archived(memory.scope, evicted)


def test_a_relearned_fact_may_be_evicted_again_and_the_event_stays(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    clock = Clock()
    memory = opened(tmp_path, server, clock)
    evicted = evict_one(memory, clock)
    content = memory.get_archived(evicted).fact.content
    clock.advance(hours=1)
    result = memory.create_fact(content)  # confidence 0.70 loses again
    assert (result.fact_id, result.relearned, result.evicted) == (None, evicted, (evicted,))
    assert result.fact.id == evicted  # what the API's Location names: the archived fact
    assert memory.get_archived(evicted).trigger == "manual"
    assert kinds(memory) == [("relearned", "active", "confidence", evicted)]


@pytest.mark.parametrize("policy", POLICIES)
def test_extraction_relearns_an_evicted_fact(
    tmp_path: Path, server: ScriptedChatServer, policy: str
) -> None:
    clock = Clock()
    memory = opened(tmp_path, server, clock, policy=policy)
    evicted = evict_one(memory, clock)
    entry = memory.get_archived(evicted)
    memory.delete_fact("fact_f08")
    server.enqueue(answer(newFacts=[new_fact(entry.fact.content.lower(), 0.9)]))
    report = memory.learn("thread-1", CHATTING).report
    assert report.relearned == (evicted,)
    assert report.added == (evicted,)
    assert memory.get_fact(evicted) == entry.fact
    [event] = [e for e in events(memory) if e.kind == "relearned"]
    assert (event.trigger, event.role, event.policy_version) == ("extraction", "active", policy)


def test_a_contradiction_whose_replacement_is_relearned_needs_the_relearned_fact(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    clock = Clock()
    memory = opened(tmp_path, server, clock)
    evicted = evict_one(memory, clock)
    text = memory.get_archived(evicted).fact.content
    memory.delete_fact("fact_f08")
    clock.advance(hours=1)
    server.enqueue(answer(newFacts=[new_fact(text, 0.9)], factsToRemove=[removal("fact_f05", 0)]))
    report = memory.learn("thread-1", CHATTING).report
    assert report.relearned == (evicted,)
    assert [change.fact_id for change in report.removed] == ["fact_f05"]  # its replacement stayed
    assert evicted in {f.id for f in memory.list_facts()}


def test_import_relearns_and_a_changed_text_under_an_archived_id_is_refused(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    clock = Clock()
    memory = opened(tmp_path, server, clock)
    evicted = evict_one(memory, clock)
    entry = memory.get_archived(evicted)
    document = memory.export_document()
    facts = document["facts"]
    assert isinstance(facts, list)
    changed = [*facts, {**entry.fact.to_dict(), "content": "Another text entirely"}]
    before = tree(tmp_path)
    with pytest.raises(ArchivedFactError):
        memory.import_document({**document, "facts": changed})
    assert tree(tmp_path) == before
    fresh = [f for f in facts if isinstance(f, dict) and f["id"] != "fact_f08"]
    result = memory.import_document({**document, "facts": [*fresh, entry.fact.to_dict()]})
    assert evicted in result.kept
    [event] = [e for e in events(memory) if e.kind == "relearned" and e.fact_id == evicted]
    assert event.trigger == "import"


def test_a_deleted_fact_said_again_is_relearned_but_not_counted_against_the_policy(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    clock = Clock()
    memory = opened(tmp_path, server, clock)
    memory.delete_fact("fact_f03")
    result = memory.create_fact("fresh fact number 3")
    assert result.relearned == "fact_f03"
    [event] = events(memory)
    assert (event.kind, event.reason) == ("relearned", "deleted")
    report = memory.regret()
    assert report.uncounted["relearned"] == 1
    confidence = report.policy("confidence", "active")
    assert confidence is not None
    assert confidence.events_total == 0


def test_a_relearn_is_committed_with_its_fact_or_not_at_all(
    tmp_path: Path, server: ScriptedChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    memory = opened(tmp_path, server, clock)
    evicted = evict_one(memory, clock)
    content = memory.get_archived(evicted).fact.content
    memory.delete_fact("fact_f08")
    before = tree(tmp_path)

    class Crash(BaseException):
        pass

    def crash(path: Path) -> bool:
        raise Crash

    with monkeypatch.context() as patch:
        patch.setattr(journal, "remove_durably", crash)
        patch.setattr(journal, "_roll_back_now", lambda user: None)  # a crash undoes nothing
        with pytest.raises(Crash):
            memory.create_fact(content)
    assert any(name.endswith("regret-events.json") for name in tree(tmp_path))  # written ...
    reopened = Memory.open(tmp_path, memory.config, user="alice", clock=clock)
    assert reopened.list_facts() == memory.list_facts()  # ... and rolled back with the fact
    assert tree(tmp_path) == before
    assert reopened.store.regret_events(reopened.scope) == ()


def test_a_damaged_regret_log_stops_the_commit_and_is_not_overwritten(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    clock = Clock()
    memory = opened(tmp_path, server, clock)
    evicted = evict_one(memory, clock)
    content = memory.get_archived(evicted).fact.content
    log = tmp_path / "users/alice/agents/__default__/.metadata/regret-events.json"
    log.write_text('{"not": "a list"}', "utf-8")
    before = tree(tmp_path)
    with pytest.raises(CorruptMemoryFile, match=r"regret-events\.json"):
        memory.create_fact(content)
    assert tree(tmp_path) == before
    with pytest.raises(CorruptMemoryFile, match=r"regret-events\.json"):
        memory.regret()


# --- restored ----------------------------------------------------------------------


@pytest.mark.parametrize("policy", POLICIES)
def test_a_restore_is_a_regret_event(
    tmp_path: Path, server: ScriptedChatServer, policy: str
) -> None:
    clock = Clock()
    memory = opened(tmp_path, server, clock, policy=policy)
    evicted = evict_one(memory, clock)
    entry = memory.get_archived(evicted)
    clock.advance(days=1)
    memory.restore(evicted)
    [event] = events(memory)
    assert (event.kind, event.role, event.policy_version) == ("restored", "active", policy)
    assert (event.trigger, event.receipt_id) == ("restore", entry.receipt_id)


# --- missed recall -----------------------------------------------------------------


@pytest.mark.parametrize("policy", POLICIES)
def test_a_search_records_the_archived_facts_it_would_have_returned(
    tmp_path: Path, server: ScriptedChatServer, policy: str
) -> None:
    clock = Clock()
    memory = opened(tmp_path, server, clock, policy=policy)
    evicted = evict_one(memory, clock)
    entry = memory.get_archived(evicted)
    number = entry.fact.content.split()[-1]
    clock.advance(hours=2)
    results = memory.search(f"fact number {number}", top_k=3)
    assert evicted not in [r.fact_id for r in results]  # the library's results only
    [event] = events(memory)
    assert (event.kind, event.role, event.policy_version) == ("missed_recall", "active", policy)
    assert (event.fact_id, event.rank, event.trigger) == (evicted, 1, "search")
    assert event.query_digest == query_digest(f"Fact Number {number} ")
    assert event.receipt_id == entry.receipt_id
    log = (tmp_path / "users/alice/agents/__default__/.metadata/regret-events.json").read_text()
    assert "fact number" not in log.casefold()  # no query text, no content
    assert entry.fact.content.casefold() not in log.casefold()


def test_missed_recall_detection_does_not_change_what_a_search_returns(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    clock = Clock()
    with_detection = opened(tmp_path / "a", server, clock)
    without = opened(tmp_path / "b", server, clock, regret_missed_recall=False)
    for memory in (with_detection, without):
        for n in range(4):
            evict_one(memory, clock, text=f"A confident new fact number {n}")
    queries = ["fact number", "fresh fact", "number 3", "Emacs", "confident", "nothing here"]
    for query in queries:
        found = [(r.fact_id, r.score, r.bm25) for r in with_detection.search(query, top_k=4)]
        assert found == [(r.fact_id, r.score, r.bm25) for r in without.search(query, top_k=4)]
    assert events(with_detection)
    assert events(without) == []


def test_a_search_that_only_looks_records_nothing(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    clock = Clock()
    memory = opened(tmp_path, server, clock)
    evicted = evict_one(memory, clock)
    number = memory.get_archived(evicted).fact.content.split()[-1]
    memory.search(f"fact number {number}", record=False)
    assert events(memory) == []


def test_switching_detection_off_drops_the_archive_from_the_index(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    clock = Clock()
    memory = opened(tmp_path, server, clock)
    evicted = evict_one(memory, clock)
    number = memory.get_archived(evicted).fact.content.split()[-1]
    memory.search("anything")  # indexes the archive
    index = memory._search_index.get(memory.store)
    hits = index.search("alice", "__default__", f"number {number}", now=NOW, with_archive=True)
    assert [hit.fact_id for hit in hits if hit.archived] == [evicted]
    off = Memory(memory.store, MemoryConfig(max_facts=10, regret_missed_recall=False), memory.scope)
    off._search_index = memory._search_index
    off.search("anything")
    hits = index.search("alice", "__default__", f"number {number}", now=NOW, with_archive=True)
    assert not [hit for hit in hits if hit.archived]


def test_a_purged_fact_leaves_the_index_at_the_next_search(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    clock = Clock()
    memory = opened(tmp_path, server, clock)
    evicted = evict_one(memory, clock)
    number = memory.get_archived(evicted).fact.content.split()[-1]
    memory.search("anything")
    memory.purge(evicted)
    memory.search(f"fact number {number}")
    index = memory._search_index.get(memory.store)
    hits = index.search("alice", "__default__", f"number {number}", now=NOW, with_archive=True)
    assert evicted not in [hit.fact_id for hit in hits]
    assert events(memory) == []


def test_a_purge_by_another_process_leaves_the_index_at_the_next_search(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    """A purge changes neither the library nor the store's version token; the index is marked."""
    clock = Clock()
    memory = opened(tmp_path, server, clock)
    evicted = evict_one(memory, clock)
    number = memory.get_archived(evicted).fact.content.split()[-1]
    memory.search("anything")  # indexes the archive
    other = open_memory(tmp_path, server, clock=clock, max_facts=10)  # another process
    other.purge(evicted)
    memory.search(f"fact number {number}")
    index = memory._search_index.get(memory.store)
    hits = index.search("alice", "__default__", f"number {number}", now=NOW, with_archive=True)
    assert evicted not in [hit.fact_id for hit in hits]
    assert events(memory) == []


def test_a_fact_evicted_at_once_is_indexed_in_the_archive_at_the_next_search(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    """The library's content is unchanged by such a create; the archive is followed all the same."""
    clock = Clock()
    memory = opened(tmp_path, server, clock)
    memory.search("anything")  # the archive (empty) is indexed at this version
    before = [fact.id for fact in memory.list_facts()]
    clock.advance(hours=1)
    result = memory.create_fact("Collects vintage typewriters", confidence=0.1)
    assert result.fact_id is None  # evicted at once
    assert [fact.id for fact in memory.list_facts()] == before
    clock.advance(hours=1)
    memory.search("vintage typewriters")
    [event] = events(memory)
    assert (event.kind, event.fact_id, event.rank) == ("missed_recall", result.fact.id, 1)


def test_a_restored_fact_leaves_the_archive_rows_and_is_found_in_the_library(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    clock = Clock()
    memory = opened(tmp_path, server, clock)
    evicted = evict_one(memory, clock)
    number = memory.get_archived(evicted).fact.content.split()[-1]
    memory.search("anything")  # indexes the archive
    memory.delete_fact("fact_f08")  # room for it
    memory.restore(evicted)
    clock.advance(hours=1)
    results = memory.search(f"fact number {number}", top_k=1)
    assert [r.fact_id for r in results] == [evicted]
    index = memory._search_index.get(memory.store)
    hits = index.search("alice", "__default__", f"number {number}", now=NOW, with_archive=True)
    assert [hit.archived for hit in hits if hit.fact_id == evicted] == [False]
    assert [e.kind for e in events(memory)] == ["restored"]  # no missed recall of it


@pytest.mark.parametrize("detection", [True, False])
def test_reindex_rebuilds_the_library_and_the_archive(
    tmp_path: Path, server: ScriptedChatServer, detection: bool
) -> None:
    clock = Clock()
    memory = opened(tmp_path, server, clock, regret_missed_recall=detection)
    evicted = evict_one(memory, clock)
    number = memory.get_archived(evicted).fact.content.split()[-1]
    memory.search("anything")  # the index exists; reindex empties it, then rebuilds it
    report = memory.reindex()
    assert (report.scopes, report.facts) == (1, 10)
    with SearchIndex(tmp_path / ".retrieval/memory-fts5.sqlite3") as index:
        hits = index.search("alice", "__default__", f"number {number}", now=NOW, with_archive=True)
        assert [hit.fact_id for hit in hits if hit.archived] == ([evicted] if detection else [])
        version = memory.snapshot().version
        assert index.is_archive_current("alice", "__default__", version) is detection
    # The next search finds the archive current: it is not listed again.
    listed: list[Scope] = []
    listing = memory.store.archive_listing

    def counted(scope: Scope, now: datetime) -> Mapping[str, str]:
        listed.append(scope)
        return listing(scope, now)

    memory.store.archive_listing = counted  # type: ignore[method-assign]
    memory.search(f"fact number {number}")
    assert listed == []
    assert [e.kind for e in events(memory)] == (["missed_recall"] if detection else [])


def test_a_damaged_regret_log_never_fails_a_search(
    tmp_path: Path, server: ScriptedChatServer, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    memory = opened(tmp_path, server, clock)
    evicted = evict_one(memory, clock)
    number = memory.get_archived(evicted).fact.content.split()[-1]
    log = tmp_path / "users/alice/agents/__default__/.metadata/regret-events.json"
    log.write_text("[ not json", "utf-8")
    assert memory.search(f"fact number {number}")  # the library's results, all the same
    assert log.read_text("utf-8") == "[ not json"
    assert "regret-events.json" in caplog.text


# --- shadow regret -----------------------------------------------------------------


def shadowed(root: Path, server: ScriptedChatServer, clock: Clock) -> Memory:
    """The shadow scenario after one eviction: confidence evicted fact_f00, hybrid-v1 would
    have evicted the old fact."""
    memory = opened(root, server, clock, shadow=True)
    assert evict_one(memory, clock) == "fact_f00"
    [receipt] = memory.audit()
    assert receipt.shadow is not None
    assert receipt.shadow.would_evict == (OLD,)
    assert set(memory.store.shadow_marks(memory.scope)) == {OLD}
    return memory


def test_a_confirmation_of_a_fact_the_shadow_would_have_evicted_counts_against_it(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    clock = Clock()
    memory = shadowed(tmp_path, server, clock)
    mark = memory.store.shadow_marks(memory.scope)[OLD]
    clock.advance(days=2)
    server.enqueue(answer(factsToReinforce=[reinforce(OLD)]))
    assert memory.learn("thread-1", CONFIRMING).report.confirmed == (OLD,)
    [event] = events(memory)
    assert (event.kind, event.role, event.policy_version) == ("confirmed", "shadow", "hybrid-v1")
    assert (event.evicted_at, event.receipt_id, event.trigger) == (
        mark.since,
        mark.receipt_id,
        "extraction",
    )
    assert OLD not in memory.store.shadow_marks(memory.scope)  # settled


def test_a_search_recall_of_a_fact_the_shadow_would_have_evicted_counts_against_it(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    clock = Clock()
    memory = shadowed(tmp_path, server, clock)
    results = memory.search("Emacs")
    assert [r.fact_id for r in results] == [OLD]
    [event] = events(memory)
    assert (event.kind, event.role, event.rank) == ("recalled", "shadow", 1)
    assert OLD in memory.store.shadow_marks(memory.scope)  # a recall settles nothing


def test_a_correction_of_a_fact_the_shadow_would_have_evicted_counts_against_it(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    clock = Clock()
    memory = shadowed(tmp_path, server, clock)
    server.enqueue(
        answer(
            newFacts=[new_fact("The user's favourite editor is Helix")],
            factsToRemove=[removal(OLD, 0)],
        )
    )
    report = memory.learn("thread-1", CHATTING).report
    assert [change.fact_id for change in report.removed] == [OLD]
    [event] = events(memory)
    assert (event.kind, event.role) == ("corrected", "shadow")
    assert memory.store.shadow_marks(memory.scope) == {}
    assert memory.get_archived(OLD).shadow is None  # settled: it carries no mark


def test_saying_again_a_fact_the_shadow_would_have_evicted_counts_against_it(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    clock = Clock()
    memory = shadowed(tmp_path, server, clock)
    server.enqueue(answer(newFacts=[new_fact(OLD_TEXT.upper())]))
    report = memory.learn("thread-1", CHATTING).report
    assert report.metrics.duplicate_facts == 1
    [event] = events(memory)
    assert (event.kind, event.role, event.fact_id) == ("relearned", "shadow", OLD)


def test_a_fact_both_policies_evicted_counts_against_both(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    clock = Clock()
    memory = shadowed(tmp_path, server, clock)
    mark = memory.store.shadow_marks(memory.scope)[OLD]
    for n in range(1, 10):  # confidence works up the fresh facts, then the old one goes too
        evict_one(memory, clock, text=f"Another confident fact {n}")
    entry = memory.get_archived(OLD)
    assert entry.shadow == mark  # the first counterfactual eviction, not a later one
    assert OLD not in memory.store.shadow_marks(memory.scope)  # the mark moved into the archive
    clock.advance(days=1)
    memory.search("Emacs")
    got = {(e.kind, e.role, e.policy_version) for e in events(memory) if e.fact_id == OLD}
    assert got == {
        ("missed_recall", "active", "confidence"),
        ("missed_recall", "shadow", "hybrid-v1"),
    }
    memory.delete_fact(memory.list_facts()[0].id)
    memory.create_fact(OLD_TEXT)
    roles = {e.role for e in events(memory) if e.fact_id == OLD and e.kind == "relearned"}
    assert roles == {"active", "shadow"}
    assert memory.get_fact(OLD).content == OLD_TEXT


def test_without_shadow_mode_nothing_is_marked_and_nothing_counts_against_hybrid(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    clock = Clock()
    memory = opened(tmp_path, server, clock, shadow=False)
    evict_one(memory, clock)
    assert memory.store.shadow_marks(memory.scope) == {}
    server.enqueue(answer(factsToReinforce=[reinforce(OLD)]))
    memory.learn("thread-1", CONFIRMING)
    memory.search("Emacs")
    assert events(memory) == []
    report = memory.regret()
    assert [(p.policy, p.role) for p in report.policies] == [("confidence", "active")]


def test_under_hybrid_there_is_no_shadow_and_its_evictions_count_against_it(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    clock = Clock()
    memory = opened(tmp_path, server, clock, policy="hybrid-v1", shadow=True)
    assert evict_one(memory, clock) == OLD  # hybrid-v1 decides; shadow mode compares nothing
    assert memory.store.shadow_marks(memory.scope) == {}
    memory.search("Emacs")
    assert kinds(memory) == [("missed_recall", "active", "hybrid-v1", OLD)]


def test_a_dry_run_records_no_regret(tmp_path: Path, server: ScriptedChatServer) -> None:
    clock = Clock()
    memory = shadowed(tmp_path, server, clock)
    before = tree(tmp_path)
    server.enqueue(answer(factsToReinforce=[reinforce(OLD)]))
    memory.learn("thread-1", CONFIRMING, dry_run=True)
    assert tree(tmp_path) == before


def test_events_are_ordered_and_dated_by_the_injected_clock(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    clock = Clock()
    memory = shadowed(tmp_path, server, clock)
    for hours in (1, 2, 3):
        clock.now = NOW + timedelta(days=1, hours=hours)
        memory.search("Emacs")
    assert [e.occurred_at for e in events(memory)] == [
        "2026-08-14T13:00:00Z",
        "2026-08-14T14:00:00Z",
        "2026-08-14T15:00:00Z",
    ]
