"""The one exception tree of deermem.

Every error deermem raises on purpose derives from :class:`DeerMemError`, so a
caller can catch "anything deermem refused" without catching programming
errors. Errors that stand for bad input also derive from :class:`ValueError`,
because that is what they are and what generic callers already handle::

    DeerMemError
    ├── ConfigError                 (ValueError) a configuration key has a bad value
    ├── StoreSettingsExistError     (FileExistsError) a store already keeps other settings
    ├── FactValidationError         (ValueError) a fact field has a bad value
    │   └── InvalidTextError        ... text that cannot be stored as it is (a lone
    │                               surrogate, an undecodable byte, a control character)
    ├── DuplicateFactError          (ValueError) an equal fact is already stored
    ├── ArchivedFactError           (ValueError) an added fact's id is in the archive
    ├── FactNotFoundError           (KeyError)   no fact (or archive entry) with that id
    ├── StorageError                             the store could not do what was asked
    │   ├── CorruptMemoryFile                    a stored file is not what it must be
    │   │   └── OwnerConflictError               ... a directory that is another user's
    │   ├── NotAStoreError                       a write into, or a copy from, no store
    │   ├── UnsafeIdentifierError   (ValueError) a user id or agent name cannot address a path
    │   ├── StoreLockTimeout        (TimeoutError) another process held the lock too long
    │   ├── StoreNeedsRecovery                   an interrupted commit cannot be rolled back here
    │   ├── DatabaseError                        the database refused or could not be reached
    │   │   ├── DatabaseSchemaError              the database's schema is not this deermem's
    │   │   ├── DatabaseReadOnly                 ... this connection may not write there
    │   │   └── DatabaseUnavailable              ... it is down, unreachable or overloaded: retry
    │   ├── MigrationError                       a memory could not be copied to another store
    │   └── RevisionConflict                     the data changed since it was read
    │       ├── ManifestRevisionConflict         ... the user's summary document
    │       └── FactRevisionConflict             ... one fact
    ├── SearchIndexError            the search index file cannot be created or used
    ├── MessageFormatError          (ValueError) a conversation message has an unusable shape
    ├── ConversationFileError       (ValueError) a conversation file is missing or unreadable
    ├── PatternError                (ValueError) a signal pattern file or pattern is invalid
    ├── PromptTemplateError         (ValueError) a prompt template file cannot be used
    │   └── PromptNotFoundError     (FileNotFoundError) no template of that name exists
    ├── UpdateQueueError            the update queue did not take a conversation
    │   ├── QueueFullError          the queue is at its depth limit
    │   └── QueueClosedError        the queue has been shut down
    ├── LLMError                    a language-model call gave no usable answer
    │   ├── LLMNotConfigured        no model is configured, so extraction is off
    │   ├── LLMUnavailable          the configured backend cannot run here
    │   ├── LLMTransportError       no HTTP answer arrived (after the retries)
    │   │   └── LLMTimeout          ... because the request timed out
    │   ├── LLMStatusError          the server answered with an error status
    │   └── LLMResponseInvalid      the answer is not a usable chat completion
    ├── ServerError                 the HTTP or MCP server cannot start or serve as
    │                               configured; its branch is drawn in deermem.service.errors
    └── EvaluationError             the reproducible evaluation refused to go on; its
                                    branch is drawn in deermem.eval.errors

When you add a branch, keep the
tree drawn above in step with the classes below.

The LLM errors wrap whatever the transport raised (``httpx``, ``llama_cpp``)
at the boundary, so callers catch :class:`LLMError` and never a library's
exception. Their messages never contain an API key: the client redacts it
before an error is built.

Errors carry their context as attributes (``field``, ``value``, ``source``) so
callers never parse messages; the message is for people.
"""

from __future__ import annotations

import re
import reprlib
from collections.abc import Mapping, Sequence
from typing import Final, Self

__all__ = [
    "ArchivedFactError",
    "ConfigError",
    "ConversationFileError",
    "CorruptMemoryFile",
    "DatabaseError",
    "DatabaseReadOnly",
    "DatabaseSchemaError",
    "DatabaseUnavailable",
    "DeerMemError",
    "DuplicateFactError",
    "FactNotFoundError",
    "FactRevisionConflict",
    "FactValidationError",
    "InvalidTextError",
    "LLMError",
    "LLMNotConfigured",
    "LLMResponseInvalid",
    "LLMStatusError",
    "LLMTimeout",
    "LLMTransportError",
    "LLMUnavailable",
    "ManifestRevisionConflict",
    "MessageFormatError",
    "MigrationError",
    "NotAStoreError",
    "OwnerConflictError",
    "PatternError",
    "PromptNotFoundError",
    "PromptTemplateError",
    "QueueClosedError",
    "QueueFullError",
    "RevisionConflict",
    "SearchIndexError",
    "StorageError",
    "StoreLockTimeout",
    "StoreNeedsRecovery",
    "StoreSettingsExistError",
    "UnsafeIdentifierError",
    "UpdateQueueError",
    "Withheld",
    "described",
    "preview",
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


class StoreSettingsExistError(DeerMemError, FileExistsError):
    """A store's settings file holds other settings, and replacing them was not asked for.

    Attributes:
        path: the store's settings file, as a string.
        differences: each setting given another value than the one kept, as
            ``"max_facts: keeps 20, given 30 (from deermem.toml)"``, when known.
    """

    def __init__(self, path: str, differences: Sequence[str] = ()) -> None:
        self.path = path
        self.differences = tuple(differences)
        which = f" ({'; '.join(self.differences)})" if self.differences else ""
        super().__init__(
            f"{path}: the store already keeps other settings{which}; nothing was changed "
            "(compare with `deermem config show`; `deermem init --force` replaces them)"
        )

    def __str__(self) -> str:
        # FileExistsError would print its errno form; people need the sentence.
        return str(self.args[0])


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
        super().__init__(self._describe())

    def _describe(self) -> str:
        where = f"fact {self.fact_id!r}: " if self.fact_id else ""
        return f"{where}field {self.field!r} has {_shown(self.field, self.value)}; {self.allowed}"

    def naming(self, fact_id: str) -> Self:
        """The same error (of the same class), naming the fact it concerns."""
        return self._changed(fact_id=fact_id)

    def in_list(self, name: str, position: int) -> Self:
        """The same error, its field named by the fact's place in a document's list
        (``facts[3].content``): for a fact the document gave no id, whose id
        deermem chose and the document's author never saw."""
        return self._changed(field=f"{name}[{position}].{self.field}", fact_id=None)

    def as_field(self, field: str) -> Self:
        """The same error, its field named as the caller's interface names it (mem0's
        ``text`` is a fact's ``content``)."""
        return self._changed(field=field)

    def _changed(self, **fields: object) -> Self:
        changed = type(self).__new__(type(self))
        changed.__dict__.update(self.__dict__, **fields)
        changed.args = (changed._describe(),)
        return changed


class InvalidTextError(FactValidationError):
    """A text field holds characters it cannot be stored with.

    Raised for a lone surrogate anywhere (which is what an undecodable byte
    becomes when Python decodes a command-line argument or a file name), and
    for a control character in a one-line field (a category, a topic, an
    id). Nothing is written: text that cannot be written as UTF-8, or that
    would break a one-line field, is refused where it enters.

    Attributes:
        position: the index of the first offending character in the field's text.
        character: that character.
    """

    def __init__(
        self,
        field: str,
        value: object,
        *,
        position: int,
        character: str,
        problem: str,
        fact_id: str | None = None,
    ) -> None:
        self.position = position
        self.character = character
        super().__init__(field, value, problem, fact_id=fact_id)


class DuplicateFactError(DeerMemError, ValueError):
    """A fact would say what another active fact says (compared stripped and case-folded).

    Raised by a create, a restore, an update of a fact's content and an
    import; nothing is changed. An import compares the document's facts with
    each other (they replace the library), so ``where`` names the fact of
    the document that repeats an earlier one.

    Attributes:
        existing_id: the id of the fact it repeats (stored, or earlier in the document).
        where: the repeating fact's place in an imported document
            (``facts[3]``), else ``None``.
    """

    def __init__(self, existing_id: str, *, where: str | None = None) -> None:
        self.existing_id = existing_id
        self.where = where
        if where is None:
            message = f"an equal fact is already stored as {existing_id!r}"
        else:
            message = f"{where} says what fact {existing_id!r} of the same document says"
        super().__init__(message)


class ArchivedFactError(DeerMemError, ValueError):
    """A fact to add has the id of an archived fact: it would live twice.

    Every path that adds facts (create, import, restore, extraction) passes
    the capacity gate, which refuses this; nothing is changed. Restore the
    archived fact (or purge it) instead of adding it again. A fact created
    under an id of the caller's (``Memory.create_fact(fact_id=...)``) that
    says what an archived fact says is refused the same way, naming the
    archived fact: relearned, it would come back under that fact's id.

    Attributes:
        fact_id: the id that is in the archive.
    """

    def __init__(self, fact_id: str) -> None:
        self.fact_id = fact_id
        super().__init__(
            f"fact {fact_id!r} is in the archive; restore it (deermem archive restore "
            f"{fact_id}) or purge it instead of adding it again"
        )


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


class OwnerConflictError(CorruptMemoryFile):
    """A directory of the store belongs to another user id (or agent), or to several.

    Its owner record names another owner, its facts were written for another
    user id, or they name several: nothing in it is read or written, and no
    data is merged. The message names the directory, never the other owner
    (an error may reach whoever asked for the wrong directory).

    Attributes:
        path: the directory, as a string.
        problem: what is wrong, for people.
    """


class NotAStoreError(StorageError):
    """A write was aimed at a directory that holds no deermem store, or a copy
    at one as its source.

    A store is created in a new or empty directory only, never among the
    files of a project (``deermem init`` refuses the same directory); the
    CLI also refuses to create one by a write on a root that does not exist,
    so a mistyped ``--root`` is not a new, empty memory; and ``deermem
    migrate`` copies from a store only (a typo would copy nothing, "verified").
    A directory that is a symbolic link to nothing (an unmounted disk) is
    refused too, naming its target: no ``mkdir`` can make it.

    Attributes:
        root: the directory, as a string.
    """

    def __init__(self, root: object, problem: str) -> None:
        self.root = str(root)
        super().__init__(f"{self.root}: {problem}")


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
        said = f"no {kind} given" if value is None else f"{kind} {preview(value)} is not allowed"
        super().__init__(f"{said}: {reason}")


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


class StoreNeedsRecovery(StorageError):
    """An interrupted commit must be rolled back first, and this process cannot do it.

    Raised instead of reading half of a commit: a file the commit changed (or
    the journal itself) cannot be written back here — a read-only mount,
    another user's files, a full disk. Opening the store once with write
    access recovers it.

    Attributes:
        journal: the commit journal, as a string.
        blocking: the file that could not be restored or removed.
        reason: why the file system refused.
    """

    def __init__(self, journal: object, blocking: object, error: OSError) -> None:
        self.journal = str(journal)
        self.blocking = str(blocking)
        self.reason = error.strerror or str(error)
        super().__init__(
            f"{self.journal}: needs recovery: an interrupted commit must be rolled back, and "
            f"{self.blocking} cannot be restored ({self.reason}); open the store once with "
            "write access"
        )


class DatabaseError(StorageError):
    """The database refused an operation or could not be reached; nothing was changed.

    A commit that raises this was rolled back by the server (a lost
    connection, a statement timeout, a restart), so retrying it is a new
    attempt, never a duplicate. The message names the database by its
    address with the password left out.

    Attributes:
        database: the database's address, without the password.
        reason: what the driver or the server said.
    """

    def __init__(self, database: str, reason: str) -> None:
        self.database = database
        self.reason = reason
        super().__init__(f"{database}: {reason}")


class DatabaseSchemaError(DatabaseError):
    """The database is not at the schema version this deermem reads and writes.

    Either it was never migrated (run ``deermem db upgrade``), or it is at a
    version this deermem does not know (a newer deermem migrated it).

    Attributes:
        found: the version the database is at (``None``: not migrated).
        expected: the version this deermem needs.
    """

    def __init__(self, database: str, reason: str, *, found: int | None, expected: int) -> None:
        self.found = found
        self.expected = expected
        super().__init__(database, reason)


class DatabaseReadOnly(DatabaseError):
    """The database refused a statement this connection may not run; nothing was changed.

    SQLSTATE 42501 (insufficient privilege: a role granted ``SELECT`` only)
    or 25006 (a read-only transaction: ``default_transaction_read_only``, a
    hot standby, ``target_session_attrs=read-only``). Around a write that
    only keeps derived data — a search's recall counts, its vectors — it is
    what a read-only mount is to the Markdown store: the search answers all
    the same (docs/postgres.md, "Read-only connections").
    """


class DatabaseUnavailable(DatabaseError):
    """The database cannot be reached or did not answer in time; nothing was changed.

    A passing condition, not a refusal: the server is down or restarting,
    the network or the connection pool gave out, a statement ran past its
    timeout, a transaction lost a conflict. The same operation may succeed
    when retried (the HTTP API answers 503 with ``Retry-After``).
    """


class MigrationError(StorageError):
    """``deermem migrate`` stopped: the destination holds other data, or a copy differs.

    Attributes:
        user_id: the user concerned (``None``: the single-user layout).
        problem: what is wrong, for people (names parts, never content).
    """

    def __init__(self, user_id: str | None, problem: str) -> None:
        self.user_id = user_id
        self.problem = problem
        who = "the single-user layout" if user_id is None else f"user {user_id!r}"
        super().__init__(f"{who}: {problem}")


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


class SearchIndexError(DeerMemError):
    """The search index cannot be created or opened, even from scratch.

    A missing, stale or damaged index is rebuilt silently; this error means
    rebuilding is impossible too (the directory is missing or read-only, the
    file is locked by another process for too long). Search then falls back
    to substring matching.

    Attributes:
        path: the index file (``":memory:"`` for an in-memory index).
        reason: what SQLite reported.
    """

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"search index {path}: {reason}")


class PromptTemplateError(DeerMemError, ValueError):
    """A prompt template (bundled or an override) cannot be used.

    Overrides are checked when they are loaded, so a typo in a placeholder
    stops start-up instead of sending a broken prompt to the model.

    Attributes:
        path: the template file, as a string.
        problem: what is wrong with it, for people.
    """

    def __init__(self, path: str, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"{path}: {problem}")


class PromptNotFoundError(PromptTemplateError, FileNotFoundError):
    """No template of this name exists in the override directories or the package.

    Attributes:
        name: the template name that was asked for.
        searched: the places looked in, in the order they were tried.
    """

    def __init__(self, name: str, searched: list[str]) -> None:
        self.name = name
        self.searched = list(searched)
        super().__init__(name, "no such prompt template (looked in: " + ", ".join(searched) + ")")


class UpdateQueueError(DeerMemError):
    """The update queue did not take a conversation; nothing was queued.

    Attributes:
        thread_id: the conversation's thread.
    """

    def __init__(self, message: str, *, thread_id: str) -> None:
        self.thread_id = thread_id
        super().__init__(message)


class QueueFullError(UpdateQueueError):
    """The queue holds ``max_depth`` conversations and this one carries no signal.

    Conversations with a detected signal (a correction, a confirmation ...)
    and emergency flushes are always admitted; ordinary ones wait for room.

    Attributes:
        thread_id: the refused conversation's thread.
        max_depth: the configured limit (``queue_max_depth``).
    """

    def __init__(self, thread_id: str, max_depth: int) -> None:
        self.max_depth = max_depth
        super().__init__(
            f"update queue is full ({max_depth} conversations waiting); thread "
            f"{preview(thread_id)} was not queued (raise queue_max_depth, or 0 for no limit)",
            thread_id=thread_id,
        )


class QueueClosedError(UpdateQueueError):
    """The queue was shut down; it takes no more conversations."""

    def __init__(self, thread_id: str) -> None:
        super().__init__(
            f"update queue is shut down; thread {preview(thread_id)} was not queued",
            thread_id=thread_id,
        )


class MessageFormatError(DeerMemError, ValueError):
    """A conversation message cannot be read as a chat message.

    Attributes:
        index: the position of the message in the conversation (0-based).
        field: the offending field, e.g. ``"role"`` or ``"content"``.
        value: the rejected value, as given.
        allowed: a short description of what the field accepts.
    """

    def __init__(self, index: int, field: str, value: object, allowed: str) -> None:
        self.index = index
        self.field = field
        self.value = value
        self.allowed = allowed
        shown = _shown(field, value, _QUOTED_MESSAGE_FIELDS)
        super().__init__(f"message {index}: field {field!r} has {shown}; {allowed}")


class ConversationFileError(DeerMemError, ValueError):
    """A conversation file (``deermem ingest FILE``) cannot be read.

    Attributes:
        path: the file, as given.
        problem: what is wrong, for people.
        line / column: where in the file, when the JSON is invalid (1-based).
    """

    def __init__(
        self, path: str, problem: str, *, line: int | None = None, column: int | None = None
    ) -> None:
        self.path = path
        self.problem = problem
        self.line = line
        self.column = column
        where = f" (line {line}, column {column})" if line is not None else ""
        super().__init__(f"{path}{where}: {problem}")


class PatternError(DeerMemError, ValueError):
    """A signal pattern file cannot be used.

    Attributes:
        path: the pattern file, as a string.
        problem: what is wrong, for people.
        pattern: the offending regular expression, when one is to blame.
        index: the position of that pattern in the file's list (0-based), when known.
    """

    def __init__(
        self, path: str, problem: str, *, pattern: str | None = None, index: int | None = None
    ) -> None:
        self.path = path
        self.problem = problem
        self.pattern = pattern
        self.index = index
        where = f" pattern {index}" if index is not None else ""
        # Shown as written in the file: repr() would double every backslash of a regex.
        shown = pattern if pattern is None or len(pattern) <= 80 else pattern[:77] + "..."
        what = f" `{shown}`" if shown is not None else ""
        head = f"{path}:{where}{what}" if where or what else path
        super().__init__(f"{head}: {problem}")


class LLMError(DeerMemError):
    """A language-model call did not produce a usable answer.

    Attributes:
        model: the model name the call was for, when known.
        endpoint: the URL called (never with credentials), or ``None`` for a local model.
        attempts: how many attempts were made before giving up (0 when none was).
    """

    def __init__(
        self,
        message: str,
        *,
        model: str | None = None,
        endpoint: str | None = None,
        attempts: int = 0,
    ) -> None:
        self.model = model
        self.endpoint = endpoint
        self.attempts = attempts
        super().__init__(message)


class LLMNotConfigured(LLMError):
    """No model is configured; features that need one (extraction) are off."""


class LLMUnavailable(LLMError):
    """The configured backend cannot run here (a missing extra, or no model file)."""


class LLMTransportError(LLMError):
    """The request got no HTTP answer: refused, reset, dropped, or a protocol error.

    Attributes:
        cause: the class name of the underlying transport error, e.g. ``"ConnectError"``.
    """

    def __init__(
        self,
        message: str,
        *,
        cause: str,
        model: str | None = None,
        endpoint: str | None = None,
        attempts: int = 0,
    ) -> None:
        self.cause = cause
        super().__init__(message, model=model, endpoint=endpoint, attempts=attempts)


class LLMTimeout(LLMTransportError):
    """The request timed out (connecting, sending, or waiting for the answer)."""


class LLMStatusError(LLMError):
    """The server answered with an error status.

    Attributes:
        status_code: the HTTP status.
        retryable: whether the status is one deermem retries (429 and 5xx).
        retry_after: the wait the server asked for, in seconds, when it said.
        detail: the server's error text, shortened and with any key redacted.
    """

    def __init__(
        self,
        message: str,
        *,
        status_code: int,
        retryable: bool,
        retry_after: float | None = None,
        detail: str = "",
        model: str | None = None,
        endpoint: str | None = None,
        attempts: int = 0,
    ) -> None:
        self.status_code = status_code
        self.retryable = retryable
        self.retry_after = retry_after
        self.detail = detail
        super().__init__(message, model=model, endpoint=endpoint, attempts=attempts)


class LLMResponseInvalid(LLMError):
    """The server answered 2xx, but not with a chat completion deermem can read.

    Attributes:
        reason: what is missing or malformed, e.g. ``"choices[0].message is missing"``.
    """

    def __init__(
        self,
        message: str,
        *,
        reason: str,
        model: str | None = None,
        endpoint: str | None = None,
        attempts: int = 0,
    ) -> None:
        self.reason = reason
        super().__init__(message, model=model, endpoint=endpoint, attempts=attempts)


# A container's repr is made of its first items, a few levels down, never of the whole.
_BRIEF: Final = reprlib.Repr()
_BRIEF.maxlevel = 3
_BRIEF.maxlist = _BRIEF.maxtuple = _BRIEF.maxdict = _BRIEF.maxset = _BRIEF.maxfrozenset = 8
_BRIEF.maxstring = _BRIEF.maxlong = _BRIEF.maxother = 80


def preview(value: object, limit: int = 80) -> str:
    """A rejected value for a message: its ``repr``, at most ``limit`` characters.

    Made without rendering the whole value, so that neither a huge value nor
    one that repeats a list a billion times over (a read file's) floods a
    message or takes minutes to print.
    """
    text = repr(value[: limit + 1]) if isinstance(value, str) else _BRIEF.repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Withheld:
    """What an error says of a value in its place: ``<too large>``, ``<dict>``."""

    __slots__ = ("description",)

    def __init__(self, description: str) -> None:
        self.description = description

    def __repr__(self) -> str:
        return f"<{self.description}>"


# The fields of a fact whose text an error may quote: ids, codes and times, which hold
# nothing a person wrote. Any other text — a fact's content or title, its category (a
# label anyone may write: ``other`` keeps it as its own), text where a number belongs
# (a confidence, a revision), a summary, a message, a field deermem does not know — is
# described by its length, and a list or a mapping by its size (a number is quoted):
# an error's message reaches logs, tool results and models, and that text may hold a
# secret or someone's private life.
_QUOTED_FACT_FIELDS: Final = frozenset(
    {
        "id",
        "status",
        "scope",
        "threadId",
        "createdAt",
        "updatedAt",
        "consolidatedAt",
        "lastConfirmedAt",
    }
)
# The fields of a chat message whose text an error may quote: its role's codes.
_QUOTED_MESSAGE_FIELDS: Final = frozenset({"role", "type"})
# A fact in a user document's list is named by its position first (``facts[3].id``).
# Only that prefix is passed over: a name deeper in a value (``source.note.id``,
# ``extra[0].status``) is a key of text deermem does not know, never a field of these.
_IN_A_LIST: Final = r"^facts\[\d+\]\."


def _shown(field: str, value: object, quoted: frozenset[str] = _QUOTED_FACT_FIELDS) -> str:
    """A rejected value as a message names it, without the text of what a person wrote:
    text only when ``field`` is one of ``quoted``."""
    if isinstance(value, str) and re.sub(_IN_A_LIST, "", field) in quoted:
        return f"value {preview(value)}"
    return described(value)


def described(value: object) -> str:
    """A rejected value as a message names it, never quoting text: ``a text of 41
    characters``, ``a list of 2 items``; a number, a boolean or ``None`` as it is."""
    if value is None or isinstance(value, bool | int | float | Withheld):
        return f"value {preview(value)}"
    if isinstance(value, str):
        return f"a text of {len(value):,} characters"
    if isinstance(value, list | tuple):
        return f"a list of {len(value):,} items"
    if isinstance(value, Mapping):
        return f"a mapping of {len(value):,} keys"
    return f"a value of type {type(value).__name__}"
