"""Journaled multi-file commits: all of a commit's files change, or none do.

A commit changes several files — fact files, archive entries and the user's
``memory.json`` — that must move together. The protocol (reference §2,
"Commit protocol") is an undo journal, run under the user's lock:

1. write ``.memory.journal.json`` with state ``prepared``, naming every file
   the commit will touch and holding its prior content (``null``: the file
   did not exist) — durably, before anything else changes;
2. replace and remove the files, each replacement atomic on its own, and
   make them and their directories durable;
3. remove the journal durably. The commit has happened;
4. put the files *derived* from the commit in place (:func:`write_derived`):
   the sidecars (receipts, recall counts) and the archive's bounds. They
   change only once the commit has happened, so they never describe a commit
   that did not, and a failure to write them (a full disk) is logged and
   never undoes or misreports the commit: they are derived data.

Each step starts only when the one before it is durable, so after a power cut
the journal is there whenever any file may have changed.

A crash before step 3 leaves the journal behind. :func:`recover`, which the
store runs before every locked operation and every load that sees a journal,
puts every file back as it was — so the store is always in the state before a
commit or after it. Recovery is idempotent: a crash during recovery is
recovered by the next one. A journal in state ``committed`` (the original
DeerMem writes that state before cleaning up) only needs its clean-up.

Prior contents live in the journal itself rather than in backup files:
one file to write instead of one per touched file. A journal that cannot be
read, or that lacks prior contents, is corruption — it is never ignored,
because ignoring it could keep half of a commit.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from deermem._exceptions import CorruptMemoryFile
from deermem.store.atomic import atomic_write, is_temporary, remove_durably, replace_files
from deermem.store.paths import UserPaths

__all__ = ["DerivedFiles", "FileChange", "JournalInfo", "commit_files", "recover", "write_derived"]

_log = logging.getLogger("deermem.store")
_STATE_PREPARED: Final = "prepared"
_STATE_COMMITTED: Final = "committed"
_OPERATION_ID: Final = re.compile(r"[A-Za-z0-9_-]{1,100}")


@dataclass(frozen=True, slots=True)
class FileChange:
    """One file a commit replaces (``data``) or removes (``data is None``)."""

    path: Path
    data: bytes | None


#: Computes the derived files of a commit: ``(path, content)``, ``None`` to remove.
DerivedFiles = Callable[[], Iterable[tuple[Path, bytes | None]]]


@dataclass(frozen=True, slots=True)
class JournalInfo:
    """What the journal says about the commit, for people and for recovery tools."""

    agent: str
    expected_revision: int
    next_revision: int
    fact_ids: tuple[str, ...]


def commit_files(user: UserPaths, changes: Sequence[FileChange], info: JournalInfo) -> None:
    """Steps 1 to 3: apply ``changes`` atomically under the journal.

    The caller holds the user's lock. If a step fails without a crash (a
    full disk), what was done is rolled back at once and the error raised.
    """
    journal = _journal_bytes(user, changes, info)
    try:
        atomic_write(user.journal, journal)
        replace_files(((change.path, change.data) for change in changes), journaled=True)
        remove_durably(user.journal)
    except BaseException:
        _roll_back_now(user)
        raise


def _journal_bytes(user: UserPaths, changes: Sequence[FileChange], info: JournalInfo) -> bytes:
    """The ``prepared`` journal: every file the commit touches, with its prior content."""
    files: list[dict[str, object]] = []
    old_entries: dict[str, dict[str, str]] = {}
    for change in changes:
        relative = user.relative(change.path)
        try:
            before: str | None = change.path.read_bytes().decode("utf-8", "surrogateescape")
        except FileNotFoundError:
            before = None
        files.append({"path": relative, "before": before})
        if change.path.suffix == ".md" and before is not None:
            old_entries[change.path.stem] = {"path": relative}
    journal = {
        "operationId": uuid.uuid4().hex,
        "state": _STATE_PREPARED,
        "agentName": info.agent,
        "expectedRevision": info.expected_revision,
        "nextRevision": info.next_revision,
        "factIds": list(info.fact_ids),
        "oldEntries": old_entries,
        "files": files,
    }
    # ensure_ascii keeps undecodable bytes (as surrogates) representable in JSON.
    return json.dumps(journal, ensure_ascii=True).encode("ascii")


def write_derived(user: UserPaths, derived: DerivedFiles) -> None:
    """Step 4: compute the derived files of a commit that has happened, and write them.

    An ``OSError`` (a full disk) is logged, as the commit stands; anything
    else is a defect and is raised — after the commit, which has happened.
    Each file is replaced atomically; the new contents are computed before
    the first is written.
    """
    try:
        replace_files(list(derived()))
    except OSError as error:
        _log.error(
            "the commit in %s succeeded, but its sidecars could not be updated: %s",
            user.user_dir,
            error,
        )


def _roll_back_now(user: UserPaths) -> None:
    """Undo a commit that failed half-way (disk full ...), so the store is consistent now.

    If the rollback fails too, the journal stays and the next locked
    operation recovers.
    """
    try:
        recover(user)
    except (OSError, CorruptMemoryFile) as error:
        _log.error("could not roll back the failed commit in %s yet: %s", user.user_dir, error)


def recover(user: UserPaths) -> bool:
    """Finish or undo an interrupted commit; return whether there was one.

    Raises:
        CorruptMemoryFile: the journal cannot be read, has an unknown state,
            lacks the prior contents, or names a file outside the user directory.
    """
    try:
        raw = user.journal.read_bytes()
    except FileNotFoundError:
        return False
    journal = _parse(raw, user.journal)
    state = journal.get("state")
    if state == _STATE_PREPARED:
        restored = _prior_contents(journal, user)
        replace_files(restored)
        _sweep_temporaries({path.parent for path, _ in restored})
        _log.warning(
            "rolled back an interrupted commit in %s (%d files restored)",
            user.user_dir,
            len(restored),
        )
    elif state != _STATE_COMMITTED:
        raise CorruptMemoryFile(user.journal, f"unknown journal state {state!r}")
    _remove_backups(user, journal.get("operationId"))
    remove_durably(user.journal)
    return True


def _parse(raw: bytes, path: Path) -> dict[str, object]:
    try:
        journal = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CorruptMemoryFile(path, f"the commit journal is not valid JSON: {error}") from None
    if not isinstance(journal, dict):
        raise CorruptMemoryFile(path, "the commit journal is not a JSON object")
    return journal


def _prior_contents(journal: dict[str, object], user: UserPaths) -> list[tuple[Path, bytes | None]]:
    files = journal.get("files")
    if not isinstance(files, list):
        raise CorruptMemoryFile(
            user.journal,
            "an interrupted commit whose journal does not hold the prior file contents "
            "(written by another implementation?); restore the files from "
            f"{user.recovery} by hand, then delete the journal",
        )
    restored: list[tuple[Path, bytes | None]] = []
    for item in files:
        if not isinstance(item, dict):
            raise CorruptMemoryFile(user.journal, "a journal entry is not an object")
        relative, before = item.get("path"), item.get("before")
        path = user.inside(relative) if isinstance(relative, str) else None
        if path is None:
            raise CorruptMemoryFile(
                user.journal, f"journal path {relative!r} escapes the user directory"
            )
        if before is not None and not isinstance(before, str):
            raise CorruptMemoryFile(user.journal, f"journal entry for {relative!r} is malformed")
        restored.append(
            (path, None if before is None else before.encode("utf-8", "surrogateescape"))
        )
    return restored


def _remove_backups(user: UserPaths, operation: object) -> None:
    """Remove the original DeerMem's backup directory of this operation, if any."""
    if not isinstance(operation, str) or not _OPERATION_ID.fullmatch(operation):
        return
    backups = user.recovery / operation
    if backups.is_dir():
        shutil.rmtree(backups)


def _sweep_temporaries(directories: set[Path]) -> None:
    """Remove temporary files an interrupted writer left in these directories."""
    for directory in directories:
        try:
            items = list(directory.iterdir())
        except FileNotFoundError:
            continue
        for item in items:
            if is_temporary(item.name):
                item.unlink(missing_ok=True)
