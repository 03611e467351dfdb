"""Journaled multi-file commits: all of a commit's files change, or none do.

A commit changes several files — fact files, archive entries and the user's
``memory.json`` — that must move together. The protocol (reference §2,
"Commit protocol") is an undo journal, run under the user's lock:

1. write ``.memory.journal.json`` with state ``prepared``, naming every file
   the commit will touch and holding its prior content (``null``: the file
   did not exist) — durably, before anything else changes;
2. replace and remove the files (each replacement atomic on its own) and
   fsync them and their directories together. Their new contents are
   written to temporary files (invisible) while step 1 is being flushed, on
   a worker thread; they are renamed only once step 1 has returned, so the
   order of durable changes is the same as writing them after step 1. (A
   crash during step 1 may leave such temporaries behind with no journal to
   find them by: hidden files every reader skips, like the temporary of any
   interrupted atomic write.);
3. remove the journal durably. The commit has happened.

Files *derived* from the commit (the sidecars: receipts, recall counts, and
the archive's bounds) must change only once the commit has happened, and be
durable when it returns. They are computed once step 2's files are in place,
their new contents written to temporary files (invisible) and fsynced in
step 2's flush round, and renamed into place only after step 3 is durable,
in one more round. So they never show a commit that did not happen, exactly
as when they were written after the commit, but their contents cost no
flush round of their own (the temporary files' blocks are allocated and
flushed with the commit's data, not in a round that must wait for the
journal's removal). A failure to write them (a full disk) is logged and never
undoes or misreports the commit: they are derived data. A crash before step 3
leaves their temporary files in the agent's ``.metadata`` directory; recovery
removes them with the rest. (A crash between step 3 and their renaming leaves
a hidden temporary file, as a crash inside any atomic write can.)

A crash before step 3 leaves the journal behind. :func:`recover`, which the
store runs before every locked operation and every load that sees a journal,
puts every file back as it was — so the store is always in the state before a
commit or after it. Recovery is idempotent: a crash during recovery is
recovered by the next one. A journal in state ``committed`` (the original
DeerMem writes that state before cleaning up) only needs its clean-up.

Prior contents live in the journal itself rather than in backup files:
one file to fsync instead of one per touched file. A journal that cannot be
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
from deermem.store.atomic import (
    DurableBatch,
    StagedFiles,
    atomic_write,
    in_background,
    is_temporary,
    remove_durably,
)
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


def commit_files(
    user: UserPaths,
    changes: Sequence[FileChange],
    info: JournalInfo,
    derived: DerivedFiles | None = None,
) -> None:
    """Apply ``changes`` atomically under the journal. The caller holds the user's lock.

    ``derived`` is called once the changes are in place (step 2, before
    their flush); the files it names change only once the commit has
    happened (see the module docstring).
    """
    journal = _journal_bytes(user, changes, info)
    batch = DurableBatch()
    try:
        _prepare_while_journaling(user, journal, batch, changes)
        staged = StagedFiles()
        try:
            problem = _apply_prepared(batch, changes, staged, derived)
            remove_durably(user.journal)
        except BaseException:
            staged.discard()
            _roll_back_now(user)
            raise
    finally:
        batch.close()
    _publish(staged, user, problem)


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


def _prepare_while_journaling(
    user: UserPaths, journal: bytes, batch: DurableBatch, changes: Sequence[FileChange]
) -> None:
    """Step 1 on a worker thread while this one writes the new contents to temporary files.

    The temporaries are invisible; they are renamed into place only after
    this returns, that is after the journal and its directory entry are
    durable — the order of step 1 before step 2 is unchanged, but writing the
    files no longer waits for the journal's two flushes. If writing them
    fails once the journal exists, the journal is rolled back (nothing
    changed); if the journal fails, its error is raised and nothing changed.
    """
    written = in_background(lambda: atomic_write(user.journal, journal))
    try:
        for change in changes:
            if change.data is not None:
                batch.prepare(change.path, change.data)
    except BaseException:
        if written.exception() is None:  # waits: the journal exists, take it away
            _roll_back_now(user)
        raise
    written.result()  # waits for step 1; raises its failure


def _apply_prepared(
    batch: DurableBatch,
    changes: Sequence[FileChange],
    staged: StagedFiles,
    derived: DerivedFiles | None,
) -> Exception | None:
    """Step 2: rename and remove, stage the derived files, flush everything together.

    Returns the failure to stage the derived files, for after the commit.
    """
    batch.write_prepared()
    for change in changes:
        if change.data is None:
            batch.remove(change.path)
    problem = _stage(staged, derived)
    return staged.sync_contents_while(batch.sync) or problem


def write_derived(user: UserPaths, derived: DerivedFiles) -> None:
    """Write derived files for a commit that changed no file (two flush rounds)."""
    staged = StagedFiles()
    problem = _stage(staged, derived)
    if problem is None:
        try:
            staged.sync_contents()
        except OSError as error:
            problem = error
    _publish(staged, user, problem)


def _stage(staged: StagedFiles, derived: DerivedFiles | None) -> Exception | None:
    """Compute and stage the derived files; a failure is returned, for after the commit."""
    if derived is None:
        return None
    try:
        for path, data in derived():
            staged.stage(path, data)
    except Exception as error:  # reported once the commit has happened; see _publish
        staged.discard()
        return error
    return None


def _publish(staged: StagedFiles, user: UserPaths, problem: Exception | None) -> None:
    """Put the derived files in place, once the commit has happened.

    An ``OSError`` (a full disk) is logged, as the commit stands; anything
    else is a defect and is raised — after the commit, which has happened.
    """
    try:
        if problem is None:
            staged.publish()
    except OSError as error:
        problem = error
    finally:
        staged.discard()
    if isinstance(problem, OSError):
        _log.error(
            "the commit in %s succeeded, but its sidecars could not be updated: %s",
            user.user_dir,
            problem,
        )
    elif problem is not None:
        raise problem


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
        _apply(restored)
        _sweep_temporaries({path.parent for path, _ in restored} | _metadata_dir(journal, user))
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


def _apply(changes: Iterable[tuple[Path, bytes | None]]) -> None:
    batch = DurableBatch()
    try:
        for path, data in changes:
            if data is None:
                batch.remove(path)
            else:
                batch.write(path, data)
        batch.sync()
    finally:
        batch.close()


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


def _metadata_dir(journal: dict[str, object], user: UserPaths) -> set[Path]:
    """The agent's ``.metadata`` directory, where the derived files were being staged."""
    agent = journal.get("agentName")
    if not isinstance(agent, str) or "/" in agent:
        return set()
    directory = user.inside(f"agents/{agent}/.metadata")
    return set() if directory is None else {directory}


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
