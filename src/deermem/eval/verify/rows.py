"""Checks of ``qa.rows.jsonl`` that need nothing but the file itself.

The rows are the source everything else is derived from, so they are checked
line by line before anything is derived from them:

* **form** — UTF-8, one JSON object per line, each line exactly as the canonical
  serialiser writes it (sorted keys, default separators), one final newline;
* **schema** — :func:`~deermem.eval.qa.rows.row_problems`: the 19 keys and
  nothing else, types and forms, the relations inside a row;
* **order and pairing** — strictly sorted by ``row_id`` (so no duplicates), both
  policies for every case, case fields equal within a pair, one capacity;
* **the protocol's fact ids** (reference §3.4) — a case's kept ids are its own
  (``gold_<case_id>`` or ``d_<case_id>_…``), and ``support_all_retained`` says
  whether ``gold_<case_id>`` was kept;
* **fingerprints** — the request depends only on the case and the kept facts,
  so within a case two rows share a fingerprint exactly when they kept the same
  set of facts, and no two cases share one.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

from deermem.eval._problems import FieldProblem
from deermem.eval.qa.results import pairing_problems
from deermem.eval.qa.rows import POLICIES, QaRow, row_id_of, row_problems
from deermem.eval.result_files import jsonl_line
from deermem.eval.verify.jsondiff import first_text_difference

__all__ = ["RowsCheck", "check_rows_text"]

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
        data = json.loads(line)
    except json.JSONDecodeError as error:
        report(FieldProblem("(line)", "one JSON object", f"invalid JSON ({error.msg})"), number)
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
