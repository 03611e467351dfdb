"""What a verification found: one :class:`Finding` per failed check, and the report.

These are the values :func:`deermem.eval.verify.check.verify_results`
returns and :func:`deermem.eval.verify.render.render_verification`
prints; both sides import them from here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from deermem.eval.qa.results import ROWS_FILE, RUN_FILE, STATS_FILE, SUMMARY_FILE, QaReport
from deermem.eval.qa.rows import POLICIES

__all__ = ["RESULT_FILES", "Finding", "VerificationReport"]

RESULT_FILES: Final = (ROWS_FILE, SUMMARY_FILE, STATS_FILE, RUN_FILE)
"""The files of a QA results directory, in the order they are checked and reported."""


@dataclass(frozen=True, slots=True)
class Finding:
    """One failed check.

    Attributes:
        file: the file name inside the directory (``"qa.stats.json"``), or
            ``"(directory)"``.
        field: the JSON path or row key (``"suites.official.bootstrap.lower"``,
            ``"grade_rule"``), or a layout label such as ``"(end of file)"``.
        expected: what the check expected.
        actual: what the file holds.
        row: the ``row_id`` concerned, or ``"case <id>"`` for a whole case.
        line: the line number in the file, when it has one.
    """

    file: str
    field: str
    expected: str
    actual: str
    row: str | None = None
    line: int | None = None

    def __str__(self) -> str:
        where = self.file
        if self.line is not None:
            where += f" line {self.line}"
        if self.row:
            where += f" ({self.row})" if self.row.startswith("case ") else f" (row {self.row})"
        return f"{where}: {self.field}: expected {self.expected}, got {self.actual}"

    def to_dict(self) -> dict[str, object]:
        """The JSON form of the finding."""
        return {
            "actual": self.actual,
            "expected": self.expected,
            "field": self.field,
            "file": self.file,
            "line": self.line,
            "row": self.row,
        }


@dataclass(frozen=True, slots=True)
class VerificationReport:
    """The outcome of :func:`verify_results`.

    Attributes:
        directory: the verified directory, as given.
        findings: every failed check, in the order found (files in the order of
            :data:`RESULT_FILES`).
        rows: the number of rows read from ``qa.rows.jsonl``.
        files: file name → ``"verified"``, ``"failed"``, ``"missing"``,
            ``"not checked"`` (it could not be derived because the rows failed)
            or ``"absent"`` (``qa_run.json`` is optional).
        derived: the report re-derived from the rows, when they allowed it; its
            numbers are the ones to quote.
    """

    directory: str
    findings: tuple[Finding, ...]
    rows: int
    files: Mapping[str, str]
    derived: QaReport | None

    @property
    def ok(self) -> bool:
        """Whether every check passed."""
        return not self.findings

    def to_dict(self) -> dict[str, object]:
        """The JSON form: status, files, findings and the re-derived suites."""
        suites: dict[str, object] | None = None
        if self.derived is not None:
            suites = {}
            for suite, comparison in self.derived.comparisons.items():
                entry = comparison.to_dict()
                entry["correct"] = dict(
                    zip(
                        POLICIES, (comparison.first_correct, comparison.second_correct), strict=True
                    )
                )
                suites[suite] = entry
        return {
            "directory": self.directory,
            "files": dict(self.files),
            "findings": [finding.to_dict() for finding in self.findings],
            "ok": self.ok,
            "rows": self.rows,
            "suites": suites,
        }
