"""``deermem eval report``: a run directory's results as Markdown and charts, for people.

A directory may hold a policy run (``summary.json``, ``run.json``), graded QA
results (``qa.rows.jsonl``, ``qa.summary.json``, ``qa.stats.json`` and
usually ``qa_run.json``), or both; the report renders what is there.

The retention part is drawn from the run's own files
(:mod:`deermem.eval.report.retention`). The QA part is drawn only from
results that verify: the summary and statistics are re-derived from the rows
and must match the files byte for byte (:mod:`deermem.eval.verify.check`),
so a report cannot show a number its rows do not support
(:mod:`deermem.eval.report.qa`).

It is deterministic: the Markdown holds no time but the runs', and the charts
are drawn reproducibly (:mod:`deermem.eval.report.png`), so two reports
of one directory are byte-identical. Without matplotlib (the ``eval`` extra)
the Markdown is written alone and says how to get the charts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from deermem.eval.errors import EvaluationError
from deermem.eval.grading.statistics import DEFAULT_PARAMETERS, StatisticsParameters
from deermem.eval.policy_run.retention import retention_table
from deermem.eval.policy_run.run import RUN_FILE, SUMMARY_FILE
from deermem.eval.qa.results import ROWS_FILE as QA_ROWS_FILE
from deermem.eval.qa.results import RUN_FILE as QA_RUN_FILE
from deermem.eval.qa.results import STATS_FILE, QaReport
from deermem.eval.report.qa import QA_CHART_FILE, render_qa_chart, render_qa_markdown
from deermem.eval.report.retention import CHART_FILE, render_chart, render_markdown
from deermem.eval.result_files import write_new_files
from deermem.eval.verify.check import verify_results

__all__ = ["REPORT_FILE", "write_report"]

REPORT_FILE: Final = "report.md"


def write_report(
    run_dir: Path, *, output_dir: Path | None = None, charts: bool = True
) -> tuple[Path, ...]:
    """Write ``report.md`` and, with ``charts``, the charts for what ``run_dir`` holds.

    Args:
        run_dir: a run-policy directory, a graded run-qa directory, or both.
        output_dir: where to write (default: ``run_dir``).
        charts: draw the PNG charts (they need matplotlib); without them the
            Markdown says how to get them.

    Returns:
        The files written: ``report.md`` first, then ``retention.png`` (policy
        run) and ``qa-accuracy.png`` (graded QA results), as present and drawn.

    Raises:
        EvaluationError: the directory holds neither a policy run nor graded
            QA results, or what it holds cannot be read or does not verify.
        ResultsExistError: a report is already there (nothing is overwritten).
        ModuleNotFoundError: ``charts`` is true but matplotlib is not installed
            (:func:`~deermem.eval.report.png.missing_chart_module` tells
            beforehand).
    """
    has_policy = (run_dir / SUMMARY_FILE).exists() or (run_dir / RUN_FILE).exists()
    has_qa = (run_dir / QA_ROWS_FILE).exists()
    if not (has_policy or has_qa):
        raise EvaluationError(
            f"{run_dir}: holds neither a policy run ({SUMMARY_FILE}, {RUN_FILE}) nor graded "
            f"QA results ({QA_ROWS_FILE} ...); run run-policy or grade-qa first"
        )
    target = output_dir or run_dir
    sections: list[str] = []
    drawn: list[tuple[Path, bytes]] = []
    if has_policy:
        summary = _read_json(run_dir / SUMMARY_FILE)
        run = _read_json(run_dir / RUN_FILE)
        table = retention_table(summary, file=str(run_dir / SUMMARY_FILE))
        sections.append(render_markdown(table, run, chart=CHART_FILE if charts else None))
        if charts:
            drawn.append((target / CHART_FILE, render_chart(table)))
    if has_qa:
        report, marker = _verified_qa(run_dir)
        heading = "" if has_policy else "# Capacity eviction: answers graded\n\n"
        verified = "summary and statistics re-derived from the rows match the files byte for byte"
        chart = QA_CHART_FILE if charts else None
        sections.append(
            heading + render_qa_markdown(report, marker, chart=chart, verified=verified)
        )
        if charts:
            drawn.append((target / QA_CHART_FILE, render_qa_chart(report)))
    markdown = "\n".join(sections)
    return write_new_files([(target / REPORT_FILE, markdown.encode()), *drawn])


def _verified_qa(run_dir: Path) -> tuple[QaReport, Mapping[str, object] | None]:
    """The QA report re-derived from the rows, if the directory's files verify."""
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
    try:
        suites = json.loads(path.read_text(encoding="utf-8"))["suites"]
        bootstrap = next(iter(suites.values()))["bootstrap"]
        return StatisticsParameters(
            seed=bootstrap["seed"], iterations=bootstrap["iterations"], alpha=bootstrap["alpha"]
        )
    except (OSError, ValueError, KeyError, TypeError, StopIteration, AttributeError):
        return None  # verification reports what is wrong with the file


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
