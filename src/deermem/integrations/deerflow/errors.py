"""deermem's errors in the terms DeerFlow's callers act on.

DeerFlow's gateway, tools and embedded client turn a backend's exceptions
into HTTP statuses and tool errors by their class and, for ``ValueError``,
by their *first argument*, compared exactly:

* a lost optimistic-concurrency race → the host's ``MemoryConflictError``
  (409); stored data that cannot be read → ``MemoryCorruptionError`` (500,
  and under ``failure_policy.read: fail_closed`` it fails the agent turn);
* ``ValueError("confidence")`` (400), ``ValueError("Duplicate fact")`` (409),
  ``ValueError("content")`` (400, "content cannot be empty");
* ``KeyError`` for an unknown fact id (404) — deermem's
  :class:`~deermem.FactNotFoundError` already is one;
* ``OSError`` for storage failures (500) — a lock timeout already is one.

The two host classes exist only inside DeerFlow, so the backend takes them as
:class:`ErrorTypes`; outside DeerFlow it raises :class:`MemoryConflict` and
:class:`MemoryCorruption`, runtime errors like the host's.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from deermem.errors import (
    CorruptMemoryFile,
    DuplicateFactError,
    FactValidationError,
    RevisionConflict,
)

__all__ = ["ErrorTypes", "MemoryConflict", "MemoryCorruption", "contract_errors"]

_KEYED_FIELDS = frozenset({"confidence", "content"})


class MemoryConflict(RuntimeError):
    """The memory changed under a write (DeerFlow's ``MemoryConflictError`` outside DeerFlow)."""


class MemoryCorruption(RuntimeError):
    """Stored memory cannot be read safely (DeerFlow's ``MemoryCorruptionError`` outside it)."""


@dataclass(frozen=True)
class ErrorTypes:
    """The exception classes a conflict and a corruption are raised as."""

    conflict: type[Exception] = MemoryConflict
    corruption: type[Exception] = MemoryCorruption


@contextmanager
def contract_errors(types: ErrorTypes) -> Iterator[None]:
    """Re-raise deermem's errors as DeerFlow's callers expect them (see the module docstring)."""
    try:
        yield
    except RevisionConflict as error:
        raise types.conflict(str(error)) from error
    except CorruptMemoryFile as error:
        raise types.corruption(str(error)) from error
    except DuplicateFactError as error:
        raise ValueError("Duplicate fact") from error
    except FactValidationError as error:
        if error.field in _KEYED_FIELDS:
            raise ValueError(error.field) from error
        raise
