"""Regret on both stores: every event through every path that can cause it, and its records.

The scenario is :mod:`tests.regret_support`'s. Each test drives a real
:class:`~deermem.Memory` (and, for extraction, a ScriptedChatServer over real
HTTP) on the store under test and checks the regret events and shadow marks
the store holds afterwards. What only the Markdown store has — its files, the
journal, the on-disk search index — is tested in ``tests/test_regret_events.py``
and ``tests/test_store_regret.py``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from deermem import ArchivedFactError, Fact, Memory, MemoryConfig
from deermem.model import Scope, format_timestamp
from deermem.store import ChangeSet
from deermem.store.records import RegretEvent, ShadowMark, query_digest
from deermem.testing import ScriptedChatServer
from tests.regret_support import (
    CHATTING,
    CONFIRMING,
    OLD,
    OLD_TEXT,
    POLICIES,
    events,
    evict_one,
    kinds,
    library,
)
from tests.store_contract.conftest import Stores
from tests.wire_support import (
    NOW,
    Clock,
    answer,
    counting_ids,
    model_settings,
    new_fact,
    reinforce,
    removal,
    seed,
)

SCOPE = Scope.of("alice")


class Opened:
    """Memories on the store under test, talking to one scripted model; closed after the test."""

    def __init__(self, stores: Stores, server: ScriptedChatServer) -> None:
        self.stores = stores
        self.server = server
        self.memories: list[Memory] = []

    def __call__(
        self,
        clock: Clock,
        *,
        policy: str = "confidence",
        shadow: bool = False,
        user: str = "alice",
        seeded: bool = True,
        **settings: Any,
    ) -> Memory:
        # These tests hold regret to what a search finds by words (its missed recalls
        # included); by meaning: tests/store_contract/test_meaning.py.
        settings.setdefault("search_mode", "keyword")
        config = MemoryConfig(
            model=model_settings(self.server),
            max_facts=10,
            fact_eviction_policy=policy,
            fact_eviction_shadow_enabled=shadow,
            **settings,
        )
        memory = self.stores.memory(config, user=user, clock=clock, id_factory=counting_ids())
        self.memories.append(memory)
        if seeded:
            seed(memory, *library())
        return memory


@pytest.fixture
def server() -> Iterator[ScriptedChatServer]:
    with ScriptedChatServer() as running:
        yield running


@pytest.fixture
def opened(stores: Stores, server: ScriptedChatServer) -> Iterator[Opened]:
    memories = Opened(stores, server)
    try:
        yield memories
    finally:
        for memory in memories.memories:
            memory.close(timeout=5)


def held(memory: Memory) -> tuple[object, ...]:
    """Everything a store holds for the scope, as the API reads it."""
    return (
        memory.export_document(),
        memory.audit(),
        memory.list_archived(),
        memory.store.regret_events(memory.scope),
        memory.store.shadow_marks(memory.scope),
        memory.store.usage(memory.scope),
    )


# --- relearned ---------------------------------------------------------------------


@pytest.mark.parametrize("policy", POLICIES)
def test_a_manual_create_relearns_an_evicted_fact_with_its_history(
    opened: Opened, policy: str
) -> None:
    clock = Clock()
    memory = opened(clock, policy=policy)
    memory.record_access(["fact_f00", OLD])  # recalls (counted under hybrid-v1 only)
    evicted = evict_one(memory, clock)
    entry = memory.get_archived(evicted)
    clock.advance(days=3)
    memory.delete_fact("fact_f08")  # room for it to stay
    result = memory.create_fact(f"  {entry.fact.content.upper()} ")  # the duplicate rule
    assert (result.fact_id, result.relearned) == (evicted, evicted)
    back = memory.get_fact(evicted)
    # Its own id, creation time and confidence (0.5 said again is below it): no second
    # copy; saying it again is one more confirmation, now.
    assert back == restated(entry.fact, clock, confidence=entry.fact.confidence)
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


def restated(fact: Fact, clock: Clock, *, confidence: float) -> Fact:
    """The archived ``fact`` as a restatement at ``clock`` brings it back: confirmed now."""
    stamp = format_timestamp(clock())
    count = (fact.confirmationCount or 0) + 1
    return fact.replace(
        confidence=confidence, updatedAt=stamp, lastConfirmedAt=stamp, confirmationCount=count
    )


@pytest.mark.parametrize("policy", POLICIES)
def test_a_fact_said_again_in_a_full_library_competes_as_the_new_statement_would(
    opened: Opened, policy: str
) -> None:
    # The restatement carries a confidence above every fact's: as a new text it would be
    # kept, and the archived fact it brings back must be kept too, not evicted at once.
    clock = Clock()
    memory = opened(clock, policy=policy)
    evicted = evict_one(memory, clock)
    entry = memory.get_archived(evicted)
    clock.advance(hours=1)
    result = memory.create_fact(entry.fact.content, confidence=0.95)
    assert (result.fact_id, result.relearned) == (evicted, evicted)
    assert evicted not in result.evicted
    assert memory.get_fact(evicted) == restated(entry.fact, clock, confidence=0.95)
    assert not memory.store.archived(memory.scope, evicted)
    assert [k for k in kinds(memory) if k[0] == "relearned"] == [
        ("relearned", "active", policy, evicted)
    ]


def test_under_hybrid_v1_a_fact_said_again_at_the_same_confidence_is_fresh(
    opened: Opened,
) -> None:
    # Equal confidence: hybrid-v1 keeps a new text (fresher than the library's oldest), so the
    # restatement of an old fact must count as fresh too, not as its old creation time.
    clock = Clock()
    memory = opened(clock, policy="hybrid-v1")
    evicted = evict_one(memory, clock)
    entry = memory.get_archived(evicted)
    clock.advance(hours=1)
    result = memory.create_fact(entry.fact.content, confidence=entry.fact.confidence)
    assert (result.fact_id, result.relearned) == (evicted, evicted)
    assert evicted not in result.evicted
    assert memory.get_fact(evicted).lastConfirmedAt == format_timestamp(clock())


@pytest.mark.parametrize("policy", POLICIES)
def test_a_model_saying_an_evicted_fact_again_in_a_full_library_keeps_it(
    opened: Opened, server: ScriptedChatServer, policy: str
) -> None:
    clock = Clock()
    memory = opened(clock, policy=policy)
    evicted = evict_one(memory, clock)
    entry = memory.get_archived(evicted)
    clock.advance(hours=1)
    server.enqueue(answer(newFacts=[new_fact(entry.fact.content, 0.95)]))
    report = memory.learn("thread-1", CHATTING).report
    assert (report.relearned, report.added) == ((evicted,), (evicted,))
    assert memory.get_fact(evicted) == restated(entry.fact, clock, confidence=0.95)


def test_a_relearned_fact_may_be_evicted_again_and_the_event_stays(opened: Opened) -> None:
    clock = Clock()
    memory = opened(clock)
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
    opened: Opened, server: ScriptedChatServer, policy: str
) -> None:
    clock = Clock()
    memory = opened(clock, policy=policy)
    evicted = evict_one(memory, clock)
    entry = memory.get_archived(evicted)
    memory.delete_fact("fact_f08")
    server.enqueue(answer(newFacts=[new_fact(entry.fact.content.lower(), 0.9)]))
    report = memory.learn("thread-1", CHATTING).report
    assert report.relearned == (evicted,)
    assert report.added == (evicted,)
    assert memory.get_fact(evicted) == restated(entry.fact, clock, confidence=0.9)
    [event] = [e for e in events(memory) if e.kind == "relearned"]
    assert (event.trigger, event.role, event.policy_version) == ("extraction", "active", policy)


@pytest.mark.parametrize("said_before", [False, True])
def test_a_correction_restating_an_evicted_fact_takes_the_reserved_slot(
    opened: Opened, server: ScriptedChatServer, said_before: bool
) -> None:
    # hybrid-v1 holds a slot for a correction. The user's correction must win it whether or
    # not its words were once stored (as context) and evicted: relearned, the fact competes
    # as the correction, not as the context fact it was.
    clock = Clock()
    memory = opened(clock, policy="hybrid-v1", seeded=False)
    if said_before:
        memory.create_fact("Use uv, not pip.", category="context", confidence=0.7)
    confirmed = [
        memory.create_fact(f"Preference number {n}.", category="preference", confidence=0.9)
        for n in range(10)
    ]
    clock.advance(days=1)
    server.enqueue(answer(factsToReinforce=[reinforce(str(r.fact_id)) for r in confirmed]))
    memory.learn("thread-0", CONFIRMING)
    assert [e.fact.content for e in memory.list_archived()] == ["Use uv, not pip."] * said_before
    server.enqueue(answer(newFacts=[new_fact("Use uv, not pip.", 0.75, category="correction")]))
    report = memory.learn("thread-1", CHATTING).report
    assert len(report.relearned) == said_before
    kept = [(f.category, f.confidence) for f in memory.list_facts() if "uv" in f.content]
    assert kept == [("correction", 0.75)]


@pytest.mark.parametrize(
    ("archived", "said", "comes_back_as"),
    [
        ("context", "correction", "correction"),  # a protected statement wins
        ("correction", "preference", "correction"),  # a protected category is never given up
        ("context", "preference", "context"),  # otherwise the category stays
    ],
)
def test_a_fact_said_again_keeps_or_takes_a_protected_category(
    opened: Opened, archived: str, said: str, comes_back_as: str
) -> None:
    clock = Clock()
    memory = opened(clock)
    clock.advance(hours=1)
    gone = memory.create_fact("Deploys go out on Fridays", category=archived, confidence=0.1)
    assert gone.fact_id is None  # the library is full: evicted at once
    memory.delete_fact("fact_f08")
    clock.advance(hours=1)
    result = memory.create_fact("deploys go out on fridays", category=said, confidence=0.1)
    assert result.relearned is not None
    assert memory.get_fact(result.relearned).category == comes_back_as


def test_a_contradiction_whose_replacement_is_relearned_needs_the_relearned_fact(
    opened: Opened, server: ScriptedChatServer
) -> None:
    clock = Clock()
    memory = opened(clock)
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
    opened: Opened,
) -> None:
    clock = Clock()
    memory = opened(clock)
    evicted = evict_one(memory, clock)
    entry = memory.get_archived(evicted)
    document = memory.export_document()
    facts = document["facts"]
    assert isinstance(facts, list)
    changed = [*facts, {**entry.fact.to_dict(), "content": "Another text entirely"}]
    before = held(memory)
    with pytest.raises(ArchivedFactError):
        memory.import_document({**document, "facts": changed})
    assert held(memory) == before
    fresh = [f for f in facts if isinstance(f, dict) and f["id"] != "fact_f08"]
    result = memory.import_document({**document, "facts": [*fresh, entry.fact.to_dict()]})
    assert evicted in result.kept
    assert memory.get_fact(evicted) == entry.fact  # its own export: the same fact, not said again
    [event] = [e for e in events(memory) if e.kind == "relearned" and e.fact_id == evicted]
    assert event.trigger == "import"


def test_a_deleted_fact_said_again_is_relearned_but_not_counted_against_the_policy(
    opened: Opened,
) -> None:
    clock = Clock()
    memory = opened(clock)
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


# --- restored ----------------------------------------------------------------------


@pytest.mark.parametrize("policy", POLICIES)
def test_a_restore_is_a_regret_event(opened: Opened, policy: str) -> None:
    clock = Clock()
    memory = opened(clock, policy=policy)
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
    opened: Opened, policy: str
) -> None:
    clock = Clock()
    memory = opened(clock, policy=policy)
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
    stored = json.dumps(event.to_dict()).casefold()
    assert "fact number" not in stored  # no query text, no content
    assert entry.fact.content.casefold() not in stored


def test_missed_recall_detection_does_not_change_what_a_search_returns(opened: Opened) -> None:
    clock = Clock()
    with_detection = opened(clock)
    without = opened(clock, user="bob", regret_missed_recall=False)
    for memory in (with_detection, without):
        for n in range(4):
            evict_one(memory, clock, text=f"A confident new fact number {n}")
    queries = ["fact number", "fresh fact", "number 3", "Emacs", "confident", "nothing here"]
    for query in queries:
        found = [(r.fact_id, r.score, r.bm25) for r in with_detection.search(query, top_k=4)]
        assert found == [(r.fact_id, r.score, r.bm25) for r in without.search(query, top_k=4)]
    assert events(with_detection)
    assert events(without) == []


def test_a_search_that_only_looks_records_nothing(opened: Opened) -> None:
    clock = Clock()
    memory = opened(clock)
    evicted = evict_one(memory, clock)
    number = memory.get_archived(evicted).fact.content.split()[-1]
    memory.search(f"fact number {number}", record=False)
    assert events(memory) == []


def test_a_fact_purged_by_another_process_is_no_missed_recall(opened: Opened) -> None:
    """A purge changes the archive alone: every process's (replica's) index follows it."""
    clock = Clock()
    memory = opened(clock)
    evicted = evict_one(memory, clock)
    number = memory.get_archived(evicted).fact.content.split()[-1]
    memory.search("anything")  # indexes the archive
    other = opened(clock, seeded=False)  # another process, or another replica
    other.purge(evicted)
    memory.search(f"fact number {number}")
    assert events(memory) == []
    index = memory._search_index.get(memory.store)  # its rows are gone, not merely skipped
    hits = index.search("alice", "__default__", f"number {number}", now=NOW, with_archive=True)
    assert evicted not in [hit.fact_id for hit in hits]


def test_a_fact_evicted_at_once_is_a_missed_recall_at_the_next_search(opened: Opened) -> None:
    """The library is unchanged by such a create; the archive is followed all the same."""
    clock = Clock()
    memory = opened(clock)
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


def test_a_restored_fact_is_found_in_the_library_and_missed_no_more(opened: Opened) -> None:
    clock = Clock()
    memory = opened(clock)
    evicted = evict_one(memory, clock)
    number = memory.get_archived(evicted).fact.content.split()[-1]
    memory.search("anything")  # indexes the archive
    memory.delete_fact("fact_f08")  # room for it
    memory.restore(evicted)
    clock.advance(hours=1)
    results = memory.search(f"fact number {number}", top_k=1)
    assert [r.fact_id for r in results] == [evicted]
    assert [e.kind for e in events(memory)] == ["restored"]  # no missed recall of it


# --- shadow regret -----------------------------------------------------------------


def shadowed(opened: Opened, clock: Clock) -> Memory:
    """The scenario after one eviction: confidence evicted fact_f00, hybrid-v1 would have
    evicted the old fact."""
    memory = opened(clock, shadow=True)
    assert evict_one(memory, clock) == "fact_f00"
    [receipt] = memory.audit()
    assert receipt.shadow is not None
    assert receipt.shadow.would_evict == (OLD,)
    assert set(memory.store.shadow_marks(memory.scope)) == {OLD}
    return memory


def test_a_confirmation_of_a_fact_the_shadow_would_have_evicted_counts_against_it(
    opened: Opened, server: ScriptedChatServer
) -> None:
    clock = Clock()
    memory = shadowed(opened, clock)
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
    opened: Opened,
) -> None:
    clock = Clock()
    memory = shadowed(opened, clock)
    results = memory.search("Emacs")
    assert [r.fact_id for r in results] == [OLD]
    [event] = events(memory)
    assert (event.kind, event.role, event.rank) == ("recalled", "shadow", 1)
    assert OLD in memory.store.shadow_marks(memory.scope)  # a recall settles nothing


def test_a_scope_and_its_shadow_marks_read_together_are_what_each_read_alone_is(
    opened: Opened,
) -> None:
    """Issue 23: a recorded search reads the scope and its marks in one read
    (``load_with_marks``: one check of the scope, one pooled connection)."""
    memory = shadowed(opened, Clock())
    snapshot, marks = memory.store.load_with_marks(memory.scope)
    assert snapshot == memory.store.load(memory.scope)
    assert marks == memory.store.shadow_marks(memory.scope)
    assert set(marks) == {OLD}


def test_a_correction_of_a_fact_the_shadow_would_have_evicted_counts_against_it(
    opened: Opened, server: ScriptedChatServer
) -> None:
    clock = Clock()
    memory = shadowed(opened, clock)
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
    opened: Opened, server: ScriptedChatServer
) -> None:
    clock = Clock()
    memory = shadowed(opened, clock)
    server.enqueue(answer(newFacts=[new_fact(OLD_TEXT.upper())]))
    report = memory.learn("thread-1", CHATTING).report
    assert report.metrics.duplicate_facts == 1
    [event] = events(memory)
    assert (event.kind, event.role, event.fact_id) == ("relearned", "shadow", OLD)


def test_a_fact_both_policies_evicted_counts_against_both(opened: Opened) -> None:
    clock = Clock()
    memory = shadowed(opened, clock)
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
    opened: Opened, server: ScriptedChatServer
) -> None:
    clock = Clock()
    memory = opened(clock, shadow=False)
    evict_one(memory, clock)
    assert memory.store.shadow_marks(memory.scope) == {}
    server.enqueue(answer(factsToReinforce=[reinforce(OLD)]))
    memory.learn("thread-1", CONFIRMING)
    memory.search("Emacs")
    assert events(memory) == []
    report = memory.regret()
    assert [(p.policy, p.role) for p in report.policies] == [("confidence", "active")]


def test_under_hybrid_without_shadow_mode_its_evictions_count_against_it(
    opened: Opened,
) -> None:
    # (with shadow mode, confidence is computed beside hybrid-v1: tests/test_memory.py)
    clock = Clock()
    memory = opened(clock, policy="hybrid-v1", shadow=False)
    assert evict_one(memory, clock) == OLD  # hybrid-v1 decides; nothing is compared
    assert memory.store.shadow_marks(memory.scope) == {}
    memory.search("Emacs")
    assert kinds(memory) == [("missed_recall", "active", "hybrid-v1", OLD)]


def test_a_dry_run_records_no_regret(opened: Opened, server: ScriptedChatServer) -> None:
    clock = Clock()
    memory = shadowed(opened, clock)
    before = held(memory)
    server.enqueue(answer(factsToReinforce=[reinforce(OLD)]))
    memory.learn("thread-1", CONFIRMING, dry_run=True)
    assert held(memory) == before


def test_events_are_ordered_and_dated_by_the_injected_clock(opened: Opened) -> None:
    clock = Clock()
    memory = shadowed(opened, clock)
    for hours in (1, 2, 3):
        clock.now = NOW + timedelta(days=1, hours=hours)
        memory.search("Emacs")
    assert [e.occurred_at for e in events(memory)] == [
        "2026-08-14T13:00:00Z",
        "2026-08-14T14:00:00Z",
        "2026-08-14T15:00:00Z",
    ]


# --- the records, store by store ---------------------------------------------------

WHEN = datetime(2026, 8, 13, tzinfo=UTC)


def event(number: int) -> RegretEvent:
    return RegretEvent(
        kind="missed_recall",
        occurred_at=(WHEN + timedelta(minutes=number)).isoformat().replace("+00:00", "Z"),
        fact_id=f"fact_{number:08x}",
        category="context",
        policy_version="confidence",
        role="active",
        evicted_at="2026-08-01T00:00:00Z",
        receipt_id=None,
        reason="capacity",
        trigger="search",
        query_digest="sha256:0000000000000000",
        rank=1,
    )


def test_the_events_kept_are_the_newest_within_the_bound(stores: Stores) -> None:
    store = stores(MemoryConfig(regret_max_events=3))
    for number in range(5):
        store.commit(SCOPE, ChangeSet(now=WHEN, regret_events=(event(number),)))
    assert [e.fact_id for e in store.regret_events(SCOPE)] == [
        "fact_00000002",
        "fact_00000003",
        "fact_00000004",
    ]
    other = Scope.of("alice", "coder")  # the bound is per agent
    store.commit(other, ChangeSet(now=WHEN, regret_events=(event(9),)))
    assert [e.fact_id for e in store.regret_events(other)] == ["fact_00000009"]
    assert len(store.regret_events(SCOPE)) == 3


def test_no_events_are_kept_at_a_bound_of_zero(stores: Stores) -> None:
    store = stores(MemoryConfig(regret_max_events=0))
    store.commit(SCOPE, ChangeSet(now=WHEN, regret_events=(event(1),)))
    assert store.regret_events(SCOPE) == ()


def test_marks_are_set_and_cleared(stores: Stores) -> None:
    store = stores()
    mark = ShadowMark("hybrid-v1", "2026-08-01T00:00:00Z", "rcpt_1", "goal")
    store.commit(SCOPE, ChangeSet(now=WHEN, shadow_marks={"fact_a": mark, "fact_b": mark}))
    assert store.shadow_marks(SCOPE) == {"fact_a": mark, "fact_b": mark}
    assert stores().shadow_marks(SCOPE) == {"fact_a": mark, "fact_b": mark}  # another process
    store.commit(SCOPE, ChangeSet(now=WHEN, shadow_marks={"fact_a": None}))
    assert store.shadow_marks(SCOPE) == {"fact_b": mark}
    store.commit(SCOPE, ChangeSet(now=WHEN, shadow_marks={"fact_b": None, "fact_c": None}))
    assert store.shadow_marks(SCOPE) == {}


def test_a_regret_only_commit_changes_no_revision(stores: Stores) -> None:
    store = stores()
    memory = stores.memory(MemoryConfig())
    memory.create_fact("Likes oolong tea")
    revision, version = store.load(SCOPE).revision, store.load(SCOPE).version
    result = store.commit(SCOPE, ChangeSet(now=WHEN, regret_events=(event(1),)))
    assert (result.changed, result.revision) == (False, revision)
    assert store.load(SCOPE).version == version  # the search index stays current


def test_a_search_records_its_events_and_recalls_in_one_change(stores: Stores) -> None:
    memory = stores.memory(MemoryConfig(fact_eviction_policy="hybrid-v1"), clock=lambda: WHEN)
    fact_id = memory.create_fact("Likes oolong tea").fact_id
    assert fact_id is not None
    memory.store.record_access(
        memory.scope, [fact_id, "fact_gone"], WHEN, regret=(event(1), event(2))
    )
    assert memory.store.usage(memory.scope)[fact_id].access_count == 1
    assert [e.fact_id for e in memory.store.regret_events(memory.scope)] == [
        "fact_00000001",
        "fact_00000002",
    ]
    memory.store.record_access(memory.scope, [], WHEN, regret=(event(3),))  # events alone
    assert len(memory.store.regret_events(memory.scope)) == 3
    assert memory.store.usage(memory.scope)[fact_id].access_count == 1
