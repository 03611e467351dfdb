"""The policy run for people: the retention table in Markdown and its chart.

Drawn from the run's own files (``summary.json`` for the numbers, ``run.json``
for provenance), so a report says exactly what ``run-policy`` printed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

from deermem.eval.policy_run.retention import RetentionRow, RetentionTable, format_markdown
from deermem.eval.report.png import POLICY_COLOURS, chart_reference, figure_png

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["CHART_FILE", "render_chart", "render_markdown"]

CHART_FILE: Final = "retention.png"
_MARKERS: Final = {"confidence": "o", "hybrid-v1": "s"}


def render_markdown(table: RetentionTable, run: Mapping[str, object], *, chart: str | None) -> str:
    """The report text: provenance, the retention table, a summary line per cap, the chart.

    Args:
        chart: the chart's file name, or ``None`` when no chart was drawn.
    """
    dataset = run.get("dataset")
    dataset = dataset if isinstance(dataset, Mapping) else {}
    git = run.get("git")
    if isinstance(git, Mapping):
        code = f"git `{git.get('head')}`" + (" (uncommitted changes)" if git.get("dirty") else "")
    else:
        code = "not a git checkout"
    lines = [
        "# Capacity eviction: support facts retained",
        "",
        "| run | |",
        "|---|---|",
        f"| protocol | `{table.protocol_id}` |",
        f"| dataset | `{dataset.get('repository')}` at `{dataset.get('revision')}`, "
        f"`{dataset.get('filename')}` |",
        f"| dataset SHA-256 | `{dataset.get('sha256')}` |",
        f"| evaluation clock | {run.get('evaluation_time')} |",
        f"| created | {run.get('created_at')} ({code}) |",
        "",
        "Each case puts one support fact — the evidence that answers its question — among nine "
        "distractors and runs the production capacity gate at each cap under both policies. "
        "A cell counts the cases whose support fact survived.",
        "",
        format_markdown(table).rstrip("\n"),
        "",
    ]
    for capacity in table.capacities:
        kept = ", ".join(
            "{} {}/{}".format(policy, *table.overall(capacity, policy)) for policy in table.policies
        )
        lines.append(f"- cap {capacity}: {kept}")
    lines += ["", chart_reference("Support facts retained by cap and policy", chart), ""]
    return "\n".join(lines)


def render_chart(table: RetentionTable) -> bytes:
    """A PNG: one panel per suite and overall, share retained by cap, one line per policy."""
    panels = _panels(table)

    def draw(figure: Figure) -> None:
        axes = figure.subplots(1, len(panels), sharey=True, squeeze=False)[0]
        for axis, row in zip(axes, panels, strict=True):
            _draw_panel(axis, table, row)
        axes[0].set_ylabel("support fact retained (share of cases)")
        axes[-1].legend(loc="lower right", fontsize="small")
        figure.suptitle(f"Support facts retained by cap ({table.protocol_id})", fontsize="medium")

    return figure_png(3.2 * len(panels), 3.4, draw)


def _panels(table: RetentionTable) -> list[RetentionRow]:
    """Each suite's total (or its only scenario), then overall."""
    panels: list[RetentionRow] = []
    suites = [row.suite for row in table.rows]
    for row in table.rows:
        if row.is_total or suites.count(row.suite) == 1:
            panels.append(row)
    return panels


def _draw_panel(axis: Axes, table: RetentionTable, row: RetentionRow) -> None:
    capacities = list(table.capacities)
    for policy in table.policies:
        counts = [row.retained[(capacity, policy)] for capacity in capacities]
        shares = [count / row.cases for count in counts]
        axis.plot(
            capacities,
            shares,
            marker=_MARKERS.get(policy, "^"),
            color=POLICY_COLOURS.get(policy),
            label=policy,
        )
        for capacity, share, count in zip(capacities, shares, counts, strict=True):
            axis.annotate(
                f"{count}/{row.cases}",
                (capacity, share),
                textcoords="offset points",
                xytext=(0, 6 if policy != "confidence" else -13),
                ha="center",
                fontsize="x-small",
                color=POLICY_COLOURS.get(policy),
            )
    title = row.label if row.is_total else f"{row.suite}: {row.scenario}"
    axis.set_title(f"{title} ({row.cases} cases)", fontsize="small")
    axis.set_xticks(capacities)
    axis.set_xlim(capacities[0] - 0.8, capacities[-1] + 0.8)
    axis.set_xlabel("cap (facts kept of 10)")
    axis.set_ylim(-0.15, 1.12)
    axis.grid(alpha=0.3)
