"""Normalisation of a model's update object (catalogue: scope-gate normalisation,
schema guards, malformed replacement, reinforcement/stale entry normalisation)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from deermem.learning import answer as limits
from deermem.learning.answer import (
    NewFactProposal,
    NormalizedResponse,
    ReinforceEntry,
    RejectedResponse,
    RemovalEntry,
    StaleExtension,
    StaleRemoval,
    normalize_response,
)
from tests.update_support import LABELS, new_fact, normalized, payload


def test_classification_labels_are_kept_on_new_facts() -> None:
    response = normalized(newFacts=[new_fact("Prefers uv over pip")])
    (proposal,) = response.new_facts
    assert (proposal.scope, proposal.durability, proposal.authority) == (
        "user",
        "durable",
        "descriptive",
    )


def test_labels_are_trimmed_and_lower_cased_and_non_strings_are_missing() -> None:
    entry = new_fact("x", scope="  USER ", durability="Durable", authority=7)
    (proposal,) = normalized(newFacts=[entry]).new_facts
    assert (proposal.scope, proposal.durability, proposal.authority) == ("user", "durable", None)


def test_wrongly_typed_sections_and_removals_are_ignored_and_the_fact_kept() -> None:
    response = normalized(
        user="not a mapping",
        history=["nor", "this"],
        newFacts=[new_fact("Writes Rust at work")],
        factsToRemove={"id": "fact_x"},
        factsToReinforce="fact_y",
    )
    assert response.summaries == ()
    assert response.remove == ()
    assert response.reinforce == ()
    assert [f.content for f in response.new_facts] == ["Writes Rust at work"]


def test_nested_fields_are_coerced_or_dropped() -> None:
    response = normalized(
        newFacts=[
            new_fact("Numeric text confidence", confidence="0.91"),  # type: ignore[arg-type]
            new_fact("Odd category", category=9, sourceError="  used pip  "),
            new_fact("Blank category", category="   "),
            "not an object",
            new_fact("", confidence=0.9),  # empty content
            {"content": "no confidence", **LABELS},
        ]
    )
    facts = response.new_facts
    assert [f.content for f in facts] == [
        "Numeric text confidence",
        "Odd category",
        "Blank category",
    ]
    assert facts[0].confidence == 0.91
    assert facts[1].category == "context"
    assert facts[1].source_error == "used pip"
    assert facts[2].category == "context"
    assert response.malformed_new_facts == 3
    assert [f.index for f in facts] == [0, 1, 2]


@pytest.mark.parametrize(
    "confidence",
    [True, False, None, "high", math.nan, math.inf, -math.inf, "nan", "inf", -0.1, 1.5, "2", [0.9]],
)
def test_unusable_confidences_make_a_fact_malformed(confidence: object) -> None:
    response = normalized(newFacts=[new_fact("x", confidence=confidence)])  # type: ignore[arg-type]
    assert response.new_facts == ()
    assert response.malformed_new_facts == 1


@pytest.mark.parametrize(("value", "expected"), [(0, 0.0), (1, 1.0), (" 0.75 ", 0.75), (0.7, 0.7)])
def test_usable_confidences(value: object, expected: float) -> None:
    (proposal,) = normalized(newFacts=[new_fact("x", confidence=value)]).new_facts  # type: ignore[arg-type]
    assert proposal.confidence == expected


def test_whitespace_content_is_well_formed_here_and_refused_by_the_gate() -> None:
    response = normalized(newFacts=[new_fact("   ")])
    assert len(response.new_facts) == 1
    assert response.malformed_new_facts == 0


@pytest.mark.parametrize(
    ("content", "read"),
    [
        ("[MANUAL] Likes green tea.", "Likes green tea."),
        ("  [MANUAL]Likes green tea.", "Likes green tea."),
        ("[MANUAL] [MANUAL]  Likes green tea.", "Likes green tea."),
        ("[MANUAL] ", ""),  # blank once the marker is gone: the gate refuses it
        ("Likes [MANUAL] green tea.", "Likes [MANUAL] green tea."),  # only at the start
        ("[manual] Likes green tea.", "[manual] Likes green tea."),  # the marker as written
    ],
)
def test_the_prompts_manual_marker_echoed_at_the_start_of_a_fact_is_removed(
    content: str, read: str
) -> None:
    """The prompt marks hand-written facts "[MANUAL] "; the marker is never fact text."""
    (proposal,) = normalized(newFacts=[new_fact(content)]).new_facts
    assert proposal.content == read


@pytest.mark.parametrize(
    ("value", "days"),
    [
        (180, 180),
        (180.7, 180),
        (10**400, 10**400),
        (0, None),
        (-5, None),
        (0.9, None),
        (True, None),
        ("365", None),
        (math.inf, None),
        (math.nan, None),
        (None, None),
    ],
)
def test_expected_valid_days_of_a_new_fact(value: object, days: int | None) -> None:
    (proposal,) = normalized(newFacts=[new_fact("x", expected_valid_days=value)]).new_facts
    assert proposal.expected_valid_days == days


# --- the whole-response rejection ---------------------------------------------------


def test_removal_with_a_malformed_new_fact_rejects_the_whole_response() -> None:
    data = payload(
        user={"topOfMind": {"summary": "x", "shouldUpdate": True, **LABELS}},
        newFacts=[new_fact("Uses uv"), {"content": "Uses pip", "confidence": "very"}],
        factsToRemove=[
            {"id": "fact_pip", "scope": "user", "reason": "replaced", "replacementFactIndex": 0}
        ],
    )
    assert normalize_response(data) == RejectedResponse("removals-with-malformed-facts", 1, 1)


@pytest.mark.parametrize("new_facts", [None, "x", {"content": "x"}])
def test_removal_when_new_facts_is_not_a_list_rejects_the_whole_response(new_facts: object) -> None:
    data = payload(newFacts=new_facts, factsToRemove=[{"id": "a", "scope": "user", "reason": "r"}])
    result = normalize_response(data)
    assert isinstance(result, RejectedResponse)
    assert result.malformed_new_facts == -1


def test_missing_new_facts_with_a_removal_is_rejected() -> None:
    data = {"user": {}, "history": {}, "factsToRemove": ["fact_a"]}
    assert isinstance(normalize_response(data), RejectedResponse)


# Every field of the update, each of a type the reply schema does not give it.
WRONG_TYPES = {
    "user": "alice",
    "history": ["x"],
    "newFacts": "none",
    "factsToReinforce": "fact_a",
    "factsToRemove": {"id": "fact_a"},
    "staleFactsToRemove": 7,
    "staleFactsToExtend": None,
}


@pytest.mark.parametrize(
    "data",
    [
        {"user": "alice", "history": 5, "newFacts": "none"},  # the three keys the parser needs
        {"user": None, "history": None, "newFacts": None},
        {"user": [], "history": [], "newFacts": {}},  # each the other container
        WRONG_TYPES,
        {},  # no field at all: nothing of the schema either
    ],
)
def test_an_answer_none_of_whose_fields_has_its_type_is_rejected_whole(data: object) -> None:
    assert isinstance(data, dict)
    assert normalize_response(data) == RejectedResponse("wrong-field-types", -1, 0)


@pytest.mark.parametrize("field", ["user", "history", "newFacts", "factsToReinforce"])
def test_one_field_of_its_type_is_a_partly_wrong_answer_that_goes_on(field: str) -> None:
    right: object = [] if field in ("newFacts", "factsToReinforce") else {}
    response = normalize_response({**WRONG_TYPES, field: right})
    assert response == NormalizedResponse()


def test_malformed_facts_without_removals_only_drop_those_facts() -> None:
    response = normalized(newFacts=[new_fact("kept"), {"content": 5}])
    assert [f.content for f in response.new_facts] == ["kept"]
    assert response.malformed_new_facts == 1


# --- reinforcement, removal and stale entries -----------------------------------------


def test_reinforcement_entries_are_trimmed_and_empty_ids_dropped() -> None:
    response = normalized(
        factsToReinforce=[
            {"id": "  fact_a ", "scope": " USER", "reason": "  said so  "},
            {"id": "   ", "scope": "user", "reason": "r"},
            {"id": 12, "scope": "user", "reason": "r"},
            {"id": "fact_b"},
            "fact_c",
        ]
    )
    assert response.reinforce == (
        ReinforceEntry(id="fact_a", scope="user", reason="said so"),
        ReinforceEntry(id="fact_b", scope=None, reason=""),
    )
    assert response.ignored["factsToReinforce"] == 3


def test_a_bare_id_removal_becomes_an_unlabelled_entry() -> None:
    response = normalized(factsToRemove=["fact_api"])
    assert response.remove == (RemovalEntry(id="fact_api", scope=None, reason=""),)


@pytest.mark.parametrize(
    ("index", "expected", "given"),
    [
        (0, 0, True),
        (3, 3, True),
        (-1, -1, True),
        (True, None, True),
        ("1", None, True),
        (1.0, None, True),
        (None, None, False),
    ],
)
def test_replacement_index_is_kept_only_as_a_whole_number(
    index: object, expected: int | None, given: bool
) -> None:
    entry: dict[str, Any] = {"id": "fact_a", "scope": "user", "reason": "r"}
    if index is not None:
        entry["replacementFactIndex"] = index
    (removal,) = normalized(factsToRemove=[entry]).remove
    assert (removal.replacement_index, removal.replacement_given) == (expected, given)


def test_stale_removals_are_normalised() -> None:
    response = normalized(
        staleFactsToRemove=[
            {"id": "fact_a", "reason": "outdated"},
            {"id": "fact_b", "reason": 7},
            {"id": "fact_c"},
            {"id": ""},
            "fact_d",
        ]
    )
    assert response.stale_remove == (
        StaleRemoval(id="fact_a", reason="outdated"),
        StaleRemoval(id="fact_b", reason=""),
        StaleRemoval(id="fact_c", reason=""),
    )


@pytest.mark.parametrize("value", [None, "fact_a", {"id": "fact_a"}, 3])
def test_stale_lists_that_are_not_lists_are_empty(value: object) -> None:
    response = normalized(staleFactsToRemove=value, staleFactsToExtend=value)
    assert response.stale_remove == ()
    assert response.stale_extend == ()


def test_missing_stale_keys_are_empty() -> None:
    response = normalized()
    assert response.stale_remove == ()
    assert response.stale_extend == ()


def test_extensions_are_normalised() -> None:
    response = normalized(
        staleFactsToExtend=[
            {"id": "fact_a", "extend_by_days": 365, "reason": "still true"},
            {"id": "fact_b", "extend_by_days": 90.7},
            {"id": "fact_c", "extend_by_days": 0.9},
            {"id": "fact_d", "extend_by_days": 0},
            {"id": "fact_e", "extend_by_days": -5},
            {"id": 5, "extend_by_days": 30},
            {"id": "fact_f"},
            {"id": "fact_g", "extend_by_days": True},
            {"id": "fact_h", "extend_by_days": "30"},
        ]
    )
    assert response.stale_extend == (
        StaleExtension(id="fact_a", extend_by_days=365, reason="still true"),
        StaleExtension(id="fact_b", extend_by_days=90, reason=""),
    )


# --- summaries ------------------------------------------------------------------------


def test_summary_sections_are_read_with_labels() -> None:
    response = normalized(
        user={
            "workContext": {"summary": "Backend engineer", "shouldUpdate": True, **LABELS},
            "unknownSection": {"summary": "x", "shouldUpdate": True},
            "topOfMind": "not a mapping",
        },
        history={"recentMonths": {"summary": 3, "shouldUpdate": "false", "scope": "User"}},
    )
    work, recent = response.summaries
    assert work.key == ("user", "workContext")
    assert work.should_update
    assert (work.scope, work.authority) == ("user", "descriptive")
    assert recent.key == ("history", "recentMonths")
    assert (recent.summary, recent.should_update, recent.scope, recent.authority) == (
        "",
        False,
        "user",
        None,
    )


@pytest.mark.parametrize(
    ("flag", "expected"),
    [
        (True, True),
        ("true", True),
        (" TRUE ", True),
        (False, False),
        ("false", False),
        (1, False),
        (None, False),
    ],
)
def test_should_update_must_say_true(flag: object, expected: bool) -> None:
    response = normalized(user={"topOfMind": {"summary": "x", "shouldUpdate": flag}})
    assert response.summaries[0].should_update is expected


# --- limits ---------------------------------------------------------------------------


def test_entries_beyond_a_list_limit_are_ignored_and_counted() -> None:
    many = [new_fact(f"fact {i}") for i in range(limits.MAX_NEW_FACTS + 25)]
    removals = [
        {"id": f"f{i}", "scope": "user", "reason": "r"} for i in range(limits.MAX_REMOVALS * 3)
    ]
    response = normalized(newFacts=many, factsToRemove=removals)
    assert len(response.new_facts) == limits.MAX_NEW_FACTS
    assert len(response.remove) == limits.MAX_REMOVALS
    assert response.over_limits == limits.OverLimits(new_facts=25, removals=limits.MAX_REMOVALS * 2)
    assert response.over_limits.total == 25 + limits.MAX_REMOVALS * 2
    assert response.ignored == {}
    assert response.malformed_new_facts == 0


@pytest.mark.parametrize(
    ("fields", "counted"),
    [
        ({"content": "x" * (limits.MAX_CONTENT_CHARS + 1)}, {"content": 1}),
        ({"category": "c" * (limits.MAX_CATEGORY_CHARS + 1)}, {"category": 1}),
        ({"sourceError": "e" * (limits.MAX_SOURCE_ERROR_CHARS + 1)}, {"source_error": 1}),
        ({"confidence": "0." + "9" * limits.MAX_CONFIDENCE_TEXT_CHARS}, {"confidence": 1}),
        # Counted under the first limit broken, once.
        (
            {"content": "x" * (limits.MAX_CONTENT_CHARS + 1), "category": "c" * 100},
            {"content": 1},
        ),
    ],
)
def test_oversized_fields_make_a_fact_malformed(
    fields: dict[str, object], counted: dict[str, int]
) -> None:
    entry = {**new_fact("x"), **fields}
    response = normalized(newFacts=[entry])
    assert response.new_facts == ()
    assert response.malformed_new_facts == 1
    assert response.over_limits == limits.OverLimits(**counted)


def test_a_malformed_fact_within_the_limits_is_not_counted_over_them() -> None:
    response = normalized(newFacts=[{**new_fact("x"), "confidence": "very"}])
    assert response.malformed_new_facts == 1
    assert response.over_limits.total == 0


def test_a_rejected_response_still_counts_what_the_limits_dropped() -> None:
    data = payload(
        newFacts=[{**new_fact("x"), "content": "x" * (limits.MAX_CONTENT_CHARS + 1)}],
        factsToRemove=[{"id": "fact_a", "scope": "user", "reason": "r"}],
        factsToReinforce=[{"id": f"f{i}"} for i in range(limits.MAX_REINFORCEMENTS + 2)],
    )
    result = normalize_response(data)
    assert isinstance(result, RejectedResponse)
    assert result.over_limits == limits.OverLimits(content=1, reinforcements=2)


def test_oversized_summaries_and_ids_are_ignored_and_reasons_cut() -> None:
    response = normalized(
        user={"topOfMind": {"summary": "s" * (limits.MAX_SUMMARY_CHARS + 1), "shouldUpdate": True}},
        factsToReinforce=[
            {"id": "f" * (limits.MAX_ID_CHARS + 1), "scope": "user", "reason": "r"},
            {"id": "fact_a", "scope": "user", "reason": "r" * (limits.MAX_REASON_CHARS * 2)},
        ],
    )
    assert response.summaries == ()
    assert response.over_limits == limits.OverLimits(summaries=1, ids=1)
    assert response.ignored == {}
    (entry,) = response.reinforce
    assert len(entry.reason) == limits.MAX_REASON_CHARS


def test_normalising_the_payload_of_a_normalised_response_changes_nothing() -> None:
    response = normalized(
        user={"workContext": {"summary": "Engineer", "shouldUpdate": True, "scope": "user"}},
        newFacts=[
            new_fact("a", expected_valid_days=30.5, sourceError=" e "),
            new_fact("b", scope=None),
        ],
        factsToReinforce=[{"id": "fact_a", "scope": "USER", "reason": "yes"}],
        factsToRemove=[
            "fact_old",
            {"id": "fact_x", "scope": "user", "reason": "r", "replacementFactIndex": "0"},
        ],
        staleFactsToRemove=[{"id": "fact_s"}],
        staleFactsToExtend=[{"id": "fact_t", "extend_by_days": 9.9}],
    )
    again = normalize_response(response.to_payload())
    assert isinstance(again, NormalizedResponse)
    assert again == response
    assert isinstance(response.new_facts[0], NewFactProposal)


def test_a_reason_cut_at_a_space_normalises_the_same_twice() -> None:
    reason = "x" * (limits.MAX_REASON_CHARS - 1) + " " + "y" * 10
    response = normalized(factsToReinforce=[{"id": "fact_a", "scope": "user", "reason": reason}])
    assert response.reinforce[0].reason == "x" * (limits.MAX_REASON_CHARS - 1)
    assert normalize_response(response.to_payload()) == response
