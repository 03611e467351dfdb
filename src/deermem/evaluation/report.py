"""``deermem eval report``: a policy run as Markdown and a chart, for people.

The report is drawn from the run's own files (``summary.json`` for the
numbers, ``run.json`` for provenance), so it can be made later, elsewhere,
and says exactly what the run printed. It is deterministic: the Markdown
holds no time but the run's, and the PNG is rendered with matplotlib's
default style, its fonts bundled with matplotlib, and no software or time
stamp in the file, so two reports of one run are byte-identical.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Final

from deermem._exceptions import EvaluationError
from deermem.evaluation._io import write_new_files
from deermem.evaluation.eviction import RUN_FILE, SUMMARY_FILE
from deermem.evaluation.retention import (
    RetentionRow,
    RetentionTable,
    format_markdown,
    retention_table,
)

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["CHART_FILE", "REPORT_FILE", "render_chart", "render_markdown", "write_report"]

REPORT_FILE: Final = "report.md"
CHART_FILE: Final = "retention.png"
_COLOURS: Final = {"confidence": "#7f7f7f", "hybrid-v1": "#1f6fb4"}
_MARKERS: Final = {"confidence": "o", "hybrid-v1": "s"}


def write_report(run_dir: Path, *, output_dir: Path | None = None) -> tuple[Path, Path]:
    """Write ``report.md`` and ``retention.png`` for a run-policy directory.

    Raises:
        EvaluationError: the directory does not hold a readable policy run.
        ResultsExistError: a report is already there (nothing is overwritten).
    """
    summary = _read_json(run_dir / SUMMARY_FILE)
    run = _read_json(run_dir / RUN_FILE)
    table = retention_table(summary, file=str(run_dir / SUMMARY_FILE))
    target = output_dir or run_dir
    markdown_path, chart_path = target / REPORT_FILE, target / CHART_FILE
    write_new_files(
        [
            (markdown_path, render_markdown(table, run, chart=CHART_FILE).encode()),
            (chart_path, render_chart(table)),
        ]
    )
    return markdown_path, chart_path


def render_markdown(table: RetentionTable, run: Mapping[str, object], *, chart: str) -> str:
    """The report text: provenance, the retention table, a summary line per cap, the chart."""
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
    lines += ["", f"![Support facts retained by cap and policy]({chart})", ""]
    return "\n".join(lines)


def render_chart(table: RetentionTable) -> bytes:
    """A PNG: one panel per suite and overall, share retained by cap, one line per policy."""
    import matplotlib.style  # deferred: matplotlib costs about a second to import
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    panels = _panels(table)
    with matplotlib.style.context("default"):
        figure = Figure(figsize=(3.2 * len(panels), 3.4), dpi=100, layout="constrained")
        FigureCanvasAgg(figure)
        axes = figure.subplots(1, len(panels), sharey=True, squeeze=False)[0]
        for axis, row in zip(axes, panels, strict=True):
            _draw_panel(axis, table, row)
        axes[0].set_ylabel("support fact retained (share of cases)")
        axes[-1].legend(loc="lower right", fontsize="small")
        figure.suptitle(f"Support facts retained by cap ({table.protocol_id})", fontsize="medium")
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()


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
            color=_COLOURS.get(policy),
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
                color=_COLOURS.get(policy),
            )
    title = row.label if row.is_total else f"{row.suite}: {row.scenario}"
    axis.set_title(f"{title} ({row.cases} cases)", fontsize="small")
    axis.set_xticks(capacities)
    axis.set_xlim(capacities[0] - 0.8, capacities[-1] + 0.8)
    axis.set_xlabel("cap (facts kept of 10)")
    axis.set_ylim(-0.15, 1.12)
    axis.grid(alpha=0.3)


def _read_json(path: Path) -> Mapping[str, object]:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise EvaluationError(
            f"{path}: not found; is this a run-policy output directory?"
        ) from None
    except (OSError, ValueError) as error:
        raise EvaluationError(f"{path}: cannot read it as JSON: {error}") from None
    if not isinstance(document, dict):
        raise EvaluationError(f"{path}: expected a JSON object")
    return document
