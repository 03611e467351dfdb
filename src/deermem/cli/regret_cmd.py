"""``deermem regret``: how often each policy's evictions turned out to be mistakes."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich import box
from rich.markup import escape
from rich.table import Table

from deermem.cli._context import memory_of
from deermem.cli._output import JSON_OPTION, err_console, out_console, print_json

if TYPE_CHECKING:
    from deermem.library.regret import PolicyRegret, RegretReport

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
    from deermem.cli.regret_chart import render_regret_chart
    from deermem.eval import CHARTS_EXTRA, missing_chart_module
    from deermem.library.regret import parse_since
    from deermem.store.markdown.files import atomic_write

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
        atomic_write(chart, render_regret_chart(report))
    if as_json:
        print_json(report.to_dict())
    else:
        _print(report)
    if chart is not None and not as_json:
        out_console.print(f"chart written to {chart}")


def _print(report: RegretReport) -> None:
    window = f"since {report.since}" if report.since else "everything kept"
    out_console.print(f"regret {window}, until {report.until}")
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
    from deermem.store.records import REGRET_KINDS

    counts = [
        f"{kind.replace('_', ' ')} {policy.events[kind]}"
        for kind in REGRET_KINDS
        if policy.events[kind]
    ]
    return ", ".join(counts) or "none"


def _rate(policy: PolicyRegret) -> str:
    rate = policy.regret_rate
    return "-" if rate is None else f"{rate:.1%}"
