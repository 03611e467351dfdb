"""``verify``: re-derive a published QA report from its rows and compare byte for byte.

Anyone holding a results directory — ours or the original project's — can check
that its headline numbers follow from its rows, without the dataset, the model
or an API key (:func:`verify_results`):

1. ``qa.rows.jsonl`` is checked line by line, since everything else is derived
   from it: **form** (UTF-8, one JSON object per line, each exactly as the
   canonical serialiser writes it, one final newline); **schema**
   (:func:`~deermem.eval.rows.row_problems`: the 19 keys and nothing else,
   types and forms, the relations inside a row); **order and pairing**
   (strictly sorted by ``row_id``, both policies for every case, case fields
   equal within a pair, one capacity); **the protocol's fact ids** (reference
   §3.4: a case's kept ids are its own, ``gold_<case_id>`` or
   ``d_<case_id>_…``, and ``support_all_retained`` says whether
   ``gold_<case_id>`` was kept); **fingerprints** (the request depends only on
   the case and the kept facts, so within a case two rows share a fingerprint
   exactly when they kept the same set of facts, and no two cases share one).
2. ``qa.summary.json`` and ``qa.stats.json`` are derived again from the rows with
   the functions ``grade-qa`` uses, and must match the published files byte for
   byte. A byte comparison says *that* two files differ; a reviewer needs to
   know *where*, so a difference is explained in three tiers, stopping at the
   first that finds something: the content (a changed number, a missing or
   extra key, a different type — ``1`` is not ``1.0`` and ``true`` is not
   ``1``) by JSON path; the key order; the layout (indentation, separators,
   float spelling, final newline) by line.
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
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, InstanceOf, computed_field

from deermem.eval.errors import ResultRowsError
from deermem.eval.files import (
    FieldProblem,
    InvalidJsonError,
    describe_value,
    document_text,
    jsonl_line,
    parse_json,
)
from deermem.eval.grading import DEFAULT_PARAMETERS, StatisticsParameters
from deermem.eval.protocol import load_config
from deermem.eval.rows import (
    MARKER_FILE,
    ROWS_FILE,
    STATS_FILE,
    SUITES,
    SUMMARY_FILE,
    QaReport,
    QaRow,
    build_qa_report,
    pairing_problems,
    row_id_of,
    row_problems,
    run_problems,
)
from deermem.policy import POLICIES
from deermem.store.markdown.files import read_regular_file

__all__ = [
    "RESULT_FILES",
    "VerificationReport",
    "protocol_parameters",
    "render_verification",
    "verify_results",
]

# --- what a verification found --------------------------------------------------------------------

RESULT_FILES: Final = (ROWS_FILE, SUMMARY_FILE, STATS_FILE, MARKER_FILE)
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


class VerificationReport(BaseModel):
    """The outcome of :func:`verify_results`; ``model_dump()`` is its JSON form.

    Attributes:
        directory: the verified directory, as given.
        findings: every failed check, in the order found (files in the order of
            :data:`RESULT_FILES`).
        rows: the number of rows read from ``qa.rows.jsonl``.
        files: file name → ``"verified"``, ``"failed"``, ``"missing"``,
            ``"not checked"`` (it could not be derived because the rows failed)
            or ``"absent"`` (``qa_run.json`` is optional).
        derived: the report re-derived from the rows, when they allowed it; its
            numbers are the ones to quote (in the JSON form, as ``suites``).
    """

    model_config = ConfigDict(frozen=True)

    directory: str
    findings: tuple[Finding, ...]
    rows: int
    files: dict[str, str]
    derived: InstanceOf[QaReport] | None = Field(exclude=True)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ok(self) -> bool:
        """Whether every check passed."""
        return not self.findings

    @computed_field  # type: ignore[prop-decorator]
    @property
    def suites(self) -> dict[str, dict[str, object]] | None:
        """Each suite's statistics re-derived from the rows, with each policy's correct answers."""
        if self.derived is None:
            return None
        return {
            suite: {
                **asdict(comparison),
                "correct": dict(
                    zip(
                        POLICIES, (comparison.first_correct, comparison.second_correct), strict=True
                    )
                ),
            }
            for suite, comparison in self.derived.comparisons.items()
        }


# --- where two JSON documents differ --------------------------------------------------------------


def document_differences(expected_text: str, actual_text: str) -> list[FieldProblem]:
    """All differences between the expected document text and the published one."""
    if expected_text == actual_text:
        return []
    try:
        actual = parse_json(actual_text, object_pairs_hook=_reject_duplicate_keys)
    except _DuplicateKeyError as error:
        return [FieldProblem(error.key, "the key once", "the key twice in one object")]
    except InvalidJsonError as error:
        found = f"invalid JSON ({error.reason})"
        return [FieldProblem("(document)", "valid JSON", found, line=error.line)]
    expected = json.loads(expected_text)  # deermem's own canonical text
    differences = _content_differences(expected, actual, "")
    if differences:
        return differences
    differences = _key_order_differences(actual, "")
    if differences:
        return differences
    return [first_text_difference(expected_text, actual_text)]


def first_text_difference(expected_text: str, actual_text: str) -> FieldProblem:
    """The first line where two texts differ, or their ends if only those do."""
    if expected_text.rstrip("\n") == actual_text.rstrip("\n"):
        return FieldProblem(
            "(end of file)",
            _newline_count(expected_text),
            _newline_count(actual_text),
        )
    expected_lines = expected_text.split("\n")
    actual_lines = actual_text.split("\n")
    for number, (want, got) in enumerate(zip(expected_lines, actual_lines, strict=False), 1):
        if want != got:
            return FieldProblem("(layout)", _excerpt(want), _excerpt(got), line=number)
    number = min(len(expected_lines), len(actual_lines)) + 1
    return FieldProblem(
        "(layout)", f"{len(expected_lines)} lines", f"{len(actual_lines)} lines", line=number
    )


class _DuplicateKeyError(Exception):  # not a ValueError: parse_json lets it through
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _reject_duplicate_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    result: dict[str, object] = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKeyError(repr(key))
        result[key] = value
    return result


def _content_differences(expected: object, actual: object, path: str) -> list[FieldProblem]:
    where = path or "(document)"
    if type(expected) is not type(actual):
        return [FieldProblem(where, describe_value(expected), describe_value(actual))]
    if isinstance(expected, dict) and isinstance(actual, dict):
        differences: list[FieldProblem] = []
        for key in expected:
            child = f"{path}.{key}" if path else key
            if key not in actual:
                differences.append(
                    FieldProblem(child, describe_value(expected[key]), "no such key")
                )
            else:
                differences.extend(_content_differences(expected[key], actual[key], child))
        for key in actual:
            if key not in expected:
                child = f"{path}.{key}" if path else key
                hidden = describe_value(actual[key], reveal=False)
                differences.append(FieldProblem(child, "no such key", hidden))
        return differences
    if isinstance(expected, list) and isinstance(actual, list):
        differences = []
        if len(expected) != len(actual):
            differences.append(
                FieldProblem(where, f"{len(expected)} items", f"{len(actual)} items")
            )
        for index, (want, got) in enumerate(zip(expected, actual, strict=False)):
            differences.extend(_content_differences(want, got, f"{path}[{index}]"))
        return differences
    if expected != actual:
        return [FieldProblem(where, describe_value(expected), describe_value(actual))]
    return []


def _key_order_differences(value: object, path: str) -> list[FieldProblem]:
    if isinstance(value, dict):
        keys = list(value)
        if keys != sorted(keys):
            where = f"{path} (key order)" if path else "(key order)"
            return [FieldProblem(where, ", ".join(sorted(keys)), ", ".join(keys))]
        found: list[FieldProblem] = []
        for key, child in value.items():
            found.extend(_key_order_differences(child, f"{path}.{key}" if path else key))
        return found
    if isinstance(value, list):
        found = []
        for index, item in enumerate(value):
            found.extend(_key_order_differences(item, f"{path}[{index}]"))
        return found
    return []


def _newline_count(text: str) -> str:
    count = len(text) - len(text.rstrip("\n"))
    if count == 1:
        return "one newline at the end"
    return "no newline at the end" if count == 0 else f"{count} newlines at the end"


def _excerpt(line: str, limit: int = 60) -> str:
    return repr(line) if len(line) <= limit else repr(line[: limit - 3] + "...")


# --- the rows, line by line -----------------------------------------------------------------------

Report = Callable[[FieldProblem, int | None], None]


@dataclass(slots=True)
class RowsCheck:
    """What the line-by-line check of the rows file found.

    Attributes:
        rows: the rows that passed the schema, in file order.
        lines: row_id → line number, for naming lines in later findings.
        complete: every line passed the schema and the rows pair up, so
            summary and statistics can be derived from them.
    """

    rows: list[QaRow] = field(default_factory=list)
    lines: dict[str, int] = field(default_factory=dict)
    complete: bool = True


def check_rows_text(text: str, report: Report) -> RowsCheck:
    """Check the rows file's text, calling ``report(problem, line)`` for each problem."""
    result = RowsCheck()
    if not text:
        report(FieldProblem("(document)", "one JSON line per graded row", "an empty file"), None)
        result.complete = False
        return result
    if not text.endswith("\n") or text.endswith("\n\n"):
        expected_end = text.rstrip("\n") + "\n"
        difference = first_text_difference(expected_end, text)
        report(FieldProblem(difference.field, difference.expected, difference.actual), None)
    previous: QaRow | None = None
    failed_cases: set[object] = set()
    for number, line in enumerate(text.rstrip("\n").split("\n"), 1):
        row = _check_line(line, number, report, failed_cases)
        if row is None:
            result.complete = False
            continue
        if previous is not None and row.row_id <= previous.row_id:
            relation = "a repeat of" if row.row_id == previous.row_id else "before"
            found = f"{relation} {previous.row_id!r} on the line above"
            expected = f"after {previous.row_id!r} (rows sorted by row_id, each once)"
            report(FieldProblem("row_id", expected, found, row.row_id), number)
            result.complete = False
            if row.row_id == previous.row_id:
                continue  # reported once here, not again as an unpaired duplicate
        result.rows.append(row)
        result.lines.setdefault(row.row_id, number)
        previous = row
    # A case with a broken line is already reported; do not report it again as unpaired.
    pairable = (
        [] if None in failed_cases else [r for r in result.rows if r.case_id not in failed_cases]
    )
    for problem in pairing_problems(pairable) if pairable else ():
        report(problem, result.lines.get(problem.row or ""))
        result.complete = False
    if result.complete:
        _check_protocol_ids(result.rows, result.lines, report)
        _check_fingerprints(result.rows, result.lines, report)
    return result


def _check_line(line: str, number: int, report: Report, failed_cases: set[object]) -> QaRow | None:
    """Parse and check one line; the row if it passed the schema.

    The case id of a line that fails is added to ``failed_cases`` (``None`` when
    the line is not even JSON).
    """
    try:
        data: Any = parse_json(line)  # row_problems checks it before any use
    except InvalidJsonError as error:
        report(FieldProblem("(line)", "one JSON object", f"invalid JSON ({error.reason})"), number)
        failed_cases.add(None)  # some case lost a line, and we cannot tell which
        return None
    problems = row_problems(data)
    label = row_id_of(data)
    for problem in problems:
        report(FieldProblem(problem.field, problem.expected, problem.actual, label), number)
    if problems:
        if isinstance(data, dict) and isinstance(data.get("case_id"), str):
            failed_cases.add(data["case_id"])
        return None
    canonical = jsonl_line(data)[:-1]
    if line != canonical:
        keys = list(data)
        if keys != sorted(keys):
            report(
                FieldProblem("(key order)", "keys in sorted order", "unsorted keys", label), number
            )
        else:
            difference = first_text_difference(canonical, line)
            report(FieldProblem("(layout)", difference.expected, difference.actual, label), number)
    return QaRow.from_dict(data)


def _check_protocol_ids(rows: list[QaRow], lines: dict[str, int], report: Report) -> None:
    """Kept ids belong to their case, and the support flags match the kept ids."""
    for row in rows:
        line = lines[row.row_id]
        support = f"gold_{row.case_id}"
        foreign = [
            fact_id
            for fact_id in row.kept_fact_ids
            if fact_id != support and not fact_id.startswith(f"d_{row.case_id}_")
        ]
        if foreign:
            expected = f"ids of this case's pool ({support!r} or 'd_{row.case_id}_…')"
            report(FieldProblem("kept_fact_ids", expected, repr(foreign[0]), row.row_id), line)
        retained = support in row.kept_fact_ids
        if row.support_all_retained is not retained:
            expected = (
                f"{str(retained).lower()} ({support!r} {'is' if retained else 'is not'} kept)"
            )
            found = str(row.support_all_retained).lower()
            report(FieldProblem("support_all_retained", expected, found, row.row_id), line)


def _check_fingerprints(rows: list[QaRow], lines: dict[str, int], report: Report) -> None:
    """Equal fingerprints exactly for equal kept sets within a case; none shared across cases."""
    by_case: dict[str, dict[str, QaRow]] = {}
    owner: dict[str, str] = {}
    for row in rows:
        by_case.setdefault(row.case_id, {})[row.policy] = row
        other = owner.setdefault(row.request_fingerprint, row.case_id)
        if other != row.case_id:
            expected = f"a fingerprint of this case only (it is also case {other}'s)"
            found = row.request_fingerprint
            report(
                FieldProblem("request_fingerprint", expected, found, row.row_id), lines[row.row_id]
            )
    for pair in by_case.values():
        first, second = (pair[policy] for policy in POLICIES)
        same_facts = set(first.kept_fact_ids) == set(second.kept_fact_ids)
        if same_facts != (first.request_fingerprint == second.request_fingerprint):
            relation = "equal to" if same_facts else "different from"
            reason = "same" if same_facts else "different"
            expected = f"{relation} {first.row_id}'s ({reason} kept facts)"
            report(
                FieldProblem(
                    "request_fingerprint", expected, second.request_fingerprint, second.row_id
                ),
                lines[second.row_id],
            )


# --- every check ----------------------------------------------------------------------------------

_MAX_FINDINGS_PER_FILE: Final = 50


@dataclass(slots=True)
class _Collector:
    """Findings per file, listing at most a fixed number per file."""

    findings: list[Finding] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    def add(self, file: str, problem: FieldProblem, line: int | None = None) -> None:
        """Record ``problem`` of ``file``, at ``line`` (default: the problem's own line)."""
        count = self.counts.get(file, 0) + 1
        self.counts[file] = count
        if count <= _MAX_FINDINGS_PER_FILE:
            where = problem.line if line is None else line
            self.findings.append(
                Finding(file, problem.field, problem.expected, problem.actual, problem.row, where)
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


def protocol_parameters(config: Path) -> StatisticsParameters:
    """The bootstrap parameters of the protocol config at ``config`` (``verify --config``)."""
    return load_config(config).statistics.parameters


def verify_results(
    directory: Path | str,
    *,
    parameters: StatisticsParameters | None = None,
    expected_sha256: Mapping[str, str] | None = None,
) -> VerificationReport:
    """Verify a QA results directory (see the module docstring for every check).

    Args:
        directory: the directory holding ``qa.rows.jsonl``, ``qa.summary.json``,
            ``qa.stats.json`` and optionally ``qa_run.json``.
        parameters: the protocol's bootstrap parameters (default: the reproduction
            protocol's, :data:`~deermem.eval.grading.DEFAULT_PARAMETERS`).
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
        what = "no such directory" if not root.exists() else "not a directory"
        found.add("(directory)", FieldProblem("path", "a results directory", what))
        files = dict.fromkeys(RESULT_FILES, "missing")
        return VerificationReport(
            directory=str(directory), findings=found.result(), rows=0, files=files, derived=None
        )
    texts = {
        name: _read(root / name, name, found, required=name != MARKER_FILE) for name in RESULT_FILES
    }
    for name, digest in (expected_sha256 or {}).items():
        _check_digest(root / name, name, digest, found)
    rows = RowsCheck(complete=False)
    rows_text = texts[ROWS_FILE]
    if rows_text is not None:
        rows = check_rows_text(rows_text, lambda problem, line: found.add(ROWS_FILE, problem, line))
    run = _check_run(texts[MARKER_FILE], found)
    derived = _derive(rows, run, texts, found, parameters or DEFAULT_PARAMETERS)
    if derived is not None:
        _compare_derived(derived, rows_text, run, texts, found)
    findings = found.result()
    statuses = _statuses(texts, findings, derived is not None)
    return VerificationReport(
        directory=str(directory),
        findings=findings,
        rows=len(rows.rows),
        files=statuses,
        derived=derived,
    )


def _read(path: Path, name: str, found: _Collector, *, required: bool) -> str | None:
    """A file's text, or ``None`` (with a finding if it is required or unreadable)."""
    try:
        return read_regular_file(path).decode("utf-8")
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
        actual = hashlib.sha256(read_regular_file(path)).hexdigest()
    except OSError:
        # The three required files are reported missing by the reader already.
        if name == MARKER_FILE:
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
        data = parse_json(text)
    except InvalidJsonError as error:
        found.add(
            MARKER_FILE, FieldProblem("(document)", "valid JSON", f"invalid JSON ({error.reason})")
        )
        return None
    problems = run_problems(data)
    for problem in problems:
        found.add(MARKER_FILE, problem)
    for difference in document_differences(document_text(data), text):
        found.add(MARKER_FILE, difference)
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
            data = parse_json(text)
        except InvalidJsonError:
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
            found.add(name, difference)
    if run is not None:
        qa = run.get("qa")
        capacity = qa.get("capacity") if isinstance(qa, dict) else None
        if capacity != derived.capacity:
            problem = FieldProblem(
                "qa.capacity", f"{derived.capacity} (the rows' capacity)", str(capacity)
            )
            found.add(MARKER_FILE, problem)


def _statuses(
    texts: Mapping[str, str | None], findings: tuple[Finding, ...], derived: bool
) -> dict[str, str]:
    failed = {finding.file for finding in findings}
    statuses: dict[str, str] = {}
    for name in RESULT_FILES:
        if name in failed:
            statuses[name] = "failed"
        elif texts[name] is None:
            statuses[name] = "absent" if name == MARKER_FILE else "missing"
        elif name in (SUMMARY_FILE, STATS_FILE) and not derived:
            statuses[name] = "not checked"
        else:
            statuses[name] = "verified"
    return statuses


# --- the summary a person reads -------------------------------------------------------------------


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
