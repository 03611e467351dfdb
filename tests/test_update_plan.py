"""Planning an update up to the capacity gate (catalogue: the apply rules of
test_memory_updater.py, TestFactDeduplicationCaseInsensitive, TestNewFactsExpectedValidDays)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from deermem.learning.plan import (
    MemoryState,
    PlannedRemoval,
    UpdatePlan,
    UpdateSettings,
    plan_update,
)
from deermem.model import FactSource, format_timestamp
from deermem.policy import POLICY_CONFIDENCE, POLICY_HYBRID_V1
from deermem.store import Section as SummarySection
from tests.update_support import (
    NOW,
    apply_through_capacity,
    counting_ids,
    fact,
    new_fact,
    normalized,
    plan,
    state,
)


def test_a_duplicate_of_a_stored_fact_is_skipped_and_removals_still_apply() -> None:
    memory = state(fact("fact_uv", "Prefers uv"), fact("fact_api", "Uses the v1 API"))
    response = normalized(
        newFacts=[new_fact("Prefers uv")],
        factsToRemove=[{"id": "fact_api", "scope": "user", "reason": "moved to v2"}],
    )
    result = plan(memory, response)
    assert result.new_facts == ()
    assert result.metrics.duplicate_facts == 1
    final, _ = apply_through_capacity(result)
    assert [f.id for f in final] == ["fact_uv"]
    assert final[0] is memory.facts[0]  # the stored fact is left as it is


def test_whitespace_only_facts_are_never_stored() -> None:
    result = plan(state(), normalized(newFacts=[new_fact("   \n\t")]))
    assert result.new_facts == ()


def test_same_batch_duplicates_collapse_and_keep_their_source() -> None:
    response = normalized(
        newFacts=[new_fact("Likes tea"), new_fact("likes TEA "), new_fact("Likes coffee")]
    )
    result = plan(state(), response, thread_id="thread-42")
    assert [f.content for f in result.new_facts] == ["Likes tea", "Likes coffee"]
    assert all(f.id.startswith("fact_") for f in result.new_facts)
    assert {f.source for f in result.new_facts} == {FactSource("conversation", "thread-42")}
    assert {f.createdAt for f in result.new_facts} == {format_timestamp(NOW)}


def test_case_only_differences_are_duplicates_but_new_content_is_not() -> None:
    memory = state(fact("fact_a", "Uses Neovim"))
    response = normalized(newFacts=[new_fact("USES NEOVIM"), new_fact("Uses Neovim with LazyVim")])
    assert [f.content for f in plan(memory, response).new_facts] == ["Uses Neovim with LazyVim"]


def test_threshold_duplicates_and_trim_by_confidence() -> None:
    memory = state(fact("fact_a", "A", confidence=0.75))
    response = normalized(
        newFacts=[
            new_fact("Low", confidence=0.6),
            new_fact("A"),
            new_fact("High", confidence=0.95),
            new_fact("Mid", confidence=0.8),
        ]
    )
    result = plan(memory, response)
    assert [f.content for f in result.new_facts] == ["High", "Mid"]
    final, _ = apply_through_capacity(result, max_facts=2)
    assert [f.content for f in final] == ["High", "Mid"]  # rank order: by confidence


def test_source_error_is_kept_and_a_blank_one_omitted() -> None:
    response = normalized(
        newFacts=[
            new_fact("Use uv, not pip", category="correction", sourceError="ran pip install"),
            new_fact("Use ruff", category="correction", sourceError="   "),
        ]
    )
    kept, blank = plan(state(), response).new_facts
    assert kept.sourceError == "ran pip install"
    assert blank.sourceError is None
    assert "sourceError" not in blank.to_dict()


def test_expected_valid_days_on_new_facts_and_the_creation_cap() -> None:
    settings = UpdateSettings(staleness_age_days=90, staleness_max_lifetime_multiplier=3)
    response = normalized(
        newFacts=[
            new_fact("Short", expected_valid_days=180),
            new_fact("Long", expected_valid_days=10_000),
            new_fact("None given"),
        ]
    )
    short, long, none = plan(state(), response, settings=settings).new_facts
    assert short.expected_valid_days == 180
    assert long.expected_valid_days == 270
    assert none.expected_valid_days is None
    assert "expected_valid_days" not in none.to_dict()


def test_categories_are_filed_as_the_fact_model_files_them() -> None:
    response = normalized(
        newFacts=[new_fact("x", category="Knowledge"), new_fact("y", category="GOAL")]
    )
    other, goal = plan(state(), response).new_facts
    assert (other.category, other.categoryExtension) == ("other", "Knowledge")
    assert goal.category == "goal"


@pytest.mark.parametrize(
    ("thread_id", "source"),
    [(None, FactSource("unknown")), ("manual", FactSource("conversation", "manual"))],
)
def test_the_source_is_the_thread_even_when_it_looks_like_a_source_type(
    thread_id: str | None, source: FactSource
) -> None:
    (created,) = plan(state(), normalized(newFacts=[new_fact("x")]), thread_id=thread_id).new_facts
    assert created.source == source


def test_ids_in_use_are_not_reused() -> None:
    memory = state(fact("fact_00000001"))
    (created,) = plan(memory, normalized(newFacts=[new_fact("x")])).new_facts
    assert created.id == "fact_00000002"


def test_an_id_factory_that_only_repeats_itself_is_an_error() -> None:
    memory = state(fact("fact_same"))
    with pytest.raises(ValueError, match="already in use"):
        plan_update(
            memory,
            normalized(newFacts=[new_fact("x")]),
            signals=(),
            settings=UpdateSettings(),
            now=NOW,
            thread_id="t",
            new_id=lambda: "fact_same",
        )


def test_archived_ids_are_skipped_by_the_same_loop_and_error() -> None:
    """One id loop: an archived id is in use like a stored one (a restore brings it back)."""
    archived = {"fact_00000001", "fact_00000003"}

    def make(new_id: Callable[[], str]) -> UpdatePlan:
        return plan_update(
            state(fact("fact_00000002")),
            normalized(newFacts=[new_fact("x"), new_fact("y")]),
            signals=(),
            settings=UpdateSettings(),
            now=NOW,
            thread_id="t",
            new_id=new_id,
            archived=archived.__contains__,
        )

    assert [f.id for f in make(counting_ids()).new_facts] == ["fact_00000004", "fact_00000005"]
    with pytest.raises(ValueError, match="already in use 20 times"):
        make(lambda: "fact_00000001")


def test_the_default_id_factory_makes_original_style_ids() -> None:
    result = plan_update(
        state(),
        normalized(newFacts=[new_fact("x")]),
        signals=(),
        settings=UpdateSettings(),
        now=NOW,
        thread_id="t",
    )
    (created,) = result.new_facts
    assert len(created.id) == 13
    assert created.id.startswith("fact_")
    int(created.id[5:], 16)


# --- confirmations in the plan ---------------------------------------------------------


def reinforce(fact_id: str) -> dict[str, str]:
    return {"id": fact_id, "scope": "user", "reason": "the user said exactly this"}


def test_a_fact_is_confirmed_only_with_the_reinforcement_signal() -> None:
    memory = state(fact("fact_a"))
    response = normalized(factsToReinforce=[reinforce("fact_a")])
    without_signal = plan(memory, response)
    assert without_signal.updated_facts == ()
    assert without_signal.confirmed == ()
    confirmed = plan(memory, response, signals=frozenset({"reinforcement"}))
    (updated,) = confirmed.updated_facts
    assert updated.lastConfirmedAt == format_timestamp(NOW)
    assert updated.confirmationCount == 1
    assert confirmed.facts == (updated,)
    assert confirmed.metrics.confirmations == 1


def test_a_fact_confirmed_in_this_cycle_cannot_be_removed_as_stale() -> None:
    memory = state(*(fact(f"f{i}", age_days=200) for i in range(3)))
    response = normalized(
        factsToReinforce=[reinforce("f0")],
        staleFactsToRemove=[{"id": "f0", "reason": "old"}, {"id": "f1", "reason": "old"}],
    )
    result = plan(memory, response, signals=frozenset({"reinforcement"}))
    assert result.stale_removals == ("f1",)
    assert [f.id for f in result.facts] == ["f0", "f2"]
    assert result.metrics.stale_refused == 1


def test_the_seed_scenario_confirmation_decides_the_capacity_gate() -> None:
    """The user confirms a 0.7 fact; at the cap it survives a 0.9 fact untouched
    for 180 days under hybrid-v1 and loses under confidence."""
    filler = [fact(f"fill{i}", confidence=0.95, age_days=3) for i in range(8)]
    confirmed_fact = fact("fact_confirm", "Prefers uv", confidence=0.7, age_days=30)
    stale_fact = fact("fact_stale", "Uses zsh", confidence=0.9, age_days=180)
    memory = state(*filler, confirmed_fact, stale_fact)
    response = normalized(
        factsToReinforce=[reinforce("fact_confirm")],
        newFacts=[new_fact("Writes Go", confidence=0.95)],
    )
    signals = frozenset({"reinforcement"})
    hybrid_plan = plan(memory, response, signals=signals)
    kept, _ = apply_through_capacity(hybrid_plan, max_facts=10, policy=POLICY_HYBRID_V1)
    assert "fact_confirm" in {f.id for f in kept}
    assert "fact_stale" not in {f.id for f in kept}
    plain_plan = plan(memory, response, signals=signals)
    kept, _ = apply_through_capacity(plain_plan, max_facts=10, policy=POLICY_CONFIDENCE)
    assert "fact_confirm" not in {f.id for f in kept}
    assert "fact_stale" in {f.id for f in kept}


# --- order, summaries, purity --------------------------------------------------------------


def test_a_stale_fact_proposed_again_is_added_fresh() -> None:
    memory = state(*(fact(f"f{i}", f"old fact {i}", age_days=200) for i in range(3)))
    response = normalized(
        staleFactsToRemove=[{"id": "f0", "reason": "outdated"}],
        newFacts=[new_fact("Old fact 0")],
    )
    result = plan(memory, response)
    assert result.removals == (PlannedRemoval("f0", "staleness"),)
    assert [f.content for f in result.new_facts] == ["Old fact 0"]


def test_a_contradiction_of_a_fact_removed_as_stale_is_counted_as_unknown() -> None:
    memory = state(*(fact(f"f{i}", age_days=200) for i in range(3)))
    response = normalized(
        staleFactsToRemove=[{"id": "f0", "reason": "old"}],
        factsToRemove=[
            {"id": "f0", "scope": "user", "reason": "wrong"},
            {"id": "ghost", "scope": "user", "reason": "wrong"},
        ],
    )
    result = plan(memory, response)
    assert result.pending_removals == ()
    assert result.metrics.unknown_removals == 2


def test_an_unchanged_summary_is_not_a_change() -> None:
    memory = MemoryState(
        summaries={("user", "workContext"): SummarySection("Engineer", "2026-01-01T00:00:00Z")}
    )
    section = {"shouldUpdate": True, "scope": "user", "authority": "descriptive"}
    response = normalized(
        user={
            "workContext": {"summary": "Engineer", **section},
            "topOfMind": {"summary": "Shipping v2", **section},
        }
    )
    result = plan(memory, response)
    assert list(result.summaries) == [("user", "topOfMind")]
    assert result.metrics.summaries_updated == 1


def test_an_empty_response_changes_nothing() -> None:
    memory = state(fact("a"), fact("b"))
    result = plan(memory, normalized())
    assert not result.changes_anything
    assert result.facts == memory.facts


def test_planning_is_deterministic_and_leaves_its_input_alone() -> None:
    memory = state(fact("a", age_days=200), fact("b", age_days=200), fact("c", age_days=200))
    response = normalized(
        newFacts=[new_fact("New one")],
        factsToReinforce=[reinforce("a")],
        staleFactsToRemove=[{"id": "b", "reason": "old"}],
        staleFactsToExtend=[{"id": "c", "extend_by_days": 30, "reason": "still true"}],
    )
    snapshot = [f.to_dict() for f in memory.facts]
    first = plan(memory, response, signals=frozenset({"reinforcement"}))
    second = plan(memory, response, signals=frozenset({"reinforcement"}))
    assert first == second
    assert [f.to_dict() for f in memory.facts] == snapshot
    assert [f.id for f in first.updated_facts] == ["a", "c"]
    assert dict(first.extended) == {"c": 230}
    assert first.facts[-1].createdAt == format_timestamp(NOW)
