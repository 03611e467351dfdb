"""``deermem eval report``: a run's results as Markdown and charts, for people.

A directory may hold a policy run (``summary.json``, ``run.json``), graded QA
results (``qa.rows.jsonl``, ``qa.summary.json``, ``qa.stats.json`` and
usually ``qa_run.json``), or both; :func:`write_report` renders what is there.

The retention part is drawn from the run's own files, so a report says
exactly what ``run-policy`` printed. The QA part is drawn only from results
that verify: the summary and statistics are re-derived from the rows and must
match the files byte for byte (:func:`deermem.eval.verify.verify_results`), so
a report cannot show a number its rows do not support — accuracy per suite
and scenario, the 2×2 table of each suite, McNemar's exact p and the paired
bootstrap interval.

It is deterministic: the Markdown holds no time but the runs', and the charts
are drawn reproducibly (:func:`deermem.eval.figure_png`), so two reports
of one directory are byte-identical. Without matplotlib (the ``eval`` extra)
the Markdown is written alone and says how to get the charts.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final, NamedTuple

from deermem.eval import CHARTS_EXTRA, POLICY_COLOURS, figure_png, policy_run
from deermem.eval.errors import EvaluationError
from deermem.eval.files import interrupted_set, parse_json, write_new_files
from deermem.eval.grading import DEFAULT_PARAMETERS, PairedComparison, StatisticsParameters
from deermem.eval.policy_run import (
    RetentionRow,
    RetentionTable,
    format_markdown,
    is_total_line,
    line_label,
    retention_table,
)
from deermem.eval.protocol import scenario_rank
from deermem.eval.rows import (
    MARKER_FILE,
    ROWS_FILE,
    STATS_FILE,
    SUITE_OF_SOURCE,
    SUITES,
    QaReport,
    report_paths,
)
from deermem.eval.verify import protocol_parameters, verify_results
from deermem.policy import POLICIES
from deermem.store.markdown.files import read_regular_file

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "write_report",
]

# --- a chart in Markdown --------------------------------------------------------------------------


def chart_reference(description: str, file: str | None) -> str:
    """The Markdown line that shows a chart, or says how to get it when none was drawn."""
    if file is None:
        return f"*{description}: no chart; drawing it needs matplotlib (`{CHARTS_EXTRA}`).*"
    return f"![{description}]({file})"


# --- the policy run -------------------------------------------------------------------------------

RETENTION_CHART_FILE: Final = "retention.png"
_MARKERS: Final = {"confidence": "o", "hybrid-v1": "s"}


def render_retention_markdown(
    table: RetentionTable, run: Mapping[str, object], *, chart: str | None
) -> str:
    """The report text: provenance, the retention table, a summary line per cap, the chart.

    Args:
        chart: the chart's file name, or ``None`` when no chart was drawn.
    """
    dataset = run.get("dataset")
    dataset = dataset if isinstance(dataset, Mapping) else {}
    code = _code_of(run)
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


def render_retention_chart(table: RetentionTable) -> bytes:
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


# --- graded QA results ----------------------------------------------------------------------------

QA_CHART_FILE: Final = "qa-accuracy.png"


class AccuracyLine(NamedTuple):
    """One line of the accuracy table: a scenario, a suite total or overall.

    Attributes:
        correct: policy → correct answers.
    """

    suite: str
    scenario: str
    cases: int
    correct: Mapping[str, int]

    @property
    def is_total(self) -> bool:
        return is_total_line(self.scenario)

    @property
    def label(self) -> str:
        return line_label(self.suite, self.scenario)


def accuracy_lines(report: QaReport) -> list[AccuracyLine]:
    """Each suite's scenarios (protocol order), its total when it has several, then overall."""
    by_scenario: dict[tuple[str, str], tuple[int, dict[str, int]]] = {}
    for group in report.groups:
        suite = SUITE_OF_SOURCE.get(group.source, group.source)
        _, correct = by_scenario.setdefault((suite, group.scenario), (group.cases, {}))
        correct[group.policy] = group.correct
    lines: list[AccuracyLine] = []
    for suite in SUITES[:-1]:
        members = sorted((scenario for s, scenario in by_scenario if s == suite), key=scenario_rank)
        rows = [AccuracyLine(suite, name, *by_scenario[(suite, name)]) for name in members]
        lines.extend(rows)
        if len(rows) > 1:
            lines.append(_total(suite, "total", rows))
    scenarios = [line for line in lines if not line.is_total]
    lines.append(_total(SUITES[-1], "all", scenarios))
    return lines


def render_qa_markdown(
    report: QaReport, run: Mapping[str, object] | None, *, chart: str | None, verified: str
) -> str:
    """The QA section: provenance, accuracy, the paired comparison and 2×2 tables.

    Args:
        chart: the chart's file name, or ``None`` when no chart was drawn.
    """
    first, second = POLICIES
    bootstrap = next(iter(report.comparisons.values())).bootstrap
    lines = [
        f"## Answers at cap {report.capacity}: {first} vs {second}",
        "",
        "| QA run | |",
        "|---|---|",
        f"| protocol | `{report.protocol_id}` |",
        *_run_rows(run),
        f"| answers | {len(report.rows)} rows; {verified} |",
        "",
        "Each case's question was asked twice — over the facts each policy kept at cap "
        f"{report.capacity} — and each answer graded blind against the reference by "
        f"`{report.rows[0].grader_version}`.",
        "",
        "### Accuracy by scenario",
        "",
        f"| suite | scenario | cases | {first} | {second} |",
        "|---|---|---:|---:|---:|",
    ]
    for line in accuracy_lines(report):
        cells = [line.suite, line.scenario, str(line.cases)]
        cells += [_share(line.correct.get(policy, 0), line.cases) for policy in POLICIES]
        if line.is_total:
            cells = [f"**{cell}**" for cell in cells]
        lines.append("| " + " | ".join(cells) + " |")
    confidence = round((1 - bootstrap.alpha) * 100)
    lines += [
        "",
        "### Paired comparison",
        "",
        f"| suite | cases | {first} | {second} | McNemar p (exact, two-sided) | "
        f"{second} − {first} [{confidence}% CI] |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for suite in SUITES:
        comparison = report.comparisons[suite]
        interval = comparison.bootstrap
        lines.append(
            f"| {suite} | {comparison.cases} | {comparison.first_correct}/{comparison.cases} | "
            f"{comparison.second_correct}/{comparison.cases} | {comparison.mcnemar.p_value!r} | "
            f"{interval.mean_difference:+.3f} [{interval.lower:+.3f}, {interval.upper:+.3f}] |"
        )
    lines += [
        "",
        f"p: how often a split of the discordant cases at least this uneven would occur if the "
        f"two policies were equally good. Interval: paired bootstrap over cases (seed "
        f"{bootstrap.seed}, {bootstrap.iterations:,} resamples, percentile).",
        "",
        "### 2×2 tables (cases)",
    ]
    for suite in SUITES:
        lines += ["", *_two_by_two(suite, report.comparisons[suite])]
    lines += ["", chart_reference("Accuracy by scenario and policy", chart), ""]
    return "\n".join(lines)


def render_qa_chart(report: QaReport) -> bytes:
    """A PNG: accuracy per scenario and suite (left), the difference with its interval (right)."""
    lines = accuracy_lines(report)

    def draw(figure: Figure) -> None:
        left, right = figure.subplots(1, 2, width_ratios=(2.2, 1.0))
        _draw_accuracy(left, lines)
        _draw_differences(right, report)
        figure.suptitle(
            f"Answers at cap {report.capacity} ({report.protocol_id})", fontsize="medium"
        )

    return figure_png(11.0, 3.8, draw)


def _draw_accuracy(axis: Axes, lines: Sequence[AccuracyLine]) -> None:
    width = 0.38
    positions = list(range(len(lines)))
    for offset, policy in zip((-width / 2, width / 2), POLICIES, strict=True):
        shares = [line.correct.get(policy, 0) / line.cases for line in lines]
        bars = axis.bar(
            [p + offset for p in positions],
            shares,
            width,
            label=policy,
            color=POLICY_COLOURS.get(policy),
        )
        for bar, line in zip(bars, lines, strict=True):
            axis.annotate(
                f"{line.correct.get(policy, 0)}/{line.cases}",
                (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                textcoords="offset points",
                xytext=(0, 2),
                ha="center",
                fontsize="x-small",
            )
    axis.set_xticks(positions)
    labels = ["\n".join(textwrap.wrap(line.label.replace("_", " "), 12)) for line in lines]
    axis.set_xticklabels(labels, fontsize="x-small")
    axis.set_ylim(0, 1.28)
    axis.set_ylabel("answers graded correct (share of cases)")
    axis.set_title("Accuracy by scenario", fontsize="small")
    axis.legend(loc="upper left", fontsize="small", ncols=2)
    axis.grid(axis="y", alpha=0.3)


def _draw_differences(axis: Axes, report: QaReport) -> None:
    first, second = POLICIES
    for index, suite in enumerate(SUITES):
        comparison = report.comparisons[suite]
        interval = comparison.bootstrap
        axis.errorbar(
            [interval.mean_difference],
            [index],
            xerr=[
                [interval.mean_difference - interval.lower],
                [interval.upper - interval.mean_difference],
            ],
            fmt="o",
            color=POLICY_COLOURS[second],
            capsize=4,
        )
        axis.annotate(
            f"p = {comparison.mcnemar.p_value:.4g}",
            (interval.upper, index),
            textcoords="offset points",
            xytext=(6, -3),
            fontsize="x-small",
        )
    axis.axvline(0.0, color="#444444", linewidth=0.8)
    axis.set_yticks(range(len(SUITES)))
    axis.set_yticklabels(list(SUITES), fontsize="small")
    axis.set_ylim(len(SUITES) - 0.5, -0.5)
    axis.set_xlim(-1.05, 1.35)
    axis.set_xlabel(f"accuracy({second}) − accuracy({first})")
    confidence = round((1 - next(iter(report.comparisons.values())).bootstrap.alpha) * 100)
    axis.set_title(f"Paired difference, {confidence}% bootstrap interval", fontsize="small")
    axis.grid(axis="x", alpha=0.3)


def _two_by_two(suite: str, comparison: PairedComparison) -> list[str]:
    first, second = POLICIES
    test = comparison.mcnemar
    return [
        f"{suite} ({comparison.cases} cases; McNemar uses the {test.only_first_correct} + "
        f"{test.only_second_correct} discordant ones):",
        "",
        f"| | {second} right | {second} wrong |",
        "|---|---:|---:|",
        f"| **{first} right** | {test.both_correct} | {test.only_first_correct} |",
        f"| **{first} wrong** | {test.only_second_correct} | {test.both_wrong} |",
    ]


def _code_of(run: Mapping[str, object]) -> str:
    """The code a run marker says made the results: its git commit, or no checkout."""
    git = run.get("git")
    if not isinstance(git, Mapping):
        return "not a git checkout"
    return f"git `{git.get('head')}`" + (" (uncommitted changes)" if git.get("dirty") else "")


def _run_rows(run: Mapping[str, object] | None) -> list[str]:
    if run is None:
        return ["| run marker | none (qa_run.json absent) |"]
    qa = run.get("qa")
    qa = qa if isinstance(qa, Mapping) else {}
    code = _code_of(run)
    return [
        f"| model | `{qa.get('model')}`, temperature {qa.get('temperature')}, "
        f"max_tokens {qa.get('max_tokens')} |",
        f"| created | {run.get('created_at')} ({code}) |",
    ]


def _share(correct: int, cases: int) -> str:
    return f"{correct}/{cases} ({correct / cases:.1%})"


def _total(suite: str, scenario: str, members: Sequence[AccuracyLine]) -> AccuracyLine:
    return AccuracyLine(
        suite,
        scenario,
        sum(line.cases for line in members),
        {policy: sum(line.correct.get(policy, 0) for line in members) for policy in POLICIES},
    )


# --- the report of a directory --------------------------------------------------------------------

REPORT_FILE: Final = "report.md"


def write_report(
    run_dir: Path,
    *,
    output_dir: Path | None = None,
    charts: bool = True,
    config: Path | None = None,
) -> tuple[Path, ...]:
    """Write ``report.md`` and, with ``charts``, the charts for what ``run_dir`` holds.

    Args:
        run_dir: a run-policy directory, a graded run-qa directory, or both.
        output_dir: where to write (default: ``run_dir``).
        charts: draw the PNG charts (they need matplotlib); without them the
            Markdown says how to get them.
        config: a protocol config whose bootstrap parameters QA results are
            verified with (default: the reproduction protocol's, as for ``verify``).

    Returns:
        The files written: ``report.md`` first, then ``retention.png`` (policy
        run) and ``qa-accuracy.png`` (graded QA results), as present and drawn.

    Raises:
        EvaluationError: the directory holds neither a policy run nor graded
            QA results, holds what an interrupted run-policy or grade-qa left,
            or what it holds cannot be read or does not verify; a ProtocolError
            when ``config`` is not a valid protocol config.
        ResultsExistError: a report is already there (nothing is overwritten;
            what an interrupted report left, charts without ``report.md``,
            is replaced).
        ModuleNotFoundError: ``charts`` is true but matplotlib is not installed
            (:func:`~deermem.eval.missing_chart_module` tells
            beforehand).
    """
    for paths, command in (
        (policy_run.policy_output_paths(run_dir), "run-policy"),
        (report_paths(run_dir), "grade-qa"),
    ):
        left = interrupted_set(paths)
        if left:
            raise EvaluationError(
                f"{run_dir}: holds what an interrupted {command} left "
                f"({', '.join(path.name for path in left)}, without {paths[-1].name}, which it "
                f"writes last); run {command} again to replace it"
            )
    has_policy = (run_dir / policy_run.RUN_FILE).exists()
    has_qa = (run_dir / STATS_FILE).exists()
    if not (has_policy or has_qa):
        raise EvaluationError(
            f"{run_dir}: holds neither a policy run ({policy_run.SUMMARY_FILE}, "
            f"{policy_run.RUN_FILE}) nor graded QA results ({ROWS_FILE} ...); "
            "run run-policy or grade-qa first"
        )
    target = output_dir or run_dir
    sections: list[str] = []
    drawn: list[tuple[Path, bytes]] = []
    if has_policy:
        summary = _read_json(run_dir / policy_run.SUMMARY_FILE)
        run = _read_json(run_dir / policy_run.RUN_FILE)
        table = retention_table(summary, file=str(run_dir / policy_run.SUMMARY_FILE))
        sections.append(
            render_retention_markdown(table, run, chart=RETENTION_CHART_FILE if charts else None)
        )
        if charts:
            drawn.append((target / RETENTION_CHART_FILE, render_retention_chart(table)))
    if has_qa:
        parameters = DEFAULT_PARAMETERS if config is None else protocol_parameters(config)
        report, marker = _verified_qa(run_dir, parameters)
        heading = "" if has_policy else "# Capacity eviction: answers graded\n\n"
        verified = "summary and statistics re-derived from the rows match the files byte for byte"
        chart = QA_CHART_FILE if charts else None
        sections.append(
            heading + render_qa_markdown(report, marker, chart=chart, verified=verified)
        )
        if charts:
            drawn.append((target / QA_CHART_FILE, render_qa_chart(report)))
    markdown = "\n".join(sections)
    # report.md last: it marks the set complete (see write_new_files).
    *charts_written, written = write_new_files([*drawn, (target / REPORT_FILE, markdown.encode())])
    return (written, *charts_written)


def _verified_qa(
    run_dir: Path, parameters: StatisticsParameters
) -> tuple[QaReport, Mapping[str, object] | None]:
    """The QA report re-derived from the rows, if the directory's files verify.

    The bootstrap parameters are the protocol's, never those the stats file states:
    a file is checked against them, as ``verify`` checks it (a stated count of
    a billion resamples would otherwise be followed).
    """
    verification = verify_results(run_dir, parameters=parameters)
    if not verification.ok or verification.derived is None:
        count = len(verification.findings)
        raise EvaluationError(
            f"{run_dir}: the QA results do not verify ({count} problem{'s' if count != 1 else ''}"
            f"; first: {verification.findings[0]}); see deermem eval verify {run_dir}"
        )
    marker_path = run_dir / MARKER_FILE
    marker = _read_json(marker_path) if marker_path.exists() else None
    return verification.derived, marker


def _read_json(path: Path) -> Mapping[str, object]:
    try:
        document = parse_json(read_regular_file(path).decode("utf-8"))
    except FileNotFoundError:
        raise EvaluationError(
            f"{path}: not found; is this a run-policy output directory?"
        ) from None
    except (OSError, ValueError) as error:
        raise EvaluationError(f"{path}: cannot read it as JSON: {error}") from None
    if not isinstance(document, dict):
        raise EvaluationError(f"{path}: expected a JSON object")
    return document
