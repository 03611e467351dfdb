"""Memory, the facade, on both stores: create, update, delete, list, import/export, why."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from deermem import (
    DuplicateFactError,
    FactNotFoundError,
    FactValidationError,
    Memory,
    MemoryConfig,
    UnsafeIdentifierError,
)
from deermem.cli.demo import seed_scenarios
from deermem.errors import FactRevisionConflict
from deermem.model import Scope
from tests.store_contract.conftest import Stores

NOW = datetime(2026, 8, 13, tzinfo=UTC)


def open_memory(
    stores: Stores, *, user: str | None = "alice", agent: str | None = None, **settings: object
) -> Memory:
    return stores.memory(MemoryConfig(**settings), user=user, agent=agent, clock=lambda: NOW)


def scenario_document(name: str) -> dict[str, Any]:
    scenario = {s.name: s for s in seed_scenarios(NOW)}[name]
    return {"facts": [dict(fact) for fact in scenario.facts]}


def fill(memory: Memory, count: int, confidence: float = 0.9) -> list[str]:
    ids = []
    for number in range(count):
        result = memory.create_fact(f"Background fact {number}", confidence=confidence)
        assert result.fact_id is not None
        ids.append(result.fact_id)
    return ids


# --- create -----------------------------------------------------------------------------


def test_create_trims_and_stores_a_manual_fact(stores: Stores) -> None:
    memory = open_memory(stores)
    result = memory.create_fact("  Prefers uv over pip \n", category="Correction", confidence=0.9)
    assert result.kept
    assert result.evicted == ()
    assert result.receipts == ()
    fact = memory.get_fact(result.fact_id or "")
    assert fact.content == "Prefers uv over pip"
    assert fact.category == "correction"
    assert fact.source.type == "manual"
    assert fact.createdAt == "2026-08-13T00:00:00Z"
    assert fact.id.startswith("fact_")
    assert len(fact.id) == 13


@pytest.mark.parametrize(
    ("content", "confidence", "field"),
    [
        ("   ", 0.5, "content"),
        ("", 0.5, "content"),
        ("ok", 1.5, "confidence"),
        ("ok", float("nan"), "confidence"),
        ("ok", True, "confidence"),
    ],
)
def test_create_refuses_bad_input_and_changes_nothing(
    stores: Stores, content: str, confidence: float, field: str
) -> None:
    memory = open_memory(stores)
    with pytest.raises(FactValidationError) as caught:
        memory.create_fact(content, confidence=confidence)
    assert caught.value.field == field
    assert memory.list_facts() == ()
    assert memory.audit() == ()


def test_create_refuses_a_duplicate_compared_case_insensitively(stores: Stores) -> None:
    memory = open_memory(stores)
    first = memory.create_fact("Prefers uv over pip").fact_id
    with pytest.raises(DuplicateFactError) as caught:
        memory.create_fact("  PREFERS UV OVER PIP ")
    assert caught.value.existing_id == first
    assert len(memory.list_facts()) == 1


def test_a_new_fact_evicted_at_once_gets_no_id_and_goes_to_the_archive(stores: Stores) -> None:
    memory = open_memory(stores, max_facts=10)
    fill(memory, 10)
    result = memory.create_fact("A weak guess", confidence=0.1)
    assert result.fact_id is None
    assert not result.kept
    assert result.evicted == (result.fact.id,)
    assert len(memory.list_facts()) == 10
    [receipt] = result.receipts
    assert (receipt.trigger, receipt.reason, receipt.occupancy) == ("manual", "capacity", 11)
    [entry] = memory.list_archived()
    assert entry.fact.content == "A weak guess"
    assert entry.receipt_id == receipt.receipt_id


def test_a_new_fact_can_push_out_a_weaker_one(stores: Stores) -> None:
    memory = open_memory(stores, max_facts=10)
    weak = memory.create_fact("Weak", confidence=0.2).fact_id
    fill(memory, 9)
    result = memory.create_fact("Strong", confidence=0.95)
    assert result.kept
    assert result.evicted == (weak,)
    assert weak not in {f.id for f in memory.list_facts()}


def test_hybrid_create_keeps_the_confirmed_fact_over_the_stale_one(stores: Stores) -> None:
    memory = open_memory(stores, max_facts=10, fact_eviction_policy="hybrid-v1")
    document = scenario_document("stale-vs-confirmed")
    facts = document["facts"]
    assert isinstance(facts, list)
    memory.import_document({"facts": [f for f in facts if f["id"] != "fact_bg09"]})
    assert len(memory.list_facts()) == 10
    result = memory.create_fact("The user deploys on Fridays never", confidence=0.8)
    assert result.kept
    assert result.evicted == ("fact_stale90",)


def test_hybrid_import_uses_the_same_gate(stores: Stores) -> None:
    memory = open_memory(stores, max_facts=10, fact_eviction_policy="hybrid-v1")
    result = memory.import_document(scenario_document("stale-vs-confirmed"))
    assert result.evicted == ("fact_stale90",)
    assert "fact_confirm" in result.kept
    assert result.receipts[0].trigger == "import"


def test_an_import_breaks_ties_in_the_documents_order(stores: Stores) -> None:
    # Every fact at 0.5 ties under confidence; the document is the library, so its last
    # fact goes, as the original's import ranks the facts it is given. The gate saw the
    # stored facts in the store's order first, and evicted the new one listed first.
    memory = open_memory(stores, max_facts=10)
    fill(memory, 10, confidence=0.5)
    stored = memory.export_document()["facts"]
    assert isinstance(stored, list)
    listed = [{"content": "Listed first, new", "confidence": 0.5}, *reversed(stored)]
    result = memory.import_document({"facts": listed})
    assert result.evicted == (stored[0]["id"],)
    assert "Listed first, new" in {fact.content for fact in memory.list_facts()}
    # An archived fact said again in the document keeps the place it is said at.
    again = memory.export_document()["facts"]
    assert isinstance(again, list)
    back = {"content": stored[0]["content"], "confidence": 0.5}
    result = memory.import_document({"facts": [back, *again]})
    assert stored[0]["id"] in {fact.id for fact in memory.list_facts()}
    assert result.evicted == (again[-1]["id"],)


def test_hybrid_reserves_a_slot_for_the_correction(stores: Stores) -> None:
    memory = open_memory(stores, max_facts=10, fact_eviction_policy="hybrid-v1")
    result = memory.import_document(scenario_document("correction-vs-preferences"))
    assert "fact_correct" in {f.id for f in memory.list_facts()}
    [receipt] = result.receipts
    assert receipt.reserved_correction_slots == 1
    assert receipt.evicted[0].margin is not None
    assert receipt.evicted[0].margin < 0
    audit = json.dumps([r.to_dict() for r in memory.audit()], ensure_ascii=False)
    for fact in scenario_document("correction-vs-preferences")["facts"]:
        assert str(fact["content"]) not in audit
    assert "pip" not in audit
    assert "dark themes" not in audit


def test_shadow_mode_records_the_disagreement_without_acting_on_it(stores: Stores) -> None:
    memory = open_memory(stores, max_facts=10, fact_eviction_shadow_enabled=True)
    result = memory.import_document(scenario_document("stale-vs-confirmed"))
    assert result.evicted == ("fact_confirm",)  # confidence decided
    [receipt] = memory.audit()
    assert receipt.shadow is not None
    assert receipt.shadow.to_dict() == {
        "policyVersion": "hybrid-v1",
        "wouldEvict": ["fact_stale90"],
        "disagrees": True,
    }


def test_two_memories_on_one_store_see_each_other_and_share_the_cap(stores: Stores) -> None:
    first = open_memory(stores, max_facts=10)
    second = open_memory(stores, max_facts=10)
    fill(first, 9)
    second.create_fact("From the second process", confidence=0.95)
    assert len(first.list_facts()) == 10
    result = first.create_fact("One more", confidence=0.99)
    assert len(result.evicted) == 1
    assert len(second.list_facts()) == 10


# --- update and delete ---------------------------------------------------------------------


def test_update_keeps_omitted_fields_and_bumps_the_revision(stores: Stores) -> None:
    memory = open_memory(stores)
    fact_id = memory.create_fact("Uses pip", category="preference", confidence=0.6).fact_id
    assert fact_id is not None
    updated = memory.update_fact(fact_id, content="Uses uv", expected_revision=1)
    assert (updated.content, updated.category, updated.confidence) == ("Uses uv", "preference", 0.6)
    assert updated.revision == 2
    custom = memory.update_fact(fact_id, category="Tooling")
    assert (custom.category, custom.categoryExtension) == ("other", "Tooling")
    back = memory.update_fact(fact_id, category="goal")
    assert (back.category, back.categoryExtension) == ("goal", None)
    with pytest.raises(FactRevisionConflict):
        memory.update_fact(fact_id, confidence=0.9, expected_revision=1)
    with pytest.raises(FactNotFoundError, match="no fact 'fact_nope'"):
        memory.update_fact("fact_nope", content="x")
    with pytest.raises(FactValidationError):
        memory.update_fact(fact_id, content="  ")


def test_update_refuses_content_another_fact_says_and_changes_nothing(stores: Stores) -> None:
    memory = open_memory(stores)
    uv = memory.create_fact("Use uv.", confidence=0.8).fact_id
    pip = memory.create_fact("Use pip.", confidence=0.8).fact_id
    assert uv is not None
    assert pip is not None
    before = memory.export_document()
    with pytest.raises(DuplicateFactError) as caught:
        memory.update_fact(pip, content="  use UV. ", category="goal", confidence=0.2)
    assert caught.value.existing_id == uv
    assert memory.export_document() == before
    assert memory.audit() == ()


def test_an_update_of_a_fact_to_its_own_text_in_another_case_is_no_duplicate(
    stores: Stores,
) -> None:
    memory = open_memory(stores)
    fact_id = memory.create_fact("Use uv.").fact_id
    assert fact_id is not None
    assert memory.update_fact(fact_id, content="Use uv.").content == "Use uv."
    assert memory.update_fact(fact_id, content="USE UV.").content == "USE UV."
    assert [f.content for f in memory.list_facts()] == ["USE UV."]


def test_an_update_compares_the_text_the_commit_stores(stores: Stores) -> None:
    # Two secrets differ as written and are one text once redacted, as a create compares.
    memory = open_memory(stores)
    first = memory.create_fact("The deploy key is ghp_" + "aB3" * 12).fact_id
    other = memory.create_fact("Something else").fact_id
    assert first is not None
    assert other is not None
    with pytest.raises(DuplicateFactError) as caught:
        memory.update_fact(other, content="The deploy key is ghp_" + "xY7" * 12)
    assert caught.value.existing_id == first


def test_update_never_trims_the_library(stores: Stores) -> None:
    ids = fill(open_memory(stores, max_facts=20), 12)
    smaller = open_memory(stores, max_facts=10)
    smaller.update_fact(ids[0], confidence=0.1)
    smaller.delete_fact(ids[1])
    assert len(smaller.list_facts()) == 11  # over the new cap; only adding trims
    assert smaller.create_fact("New", confidence=0.95).evicted != ()
    assert len(smaller.list_facts()) == 10


def test_delete_moves_the_fact_to_the_archive_with_a_receipt(stores: Stores) -> None:
    memory = open_memory(stores)
    fact_id = memory.create_fact("Old address").fact_id
    assert fact_id is not None
    memory.delete_fact(fact_id, expected_revision=1)
    assert memory.list_facts() == ()
    [receipt] = memory.audit()
    assert (receipt.reason, receipt.trigger, receipt.fact_ids) == ("deleted", "manual", (fact_id,))
    [entry] = memory.list_archived()
    assert (entry.fact_id, entry.reason, entry.receipt_id) == (
        fact_id,
        "deleted",
        receipt.receipt_id,
    )
    with pytest.raises(FactNotFoundError):
        memory.delete_fact(fact_id)


def test_list_facts_filters_by_category(stores: Stores) -> None:
    memory = open_memory(stores)
    memory.create_fact("A", category="goal")
    memory.create_fact("B", category="Tooling")
    memory.create_fact("C", category="goal")
    assert sorted(f.content for f in memory.list_facts(category="GOAL")) == ["A", "C"]
    assert [f.content for f in memory.list_facts(category="tooling")] == ["B"]


# --- import and export ------------------------------------------------------------------------

RICH_DOCUMENT: dict[str, Any] = {
    "version": "2.0",
    "revision": 9,
    "lastUpdated": "2026-08-01T00:00:00Z",
    "user": {
        "workContext": {"summary": "Payments team", "updatedAt": "2026-07-01T00:00:00Z"},
        "personalContext": {"summary": "", "updatedAt": ""},
        "topOfMind": {"summary": "Queue migration", "updatedAt": "2026-07-30T00:00:00Z"},
    },
    "history": {
        "recentMonths": {"summary": "Shipped v1", "updatedAt": "2026-06-01T00:00:00Z"},
        "earlierContext": {"summary": "", "updatedAt": ""},
        "longTermBackground": {"summary": "", "updatedAt": ""},
    },
    "facts": [
        {
            "id": "fact_rich0001",
            "content": "Confirmed preference.\nSecond line.",
            "title": "A title of its own",
            "category": "preference",
            "confidence": 0.7,
            "status": "active",
            "schemaVersion": 2,
            "source": {"type": "conversation", "threadId": "t-1"},
            "topics": ["tooling"],
            "createdAt": "2026-05-01T00:00:00Z",
            "updatedAt": "2026-08-06T00:00:00Z",
            "revision": 3,
            "lastConfirmedAt": "2026-08-06T00:00:00Z",
            "confirmationCount": 2,
            "expected_valid_days": 120,
            "sourceError": "Suggested tabs.",
            "customField": {"nested": [1, 2]},
        },
        {
            "id": "fact_rich0002",
            "content": "Merged fact.",
            "category": "Tooling",
            "confidence": 0.8,
            "createdAt": "2026-06-01T00:00:00Z",
            "consolidatedFrom": ["fact_a", "fact_b"],
            "source": "consolidation",
        },
    ],
}


def test_export_then_import_keeps_every_field(stores: Stores) -> None:
    memory = open_memory(stores)
    memory.import_document(RICH_DOCUMENT)
    exported: dict[str, Any] = memory.export_document()
    assert exported["user"] == RICH_DOCUMENT["user"]
    assert exported["history"] == RICH_DOCUMENT["history"]
    facts = {f["id"]: f for f in exported["facts"]}
    rich = facts["fact_rich0001"]
    for key in (
        "lastConfirmedAt",
        "confirmationCount",
        "expected_valid_days",
        "title",
        "revision",
        "updatedAt",
        "sourceError",
        "customField",
        "topics",
    ):
        assert rich[key] == RICH_DOCUMENT["facts"][0][key], key
    assert facts["fact_rich0002"]["categoryExtension"] == "Tooling"
    other = open_memory(stores, user="bob", agent="coder")
    other.import_document(exported)
    again: dict[str, Any] = other.export_document()
    for fact in again["facts"]:
        assert fact.pop("scope") == {"userId": "bob", "agentName": "coder"}
    for fact in exported["facts"]:
        fact.pop("scope")
    assert again["facts"] == exported["facts"]
    assert again["user"] == exported["user"]


def test_import_assigns_ids_and_coerces_confidence(stores: Stores) -> None:
    memory = stores.memory(
        MemoryConfig(),
        user="alice",
        clock=lambda: NOW,
        id_factory=iter(["fact_new00001", "fact_new00002", "fact_new00003"]).__next__,
    )
    result = memory.import_document(
        {
            "facts": [
                {"content": "No confidence", "confidence": None},
                {"content": "Numeric text", "confidence": "0.9"},
                {"content": "Words", "confidence": "high"},
            ]
        }
    )
    assert result.kept == ("fact_new00001", "fact_new00002", "fact_new00003")
    assert [f.confidence for f in memory.list_facts()] == [0.5, 0.9, 0.5]
    assert all(f.source.type == "import" for f in memory.list_facts())


def test_import_replaces_facts_and_summaries(stores: Stores) -> None:
    memory = open_memory(stores)
    memory.import_document(RICH_DOCUMENT)
    result = memory.import_document({"facts": [RICH_DOCUMENT["facts"][1]]})
    assert result.replaced == ("fact_rich0001",)
    assert [f.id for f in memory.list_facts()] == ["fact_rich0002"]
    assert all(section.summary == "" for section in memory.summaries().user.values())
    assert [e.fact_id for e in memory.list_archived()] == ["fact_rich0001"]
    assert memory.list_archived()[0].reason == "replaced"


@pytest.mark.parametrize(
    "document",
    [
        {},  # no facts key: would archive everything
        {"facts": "nope"},
        {"facts": [None]},
        {"facts": [{"id": "fact_a", "content": "x"}, {"id": "fact_a", "content": "y"}]},
        {"facts": [{"id": "../escape", "content": "x"}]},
        {"facts": [{"content": "x", "topics": "not a list"}]},
        {"facts": [], "user": {"workContext": "not an object"}},
        {"facts": [], "user": {"workContext": {"summary": "lone \ud800 surrogate"}}},
        {"facts": [{"content": "x", "category": "c\udcffat"}]},  # an undecodable byte
    ],
)
def test_a_bad_import_changes_nothing(stores: Stores, document: dict[str, object]) -> None:
    memory = open_memory(stores)
    memory.import_document(RICH_DOCUMENT)
    before = memory.export_document()
    with pytest.raises(FactValidationError):
        memory.import_document(document)
    assert memory.export_document() == before


def test_an_import_refuses_two_facts_that_say_the_same_and_changes_nothing(
    stores: Stores,
) -> None:
    memory = open_memory(stores)
    memory.import_document(RICH_DOCUMENT)
    before = memory.export_document()
    document = {
        "facts": [
            {"id": "fact_first", "content": "Use uv."},
            {"content": "Something else"},
            {"id": "fact_again", "content": "  USE UV. "},
        ]
    }
    with pytest.raises(DuplicateFactError) as caught:
        memory.import_document(document)
    assert (caught.value.existing_id, caught.value.where) == ("fact_first", "facts[2]")
    assert "facts[2]" in str(caught.value)
    assert memory.export_document() == before
    # A stored fact the document updates counts as the document's, wherever it is listed.
    stored_id = memory.list_facts()[0].id
    clash = {"facts": [{"content": "New text"}, {"id": stored_id, "content": "new TEXT"}]}
    with pytest.raises(DuplicateFactError):
        memory.import_document(clash)
    assert memory.export_document() == before


def test_an_import_may_keep_duplicates_when_asked(stores: Stores) -> None:
    memory = open_memory(stores)
    document = {"facts": [{"content": "Use uv."}, {"content": "use uv."}]}
    memory.import_document(document, allow_duplicates=True)
    assert sorted(f.content for f in memory.list_facts()) == ["Use uv.", "use uv."]


def test_import_checks_a_stated_revision_and_does_not_touch_the_callers_document(
    stores: Stores,
) -> None:
    memory = open_memory(stores)
    document = copy.deepcopy(RICH_DOCUMENT)
    memory.import_document(document)
    assert document == RICH_DOCUMENT
    stale: dict[str, Any] = copy.deepcopy(RICH_DOCUMENT)
    stale["facts"][0]["revision"] = 1
    stale["facts"][0]["content"] = "Changed"
    with pytest.raises(FactRevisionConflict):
        memory.import_document(stale)


def test_import_without_an_agent_uses_the_default_bucket(stores: Stores) -> None:
    open_memory(stores).import_document({"facts": [{"content": "Hello"}]})
    fact = open_memory(stores, agent="__default__").list_facts()[0]
    assert fact.scope is not None
    assert fact.scope.agentName == "__default__"


def test_empty_sections_replace_existing_summaries_with_complete_defaults(stores: Stores) -> None:
    memory = open_memory(stores)
    memory.import_document(RICH_DOCUMENT)
    memory.import_document({"facts": [], "user": {}, "history": {}})
    document: dict[str, Any] = memory.summaries().to_dict()
    for group in ("user", "history"):
        assert all(v == {"summary": "", "updatedAt": ""} for v in document[group].values())
        assert len(document[group]) == 3


# --- why --------------------------------------------------------------------------------------


def test_why_explains_active_archived_gone_and_unknown_facts(stores: Stores) -> None:
    memory = open_memory(stores, max_facts=10)
    memory.import_document(scenario_document("stale-vs-confirmed"))
    active = memory.why("fact_stale90")
    assert active.status == "active"
    assert active.standing is not None
    assert (active.standing.rank, active.standing.occupancy) == (10, 10)
    assert active.standing.score == 0.9
    archived = memory.why("fact_confirm")
    assert archived.status == "archived"
    receipt, line = archived.last_eviction
    assert receipt is not None
    assert line is not None
    assert (line.rank, line.score, receipt.trigger) == (11, 0.7, "import")
    assert line.margin == pytest.approx(0.2)
    memory.purge("fact_confirm")
    gone = memory.why("fact_confirm")
    assert gone.status == "gone"
    assert gone.fact is None
    assert gone.receipts
    with pytest.raises(FactNotFoundError):
        memory.why("fact_never")


def test_why_marks_protected_facts_under_hybrid(stores: Stores) -> None:
    memory = open_memory(stores, max_facts=10, fact_eviction_policy="hybrid-v1")
    memory.import_document(scenario_document("correction-vs-preferences"))
    standing = memory.why("fact_correct").standing
    assert standing is not None
    assert standing.protected
    assert set(standing.components) == {"confidence", "confirmationFreshness", "accessHeat"}


# --- opening ----------------------------------------------------------------------------------


def test_scoped_views_share_the_store(stores: Stores) -> None:
    memory = open_memory(stores)
    coder = memory.scoped(user="alice", agent="Coder")
    coder.create_fact("Coder fact")
    assert coder.scope == Scope.of("alice", "coder")
    assert coder.store is memory.store
    assert memory.list_facts() == ()
    assert memory.scoped(user="bob", agent=None).scope == Scope.of("bob", None)
    assert memory.scoped(user=None, agent=None).scope == Scope.of(None, None)


def test_scoped_binds_the_whole_scope_it_is_given(stores: Stores) -> None:
    memory = stores.memory(MemoryConfig(), user="alice", agent="coder")
    assert memory.scoped(user="bob", agent=None).scope.agent == "__default__"  # not "coder"
    assert memory.scoped(user=None, agent="coder").scope.user_id is None  # not "alice"
    with pytest.raises(TypeError):
        memory.scoped(user="bob")  # type: ignore[call-arg]  # the agent must be said too
    with pytest.raises(TypeError):  # scoped() is the one way to choose a scope
        memory.search("tea", user="bob")  # type: ignore[call-arg]


def test_scoped_rejects_unsafe_names_and_a_missing_user_in_strict_mode(stores: Stores) -> None:
    memory = open_memory(stores)
    with pytest.raises(UnsafeIdentifierError):
        memory.scoped(user="alice", agent="../etc")
    with pytest.raises(UnsafeIdentifierError):
        memory.scoped(user="", agent=None)
    with pytest.raises(UnsafeIdentifierError):
        memory.scoped(user=1, agent=None)  # type: ignore[arg-type]  # untyped callers
    strict = stores.memory(MemoryConfig(strict_user_scope=True), user="alice")
    with pytest.raises(UnsafeIdentifierError, match="strict_user_scope"):
        strict.scoped(user=None, agent=None)


def test_an_unscoped_memory_works_only_through_its_views(stores: Stores) -> None:
    """A server's memory: every request names its user, so the memory itself has no scope."""
    config = MemoryConfig(strict_user_scope=True)  # no user-less memory: it still opens
    served = Memory(stores(config), config, None, clock=lambda: NOW)
    alice = served.scoped(user="alice", agent="coder")
    fact_id = alice.create_fact("Prefers uv over pip").fact.id
    assert [f.id for f in served.scoped(user="alice", agent="coder").list_facts()] == [fact_id]
    assert alice.now() == NOW  # the views share the clock (and store, queue, index)
    # The memory itself reads and writes nothing: no single-user layout behind it.
    for use in (served.list_facts, lambda: served.create_fact("Lost"), lambda: served.scope):
        with pytest.raises(UnsafeIdentifierError, match="scoped"):
            use()
    with pytest.raises(UnsafeIdentifierError, match="strict_user_scope"):
        served.scoped(user=None, agent=None)
    assert "no scope of its own" in repr(served)
    assert stores.memory(config, user="bob").list_facts() == ()


@pytest.mark.parametrize(("mode", "status"), [("archive", "archived"), ("delete", "gone")])
def test_a_deleted_fact_leaves_a_content_free_receipt_in_either_eviction_mode(
    stores: Stores, mode: str, status: str
) -> None:
    memory = open_memory(stores, eviction_mode=mode)
    fact_id = memory.create_fact("SECRET-d31 the door code is 4711", category="goal").fact.id
    memory.delete_fact(fact_id)
    explained = memory.why(fact_id)
    assert explained.status == status
    [receipt] = explained.receipts
    assert (receipt.reason, receipt.trigger, receipt.fact_ids) == ("deleted", "manual", (fact_id,))
    assert receipt.evicted[0].category == "goal"
    assert [r.receipt_id for r in memory.audit()] == [receipt.receipt_id]
    assert "SECRET-d31" not in json.dumps(receipt.to_dict())


def test_the_clock_is_injected_into_every_decision(stores: Stores) -> None:
    moments = iter([NOW, NOW + timedelta(days=1)])
    memory = stores.memory(MemoryConfig(), user="alice", clock=lambda: next(moments))
    created = memory.create_fact("First")
    assert created.fact.createdAt == "2026-08-13T00:00:00Z"
    assert (
        memory.update_fact(created.fact_id or "", confidence=0.9).updatedAt
        == "2026-08-14T00:00:00Z"
    )
