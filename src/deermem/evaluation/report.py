"""``deermem eval report``: a run directory's results as Markdown and charts, for people.

A directory may hold a policy run (``summary.json``, ``run.json``), graded QA
results (``qa.rows.jsonl``, ``qa.summary.json``, ``qa.stats.json`` and
usually ``qa_run.json``), or both; the report renders what is there.

The retention part is drawn from the run's own files (``summary.json`` for
the numbers, ``run.json`` for provenance), so it says exactly what the run
printed. The QA part is drawn only from results that verify: the summary and
statistics are re-derived from the rows and must match the files byte for
byte (see :mod:`deermem.evaluation.verify`), so a report cannot show a number
its rows do not support.

It is deterministic: the Markdown holds no time but the runs', and the PNGs
are rendered with matplotlib's default style, its fonts bundled with
matplotlib, and no software or time stamp in the file, so two reports of one
directory are byte-identical.
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

    from deermem.evaluation.qa_report import QaReport
    from deermem.evaluation.statistics import StatisticsParameters

__all__ = ["CHART_FILE", "REPORT_FILE", "render_chart", "render_markdown", "write_report"]

REPORT_FILE: Final = "report.md"
CHART_FILE: Final = "retention.png"
_COLOURS: Final = {"confidence": "#7f7f7f", "hybrid-v1": "#1f6fb4"}
_MARKERS: Final = {"confidence": "o", "hybrid-v1": "s"}
_QA_ROWS: Final = "qa.rows.jsonl"


def write_report(run_dir: Path, *, output_dir: Path | None = None) -> tuple[Path, ...]:
    """Write ``report.md`` and the charts for what ``run_dir`` holds.

    Returns:
        The files written: ``report.md`` first, then ``retention.png`` (policy
        run) and ``qa-accuracy.png`` (graded QA results), as present.

    Raises:
        EvaluationError: the directory holds neither a policy run nor graded
            QA results, or what it holds cannot be read or does not verify.
        ResultsExistError: a report is already there (nothing is overwritten).
    """
    has_policy = (run_dir / SUMMARY_FILE).exists() or (run_dir / RUN_FILE).exists()
    has_qa = (run_dir / _QA_ROWS).exists()
    if not (has_policy or has_qa):
        raise EvaluationError(
            f"{run_dir}: holds neither a policy run ({SUMMARY_FILE}, {RUN_FILE}) nor graded "
            f"QA results ({_QA_ROWS} ...); run run-policy or grade-qa first"
        )
    target = output_dir or run_dir
    sections: list[str] = []
    charts: list[tuple[Path, bytes]] = []
    if has_policy:
        summary = _read_json(run_dir / SUMMARY_FILE)
        run = _read_json(run_dir / RUN_FILE)
        table = retention_table(summary, file=str(run_dir / SUMMARY_FILE))
        sections.append(render_markdown(table, run, chart=CHART_FILE))
        charts.append((target / CHART_FILE, render_chart(table)))
    if has_qa:
        from deermem.evaluation.qa_render import QA_CHART_FILE, render_qa_chart, render_qa_markdown

        report, marker = _verified_qa(run_dir)
        heading = "" if has_policy else "# Capacity eviction: answers graded\n\n"
        verified = "summary and statistics re-derived from the rows match the files byte for byte"
        sections.append(
            heading + render_qa_markdown(report, marker, chart=QA_CHART_FILE, verified=verified)
        )
        charts.append((target / QA_CHART_FILE, render_qa_chart(report)))
    markdown = "\n".join(sections)
    return write_new_files([(target / REPORT_FILE, markdown.encode()), *charts])


def _verified_qa(run_dir: Path) -> tuple[QaReport, Mapping[str, object] | None]:
    """The QA report re-derived from the rows, if the directory's files verify."""
    from deermem.evaluation.qa_report import RUN_FILE as QA_RUN_FILE
    from deermem.evaluation.qa_report import STATS_FILE
    from deermem.evaluation.statistics import DEFAULT_PARAMETERS
    from deermem.evaluation.verify import verify_results

    parameters = _stated_parameters(run_dir / STATS_FILE) or DEFAULT_PARAMETERS
    verification = verify_results(run_dir, parameters=parameters)
    if not verification.ok or verification.derived is None:
        count = len(verification.findings)
        raise EvaluationError(
            f"{run_dir}: the QA results do not verify ({count} problem{'s' if count != 1 else ''}"
            f"; first: {verification.findings[0]}); see deermem eval verify {run_dir}"
        )
    marker_path = run_dir / QA_RUN_FILE
    marker = _read_json(marker_path) if marker_path.exists() else None
    return verification.derived, marker


def _stated_parameters(path: Path) -> StatisticsParameters | None:
    """The bootstrap parameters a stats file states (verification then re-derives with them)."""
    from deermem.evaluation.statistics import StatisticsParameters

    try:
        suites = json.loads(path.read_text(encoding="utf-8"))["suites"]
        bootstrap = next(iter(suites.values()))["bootstrap"]
        return StatisticsParameters(
            seed=bootstrap["seed"], iterations=bootstrap["iterations"], alpha=bootstrap["alpha"]
        )
    except (OSError, ValueError, KeyError, TypeError, StopIteration, AttributeError):
        return None  # verification reports what is wrong with the file


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
