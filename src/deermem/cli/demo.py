"""``deermem demo``: the seed's two situations through a real memory, side by side."""

from __future__ import annotations

import tempfile
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich import box
from rich.markup import escape
from rich.table import Table

from deermem.cli._output import JSON_OPTION, out_console, print_json
from deermem.cli._render import components_text, eviction_sentence, margin_text
from deermem.model import format_timestamp, parse_timestamp
from deermem.scenarios import DEMO_CAPACITY, DEMO_CLOCK

if TYPE_CHECKING:
    from deermem.memory.demo import ScenarioRun

__all__ = ["demo"]


def demo(
    root: Path | None = typer.Option(
        None,
        "--root",
        file_okay=False,
        help="Keep the demo's store here (an empty or new directory) to explore it afterwards "
        "[default: a temporary directory].",
    ),
    now: str = typer.Option(
        format_timestamp(DEMO_CLOCK),
        "--now",
        help="The clock the memory uses (ISO 8601). Fixed by default, so every run is the same.",
    ),
    as_json: bool = JSON_OPTION,
) -> None:
    """Show what each capacity policy forgets in the seed's two situations, and why.

    Each situation is a library one fact over a cap of 10, imported into a
    real store: a 0.9 fact nobody mentioned for 180 days against a 0.7 fact
    confirmed last week, and one 0.7 correction among ten 0.9 preferences.
    Under `confidence` (the default) the fact the user cares about is
    evicted, under `hybrid-v1` it stays; shadow mode records the
    disagreement. Each eviction leaves a receipt and an archive entry; the
    demo asks `why`, switches to `hybrid-v1` and restores the fact.

    Example: `deermem demo --root /tmp/deermem-demo`, then
    `deermem --root /tmp/deermem-demo --user demo --agent stale-vs-confirmed-confidence audit`
    """
    from deermem.config import MemoryConfig, render_store_settings
    from deermem.memory.demo import DEMO_USER, MODES, run_demo
    from deermem.store.markdown.files import write_store_settings

    clock = parse_timestamp(now)
    if clock is None:
        raise typer.BadParameter(f"not an ISO 8601 timestamp: {now!r}", param_hint="--now")
    if root is not None and root.is_dir() and any(root.iterdir()):
        # The demo writes a user and receipts of its own: never into a store in use.
        raise typer.BadParameter(
            f"{root} is not empty; choose an empty or new directory", param_hint="--root"
        )
    if root is None:
        with tempfile.TemporaryDirectory(prefix="deermem-demo-") as temporary:
            runs = run_demo(Path(temporary), clock)
    else:
        runs = run_demo(root, clock)
        # The store remembers the cap its scenarios ran at, so `why` explains
        # them against it.
        write_store_settings(root, render_store_settings(MemoryConfig(max_facts=DEMO_CAPACITY)))
    if as_json:
        print_json({"now": format_timestamp(clock), "scenarios": [_as_json(r) for r in runs]})
        return
    for run in runs:
        _render(run, clock)
    if root is not None:
        out_console.print(
            f"The store is in {escape(str(root))}; explore it with "
            f"`deermem --root {escape(str(root))} --user {DEMO_USER} --agent "
            f"{runs[0].modes[MODES[0]].agent} audit` (or `facts list`, `archive list`, `why ID`)."
        )


def _render(run: ScenarioRun, now: datetime) -> None:
    from deermem.memory.demo import MODES
    from deermem.policy import elapsed_days

    scenario = run.scenario
    out_console.rule(f"[bold]{escape(scenario.title)}[/]")
    table = Table(box=box.SIMPLE_HEAD, collapse_padding=True, pad_edge=False)
    for column in ("fact", "conf.", "confirmed", "hybrid", *MODES):
        table.add_column(column, justify="left" if column == "fact" else "right", no_wrap=True)
    for fact in scenario.facts:
        fact_id = str(fact["id"])
        confirmed = parse_timestamp(fact.get("lastConfirmedAt"))
        age = "never" if confirmed is None else f"{elapsed_days(now, confirmed):.0f} d ago"
        verdicts = [
            "[red]evicted[/]" if fact_id in run.modes[mode].evicted else "kept" for mode in MODES
        ]
        table.add_row(
            f"[bold]{fact_id}[/]" if fact_id == scenario.precious_id else fact_id,
            f"{float(fact['confidence']):.2f}",  # type: ignore[arg-type]
            age,
            f"{run.hybrid_scores[fact_id]:.4f}",
            *verdicts,
        )
    out_console.print(table)
    for mode in MODES:
        for receipt in run.modes[mode].receipts:
            for line in receipt.evicted:
                parts = components_text(line.components)
                out_console.print(
                    f"  {mode}: evicted {line.fact_id} — rank {line.rank} of {receipt.occupancy}, "
                    f"score {line.score:.4f} ({parts}){margin_text(line.margin)}"
                    f" [dim]({receipt.receipt_id})[/]"
                )
                if receipt.shadow is not None:
                    shadow = receipt.shadow
                    verdict = "disagrees with" if shadow.disagrees else "agrees with"
                    out_console.print(
                        f"  {mode}: {shadow.policy} would evict {', '.join(shadow.would_evict)} "
                        f"and {verdict} confidence"
                    )
            if receipt.reserved_correction_slots:
                slots = receipt.reserved_correction_slots
                out_console.print(f"  {mode}: {slots} slot(s) reserved for corrections")
    last, entry = run.why.last_eviction
    out_console.print(
        f"  why {scenario.precious_id} (confidence): {run.why.status}; "
        f"{eviction_sentence(last, entry)}"
    )
    restore = run.restore
    if restore.restored:
        others = ", ".join(restore.evicted) or "nothing"
        out_console.print(
            f"  restore {scenario.precious_id} after switching to hybrid-v1: back in the "
            f"library; the gate evicted {others} to the archive instead"
        )
    else:
        out_console.print(f"  restore {scenario.precious_id}: evicted again")
    out_console.print()


def _as_json(run: ScenarioRun) -> dict[str, object]:
    from deermem.memory.demo import MODES

    scenario = run.scenario
    return {
        "name": scenario.name,
        "title": scenario.title,
        "maxFacts": scenario.max_facts,
        "preciousFactId": scenario.precious_id,
        "policies": {
            mode: {
                "agent": run.modes[mode].agent,
                "keptFactIds": sorted(fact.id for fact in run.modes[mode].kept),
                "evictedFactIds": list(run.modes[mode].evicted),
                "preciousKept": run.precious_kept(mode),
                "receipts": [receipt.to_dict() for receipt in run.modes[mode].receipts],
            }
            for mode in MODES
        },
        "shadow": next(
            (r.shadow.to_dict() for r in run.modes["shadow"].receipts if r.shadow is not None),
            None,
        ),
        "why": run.why.to_dict() | {"fact": None},
        "restore": run.restore.to_dict(),
    }
