"""Graded QA results for people: a Markdown section and a PNG chart.

Drawn from a :class:`~deermem.eval.qa.results.QaReport` that
``verify`` re-derived from ``qa.rows.jsonl`` and found byte-identical to the
published summary and statistics — so the report can only show numbers that
follow from the rows. Accuracy per suite and scenario, the 2×2 table of each
suite, McNemar's exact p and the paired bootstrap interval; deterministic,
like the retention report (no time but the run's, no software stamp in the
PNG).
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Final, NamedTuple

from deermem.eval.grading.statistics import PairedComparison
from deermem.eval.policy_run.retention import is_total_line, line_label
from deermem.eval.protocol.manifests import OFFICIAL_SCENARIOS
from deermem.eval.qa.results import SUITE_OF_SOURCE, SUITES, QaReport
from deermem.eval.qa.rows import POLICIES
from deermem.eval.report.png import POLICY_COLOURS, chart_reference, figure_png

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "QA_CHART_FILE",
    "AccuracyLine",
    "accuracy_lines",
    "render_qa_chart",
    "render_qa_markdown",
]

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
        members = sorted(
            (scenario for s, scenario in by_scenario if s == suite), key=_scenario_order
        )
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


def _run_rows(run: Mapping[str, object] | None) -> list[str]:
    if run is None:
        return ["| run marker | none (qa_run.json absent) |"]
    qa = run.get("qa")
    qa = qa if isinstance(qa, Mapping) else {}
    git = run.get("git")
    if isinstance(git, Mapping):
        code = f"git `{git.get('head')}`" + (" (uncommitted changes)" if git.get("dirty") else "")
    else:
        code = "not a git checkout"
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


def _scenario_order(scenario: str) -> tuple[int, str]:
    if scenario in OFFICIAL_SCENARIOS:
        return (OFFICIAL_SCENARIOS.index(scenario), "")
    return (len(OFFICIAL_SCENARIOS), scenario)
