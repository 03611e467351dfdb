"""``deermem regret``: how often each policy's evictions turned out to be mistakes.

With ``--chart`` it draws each policy's regret rate and regret events over
time as a PNG, like the evaluation's charts (:mod:`deermem.eval`:
matplotlib, the optional ``eval`` extra; the default style, the bundled
fonts, no software or time stamp), so the same report draws the same bytes.
"""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich import box
from rich.table import Table

from deermem.cli.output import (
    JSON_OPTION,
    err_console,
    escape,
    memory_of,
    out_console,
    print_json,
    write_output,
)
from deermem.eval import CHARTS_EXTRA, POLICY_COLOURS, figure_png, missing_chart_module
from deermem.library.regret import PolicyRegret, RegretReport, parse_since
from deermem.store.records import REGRET_KINDS

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["regret"]


def regret(
    ctx: typer.Context,
    since: str | None = typer.Option(
        None,
        "--since",
        metavar="WHEN",
        help="Only records from WHEN on: an ISO date or time, or a span back from now (30d, 4w).",
    ),
    as_json: bool = JSON_OPTION,
    chart: Path | None = typer.Option(
        None,
        "--chart",
        dir_okay=False,
        metavar="FILE.png",
        help="Also draw both policies over time (needs the eval extra: matplotlib).",
    ),
) -> None:
    """Per policy: evictions, regret events by kind, regret rate, the most regretted facts.

    A regret event is evidence that an eviction was a mistake: the fact was
    relearned, restored, missed by a search, or — for what the shadow policy
    would have evicted — confirmed, recalled or corrected later. Ids and
    categories only; see docs/regret.md for how to read it.

    Example: `deermem --user alice regret --since 30d --json`
    """
    memory = memory_of(ctx)
    try:
        start = None if since is None else parse_since(since, memory.now())
    except ValueError as error:
        raise typer.BadParameter(str(error), param_hint="--since") from None
    if chart is not None:
        missing = missing_chart_module()
        if missing is not None:
            err_console.print(
                f"[bold red]error:[/] no chart drawn: it needs {escape(missing)} "
                f"({escape(CHARTS_EXTRA)})"
            )
            raise typer.Exit(1)
    report = memory.regret(since=start)
    if chart is not None:
        write_output(memory, chart, render_regret_chart(report))
    if as_json:
        print_json(report.to_dict())
    else:
        _print(report)
    if chart is not None and not as_json:
        out_console.print(f"chart written to {chart}")


def _print(report: RegretReport) -> None:
    window = f"from {report.since}" if report.since else "from the first record kept"
    out_console.print(f"regret {window} to {report.until}")
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for column in ("policy", "role", "evicted", "regretted", "rate"):
        text = column in ("policy", "role")
        table.add_column(column, justify="left" if text else "right", no_wrap=True)
    table.add_column("regret events", overflow="fold")
    for policy in report.policies:
        table.add_row(
            policy.policy,
            policy.role,
            str(policy.evictions),
            str(policy.regretted),
            _rate(policy),
            _events(policy),
        )
    out_console.print(table)
    for policy in report.policies:
        if policy.most_regretted:
            listed = ", ".join(
                f"{fact.fact_id} ({fact.category}, {fact.events})" for fact in policy.most_regretted
            )
            out_console.print(f"most regretted under {policy.policy} ({policy.role}): {listed}")
    uncounted = sum(report.uncounted.values())
    if uncounted:
        out_console.print(
            f"{uncounted} event(s) about facts removed by a person or an update "
            "(not counted against a policy)"
        )
    if report.audit_from and report.since and report.since < report.audit_from:
        out_console.print(
            f"note: the audit reaches back to {report.audit_from} only "
            "(raise eviction_audit_max_entries to keep more)"
        )


def _events(policy: PolicyRegret) -> str:
    counts = [
        f"{kind.replace('_', ' ')} {policy.events[kind]}"
        for kind in REGRET_KINDS
        if policy.events[kind]
    ]
    return ", ".join(counts) or "none"


def _rate(policy: PolicyRegret) -> str:
    rate = policy.regret_rate
    return "-" if rate is None else f"{rate:.1%}"


# --- the chart -------------------------------------------------------------------------


def render_regret_chart(report: RegretReport) -> bytes:
    """Two panels over time, one line per policy and role: regret rate, and regret events.

    Raises:
        ModuleNotFoundError: matplotlib is not installed
            (see :func:`~deermem.eval.missing_chart_module`).
    """

    def draw(figure: Figure) -> None:
        rate, events = figure.subplots(2, 1, sharex=True)
        days = sorted({point.date for policy in report.policies for point in policy.timeline})
        first = date.fromisoformat(days[0]).toordinal() if days else 0
        for policy in report.policies:
            _draw(rate, events, policy, first)
        if days:
            span = date.fromisoformat(days[-1]).toordinal() - first
            ticks = sorted({round(span * n / 4) for n in range(5)})
            labels = [date.fromordinal(first + tick).isoformat() for tick in ticks]
            events.set_xticks(ticks, labels, fontsize="small")
            rate.legend(loc="upper left", fontsize="small")
        rate.set_ylabel("regretted / evicted")
        rate.set_ylim(0.0, 1.0)
        events.set_ylabel("regret events (running total)")
        events.set_xlabel("day (UTC)")
        window = f"since {report.since[:10]}" if report.since else "everything kept"
        figure.suptitle(
            f"Regret by policy ({window}, until {report.until[:10]})", fontsize="medium"
        )

    return figure_png(8.0, 5.2, draw)


def _draw(rate: Axes, events: Axes, policy: PolicyRegret, first: int) -> None:
    points = policy.timeline
    if not points:
        return
    days = [date.fromisoformat(p.date).toordinal() - first for p in points]
    label = f"{policy.policy} ({policy.role})"
    colour = POLICY_COLOURS.get(policy.policy)
    line = "-" if policy.role == "active" else "--"
    marker = "o" if len(points) < 40 else ""
    rates = [p.regretted / p.evictions if p.evictions else 0.0 for p in points]
    for axis, values in ((rate, rates), (events, [float(p.events) for p in points])):
        axis.plot(
            days, values, label=label, color=colour, linestyle=line, marker=marker, markersize=3
        )
