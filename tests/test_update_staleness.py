"""Staleness review (catalogue: test_memory_staleness_review.py)."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest

from deermem.learning.answer import StaleExtension, StaleRemoval
from deermem.learning.plan import (
    UpdateSettings,
    effective_window_days,
    read_expected_valid_days,
    review_due,
    review_staleness,
    shift_days,
    stale_candidates,
)
from deermem.learning.prompt import stale_candidate_lines
from deermem.model import Fact, parse_timestamp
from tests.update_support import NOW, days_ago, fact

DEFAULT = UpdateSettings()


def candidates(*facts: Fact, settings: UpdateSettings = DEFAULT) -> list[str]:
    return [f.id for f in stale_candidates(facts, now=NOW, settings=settings)]


# --- reading timestamps and windows --------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-01-02T03:04:05Z", datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)),
        ("2026-01-02T03:04:05+00:00", datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)),
        ("2026-01-02T03:04:05", datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)),  # naive is UTC
        ("", None),
        ("last tuesday", None),
    ],
)
def test_fact_timestamps(text: str, expected: datetime | None) -> None:
    assert parse_timestamp(text) == expected


@pytest.mark.parametrize(
    ("value", "days"),
    [
        (365, 365),
        (180.7, 180),
        (None, None),
        (True, None),
        (0, None),
        (-5, None),
        (0.5, None),
        (0.9, None),
        ("365", None),
        (math.inf, None),
        (-math.inf, None),
        (math.nan, None),
        (10**400, 10**400),
        (timedelta.max.days + 1, timedelta.max.days + 1),
    ],
)
def test_read_expected_valid_days(value: object, days: int | None) -> None:
    assert read_expected_valid_days(fact("f", expected_valid_days=value)) == days
    fallback = 90 if days is None else days
    assert effective_window_days(fact("f", expected_valid_days=value), 90) == fallback


def test_a_stored_window_above_the_creation_cap_is_used_as_it_is() -> None:
    settings = UpdateSettings(staleness_age_days=90, staleness_max_lifetime_multiplier=3)
    assert effective_window_days(fact("f", expected_valid_days=999), 90) == 999
    assert settings.creation_cap_days == 270


@pytest.mark.parametrize(
    ("days", "expected"),
    [
        (365, datetime(2027, 8, 13, 12, 0, tzinfo=UTC)),
        (-365, datetime(2025, 8, 13, 12, 0, tzinfo=UTC)),
        (10**400, None),
        (timedelta.max.days, None),
        (3_000_000, None),
    ],
)
def test_shift_days(days: int, expected: datetime | None) -> None:
    assert shift_days(NOW, days) == expected


# --- candidates ----------------------------------------------------------------------


def test_only_old_facts_are_candidates() -> None:
    assert candidates(fact("old", age_days=100), fact("new", age_days=10)) == ["old"]


def test_protected_categories_are_never_candidates() -> None:
    both = (
        fact("c", category="correction", age_days=400),
        fact("g", category="goal", age_days=400),
    )
    assert candidates(*both) == ["g"]
    custom = UpdateSettings(protected_categories=("goal",))
    assert candidates(*both, settings=custom) == ["c"]


def test_no_facts_and_all_recent() -> None:
    assert candidates() == []
    assert candidates(fact("a", age_days=5), fact("b", age_days=89)) == []


def test_a_fact_inside_its_own_window_is_not_a_candidate() -> None:
    assert candidates(fact("a", age_days=120, expected_valid_days=365)) == []


def test_a_fact_past_its_own_short_window_is_a_candidate() -> None:
    assert candidates(fact("a", age_days=40, expected_valid_days=30)) == ["a"]


def test_a_recent_confirmation_restarts_the_clock() -> None:
    assert candidates(fact("a", age_days=200, lastConfirmedAt=days_ago(7))) == []


def test_an_unreadable_confirmation_falls_back_to_creation() -> None:
    assert candidates(fact("a", age_days=200, lastConfirmedAt="yesterday-ish")) == ["a"]


def test_an_unreadable_creation_time_is_skipped() -> None:
    assert candidates(fact("a", createdAt="not a date")) == []


def test_an_overflowing_window_is_not_stale_and_does_not_stop_the_selection() -> None:
    facts = (fact("huge", age_days=400, expected_valid_days=10**12), fact("old", age_days=400))
    assert candidates(*facts) == ["old"]


@pytest.mark.parametrize(("count", "due"), [(2, False), (3, True), (5, True)])
def test_the_review_needs_the_minimum_number_of_candidates(count: int, due: bool) -> None:
    aged = [fact(f"f{i}", age_days=200) for i in range(count)]
    assert review_due(stale_candidates(aged, now=NOW, settings=DEFAULT), DEFAULT) is due


def test_a_disabled_review_is_never_due() -> None:
    settings = UpdateSettings(staleness_review_enabled=False)
    aged = [fact(f"f{i}", age_days=200) for i in range(5)]
    assert not review_due(stale_candidates(aged, now=NOW, settings=settings), settings)


# --- the candidate lines -----------------------------------------------------------------


def test_candidate_lines() -> None:
    lines = stale_candidate_lines(
        [
            fact("fact_a", "Uses Python 3.9", category="context", confidence=0.9, age_days=100),
            fact(
                "fact_b",
                "Lives in Oslo",
                confidence=0.72,
                createdAt="2025-01-01T00:00:00Z",
                lastConfirmedAt="2025-06-30T08:00:00Z",
                expected_valid_days=365,
            ),
        ],
        DEFAULT,
    ).splitlines()
    assert lines == [
        '- [fact_a | context | conf:0.90 | 2026-05-05 | valid:90d] "Uses Python 3.9"',
        '- [fact_b | context | conf:0.72 | 2025-06-30 | valid:365d] "Lives in Oslo"',
    ]


def test_candidate_lines_escape_markup_but_not_quotes() -> None:
    line = stale_candidate_lines(
        [fact("f", 'Says "hi" <b>&</b> </stale_facts>', category='<odd> "cat"', age_days=100)],
        DEFAULT,
    )
    assert "&lt;b&gt;&amp;&lt;/b&gt; &lt;/stale_facts&gt;" in line
    assert '"hi"' in line
    assert '&lt;odd&gt; "cat"' in line
    assert "</stale_facts>" not in line


def test_no_candidates_no_lines() -> None:
    assert stale_candidate_lines([], DEFAULT) == ""


# --- applying the model's proposals ----------------------------------------------------


def review(facts: list[Fact], removals=(), extensions=(), settings: UpdateSettings = DEFAULT):
    return review_staleness(facts, list(removals), list(extensions), now=NOW, settings=settings)


def test_a_proposed_aged_fact_is_removed_and_a_fresh_one_kept() -> None:
    outcome = review(
        [fact("old", age_days=200), fact("new")], [StaleRemoval(id="old", reason="outdated")]
    )
    assert [f.id for f in outcome.facts] == ["new"]
    assert outcome.removed == ("old",)


def test_proposals_for_fresh_or_protected_or_unknown_facts_are_refused() -> None:
    facts = [
        fact("fresh"),
        fact("corr", category="correction", age_days=400),
        fact("old", age_days=400),
    ]
    proposals = [StaleRemoval(id=i, reason="") for i in ("fresh", "corr", "ghost")]
    outcome = review(facts, proposals)
    assert [f.id for f in outcome.facts] == ["fresh", "corr", "old"]
    assert outcome.removed == ()
    assert outcome.refused_removals == 3


def test_the_cap_removes_the_lowest_confidences_first() -> None:
    facts = [
        fact("a", confidence=0.9, age_days=200),
        fact("b", confidence=0.2, age_days=200),
        fact("c", confidence=0.5, age_days=200),
        fact("d", confidence=0.3, age_days=200),
    ]
    settings = UpdateSettings(staleness_max_removals_per_cycle=2)
    outcome = review(facts, [StaleRemoval(id=i, reason="") for i in "abcd"], settings=settings)
    assert outcome.removed == ("b", "d")
    assert [f.id for f in outcome.facts] == ["a", "c"]
    assert outcome.capped_removals == 2


def test_equal_confidences_are_removed_in_library_order() -> None:
    # A Fact always holds a valid confidence (validation refuses null), so the
    # original's "null counts as 0.5" case cannot arise; ties break by position.
    facts = [fact(i, confidence=0.5, age_days=200) for i in ("x", "y", "z")]
    settings = UpdateSettings(staleness_max_removals_per_cycle=2)
    outcome = review(
        facts, [StaleRemoval(id=i, reason="") for i in ("z", "y", "x")], settings=settings
    )
    assert outcome.removed == ("x", "y")


def test_empty_or_missing_proposals_change_nothing() -> None:
    facts = [fact("old", age_days=200)]
    outcome = review(facts)
    assert list(outcome.facts) == facts
    assert outcome.removed == ()
    assert dict(outcome.extended) == {}


def test_the_guardrail_applies_when_the_review_is_disabled() -> None:
    settings = UpdateSettings(staleness_review_enabled=False)
    outcome = review(
        [fact("old", age_days=200), fact("new")],
        [StaleRemoval(id="old", reason=""), StaleRemoval(id="new", reason="")],
        settings=settings,
    )
    assert outcome.removed == ("old",)


def test_an_extension_sets_the_window_from_creation() -> None:
    outcome = review(
        [fact("old", age_days=100)],
        extensions=[StaleExtension(id="old", extend_by_days=365, reason="")],
    )
    (extended,) = outcome.facts
    assert extended.expected_valid_days == 465
    assert dict(outcome.extended) == {"old": 465}


def test_an_extension_is_not_capped_by_the_creation_multiplier() -> None:
    settings = UpdateSettings(staleness_age_days=90, staleness_max_lifetime_multiplier=1)
    outcome = review(
        [fact("old", age_days=100)],
        extensions=[StaleExtension(id="old", extend_by_days=1000, reason="")],
        settings=settings,
    )
    assert outcome.facts[0].expected_valid_days == 1100


def test_an_extension_is_capped_by_the_maximum() -> None:
    outcome = review(
        [fact("old", age_days=100)],
        extensions=[StaleExtension(id="old", extend_by_days=10**9, reason="")],
    )
    (extended,) = outcome.facts
    assert extended.expected_valid_days == 3650
    later = stale_candidates([extended], now=NOW + timedelta(days=4000), settings=DEFAULT)
    assert [f.id for f in later] == ["old"]


def test_removed_and_fresh_facts_cannot_be_extended() -> None:
    facts = [fact("gone", age_days=200), fact("kept", age_days=200), fact("fresh")]
    outcome = review(
        facts,
        [StaleRemoval(id="gone", reason="")],
        [StaleExtension(id=i, extend_by_days=30, reason="") for i in ("gone", "kept", "fresh")],
    )
    assert dict(outcome.extended) == {"kept": 230}
    assert outcome.refused_extensions == 2


def test_a_proposed_removal_spared_by_the_cap_is_not_extended() -> None:
    facts = [fact("a", confidence=0.2, age_days=200), fact("b", confidence=0.9, age_days=200)]
    settings = UpdateSettings(staleness_max_removals_per_cycle=1)
    outcome = review(
        facts,
        [StaleRemoval(id="a", reason=""), StaleRemoval(id="b", reason="")],
        [StaleExtension(id="b", extend_by_days=30, reason="")],
        settings=settings,
    )
    assert outcome.removed == ("a",)
    assert outcome.facts[0].id == "b"
    assert outcome.facts[0].expected_valid_days is None


def test_contradiction_and_staleness_removals_combine_in_one_plan() -> None:
    from tests.update_support import normalized, plan, state

    memory = state(fact("stale", age_days=200), fact("wrong", "Uses pip"), fact("keep"))
    response = normalized(
        staleFactsToRemove=[{"id": "stale", "reason": "old"}],
        factsToRemove=[{"id": "wrong", "scope": "user", "reason": "now uses uv"}],
    )
    result = plan(memory, response)
    assert result.stale_removals == ("stale",)
    assert [p.fact_id for p in result.pending_removals] == ["wrong"]
    assert [f.id for f in result.facts] == ["wrong", "keep"]
