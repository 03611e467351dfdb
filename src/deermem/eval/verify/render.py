"""The human summary of a verification: verdict, file statuses, findings, figures."""

from __future__ import annotations

from deermem.eval.qa.results import SUITES, QaReport
from deermem.eval.qa.rows import POLICIES
from deermem.eval.verify.findings import VerificationReport

__all__ = ["render_verification"]


def render_verification(report: VerificationReport) -> str:
    """The human summary: verdict, file statuses, findings, and the suites' figures."""
    lines: list[str] = []
    if report.ok:
        lines.append(f"verified {report.directory}: {report.rows} rows; summary and statistics")
        lines.append("re-derived from the rows match the published files byte for byte")
    else:
        count = len(report.findings)
        lines.append(f"FAILED {report.directory}: {count} problem{'s' if count != 1 else ''}")
    width = max(len(name) for name in report.files)
    lines.extend(f"  {name:<{width}}  {status}" for name, status in report.files.items())
    if report.findings:
        lines.append("")
        lines.extend(f"  {finding}" for finding in report.findings)
    if report.derived is not None:
        lines.append("")
        lines.extend(_suite_table(report.derived))
    return "\n".join(lines) + "\n"


def _suite_table(derived: QaReport) -> list[str]:
    first, second = POLICIES
    confidence = round((1 - next(iter(derived.comparisons.values())).bootstrap.alpha) * 100)
    header = (
        f"{'suite':<10} {first:>11} {second:>11}  {'McNemar p':<20} "
        f"{second} − {first} [{confidence}% CI]"
    )
    lines = ["re-derived from qa.rows.jsonl:", header]
    for suite in SUITES:
        comparison = derived.comparisons[suite]
        cases = comparison.cases
        interval = comparison.bootstrap
        lines.append(
            f"{suite:<10} {f'{comparison.first_correct}/{cases}':>11} "
            f"{f'{comparison.second_correct}/{cases}':>11}  {comparison.mcnemar.p_value!r:<20} "
            f"{interval.mean_difference:+.3f} [{interval.lower:+.3f}, {interval.upper:+.3f}]"
        )
    return lines
