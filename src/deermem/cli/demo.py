"""``deermem demo``: the seed's two situations under both capacity policies."""

from __future__ import annotations

from datetime import datetime

import typer
from rich import box
from rich.markup import escape
from rich.table import Table

from deermem.cli._output import JSON_OPTION, out_console, print_json
from deermem.model.timestamps import format_timestamp, parse_timestamp
from deermem.policy import (
    POLICY_CONFIDENCE,
    POLICY_HYBRID_V1,
    CapacityDecision,
    CapacityPolicy,
    ShadowComparison,
    elapsed_days,
)
from deermem.scenarios import DEMO_CLOCK, Scenario, seed_scenarios

__all__ = ["demo"]

Decisions = dict[str, CapacityDecision[dict[str, object]]]


def demo(
    now: str = typer.Option(
        format_timestamp(DEMO_CLOCK),
        "--now",
        help="The clock the policies use (ISO 8601). Fixed by default, so every run is the same.",
    ),
    as_json: bool = JSON_OPTION,
) -> None:
    """Show what each capacity policy keeps in the seed's two situations.

    Each situation is a library one fact over a cap of 10: a 0.9 fact nobody
    mentioned for 180 days against a 0.7 fact confirmed last week, and one 0.7
    correction among ten 0.9 preferences. `confidence` (the default) evicts
    the fact the user cares about; `hybrid-v1` keeps it. Shadow mode runs
    `hybrid-v1` beside `confidence` and records where they disagree.

    Example: `deermem demo --json`
    """
    clock = parse_timestamp(now)
    if clock is None:
        raise typer.BadParameter(f"not an ISO 8601 timestamp: {now!r}", param_hint="--now")
    results = [(scenario, *_decide(scenario, clock)) for scenario in seed_scenarios(clock)]
    if as_json:
        print_json({"now": format_timestamp(clock), "scenarios": [_as_json(*r) for r in results]})
        return
    for scenario, decisions, shadow in results:
        _render(scenario, decisions, shadow, clock)


def _decide(scenario: Scenario, now: datetime) -> tuple[Decisions, ShadowComparison | None]:
    decisions: Decisions = {}
    for policy in (POLICY_CONFIDENCE, POLICY_HYBRID_V1):
        gate = CapacityPolicy(max_facts=scenario.max_facts, policy=policy)
        decisions[policy] = gate.decide(list(scenario.facts), now=now).decision
    shadow_gate = CapacityPolicy(max_facts=scenario.max_facts, shadow_enabled=True)
    shadow = shadow_gate.decide(list(scenario.facts), now=now).shadow
    return decisions, shadow


def _render(
    scenario: Scenario, decisions: Decisions, shadow: ShadowComparison | None, now: datetime
) -> None:
    out_console.rule(f"[bold]{escape(scenario.title)}[/]")
    table = Table(box=box.SIMPLE_HEAD, collapse_padding=True, pad_edge=False)
    for column in ("fact", "category", "conf.", "confirmed", "hybrid", *decisions):
        table.add_column(column, justify="left" if column == "fact" else "right", no_wrap=True)
    hybrid_scores = decisions[POLICY_HYBRID_V1].scores
    for fact in scenario.facts:
        fact_id = str(fact["id"])
        confirmed = parse_timestamp(fact.get("lastConfirmedAt"))
        age = "never" if confirmed is None else f"{elapsed_days(now, confirmed):.0f} d ago"
        verdicts = [
            "[red]evicted[/]" if fact_id in decision.evicted_ids else "kept"
            for decision in decisions.values()
        ]
        name = f"[bold]{fact_id}[/]" if fact_id == scenario.precious_id else fact_id
        table.add_row(
            name,
            escape(str(fact["category"])),
            f"{float(fact['confidence']):.2f}",  # type: ignore[arg-type]
            age,
            f"{hybrid_scores[fact_id].score:.4f}",
            *verdicts,
        )
    out_console.print(table)
    for policy, decision in decisions.items():
        for item in decision.evicted:
            parts = ", ".join(f"{k} {v:.4f}" for k, v in item.components.items())
            margin = _margin(item.margin)
            out_console.print(
                f"  {policy}: evicted {item.fact_id} — rank {item.rank} of "
                f"{decision.occupancy}, score {item.score:.4f} ({parts}){margin}"
            )
        if decision.reserved_correction_slots:
            out_console.print(
                f"  {policy}: {decision.reserved_correction_slots} slot(s) reserved for corrections"
            )
    if shadow is not None:
        verdict = "disagrees with" if shadow.disagrees else "agrees with"
        out_console.print(
            f"  shadow mode: confidence decides; {shadow.policy} would evict "
            f"{', '.join(shadow.would_evict)} and {verdict} it"
        )
    out_console.print()


def _margin(margin: float | None) -> str:
    if margin is None:
        return ""
    if margin >= 0:
        return f", {margin:.4f} below the lowest kept"
    return f", {-margin:.4f} above the lowest kept (a reserved correction holds its slot)"


def _as_json(
    scenario: Scenario, decisions: Decisions, shadow: ShadowComparison | None
) -> dict[str, object]:
    return {
        "name": scenario.name,
        "title": scenario.title,
        "maxFacts": scenario.max_facts,
        "preciousFactId": scenario.precious_id,
        "policies": {
            policy: {
                "keptFactIds": list(decision.kept_ids),
                "preciousKept": scenario.precious_id in decision.kept_ids,
                "reservedCorrectionSlots": decision.reserved_correction_slots,
                "evicted": [
                    {
                        "factId": item.fact_id,
                        "category": item.category,
                        "score": item.score,
                        "components": dict(item.components),
                        "rank": item.rank,
                        "margin": item.margin,
                    }
                    for item in decision.evicted
                ],
            }
            for policy, decision in decisions.items()
        },
        "shadow": None if shadow is None else shadow.to_dict(),
    }
