"""``verify``: re-derive a published QA report from its rows and compare byte for byte.

Anyone holding a results directory — ours or the original project's — can check
that its headline numbers follow from its rows, without the dataset, the model
or an API key:

1. ``qa.rows.jsonl`` is checked line by line
   (:mod:`~deermem.eval.verify.rows`): canonical form, the 19-key schema,
   sorted and complete pairs, the protocol's fact ids, fingerprint
   consistency, and grades that agree with their rules.
2. ``qa.summary.json`` and ``qa.stats.json`` are derived again from the rows with
   the functions ``grade-qa`` uses, and must match the published files byte for
   byte; a mismatch is explained by JSON path (content), key order or line.
3. ``qa_run.json``, if present, is checked against its schema and must agree
   with the rows (capacity) and the other files (protocol id).

What cannot be checked from the rows alone, and is therefore not claimed: that
each grade matches its reference answer (references are private and not
published; ``grade-qa`` re-grades from the dataset), that a prediction is the
model's own words rather than copied memory text (predictions are published on
purpose), and fields that no figure is derived from and nothing else constrains
(``usage``, ``attempts``, ``response_model``, the rank order of kept ids). When
the files' SHA-256 were published, ``expected_sha256`` pins those too.

What *is* checked for private text: rows, summary, statistics and marker carry
no key outside their schema, identifiers have no spaces, usage holds only
numbers, and the marker holds no credential-like string.

The bootstrap parameters are part of the protocol, not of the published files:
they default to the reproduction protocol's seed 4789, 10,000 resamples and
alpha 0.05, and a changed seed in ``qa.stats.json`` is reported, not followed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from deermem.eval._problems import FieldProblem
from deermem.eval.errors import ResultRowsError
from deermem.eval.grading.statistics import DEFAULT_PARAMETERS, StatisticsParameters
from deermem.eval.qa.marker_schema import run_problems
from deermem.eval.qa.results import (
    ROWS_FILE,
    RUN_FILE,
    STATS_FILE,
    SUMMARY_FILE,
    QaReport,
    build_qa_report,
)
from deermem.eval.result_files import document_text
from deermem.eval.verify.findings import RESULT_FILES, Finding, VerificationReport
from deermem.eval.verify.jsondiff import document_differences
from deermem.eval.verify.rows import RowsCheck, check_rows_text

__all__ = ["verify_results"]

_MAX_FINDINGS_PER_FILE: Final = 50


@dataclass(slots=True)
class _Collector:
    """Findings per file, listing at most a fixed number per file."""

    findings: list[Finding] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    def add(self, file: str, problem: FieldProblem, line: int | None = None) -> None:
        count = self.counts.get(file, 0) + 1
        self.counts[file] = count
        if count <= _MAX_FINDINGS_PER_FILE:
            self.findings.append(
                Finding(file, problem.field, problem.expected, problem.actual, problem.row, line)
            )

    def result(self) -> tuple[Finding, ...]:
        extra = [
            Finding(name, "(more)", f"at most {_MAX_FINDINGS_PER_FILE} listed", f"{n} in all")
            for name, n in self.counts.items()
            if n > _MAX_FINDINGS_PER_FILE
        ]
        order = {name: index for index, name in enumerate(("(directory)", *RESULT_FILES))}
        every = self.findings + extra
        return tuple(sorted(every, key=lambda finding: order.get(finding.file, len(order))))


def verify_results(
    directory: Path | str,
    *,
    parameters: StatisticsParameters = DEFAULT_PARAMETERS,
    expected_sha256: Mapping[str, str] | None = None,
) -> VerificationReport:
    """Verify a QA results directory (see the module docstring for every check).

    Args:
        directory: the directory holding ``qa.rows.jsonl``, ``qa.summary.json``,
            ``qa.stats.json`` and optionally ``qa_run.json``.
        parameters: the protocol's bootstrap parameters.
        expected_sha256: file name → SHA-256 (lowercase hex) the file must have,
            for results whose hashes were published. Only a hash pins the fields
            no figure is derived from (``usage``, ``attempts``, the rank order of
            ``kept_fact_ids``, a prediction edited into another plausible one).

    Returns:
        The report; ``report.ok`` says whether everything matched. Problems in
        the files are findings, never exceptions.
    """
    root = Path(directory)
    found = _Collector()
    if not root.is_dir():
        found.add("(directory)", FieldProblem("path", "a results directory", "no such directory"))
        files = dict.fromkeys(RESULT_FILES, "missing")
        return VerificationReport(str(directory), found.result(), 0, files, None)
    texts = {
        name: _read(root / name, name, found, required=name != RUN_FILE) for name in RESULT_FILES
    }
    for name, digest in (expected_sha256 or {}).items():
        _check_digest(root / name, name, digest, found)
    rows = RowsCheck(complete=False)
    rows_text = texts[ROWS_FILE]
    if rows_text is not None:
        rows = check_rows_text(rows_text, lambda problem, line: found.add(ROWS_FILE, problem, line))
    run = _check_run(texts[RUN_FILE], found)
    derived = _derive(rows, run, texts, found, parameters)
    if derived is not None:
        _compare_derived(derived, rows_text, run, texts, found)
    findings = found.result()
    statuses = _statuses(texts, findings, derived is not None)
    return VerificationReport(str(directory), findings, len(rows.rows), statuses, derived)


def _read(path: Path, name: str, found: _Collector, *, required: bool) -> str | None:
    """A file's text, or ``None`` (with a finding if it is required or unreadable)."""
    try:
        return path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        if required:
            found.add(name, FieldProblem("(file)", "the file", "no such file"))
    except UnicodeDecodeError as error:
        found.add(
            name,
            FieldProblem("(file)", "UTF-8 text", f"an undecodable byte at offset {error.start}"),
        )
    except OSError as error:
        found.add(name, FieldProblem("(file)", "a readable file", error.strerror or str(error)))
    return None


def _check_digest(path: Path, name: str, expected: str, found: _Collector) -> None:
    """Compare a file's SHA-256 with the published one."""
    if name not in RESULT_FILES:  # never read anything but the result files
        found.add(
            name, FieldProblem("(sha256)", "one of " + ", ".join(RESULT_FILES), "another name")
        )
        return
    try:
        actual = hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        # The three required files are reported missing by the reader already.
        if name == RUN_FILE:
            found.add(
                name, FieldProblem("(file)", "the file (its SHA-256 is pinned)", "no such file")
            )
        return
    if actual != expected.lower():
        found.add(name, FieldProblem("(sha256)", expected.lower(), actual))


def _check_run(text: str | None, found: _Collector) -> dict[str, object] | None:
    """Check the marker; its parsed content if it passed its schema."""
    if text is None:
        return None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        found.add(RUN_FILE, FieldProblem("(document)", "valid JSON", f"invalid JSON ({error.msg})"))
        return None
    problems = run_problems(data)
    for problem in problems:
        found.add(RUN_FILE, problem)
    for difference in document_differences(document_text(data), text):
        found.add(
            RUN_FILE,
            FieldProblem(difference.field, difference.expected, difference.actual),
            difference.line,
        )
    return data if not problems and isinstance(data, dict) else None


def _derive(
    rows: RowsCheck,
    run: dict[str, object] | None,
    texts: Mapping[str, str | None],
    found: _Collector,
    parameters: StatisticsParameters,
) -> QaReport | None:
    """Re-derive the report from the rows, if the rows and a protocol id allow it."""
    if not rows.complete:
        return None
    protocol_id = _protocol_id(run, texts)
    if protocol_id is None:
        expected = "a protocol_id in qa_run.json, qa.summary.json or qa.stats.json"
        found.add(SUMMARY_FILE, FieldProblem("protocol_id", expected, "none found"))
        return None
    try:
        return build_qa_report(rows.rows, protocol_id=protocol_id, parameters=parameters)
    except ResultRowsError as error:
        for problem in error.problems:
            found.add(ROWS_FILE, FieldProblem("(suites)", "cases in every suite", problem))
        return None


def _protocol_id(run: Mapping[str, object] | None, texts: Mapping[str, str | None]) -> str | None:
    """The protocol id to derive with: the marker's, else the summary's, else the stats'."""
    if run is not None and isinstance(run.get("protocol_id"), str):
        return str(run["protocol_id"])
    for name in (SUMMARY_FILE, STATS_FILE):
        text = texts[name]
        if text is None:
            continue
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            continue
        if isinstance(data, dict) and isinstance(data.get("protocol_id"), str):
            return str(data["protocol_id"])
    return None


def _compare_derived(
    derived: QaReport,
    rows_text: str | None,
    run: Mapping[str, object] | None,
    texts: Mapping[str, str | None],
    found: _Collector,
) -> None:
    """Compare the re-derived files with the published ones, byte for byte."""
    expected = derived.files()
    if (
        rows_text is not None
        and rows_text != expected[ROWS_FILE]
        and not found.counts.get(ROWS_FILE)
    ):
        # The line checks should have explained any difference; never let one pass silently.
        found.add(ROWS_FILE, FieldProblem("(document)", "the canonical rows text", "other bytes"))
    for name in (SUMMARY_FILE, STATS_FILE):
        text = texts[name]
        if text is None:
            continue
        for difference in document_differences(expected[name], text):
            problem = FieldProblem(difference.field, difference.expected, difference.actual)
            found.add(name, problem, difference.line)
    if run is not None:
        qa = run.get("qa")
        capacity = qa.get("capacity") if isinstance(qa, dict) else None
        if capacity != derived.capacity:
            problem = FieldProblem(
                "qa.capacity", f"{derived.capacity} (the rows' capacity)", str(capacity)
            )
            found.add(RUN_FILE, problem)


def _statuses(
    texts: Mapping[str, str | None], findings: tuple[Finding, ...], derived: bool
) -> dict[str, str]:
    failed = {finding.file for finding in findings}
    statuses: dict[str, str] = {}
    for name in RESULT_FILES:
        if name in failed:
            statuses[name] = "failed"
        elif texts[name] is None:
            statuses[name] = "absent" if name == RUN_FILE else "missing"
        elif name in (SUMMARY_FILE, STATS_FILE) and not derived:
            statuses[name] = "not checked"
        else:
            statuses[name] = "verified"
    return statuses
