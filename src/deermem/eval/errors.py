"""The errors of the evaluation harness: one branch of deermem's exception tree.

Every refusal of ``deermem eval`` is an :class:`EvaluationError`, itself a
:class:`~deermem.DeerMemError`, so a caller can catch "the evaluation refused"
apart from the memory library's errors, or both at once. Errors that stand for
bad input also derive from :class:`ValueError`::

    DeerMemError
    └── EvaluationError             the reproducible evaluation refused to go on
        ├── GradingError            (ValueError) the grader was given an unusable reference
        ├── StatisticsError         (ValueError) statistics asked of no pairs or bad parameters
        ├── ResultRowsError         (ValueError) graded rows break the schema or the pairing
        ├── ProtocolError           (ValueError) a protocol file (config, manifest,
        │                           prompt) is missing, malformed or inconsistent
        ├── DatasetIntegrityError   (ValueError) the dataset is not the pinned file,
        │   │                       or its content breaks the protocol's rules
        │   └── DatasetHashMismatchError  its SHA-256 is not the pinned one
        ├── ProviderEnvironmentError (ValueError) the answer endpoint's environment
        │                           variables are unset or blank
        ├── RunMarkerError          a QA run's qa_run.json is missing, unreadable, or
        │                           was written under other protocol files or settings
        ├── AnswerRowIntegrityError stored answers are missing, malformed, or not the
        │                           answers to the tasks recomputed from the protocol
        └── ResultsExistError       (FileExistsError) result files are already there;
                                    nothing is overwritten

Their context is in attributes (``file``, ``key``, ``paths`` ...); messages
never quote dataset text or a key. They stay in this package (:mod:`deermem`
exports the library's errors only).
"""

from __future__ import annotations

from deermem.errors import DeerMemError, preview

__all__ = [
    "AnswerRowIntegrityError",
    "DatasetHashMismatchError",
    "DatasetIntegrityError",
    "EvaluationError",
    "GradingError",
    "ProtocolError",
    "ProviderEnvironmentError",
    "ResultRowsError",
    "ResultsExistError",
    "RunMarkerError",
    "StatisticsError",
]


class EvaluationError(DeerMemError):
    """Base of every error the evaluation harness raises on purpose."""


class GradingError(EvaluationError, ValueError):
    """The grader cannot judge against this reference (it has no tokens).

    An empty reference is a defect of the protocol, not a wrong answer, so it
    stops the grading instead of producing a grade.
    """

    def __init__(self, reference: str) -> None:
        self.reference = reference
        super().__init__(
            f"grading reference {preview(reference)} has no letters or digits to compare with"
        )


class StatisticsError(EvaluationError, ValueError):
    """A statistic was asked of no pairs, or with parameters outside their range.

    Attributes:
        parameter: the offending parameter (``"pairs"``, ``"alpha"``, ...).
        value: the rejected value.
    """

    def __init__(self, parameter: str, value: object, allowed: str) -> None:
        self.parameter = parameter
        self.value = value
        self.allowed = allowed
        super().__init__(f"{parameter} = {preview(value)}: {allowed}")


class ResultRowsError(EvaluationError, ValueError):
    """Graded rows cannot be summarised: a field, the pairing or the order is wrong.

    Attributes:
        problems: one line per problem, each naming the row, the field, what was
            expected and what was found.
    """

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        if len(self.problems) == 1:
            message = f"invalid graded rows: {self.problems[0]}"
        else:
            lines = "\n".join(f"  - {problem}" for problem in self.problems)
            message = f"invalid graded rows ({len(self.problems)} problems):\n{lines}"
        super().__init__(message)


class ProtocolError(EvaluationError, ValueError):
    """A protocol file is missing, malformed or disagrees with another.

    Attributes:
        file: the path of the offending file, as given.
        key: the dotted key inside the file (``"pool.capacities"``,
            ``"cases[2].loss_rank"``), or ``None`` when the problem concerns the
            whole file.
        problem: what is wrong, for people.
    """

    def __init__(self, file: str, key: str | None, problem: str) -> None:
        self.file = file
        self.key = key
        self.problem = problem
        where = f"{file}: {key}" if key else file
        super().__init__(f"{where}: {problem}")


class DatasetIntegrityError(EvaluationError, ValueError):
    """The dataset file cannot be used with the protocol.

    Attributes:
        path: the dataset path, as given.
        problem: what is wrong, for people. Never quotes dataset text.
    """

    def __init__(self, path: str, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"{path}: {problem}")


class DatasetHashMismatchError(DatasetIntegrityError):
    """The dataset's SHA-256 is not the one the protocol pins; it was not parsed.

    Attributes:
        expected: the pinned SHA-256 (lowercase hex).
        actual: the SHA-256 of the file that was given.
    """

    def __init__(self, path: str, *, expected: str, actual: str) -> None:
        self.expected = expected
        self.actual = actual
        super().__init__(
            path,
            f"SHA-256 mismatch: the protocol pins {expected}, this file has {actual}; "
            "refusing to read it (is it the pinned revision of the file?)",
        )


class ProviderEnvironmentError(EvaluationError, ValueError):
    """The variables that name the answer endpoint and its key are unset, blank or unusable.

    Attributes:
        variables: the offending variables, the base-URL variable first.
    """

    def __init__(self, variables: list[str], *, problem: str | None = None) -> None:
        self.variables = list(variables)
        if problem is None:
            problem = "missing provider environment variables: " + ", ".join(self.variables)
        super().__init__(
            f"{problem} (set them to the endpoint's API root and its key, "
            "or answer with the embedded model: --provider local)"
        )


class RunMarkerError(EvaluationError):
    """A QA run directory's ``qa_run.json`` does not fit the current protocol.

    Attributes:
        path: the marker file.
        changed: what differs (``"config"``, ``"answer prompt"``, ``"qa.model"``
            ...); empty when the marker is missing or unreadable.
        problem: what is wrong, for people.
    """

    def __init__(self, path: str, problem: str, *, changed: tuple[str, ...] = ()) -> None:
        self.path = path
        self.changed = changed
        self.problem = problem
        super().__init__(f"{path}: {problem}")


class AnswerRowIntegrityError(EvaluationError):
    """Stored answers cannot be graded: missing, malformed, or not the protocol's.

    Grading is refused as a whole: every answer must be the answer to the task
    recomputed from the current protocol and dataset (identity fields, kept
    facts in rank order, request fingerprint).

    Attributes:
        row_ids: the rows concerned, sorted.
        problems: one line per problem, each naming the row and the field.
    """

    def __init__(self, summary: str, row_ids: list[str], problems: list[str]) -> None:
        self.row_ids = sorted(set(row_ids))
        self.problems = list(problems)
        lines = "\n".join(f"  - {problem}" for problem in self.problems)
        super().__init__(f"{summary}: {', '.join(self.row_ids)}" + (f"\n{lines}" if lines else ""))


class ResultsExistError(EvaluationError, FileExistsError):
    """Result files are already present; an evaluation never overwrites results.

    Attributes:
        paths: every result path that already exists, sorted.
    """

    def __init__(self, paths: list[str]) -> None:
        self.paths = sorted(paths)
        super().__init__(
            "refusing to overwrite existing result files: "
            + ", ".join(self.paths)
            + " (choose a new output directory or move them away)"
        )
