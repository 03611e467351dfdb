"""The label gate (catalogue: test_memory_scope_gate.py)."""

from __future__ import annotations

from typing import Any

import pytest

from deermem.learning.plan import fact_label_rejection, gate_response
from deermem.learning.report import FactRejections, RemovalRejections, SummaryRejections
from deermem.model import format_timestamp
from deermem.store import Section as SummarySection
from tests.update_support import (
    NOW,
    apply_through_capacity,
    fact,
    new_fact,
    normalized,
    plan,
    state,
)


def removal(fact_id: str, **fields: Any) -> dict[str, Any]:
    return {"id": fact_id, "scope": "user", "reason": "the user said otherwise", **fields}


def test_fact_gate_admits_only_durable_descriptive_user_facts() -> None:
    response = normalized(
        newFacts=[
            new_fact("Accepted"),
            new_fact("No scope", scope=None),
            new_fact("Thread scope", scope="thread"),
            new_fact("Transient", durability="transient"),
            new_fact("Transactional", authority="transactional"),
        ]
    )
    result = plan(state(), response)
    assert [f.content for f in result.new_facts] == ["Accepted"]
    assert result.metrics.fact_rejections == FactRejections(
        missing=1, scope=1, durability=1, authority=1
    )
    assert result.metrics.facts_passed_scope_gate == 1
    assert result.metrics.rejected_by_scope_gate == 4


@pytest.mark.parametrize(
    ("labels", "reason"),
    [
        (("user", "durable", "descriptive"), None),
        ((None, "durable", "descriptive"), "missing"),
        (("user", None, "descriptive"), "missing"),
        (("user", "durable", None), "missing"),
        (("project", "durable", "descriptive"), "scope"),
        (("user", "transient", "descriptive"), "durability"),
        (("user", "durable", "transactional"), "authority"),
        (("thread", "transient", "transactional"), "scope"),  # the first failing label counts
    ],
)
def test_fact_label_rejection_reasons(
    labels: tuple[str | None, str | None, str | None], reason: str | None
) -> None:
    assert fact_label_rejection(*labels) == reason


def test_summary_gate_requires_user_scope_and_descriptive_authority() -> None:
    section = {"shouldUpdate": True}
    response = normalized(
        user={
            "workContext": {
                **section,
                "summary": "Project scoped",
                "scope": "project",
                "authority": "descriptive",
            },
            "personalContext": {
                **section,
                "summary": "An order",
                "scope": "user",
                "authority": "transactional",
            },
            "topOfMind": {**section, "summary": "No label", "scope": "user"},
        },
        history={
            "recentMonths": {
                **section,
                "summary": "  Moved to Berlin  ",
                "scope": "user",
                "authority": "descriptive",
            }
        },
    )
    result = plan(state(), response)
    assert result.summaries == {
        ("history", "recentMonths"): SummarySection("Moved to Berlin", format_timestamp(NOW))
    }
    assert result.metrics.summary_rejections == SummaryRejections(missing=1, scope=1, authority=1)


def test_sections_that_ask_for_no_change_are_not_refusals() -> None:
    response = normalized(
        user={
            "workContext": {"summary": "x", "shouldUpdate": False},
            "topOfMind": {"summary": "  ", "shouldUpdate": True},
        }
    )
    result = plan(state(), response)
    assert result.summaries == {}
    assert result.metrics.summary_rejections == SummaryRejections()


def test_thread_scoped_removal_cannot_delete_a_user_fact() -> None:
    memory = state(fact("fact_api", "Uses the v1 API"))
    result = plan(memory, normalized(factsToRemove=[removal("fact_api", scope="thread")]))
    assert result.pending_removals == ()
    assert result.metrics.removal_rejections == RemovalRejections(scope=1)


def test_unreasoned_user_removal_fails_closed() -> None:
    memory = state(fact("fact_api", "Uses the v1 API"))
    result = plan(memory, normalized(factsToRemove=[removal("fact_api", reason="   ")]))
    assert result.pending_removals == ()
    assert result.metrics.removal_rejections == RemovalRejections(missing=1)


def test_legacy_string_removal_fails_closed_as_missing() -> None:
    memory = state(fact("fact_api", "Uses the v1 API"))
    result = plan(memory, normalized(factsToRemove=["fact_api"]))
    assert result.pending_removals == ()
    assert result.metrics.removal_rejections == RemovalRejections(missing=1)


def test_paired_removal_is_skipped_when_the_replacement_fails_the_label_gate() -> None:
    memory = state(fact("fact_old", "Uses pip"))
    response = normalized(
        newFacts=[new_fact("Uses uv", durability="transient")],
        factsToRemove=[removal("fact_old", replacementFactIndex=0)],
    )
    result = plan(memory, response)
    final, _ = apply_through_capacity(result)
    assert [f.id for f in final] == ["fact_old"]
    assert result.metrics.removal_rejections.replacement == 1


def test_paired_removal_is_skipped_when_the_replacement_fails_the_threshold() -> None:
    memory = state(fact("fact_old", "Uses pip"))
    response = normalized(
        newFacts=[new_fact("Uses uv", confidence=0.69)],
        factsToRemove=[removal("fact_old", replacementFactIndex=0)],
    )
    result = plan(memory, response)
    final, _ = apply_through_capacity(result)
    assert [f.id for f in final] == ["fact_old"]
    metrics = result.metrics
    assert metrics.facts_passed_scope_gate == 1
    assert metrics.rejected_low_confidence == 1
    assert metrics.removal_rejections.replacement == 1


def test_paired_removal_applies_when_the_replacement_is_stored() -> None:
    memory = state(fact("fact_old", "Uses pip"))
    response = normalized(
        newFacts=[new_fact("Uses uv")], factsToRemove=[removal("fact_old", replacementFactIndex=0)]
    )
    final, outcome = apply_through_capacity(plan(memory, response))
    assert [f.content for f in final] == ["Uses uv"]
    assert outcome.removed == ("fact_old",)
    assert [(r.fact_id, r.reason) for r in outcome.removals] == [("fact_old", "contradiction")]
    assert outcome.metrics.contradiction_removals == 1


def test_paired_removal_is_skipped_when_the_replacement_is_trimmed() -> None:
    memory = state(fact("fact_old", "Uses pip", confidence=0.95))
    response = normalized(
        newFacts=[new_fact("Uses uv", confidence=0.8)],
        factsToRemove=[removal("fact_old", replacementFactIndex=0)],
    )
    final, outcome = apply_through_capacity(plan(memory, response), max_facts=1)
    assert [f.id for f in final] == ["fact_old"]
    assert outcome.skipped == ("fact_old",)
    assert outcome.metrics.removal_rejections.replacement == 1


def test_an_unlabelled_fact_is_dropped_without_aborting_the_rest() -> None:
    memory = state(fact("fact_old", "Uses pip"))
    response = normalized(
        newFacts=[new_fact("Unlabelled", authority=None), new_fact("Prefers dark mode")],
        factsToRemove=[removal("fact_old", replacementFactIndex=0)],
    )
    result = plan(memory, response)
    final, _ = apply_through_capacity(result)
    assert {f.content for f in final} == {"Uses pip", "Prefers dark mode"}
    assert result.metrics.fact_rejections.missing == 1
    assert result.metrics.removal_rejections.replacement == 1


@pytest.mark.parametrize("index", [-1, 1, 99, True, "0", 0.0])
def test_invalid_replacement_indices_are_refused(index: object) -> None:
    memory = state(fact("fact_old", "Uses pip"))
    response = normalized(
        newFacts=[new_fact("Uses uv")],
        factsToRemove=[removal("fact_old", replacementFactIndex=index)],
    )
    result = plan(memory, response)
    assert result.pending_removals == ()
    assert result.metrics.removal_rejections.replacement == 1


def test_a_replacement_repeating_another_stored_fact_lets_the_removal_apply() -> None:
    memory = state(fact("fact_old", "Uses pip"), fact("fact_uv", "Uses uv"))
    response = normalized(
        newFacts=[new_fact("uses UV ")], factsToRemove=[removal("fact_old", replacementFactIndex=0)]
    )
    result = plan(memory, response)
    assert result.new_facts == ()  # a duplicate: the stored fact stays as it is
    assert result.pending_removals[0].replacement_fact_id == "fact_uv"
    final, _ = apply_through_capacity(result)
    assert [f.id for f in final] == ["fact_uv"]


def test_a_replacement_repeating_the_removed_fact_itself_keeps_it() -> None:
    memory = state(fact("fact_old", "Uses pip"))
    response = normalized(
        newFacts=[new_fact("USES PIP")], factsToRemove=[removal("fact_old", replacementFactIndex=0)]
    )
    result = plan(memory, response)
    assert result.pending_removals[0].replacement_fact_id is None
    final, outcome = apply_through_capacity(result)
    assert [f.id for f in final] == ["fact_old"]
    assert outcome.skipped == ("fact_old",)


def test_a_removal_without_replacement_applies_after_the_capacity_gate() -> None:
    memory = state(fact("fact_api", "Uses the v1 API"), fact("fact_b"))
    final, outcome = apply_through_capacity(
        plan(memory, normalized(factsToRemove=[removal("fact_api")]))
    )
    assert [f.id for f in final] == ["fact_b"]
    assert outcome.removed == ("fact_api",)


def test_a_removal_of_an_evicted_fact_is_neither_applied_nor_skipped() -> None:
    memory = state(fact("fact_low", "Low", confidence=0.1), fact("fact_hi", "High", confidence=0.9))
    response = normalized(
        newFacts=[new_fact("New", confidence=0.95)], factsToRemove=[removal("fact_low")]
    )
    final, outcome = apply_through_capacity(plan(memory, response), max_facts=2)
    assert {f.id for f in final} == {"fact_hi", "fact_00000001"}
    assert outcome.removed == ()
    assert outcome.skipped == ()


def test_threshold_boundary_and_blank_content() -> None:
    response = normalized(
        newFacts=[new_fact("At the threshold", confidence=0.7), new_fact("   ", confidence=0.9)]
    )
    gated = gate_response(response, threshold=0.7)
    assert [f.content for f in gated.new_facts] == ["At the threshold"]
    assert gated.metrics.facts_passed_confidence == 2
    assert gated.metrics.rejected_empty_content == 1
    assert gated.replacement_indices == frozenset({0, 1})


def test_metrics_keep_the_original_names() -> None:
    response = normalized(newFacts=[new_fact("a"), new_fact("b", scope="thread")])
    counters = plan(state(), response).metrics.to_dict()
    assert counters["facts_extracted"] == 2
    assert counters["facts_passed_scope_gate"] == 1
    assert counters["rejected_by_scope_gate"] == 1
    assert counters["scope_gate_rejections"] == {
        "facts": {"missing": 0, "scope": 1, "durability": 0, "authority": 0},
        "summaries": {"missing": 0, "scope": 0, "authority": 0},
        "removals": {"missing": 0, "scope": 0, "replacement": 0},
    }
