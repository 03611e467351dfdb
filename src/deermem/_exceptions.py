"""The one exception tree of deermem.

Every error deermem raises on purpose derives from :class:`DeerMemError`, so a
caller can catch "anything deermem refused" without catching programming
errors. Errors that stand for bad input also derive from :class:`ValueError`,
because that is what they are and what generic callers already handle::

    DeerMemError
    ├── ConfigError                 (ValueError) a configuration key has a bad value
    ├── FactValidationError         (ValueError) a fact field has a bad value
    ├── DuplicateFactError          (ValueError) an equal fact is already stored
    ├── FactNotFoundError           (KeyError)   no fact (or archive entry) with that id
    └── StorageError                             the store could not do what was asked
        ├── CorruptMemoryFile                    a stored file is not what it must be
        ├── UnsafeIdentifierError   (ValueError) a user id or agent name cannot address a path
        ├── StoreLockTimeout        (TimeoutError) another process held the lock too long
        └── RevisionConflict                     the data changed since it was read
            ├── ManifestRevisionConflict         ... the user's summary document
            └── FactRevisionConflict             ... one fact

Later layers add their own branches here (storage, LLM, evaluation); keep the
tree drawn above in step with the classes below.

Errors carry their context as attributes (``field``, ``value``, ``source``) so
callers never parse messages; the message is for people.
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "CorruptMemoryFile",
    "DeerMemError",
    "DuplicateFactError",
    "FactNotFoundError",
    "FactRevisionConflict",
    "FactValidationError",
    "ManifestRevisionConflict",
    "RevisionConflict",
    "StorageError",
    "StoreLockTimeout",
    "UnsafeIdentifierError",
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


class DuplicateFactError(DeerMemError, ValueError):
    """A new fact repeats one already stored (compared stripped and case-folded).

    Attributes:
        existing_id: the id of the stored fact it repeats.
    """

    def __init__(self, existing_id: str) -> None:
        self.existing_id = existing_id
        super().__init__(f"an equal fact is already stored as {existing_id!r}")


class FactNotFoundError(DeerMemError, KeyError):
    """No fact with this id exists where it was looked for.

    Attributes:
        fact_id: the id that was asked for.
        where: ``"memory"`` for the active facts, ``"archive"`` for the archive.
    """

    def __init__(self, fact_id: str, *, where: str = "memory") -> None:
        self.fact_id = fact_id
        self.where = where
        super().__init__(fact_id)

    def __str__(self) -> str:
        # KeyError would print repr(fact_id); people need a sentence.
        place = "in the archive" if self.where == "archive" else "in this memory"
        return f"no fact {self.fact_id!r} {place}"


class StorageError(DeerMemError):
    """The store could not carry out an operation; nothing was changed."""


class CorruptMemoryFile(StorageError):
    """A stored file cannot be read as what it must be.

    Loading stops instead of treating the data as empty, so the next write
    cannot overwrite what is left of it.

    Attributes:
        path: the file, as a string.
        problem: what is wrong with it, for people.
    """

    def __init__(self, path: object, problem: str) -> None:
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


class UnsafeIdentifierError(StorageError, ValueError):
    """A user id or agent name cannot be used to address a storage location.

    Attributes:
        kind: ``"user id"`` or ``"agent name"``.
        value: the rejected value, as given.
        reason: what is allowed.
    """

    def __init__(self, kind: str, value: object, reason: str) -> None:
        self.kind = kind
        self.value = value
        self.reason = reason
        super().__init__(f"{kind} {_preview(value)} is not allowed: {reason}")


class StoreLockTimeout(StorageError, TimeoutError):
    """Another writer held a user's lock for longer than the configured timeout.

    Attributes:
        path: the lock file.
        timeout: seconds waited.
    """

    def __init__(self, path: object, timeout: float) -> None:
        self.path = str(path)
        self.timeout = timeout
        super().__init__(
            f"{self.path}: could not take the lock within {timeout:g} s; another process "
            "is writing this memory (raise file_lock_timeout_seconds if this is expected)"
        )


class RevisionConflict(StorageError):
    """What a change was based on is no longer what is stored; reload and retry.

    Attributes:
        expected: the revision the change was based on (``None``: "must not exist").
        actual: the revision stored now (``None``: "does not exist").
    """

    def __init__(self, message: str, *, expected: int | None, actual: int | None) -> None:
        self.expected = expected
        self.actual = actual
        super().__init__(message)


class ManifestRevisionConflict(RevisionConflict):
    """The user's summary document changed since the change was prepared."""

    def __init__(self, *, expected: int | None, actual: int | None) -> None:
        super().__init__(
            f"memory changed concurrently: expected revision {expected}, found {actual}; "
            "reload and retry",
            expected=expected,
            actual=actual,
        )


class FactRevisionConflict(RevisionConflict):
    """One fact changed (or appeared, or vanished) since the change was prepared.

    Attributes:
        fact_id: the fact in question.
    """

    def __init__(self, fact_id: str, *, expected: int | None, actual: int | None) -> None:
        self.fact_id = fact_id
        if expected is None:
            message = f"fact {fact_id!r} already exists (revision {actual})"
        elif actual is None:
            message = f"fact {fact_id!r} no longer exists (expected revision {expected})"
        else:
            message = (
                f"fact {fact_id!r} changed concurrently: expected revision {expected}, "
                f"found {actual}; reload and retry"
            )
        super().__init__(message, expected=expected, actual=actual)


def _preview(value: object, limit: int = 80) -> str:
    """Render a rejected value briefly, so a huge string cannot flood a message."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
