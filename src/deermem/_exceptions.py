"""The one exception tree of deermem.

Every error deermem raises on purpose derives from :class:`DeerMemError`, so a
caller can catch "anything deermem refused" without catching programming
errors. Errors that stand for bad input also derive from :class:`ValueError`,
because that is what they are and what generic callers already handle::

    DeerMemError
    ├── ConfigError                 (ValueError) a configuration key has a bad value
    ├── FactValidationError         (ValueError) a fact field has a bad value
    └── EvaluationError             the evaluation harness refused to go on
        ├── ProtocolError           (ValueError) a protocol file (config, manifest,
        │                           prompt) is missing, malformed or inconsistent
        ├── DatasetIntegrityError   (ValueError) the dataset is not the pinned file,
        │   │                       or its content breaks the protocol's rules
        │   └── DatasetHashMismatchError  its SHA-256 is not the pinned one
        └── ResultsExistError       (FileExistsError) result files are already there

Later layers add their own branches here (storage, LLM, evaluation); keep the
tree drawn above in step with the classes below.

Errors carry their context as attributes (``field``, ``value``, ``source``) so
callers never parse messages; the message is for people.
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "DatasetHashMismatchError",
    "DatasetIntegrityError",
    "DeerMemError",
    "EvaluationError",
    "FactValidationError",
    "ProtocolError",
    "ResultsExistError",
]


class DeerMemError(Exception):
    """Root of every error deermem raises deliberately."""


class ConfigError(DeerMemError, ValueError):
    """A configuration could not be loaded or has invalid values.

    Attributes:
        problems: one human-readable line per invalid key, each naming the key,
            the value and what is allowed.
        source: where the configuration came from (a file path, ``"environment"``
            or ``"arguments"``), or ``None`` when unknown.
    """

    def __init__(self, problems: list[str], *, source: str | None = None) -> None:
        self.problems = list(problems)
        self.source = source
        prefix = f"{source}: " if source else ""
        if len(self.problems) == 1:
            message = f"{prefix}invalid configuration: {self.problems[0]}"
        else:
            lines = "\n".join(f"  - {problem}" for problem in self.problems)
            message = f"{prefix}invalid configuration ({len(self.problems)} problems):\n{lines}"
        super().__init__(message)


class FactValidationError(DeerMemError, ValueError):
    """A fact field has a value the canonical schema does not allow.

    Attributes:
        field: the camelCase field name, e.g. ``"confidence"``.
        value: the rejected value, as given.
        allowed: a short description of what the field accepts.
        fact_id: the id of the fact when it is known, for messages about stored data.
    """

    def __init__(
        self, field: str, value: object, allowed: str, *, fact_id: str | None = None
    ) -> None:
        self.field = field
        self.value = value
        self.allowed = allowed
        self.fact_id = fact_id
        where = f"fact {fact_id!r}: " if fact_id else ""
        super().__init__(f"{where}field {field!r} has value {_preview(value)}; {allowed}")


class EvaluationError(DeerMemError):
    """The evaluation harness refused to go on; nothing was written."""


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


def _preview(value: object, limit: int = 80) -> str:
    """Render a rejected value briefly, so a huge string cannot flood a message."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
