"""The seed's two situations as data, for the demo, the docs and the tests.

Both are libraries one fact over a cap of 10 in which the ``confidence``
policy evicts the fact a user would most want kept:

* **stale-vs-confirmed** — a 0.9 preference nobody has mentioned for 180
  days against a 0.7 preference the user confirmed a week ago.
* **correction-vs-preferences** — one 0.7 correction ("don't use pip, use
  uv") among ten 0.9 preferences.

Timestamps are relative to an injected clock, so the situations are the same
on every run and every machine.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

from deermem.model import format_timestamp

__all__ = ["DEMO_CLOCK", "Scenario", "seed_scenarios"]

# The evaluation's fixed clock; any fixed value would do.
DEMO_CLOCK: Final = datetime(2026, 8, 13, tzinfo=UTC)
DEMO_CAPACITY: Final = 10


@dataclass(frozen=True, slots=True)
class Scenario:
    """A named library over its cap, and the fact the user cares about."""

    name: str
    title: str
    max_facts: int
    facts: tuple[dict[str, object], ...]
    precious_id: str
    """The fact the user would want kept; ``confidence`` evicts it."""


def seed_scenarios(now: datetime = DEMO_CLOCK) -> tuple[Scenario, Scenario]:
    """Build both situations with timestamps relative to ``now``."""

    def ago(days: float) -> str:
        return format_timestamp(now - timedelta(days=days))

    # Nine well-established facts that outrank both contenders under either policy.
    background = tuple(
        {
            "id": f"fact_bg{index:02d}",
            "content": text,
            "category": category,
            "confidence": 0.95,
            "createdAt": ago(20 + index),
        }
        for index, (category, text) in enumerate(
            [
                ("identity", "The user is a backend engineer on the payments team."),
                ("context", "The main service is written in Python 3.11."),
                ("preference", "The user reads diffs in unified format."),
                ("constraint", "Production deploys happen only on weekdays."),
                ("goal", "The user is migrating the billing jobs to a queue."),
                ("preference", "The user wants answers in English."),
                ("decision", "The team chose PostgreSQL over MySQL in 2025."),
                ("behavior", "The user runs the tests before every commit."),
                ("context", "CI runs on two-core machines."),
            ],
            start=1,
        )
    )
    stale_vs_confirmed = Scenario(
        name="stale-vs-confirmed",
        title="A 0.9 fact nobody mentioned for 180 days vs a 0.7 fact confirmed last week",
        max_facts=DEMO_CAPACITY,
        facts=(
            *background,
            {
                "id": "fact_stale90",
                "content": "The user prefers tabs over spaces.",
                "category": "preference",
                "confidence": 0.9,
                "createdAt": ago(180),
            },
            {
                "id": "fact_confirm",
                "content": "The user wants short commit messages in the imperative mood.",
                "category": "preference",
                "confidence": 0.7,
                "createdAt": ago(60),
                "lastConfirmedAt": ago(7),
                "confirmationCount": 1,
            },
        ),
        precious_id="fact_confirm",
    )
    preferences = tuple(
        {
            "id": f"fact_pref{index:02d}",
            "content": text,
            "category": "preference",
            "confidence": 0.9,
            "createdAt": ago(10 + index),
        }
        for index, text in enumerate(
            [
                "The user likes type hints everywhere.",
                "The user prefers pytest over unittest.",
                "The user prefers dark themes in screenshots.",
                "The user likes small pull requests.",
                "The user prefers ruff for linting.",
                "The user wants examples before theory.",
                "The user prefers pathlib over os.path.",
                "The user likes tables for comparisons.",
                "The user prefers f-strings.",
                "The user wants error messages that name the file.",
            ],
            start=1,
        )
    )
    correction_vs_preferences = Scenario(
        name="correction-vs-preferences",
        title="One 0.7 correction among ten 0.9 preferences",
        max_facts=DEMO_CAPACITY,
        facts=(
            {
                "id": "fact_correct",
                "content": "Don't use pip in this project; use uv.",
                "category": "correction",
                "confidence": 0.7,
                "createdAt": ago(30),
                "sourceError": "The assistant suggested 'pip install'.",
            },
            *preferences,
        ),
        precious_id="fact_correct",
    )
    return stale_vs_confirmed, correction_vs_preferences
