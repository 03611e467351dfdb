"""Confirmation gating (catalogue: reinforcement tests of test_memory_updater.py)."""

from __future__ import annotations

import pytest

from deermem.model import format_timestamp
from deermem.update import ReinforceEntry, UpdateSettings, confirm_facts, next_confirmation_count
from tests.update_support import NOW, fact

HYBRID = UpdateSettings(fact_eviction_policy="hybrid-v1")
SHADOW = UpdateSettings(fact_eviction_shadow_enabled=True)
PLAIN = UpdateSettings()
REINFORCED = frozenset({"reinforcement"})
OK = ReinforceEntry("fact_a", "user", "the user said this is exactly right")


@pytest.mark.parametrize(
    ("prior", "count"),
    [(3, 4), (0, 1), (1, 2), (None, 1), (True, 1), (False, 1), (-1, 1), ("3", 1), (2.0, 1)],
)
def test_next_confirmation_count(prior: object, count: int) -> None:
    assert next_confirmation_count(prior) == count


def test_a_confirmed_fact_gets_the_time_and_its_first_count() -> None:
    facts = (fact("fact_a"), fact("fact_b"))
    outcome = confirm_facts(facts, [OK], signals=REINFORCED, settings=HYBRID, now=NOW)
    confirmed, other = outcome.facts
    assert confirmed.lastConfirmedAt == format_timestamp(NOW)
    assert confirmed.lastConfirmedAt.endswith("Z")
    assert confirmed.confirmationCount == 1
    assert other is facts[1]
    assert outcome.confirmed == ("fact_a",)
    assert outcome.refused == 0
    assert facts[0].lastConfirmedAt is None  # the input is not changed


def test_a_prior_count_grows() -> None:
    facts = (fact("fact_a", confirmationCount=3, lastConfirmedAt="2026-01-01T00:00:00Z"),)
    (confirmed,) = confirm_facts(facts, [OK], signals=REINFORCED, settings=HYBRID, now=NOW).facts
    assert confirmed.confirmationCount == 4


@pytest.mark.parametrize(
    ("signals", "settings", "entry"),
    [
        (frozenset(), HYBRID, OK),  # no reinforcement detected
        (frozenset({"correction", "preference"}), HYBRID, OK),  # other signals do not count
        (REINFORCED, PLAIN, OK),  # confidence policy without shadow records nothing
        (REINFORCED, HYBRID, ReinforceEntry("fact_a", "thread", "yes")),  # not user scope
        (REINFORCED, HYBRID, ReinforceEntry("fact_a", None, "yes")),  # unlabelled
        (REINFORCED, HYBRID, ReinforceEntry("fact_a", "user", "")),  # no reason
        (REINFORCED, HYBRID, ReinforceEntry("fact_zz", "user", "yes")),  # unknown id
    ],
)
def test_nothing_is_confirmed_unless_every_condition_holds(
    signals: frozenset[str], settings: UpdateSettings, entry: ReinforceEntry
) -> None:
    facts = (fact("fact_a"),)
    outcome = confirm_facts(facts, [entry], signals=signals, settings=settings, now=NOW)
    assert outcome.facts == facts
    assert outcome.confirmed == ()
    assert outcome.refused == 1


def test_shadow_mode_records_confirmations() -> None:
    outcome = confirm_facts((fact("fact_a"),), [OK], signals=REINFORCED, settings=SHADOW, now=NOW)
    assert outcome.confirmed == ("fact_a",)


def test_an_id_listed_twice_is_confirmed_once() -> None:
    outcome = confirm_facts(
        (fact("fact_a"),), [OK, OK], signals=REINFORCED, settings=HYBRID, now=NOW
    )
    assert outcome.facts[0].confirmationCount == 1
    assert outcome.confirmed == ("fact_a",)
    assert outcome.refused == 1
