"""The published QA results: graded rows, the summary and statistics derived from them, the marker.

**Graded rows** (``qa.rows.jsonl``) record *that* an answer was right, never
*what* the question, the reference answer or the memory said: those are
private (LongMemEval's text, or a user's memory) and stay out of every
published file. A row holds exactly the 19 keys of :data:`ROW_KEYS`; its only
free text is ``prediction``, the model's own answer, which is published on
purpose so that anyone can re-grade it. :func:`row_problems` is the one place
that says what a valid row is. It checks every key's type and form, and the
relations inside a row that hold whatever the protocol: ``row_id`` is
``<case_id>__<policy>``, the grade agrees with its rule, the rule is one the
grader can give this prediction, at most ``capacity`` facts are kept, and the
two support fields agree. Identifier fields must look like identifiers (no
spaces, at most 128 characters), so no sentence of private text can hide in
them.

**The report.** ``grade-qa`` ends here and ``verify`` starts here: both
derive ``qa.summary.json`` and ``qa.stats.json`` from the same rows with the
same functions, so a published report can be re-derived and compared byte for
byte. The suites are kept apart (:data:`SUITES`); the summary has no pooled
group at all.

**The run marker** ``qa_run.json`` (reference §4.2, schema version 2) ties a
results directory to the exact protocol files and model settings it was
produced with. It must name the *environment variables* that held the
endpoint and the key, never their values; so besides the types, its check
rejects any string that looks like a credential (``sk-…``, ``Bearer …``) and
requires the two variable names to be variable names. ``run-qa`` writes it
and checks it (:mod:`deermem.eval.qa`); ``verify`` checks it here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, Any, Final, cast, get_args

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails

from deermem.eval.errors import ResultRowsError
from deermem.eval.files import (
    IDENTIFIER,
    MODEL_NAME,
    ROW_ID,
    SHA256,
    FieldProblem,
    Rule,
    describe_value,
    document_text,
    is_count,
    is_usage,
    jsonl_line,
    matching,
    record_problems,
    write_new_files,
)
from deermem.eval.grading import (
    CORRECT_RULES,
    DEFAULT_PARAMETERS,
    GRADER_VERSION,
    RULES,
    PairedComparison,
    StatisticsParameters,
    compare_pairs,
    grade_answer,
    possible_rules,
)
from deermem.policy import POLICIES

__all__ = [
    "AnswerToGrade",
    "build_qa_report",
    "grade_answer_row",
    "write_qa_report",
]

# --- graded rows ----------------------------------------------------------------------------------

ROW_SCHEMA_VERSION: Final = 1

SOURCE_LONGMEMEVAL: Final = "longmemeval"
SOURCE_SYNTHETIC: Final = "synthetic"
SOURCES: Final = (SOURCE_LONGMEMEVAL, SOURCE_SYNTHETIC)
"""Where a case comes from: the official LongMemEval questions or our own corrections."""
SUITE_OF_SOURCE: Final = {SOURCE_LONGMEMEVAL: "official", SOURCE_SYNTHETIC: "synthetic"}
"""The suite a source's cases are reported in."""
OVERALL: Final = "overall"
SUITES: Final = (*SUITE_OF_SOURCE.values(), OVERALL)
"""The suites results are reported in, kept apart on purpose: ``official`` (the
LongMemEval questions) and ``synthetic`` (our correction cases) measure
different things; ``overall`` pools them."""


@dataclass(frozen=True, slots=True)
class QaRow:
    """One graded answer: a line of ``qa.rows.jsonl``. Build with :meth:`from_dict`."""

    row_id: str
    case_id: str
    source: str
    scenario: str
    question_type: str
    policy: str
    capacity: int
    kept_fact_ids: tuple[str, ...]
    support_all_retained: bool
    support_recall: float
    prediction: str
    grade_correct: bool
    grade_rule: str
    grader_version: str
    attempts: int
    request_fingerprint: str
    response_model: str | None
    usage: Mapping[str, int]
    schema_version: int = ROW_SCHEMA_VERSION

    def to_json_line(self) -> str:
        """The row's exact line in ``qa.rows.jsonl``, newline included."""
        return jsonl_line(asdict(self))

    @classmethod
    def from_dict(cls, data: object) -> QaRow:
        """Validate a parsed row and build it.

        Raises:
            ResultRowsError: the row breaks the schema; every problem is named.
        """
        problems = row_problems(data)
        if problems:
            row = _row_label(data)
            raise ResultRowsError([f"{row}: {problem}" for problem in problems])
        record = cast(dict[str, object], data)
        return cls(
            row_id=cast(str, record["row_id"]),
            case_id=cast(str, record["case_id"]),
            source=cast(str, record["source"]),
            scenario=cast(str, record["scenario"]),
            question_type=cast(str, record["question_type"]),
            policy=cast(str, record["policy"]),
            capacity=cast(int, record["capacity"]),
            kept_fact_ids=tuple(cast(list[str], record["kept_fact_ids"])),
            support_all_retained=cast(bool, record["support_all_retained"]),
            support_recall=cast(float, record["support_recall"]),
            prediction=cast(str, record["prediction"]),
            grade_correct=cast(bool, record["grade_correct"]),
            grade_rule=cast(str, record["grade_rule"]),
            grader_version=cast(str, record["grader_version"]),
            attempts=cast(int, record["attempts"]),
            request_fingerprint=cast(str, record["request_fingerprint"]),
            response_model=cast("str | None", record["response_model"]),
            usage=dict(cast(dict[str, int], record["usage"])),
            schema_version=cast(int, record["schema_version"]),
        )


@dataclass(frozen=True, slots=True)
class AnswerToGrade:
    """One stored answer joined with the task recomputed from the protocol.

    ``grade-qa`` fills the case fields, ``kept_fact_ids``, ``support_fact_ids``
    and ``reference`` from the task it recomputes from the protocol and the
    dataset — never from the stored answer, which could have been edited — and
    takes ``prediction``, ``attempts``, ``request_fingerprint``,
    ``response_model`` and ``usage`` from the stored answer after checking its
    identity fields and fingerprint against the task.
    """

    case_id: str
    source: str
    scenario: str
    question_type: str
    policy: str
    capacity: int
    kept_fact_ids: tuple[str, ...]
    support_fact_ids: tuple[str, ...]
    reference: str
    prediction: str
    attempts: int
    request_fingerprint: str
    response_model: str | None
    usage: Mapping[str, int]


def grade_answer_row(answer: AnswerToGrade) -> QaRow:
    """Grade one answer blind and build its published row (without the reference).

    Raises:
        GradingError: the reference has no tokens.
        ResultRowsError: a field of ``answer`` does not fit the row schema.
    """
    correct, rule = grade_answer(answer.prediction, answer.reference)
    kept = set(answer.kept_fact_ids)
    support = answer.support_fact_ids
    retained = sum(1 for fact_id in support if fact_id in kept)
    return QaRow.from_dict(
        {
            "attempts": answer.attempts,
            "capacity": answer.capacity,
            "case_id": answer.case_id,
            "grade_correct": correct,
            "grade_rule": rule,
            "grader_version": GRADER_VERSION,
            "kept_fact_ids": list(answer.kept_fact_ids),
            "policy": answer.policy,
            "prediction": answer.prediction,
            "question_type": answer.question_type,
            "request_fingerprint": answer.request_fingerprint,
            "response_model": answer.response_model,
            "row_id": f"{answer.case_id}__{answer.policy}",
            "scenario": answer.scenario,
            "schema_version": ROW_SCHEMA_VERSION,
            "source": answer.source,
            "support_all_retained": bool(support) and retained == len(support),
            "support_recall": retained / len(support) if support else 0.0,
            "usage": dict(answer.usage),
        }
    )


def render_rows(rows: Sequence[QaRow]) -> str:
    """The text of ``qa.rows.jsonl``: one canonical line per row, sorted by ``row_id``."""
    return "".join(row.to_json_line() for row in sorted(rows, key=lambda row: row.row_id))


def row_problems(data: object) -> list[FieldProblem]:
    """Every way ``data`` (a parsed JSON value) fails to be a valid graded row."""
    if not isinstance(data, dict):
        return [FieldProblem("(row)", "a JSON object", describe_value(data, reveal=False))]
    problems = record_problems(data, _FIELD_CHECKS, record="a graded row", shown=_shown)
    return problems or _relation_problems(data)


def _shown(key: str, value: object) -> str:
    return describe_value(value, reveal=key in _REVEALED)


def _relation_problems(row: dict[str, object]) -> list[FieldProblem]:
    """Relations between the fields of one well-typed row."""
    problems: list[FieldProblem] = []
    row_id = f"{row['case_id']}__{row['policy']}"
    if row["row_id"] != row_id:
        problems.append(
            FieldProblem("row_id", describe_value(row_id), describe_value(row["row_id"]))
        )
    rule = cast(str, row["grade_rule"])
    if row["grade_correct"] is not (rule in CORRECT_RULES):
        expected = f"{describe_value(rule in CORRECT_RULES)} (rule {describe_value(rule)})"
        problems.append(
            FieldProblem("grade_correct", expected, describe_value(row["grade_correct"]))
        )
    allowed = possible_rules(cast(str, row["prediction"]))
    if rule not in allowed:
        expected = "a rule the grader can give this prediction: " + ", ".join(
            r for r in RULES if r in allowed
        )
        problems.append(FieldProblem("grade_rule", expected, describe_value(rule)))
    kept = cast(list[str], row["kept_fact_ids"])
    if len(kept) > cast(int, row["capacity"]):
        expected = f"at most capacity = {row['capacity']} ids"
        problems.append(FieldProblem("kept_fact_ids", expected, f"{len(kept)} ids"))
    if row["support_all_retained"] is not (row["support_recall"] == 1.0):
        expected = f"support_recall {'1.0' if row['support_all_retained'] else 'below 1.0'}"
        expected += f" when support_all_retained is {describe_value(row['support_all_retained'])}"
        problems.append(
            FieldProblem("support_recall", expected, describe_value(row["support_recall"]))
        )
    return problems


def _is_kept_ids(value: object) -> bool:
    return (
        isinstance(value, list)
        and len(value) > 0
        and all(isinstance(item, str) and IDENTIFIER.fullmatch(item) for item in value)
        and len(set(value)) == len(value)
    )


_FIELD_CHECKS: Final[dict[str, Rule]] = {
    "attempts": (is_count(1), "an integer ≥ 1"),
    "capacity": (is_count(1), "an integer ≥ 1"),
    "case_id": (matching(IDENTIFIER), "an identifier"),
    "grade_correct": (lambda v: isinstance(v, bool), "true or false"),
    "grade_rule": (lambda v: v in RULES, "one of " + ", ".join(RULES)),
    "grader_version": (lambda v: v == GRADER_VERSION, describe_value(GRADER_VERSION)),
    "kept_fact_ids": (_is_kept_ids, "a non-empty list of unique fact ids"),
    "policy": (lambda v: v in POLICIES, "one of " + ", ".join(POLICIES)),
    "prediction": (lambda v: isinstance(v, str), "a string"),
    "question_type": (matching(IDENTIFIER), "an identifier"),
    "request_fingerprint": (matching(SHA256), "64 lowercase hex digits"),
    "response_model": (lambda v: v is None or matching(MODEL_NAME)(v), "a model name or null"),
    "row_id": (matching(ROW_ID), "an identifier"),
    "scenario": (matching(IDENTIFIER), "an identifier"),
    "schema_version": (lambda v: type(v) is int and v == ROW_SCHEMA_VERSION, "1"),
    "source": (lambda v: v in SOURCES, "one of " + ", ".join(SOURCES)),
    "support_all_retained": (lambda v: isinstance(v, bool), "true or false"),
    "support_recall": (
        lambda v: type(v) is float and 0.0 <= v <= 1.0,
        "a float between 0.0 and 1.0",
    ),
    "usage": (is_usage, "an object of non-negative integer token counts"),
}

ROW_KEYS: Final = tuple(_FIELD_CHECKS)
"""The 19 keys of a graded row, sorted."""

# Fields whose bad values are safe to quote in a message: numbers, flags, labels.
_REVEALED: Final = frozenset(
    {
        "attempts",
        "capacity",
        "grade_correct",
        "grade_rule",
        "grader_version",
        "policy",
        "schema_version",
        "source",
        "support_all_retained",
        "support_recall",
    }
)


def row_id_of(data: object) -> str | None:
    """The ``row_id`` of a parsed row if it is well-formed (safe to name it by)."""
    row_id = data.get("row_id") if isinstance(data, dict) else None
    if isinstance(row_id, str) and ROW_ID.fullmatch(row_id):
        return row_id
    return None


def _row_label(data: object) -> str:
    """How to name a row in a message: its row_id if it has a sane one."""
    row_id = row_id_of(data)
    return f"row {row_id}" if row_id else "row (without a valid row_id)"


# --- the summary and the statistics ---------------------------------------------------------------

ROWS_FILE: Final = "qa.rows.jsonl"
SUMMARY_FILE: Final = "qa.summary.json"
STATS_FILE: Final = "qa.stats.json"
MARKER_FILE: Final = "qa_run.json"
"""The run marker ``run-qa`` writes; see :class:`RunMarker`."""


def report_paths(directory: Path) -> tuple[Path, Path, Path]:
    """The three files ``grade-qa`` writes, in writing order (the last marks them complete)."""
    return (directory / ROWS_FILE, directory / SUMMARY_FILE, directory / STATS_FILE)


REPORT_SCHEMA_VERSION: Final = 1


# Fields that describe the case, so both rows of a pair must agree on them.
_CASE_FIELDS: Final = ("source", "scenario", "question_type", "capacity")


@dataclass(frozen=True, slots=True)
class SummaryGroup:
    """Accuracy of one policy on one scenario: an entry of ``groups`` in ``qa.summary.json``.

    Its fields are the entry's keys (:func:`dataclasses.asdict`); ``accuracy``
    is derived, correct answers over cases.
    """

    source: str
    scenario: str
    policy: str
    cases: int
    correct: int
    accuracy: float = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "accuracy", self.correct / self.cases)


@dataclass(frozen=True, slots=True)
class QaReport:
    """A complete QA report, ready to write or to compare with a published one.

    Attributes:
        protocol_id: the protocol the rows were produced under.
        rows: the graded rows, sorted by ``row_id``.
        groups: the summary groups, sorted by (source, scenario, policy).
        comparisons: suite name → statistics, in the order of :data:`SUITES`.
    """

    protocol_id: str
    rows: tuple[QaRow, ...]
    groups: tuple[SummaryGroup, ...]
    comparisons: Mapping[str, PairedComparison]

    @property
    def capacity(self) -> int:
        """The capacity every row was answered at."""
        return self.rows[0].capacity

    def summary(self) -> dict[str, object]:
        """The ``qa.summary.json`` document."""
        return summary_document(self.groups, protocol_id=self.protocol_id, capacity=self.capacity)

    def statistics(self) -> dict[str, object]:
        """The ``qa.stats.json`` document."""
        return statistics_document(self.comparisons, protocol_id=self.protocol_id)

    def files(self) -> dict[str, str]:
        """File name → exact text of the three result files, in writing order."""
        return {
            ROWS_FILE: render_rows(self.rows),
            SUMMARY_FILE: document_text(self.summary()),
            STATS_FILE: document_text(self.statistics()),
        }


def check_rows(rows: Iterable[QaRow]) -> tuple[QaRow, ...]:
    """Sort rows by ``row_id`` and check that they form complete, consistent pairs.

    Raises:
        ResultRowsError: naming every duplicate, unpaired or inconsistent row
            (see :func:`pairing_problems`).
    """
    ordered = tuple(sorted(rows, key=lambda row: row.row_id))
    problems = pairing_problems(ordered)
    if problems:
        raise ResultRowsError([str(problem) for problem in problems])
    return ordered


def pairing_problems(rows: Sequence[QaRow]) -> list[FieldProblem]:
    """Every way the rows fail to be complete, consistent pairs of one capacity.

    Every case needs exactly one row per policy, the two rows of a case must
    agree on the case fields (source, scenario, question type, capacity), and
    all rows must share one capacity.
    """
    if not rows:
        return [FieldProblem("(rows)", "at least one pair of rows", "no rows")]
    problems: list[FieldProblem] = []
    cases: dict[str, dict[str, QaRow]] = {}
    for row in rows:
        policies = cases.setdefault(row.case_id, {})
        if row.policy in policies:
            problems.append(
                FieldProblem("row_id", "a row_id used once", "a repeated row_id", row.row_id)
            )
        policies[row.policy] = row
    for case_id, policies in cases.items():
        missing = [policy for policy in POLICIES if policy not in policies]
        if missing:
            expected = "a row for each policy (" + ", ".join(POLICIES) + ")"
            found = "no row for " + ", ".join(missing)
            problems.append(FieldProblem("policy", expected, found, f"case {case_id}"))
            continue
        first, second = (policies[policy] for policy in POLICIES)
        for name in _CASE_FIELDS:
            want, got = getattr(first, name), getattr(second, name)
            if want != got:
                expected = f"{describe_value(want)} (as in {first.row_id})"
                problems.append(FieldProblem(name, expected, describe_value(got), second.row_id))
    capacities = sorted({row.capacity for row in rows})
    if len(capacities) > 1:
        found = ", ".join(map(str, capacities))
        problems.append(FieldProblem("capacity", "one capacity for all rows", found))
    return problems


def summarize(rows: Iterable[QaRow]) -> tuple[SummaryGroup, ...]:
    """Accuracy per (source, scenario, policy), sorted by that tuple."""
    tallies: dict[tuple[str, str, str], list[int]] = {}
    for row in rows:
        tally = tallies.setdefault((row.source, row.scenario, row.policy), [0, 0])
        tally[0] += 1
        tally[1] += row.grade_correct
    return tuple(
        SummaryGroup(source, scenario, policy, cases, correct)
        for (source, scenario, policy), (cases, correct) in sorted(tallies.items())
    )


def compare_suites(
    rows: Iterable[QaRow], parameters: StatisticsParameters = DEFAULT_PARAMETERS
) -> dict[str, PairedComparison]:
    """McNemar and the bootstrap for each suite, over cases sorted by ``case_id``.

    Args:
        rows: complete pairs, as :func:`check_rows` returns them.
        parameters: the bootstrap's seed, iterations and alpha.

    Raises:
        ResultRowsError: a suite has no cases.
    """
    grades: dict[str, dict[str, bool]] = {}
    sources: dict[str, str] = {}
    for row in rows:
        grades.setdefault(row.case_id, {})[row.policy] = row.grade_correct
        sources[row.case_id] = row.source
    pairs: dict[str, list[tuple[bool, bool]]] = {suite: [] for suite in SUITES}
    for case_id in sorted(grades):
        pair = (grades[case_id][POLICIES[0]], grades[case_id][POLICIES[1]])
        pairs[SUITE_OF_SOURCE[sources[case_id]]].append(pair)
        pairs[OVERALL].append(pair)
    empty = [suite for suite in SUITES if not pairs[suite]]
    if empty:
        raise ResultRowsError([f"suite {suite!r} has no cases" for suite in empty])
    return {suite: compare_pairs(pairs[suite], parameters) for suite in SUITES}


def summary_document(
    groups: Sequence[SummaryGroup], *, protocol_id: str, capacity: int
) -> dict[str, object]:
    """The ``qa.summary.json`` document for these groups."""
    return {
        "grader_version": GRADER_VERSION,
        "groups": [asdict(group) for group in groups],
        "protocol_id": protocol_id,
        "qa_capacity": capacity,
        "schema_version": REPORT_SCHEMA_VERSION,
    }


def statistics_document(
    comparisons: Mapping[str, PairedComparison], *, protocol_id: str
) -> dict[str, object]:
    """The ``qa.stats.json`` document for these suites."""
    return {
        "grader_version": GRADER_VERSION,
        "policies": list(POLICIES),
        "protocol_id": protocol_id,
        "schema_version": REPORT_SCHEMA_VERSION,
        "suites": {suite: asdict(comparison) for suite, comparison in comparisons.items()},
    }


def build_qa_report(
    rows: Iterable[QaRow],
    *,
    protocol_id: str,
    parameters: StatisticsParameters = DEFAULT_PARAMETERS,
) -> QaReport:
    """Check the rows and derive everything the report publishes.

    Raises:
        ResultRowsError: the rows are not complete, consistent pairs, or a suite
            has no cases.
    """
    ordered = check_rows(rows)
    return QaReport(
        protocol_id=protocol_id,
        rows=ordered,
        groups=summarize(ordered),
        comparisons=compare_suites(ordered, parameters),
    )


def write_qa_report(directory: Path, report: QaReport) -> tuple[Path, ...]:
    """Write ``qa.rows.jsonl``, ``qa.summary.json`` and ``qa.stats.json`` as one set, in that order.

    Raises:
        ResultsExistError: the set is complete (``qa.stats.json`` exists);
            nothing is written.
    """
    return write_new_files(
        [(directory / name, text.encode("utf-8")) for name, text in report.files().items()]
    )


# --- the run marker's schema ----------------------------------------------------------------------

RUN_SCHEMA_VERSION: Final = 2

_GIT_COMMIT: Final = r"^([0-9a-f]{40}|[0-9a-f]{64})$"
_SECRET: Final = re.compile(r"\bsk-[A-Za-z0-9_-]{6,}|\bBearer\s+\S", re.IGNORECASE)
# Fields whose bad values might be private text (a path, a name, a key): described, never quoted.
_HIDDEN: Final = frozenset(
    {
        "dataset.filename",
        "dataset.repository",
        "protocol_id",
        "qa.api_key_env",
        "qa.base_url_env",
        "qa.model",
    }
)


def _anchored(pattern: re.Pattern[str] | str) -> str:
    """A pattern the whole value must match."""
    return f"^({pattern if isinstance(pattern, str) else pattern.pattern})$"


def _exact(expected: object) -> BeforeValidator:
    """This value, of this type: ``2.0`` and ``True`` are not ``2``."""

    def validate(value: object) -> object:
        if type(value) is not type(expected) or value != expected:
            raise ValueError("not the value the schema pins")
        return value

    return BeforeValidator(validate)


def _float(value: object) -> object:
    """A float as written: ``0`` is not the temperature ``0.0`` a request sends."""
    if type(value) is not float:
        raise ValueError("not a float")
    return value


def _described(description: str, **constraints: Any) -> Any:
    """A field's constraints and what it expects, as a problem states it (``expected ...``)."""
    return Field(description=description, **constraints)


_Hash = Annotated[str, _described("64 lowercase hex digits", pattern=_anchored(SHA256))]
_EnvName = Annotated[
    str, _described("an environment variable name", pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
]
_AtLeastOne = Annotated[int, _described("an integer ≥ 1", ge=1)]


class _MarkerPart(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, defer_build=True)


class _MarkerArtifacts(_MarkerPart):
    answer_prompt_sha256: _Hash
    config_sha256: _Hash
    dataset_sha256: _Hash
    official_manifest_sha256: _Hash
    synthetic_manifest_sha256: _Hash


class _MarkerDataset(_MarkerPart):
    filename: Annotated[str, _described("a file name", pattern=_anchored(IDENTIFIER))]
    repository: Annotated[
        str,
        _described(
            "a repository name",
            pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}(/[A-Za-z0-9][A-Za-z0-9_.-]{0,99})?$",
        ),
    ]
    revision: Annotated[str, _described("a 40-digit lowercase hex revision", pattern=_GIT_COMMIT)]
    sha256: _Hash


class _MarkerGit(_MarkerPart):
    dirty: Annotated[bool | None, _described("true, false or null")]
    head: Annotated[str | None, _described("a commit hash or null", pattern=_GIT_COMMIT)]


class _MarkerQa(_MarkerPart):
    api_key_env: _EnvName
    base_url_env: _EnvName
    capacity: _AtLeastOne
    grader_version: Annotated[str, _exact(GRADER_VERSION), _described(f'"{GRADER_VERSION}"')]
    max_attempts: _AtLeastOne
    max_tokens: _AtLeastOne
    model: Annotated[str, _described("a model name", pattern=_anchored(MODEL_NAME))]
    stream: Annotated[bool, _described("true or false")]
    temperature: Annotated[float, BeforeValidator(_float), _described("a float ≥ 0.0", ge=0.0)]
    timeout_seconds: Annotated[float, _described("a number ≥ 1", ge=1)]
    workers: _AtLeastOne


class RunMarker(_MarkerPart):
    """The run marker ``qa_run.json``: which protocol files and QA settings a run directory has.

    ``git`` is ``null`` when the run was not made from a git checkout (deermem
    installed from a wheel).
    """

    artifacts: _MarkerArtifacts
    created_at: Annotated[
        str,
        _described(
            "an ISO UTC timestamp ending in Z",
            pattern=r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?Z$",
        ),
    ]
    dataset: _MarkerDataset
    git: Annotated[_MarkerGit | None, _described("a JSON object or null")]
    protocol_id: Annotated[str, _described("an identifier", pattern=_anchored(IDENTIFIER))]
    qa: _MarkerQa
    schema_version: Annotated[int, _exact(RUN_SCHEMA_VERSION), _described(str(RUN_SCHEMA_VERSION))]


def run_problems(data: object) -> list[FieldProblem]:
    """Every way ``data`` (the parsed marker) breaks the ``qa_run.json`` schema.

    A problem names the dotted key and what its field expects; a found value is
    quoted unless it might be private text. Any string that looks like a
    credential is a problem wherever it is, and the dataset's hash must be the
    one the artifacts list.
    """
    try:
        marker: RunMarker | None = RunMarker.model_validate(data)
        problems: list[FieldProblem] = []
    except ValidationError as error:
        marker = None
        problems = [_marker_problem(detail) for detail in error.errors(include_url=False)]
    problems.extend(_secret_problems(data, ""))
    if (
        marker is not None
        and not problems
        and marker.artifacts.dataset_sha256 != marker.dataset.sha256
    ):
        expected = f"{describe_value(marker.dataset.sha256)} (dataset.sha256)"
        found = describe_value(marker.artifacts.dataset_sha256)
        problems.append(FieldProblem("artifacts.dataset_sha256", expected, found))
    return problems


def _marker_problem(detail: ErrorDetails) -> FieldProblem:
    where = ".".join(str(part) for part in detail["loc"])
    found = detail["input"]
    if detail["type"] == "missing":
        return FieldProblem(where, "a value", "no such key")
    if detail["type"] == "extra_forbidden":
        return FieldProblem(where, "no such key", describe_value(found, reveal=False))
    if detail["type"] in ("model_type", "model_attributes_type", "dict_type"):
        return FieldProblem(
            where or "(document)", "a JSON object", describe_value(found, reveal=False)
        )
    expected = _marker_field(detail["loc"]).description or detail["msg"]
    return FieldProblem(where, expected, describe_value(found, reveal=where not in _HIDDEN))


def _marker_field(location: tuple[int | str, ...]) -> FieldInfo:
    """The marker field at a dotted location (each step a section of the marker)."""
    section: type[BaseModel] = RunMarker
    for part in location[:-1]:
        annotation = section.model_fields[str(part)].annotation
        section = next(
            arg
            for arg in (annotation, *get_args(annotation))
            if isinstance(arg, type) and issubclass(arg, BaseModel)
        )
    return section.model_fields[str(location[-1])]


def _secret_problems(value: object, path: str) -> list[FieldProblem]:
    """Strings anywhere in the marker that look like an API key or an auth header."""
    if isinstance(value, str):
        if _SECRET.search(value):
            where = path or "(document)"
            return [FieldProblem(where, "no credential", "a string that looks like an API key")]
        return []
    found: list[FieldProblem] = []
    if isinstance(value, dict):
        for key, child in value.items():
            found.extend(_secret_problems(child, f"{path}.{key}" if path else str(key)))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found.extend(_secret_problems(child, f"{path}[{index}]"))
    return found
