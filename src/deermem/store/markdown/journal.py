"""Journaled multi-file commits: all of a commit's files change, or none do.

A commit changes several files that must move together: fact files, archive
entries, the user's ``memory.json`` and the commit's bookkeeping — the
receipts in the audit, recall counts restored or dropped, the archive's
index and its bounds, the thread marks of an update. The protocol
(reference §2, "Commit protocol") is an undo journal, run under the user's
lock:

1. write ``.memory.journal.json`` naming every file the commit will touch
   and holding its prior content (``null``: the file did not exist) —
   durably, before anything else changes;
2. replace and remove the files, each replacement atomic on its own, and
   make them and their directories durable;
3. remove the journal durably. Its removal is the commit: before it, a
   crash or a failure undoes everything; after it, nothing is written and
   nothing can make the call fail.

Each step starts only when the one before it is durable, so after a power cut
the journal is there whenever any file may have changed. A commit of a single
file needs no journal: its one atomic replacement is all or nothing already.

A crash before step 3 leaves the journal behind. :func:`recover`, which the
store runs before every locked operation and every read that sees a journal,
puts back every file that differs from its prior content — and rewrites no
other — so the store is always in the state before a commit or after it.
Recovery is idempotent: a crash during recovery is recovered by the next one.
A crash during step 1 leaves no journal, only its temporary file — which holds
the prior contents, so it must not outlive the next change (a purge's words):
:func:`remove_temporaries` removes it before every locked write.
When a file cannot be put back (a read-only store, another user's file),
:class:`~deermem.errors.StoreNeedsRecovery` names it and nothing is read.

Prior contents live in the journal itself rather than in backup files: one
file to write instead of one per touched file. A journal that cannot be
read, or that lacks what its state needs, is corruption — never ignored,
because ignoring it could keep half of a commit.

deermem's journal state is ``deermem-prepared``, not the original's
``prepared``. The original DeerMem recovers a ``prepared`` journal from
backups in ``.recovery/`` that deermem does not write: it would delete the
commit's new facts without restoring what the commit removed, and drop the
journal. It refuses a state it does not know, so a store switched back to it
after a crash stops with an error until deermem has opened it once. The
other way round, deermem recovers the original's ``prepared`` journals by
the original's own rules (the last section of this module), cleans up
its ``committed`` ones, and still recovers the ``prepared`` journals with
prior contents that deermem wrote before its state was its own.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import re
import shutil
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Final, NamedTuple

from deermem.errors import CorruptMemoryFile, StoreNeedsRecovery, UnsafeIdentifierError
from deermem.model import is_fact_id, normalise_agent, parse_json
from deermem.store.markdown.files import (
    UserPaths,
    atomic_write,
    fsync_path,
    is_temporary,
    make_directories,
    read_if_exists,
    remove_durably,
    replace_files,
    search_index_path,
)

__all__ = [
    "ERASING_DIRNAME",
    "FileChange",
    "JournalInfo",
    "begin_erasure",
    "commit_files",
    "erasing_lock",
    "erasures_pending",
    "finish_erasures",
    "recover",
    "remove_temporaries",
]

_log = logging.getLogger("deermem.store")

STATE_PREPARED: Final = "deermem-prepared"

_STATE_COMMITTED: Final = "committed"


class FileChange(NamedTuple):
    """One file a commit replaces (``data``) or removes (``data is None``)."""

    path: Path
    data: bytes | None


class JournalInfo(NamedTuple):
    """What the journal says about the commit, for people and for recovery tools."""

    agent: str
    expected_revision: int
    next_revision: int
    fact_ids: tuple[str, ...]


def commit_files(
    user: UserPaths,
    changes: Sequence[FileChange],
    info: JournalInfo,
    prior: Mapping[Path, bytes] | None = None,
) -> None:
    """Steps 1 to 3: apply ``changes`` atomically, journaled when there are several.

    The caller holds the user's lock. If a step fails without a crash (a
    full disk), what was done is rolled back at once and the error raised:
    a call that raises did not commit. ``prior`` holds files' current
    contents the caller has read under the same lock (the journal reads the
    others).
    """
    if len(changes) == 1:
        replace_files([(changes[0].path, changes[0].data)])
        return
    atomic_write(user.journal, _journal_bytes(user, changes, info, prior or {}))
    try:
        replace_files(((change.path, change.data) for change in changes), journaled=True)
        remove_durably(user.journal)
    except OSError as error:
        if user.journal.exists():
            _roll_back_now(user)
            raise
        # The journal is gone, so the commit has happened; only making its
        # removal durable failed, and the files it guarded are durable already.
        _log.error(
            "committed in %s, but the journal's removal may not be durable: %s",
            user.user_dir,
            error,
        )
    except BaseException:
        _roll_back_now(user)
        raise


def _journal_bytes(
    user: UserPaths,
    changes: Sequence[FileChange],
    info: JournalInfo,
    prior: Mapping[Path, bytes],
) -> bytes:
    """The prepared journal: every file the commit touches, with its prior content."""
    files: list[dict[str, object]] = []
    old_entries: dict[str, dict[str, str]] = {}
    for change in changes:
        relative = user.relative(change.path)
        before = prior[change.path] if change.path in prior else read_if_exists(change.path)
        files.append({"path": relative, "before": None if before is None else _text(before)})
        if change.path.suffix == ".md" and before is not None:
            old_entries[change.path.stem] = {"path": relative}
    journal = {
        "operationId": uuid.uuid4().hex,
        "state": STATE_PREPARED,
        "agentName": info.agent,
        "expectedRevision": info.expected_revision,
        "nextRevision": info.next_revision,
        "factIds": list(info.fact_ids),
        "oldEntries": old_entries,
        "files": files,
    }
    # ensure_ascii keeps undecodable bytes (as surrogates) representable in JSON.
    return json.dumps(journal, ensure_ascii=True).encode("ascii")


def _roll_back_now(user: UserPaths) -> None:
    """Undo a commit that failed half-way (disk full ...), so the store is consistent now.

    If the rollback fails too, the journal stays and the next locked
    operation recovers.
    """
    try:
        recover(user)
    except (OSError, CorruptMemoryFile, StoreNeedsRecovery) as error:
        _log.error("could not roll back the failed commit in %s yet: %s", user.user_dir, error)


def recover(user: UserPaths) -> bool:
    """Finish or undo an interrupted commit; return whether there was one.

    Raises:
        CorruptMemoryFile: the journal cannot be read, has an unknown state,
            lacks the prior contents, or names a file outside the user directory.
        StoreNeedsRecovery: a file (or the journal) cannot be written: the
            store stays as it is, and its next writable opening recovers it.
    """
    raw = read_if_exists(user.journal)
    if raw is None:
        return False
    journal = _parse(raw, user.journal)
    state = journal.get("state")
    if state == STATE_PREPARED or (state == ORIGINAL_PREPARED and "files" in journal):
        undo = _prior_contents(journal, user)
    elif state == ORIGINAL_PREPARED:
        undo = original_undo(journal, user)
    elif state == _STATE_COMMITTED:
        undo = {}
    else:
        raise CorruptMemoryFile(user.journal, f"unknown journal state {state!r}")
    restored = _restore(user, undo)
    _finish(user, journal.get("operationId"), {user.user_dir, *(path.parent for path in undo)})
    if state != _STATE_COMMITTED:
        _log.warning(
            "rolled back an interrupted commit in %s (%d of %d files restored)",
            user.user_dir,
            restored,
            len(undo),
        )
    return True


def _parse(raw: bytes, path: Path) -> dict[str, object]:
    try:
        journal = parse_json(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CorruptMemoryFile(path, f"the commit journal is not valid JSON: {error}") from None
    if not isinstance(journal, dict):
        raise CorruptMemoryFile(path, "the commit journal is not a JSON object")
    return journal


def _prior_contents(journal: Mapping[str, object], user: UserPaths) -> dict[Path, bytes | None]:
    files = journal.get("files")
    if not isinstance(files, list):
        raise CorruptMemoryFile(user.journal, "the commit journal does not hold the prior contents")
    undo: dict[Path, bytes | None] = {}
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
        # The first entry of a path holds its content before the commit.
        undo.setdefault(path, None if before is None else before.encode("utf-8", "surrogateescape"))
    return undo


def _restore(user: UserPaths, undo: Mapping[Path, bytes | None]) -> int:
    """Put back each file that differs from its prior content; return how many.

    Files the interrupted commit never reached are not rewritten, so a
    recovery needs write access to exactly what the commit changed.
    """
    count = 0
    for path, before in undo.items():
        try:
            if read_if_exists(path) == before:
                continue
            replace_files([(path, before)])
        except OSError as error:
            raise StoreNeedsRecovery(user.journal, path, error) from None
        count += 1
    return count


def remove_temporaries(user: UserPaths) -> None:
    """Remove the temporary files a killed writer left in the user directory itself.

    A process killed while it writes the journal (step 1) leaves no journal,
    so no recovery runs — but its temporary file holds the prior content of
    every file of the commit: fact text a purge then deletes, which would
    outlive it. The store runs this before every locked write (the caller
    holds the user's lock exclusively, so no writer is half-way through one
    of these files); a reader, which may have no write access, leaves them.

    Raises:
        StoreNeedsRecovery: a temporary file cannot be removed.
    """
    _remove_temporaries(user, user.user_dir)


def _remove_temporaries(user: UserPaths, directory: Path) -> None:
    """Remove the temporary files in ``directory`` that writers holding the user's lock write.

    Below the user directory every file is the lock's. In the user directory
    itself only the journal, the summaries and the owner record are: in the
    single-user layout it is the store's root, where the settings file is
    written without the user's lock.
    """
    try:
        items = list(directory.iterdir())
    except FileNotFoundError:
        return
    except OSError as error:
        raise StoreNeedsRecovery(user.journal, directory, error) from None
    at_top = directory == user.user_dir
    guarded = tuple(f".{path.name}." for path in (user.journal, user.manifest, user.owner))
    for item in items:
        if is_temporary(item.name) and (not at_top or item.name.startswith(guarded)):
            try:
                item.unlink(missing_ok=True)
            except OSError as error:
                raise StoreNeedsRecovery(user.journal, item, error) from None


def _finish(user: UserPaths, operation: object, directories: set[Path]) -> None:
    """Remove the commit's temporary files, the journal, then the original's backups."""
    for directory in directories:
        _remove_temporaries(user, directory)
    try:
        user.journal.unlink()
        fsync_path(user.user_dir)
    except FileNotFoundError:
        pass
    except OSError as error:
        raise StoreNeedsRecovery(user.journal, user.journal, error) from None
    # The backups go last: once the journal is gone nothing reads them, and
    # the original leaves an empty .recovery/ behind too.
    if isinstance(operation, str) and OPERATION_ID.fullmatch(operation):
        shutil.rmtree(user.recovery / operation, ignore_errors=True)


def _text(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape")


# ---------------------------------------------------------------------------
# Undoing a commit the original DeerMem left unfinished, by the original's own rules.
#
# The original's journal (state ``prepared``) names the commit's facts and
# keeps the prior contents in backups beside it, not in the journal
# (reference §2, "Commit protocol"): ``.recovery/<operationId>/memory.json``
# and one ``<fact_id>.md`` per fact that existed. Its recovery, which this
# module restates:
#
# * ``memory.json`` comes back from its backup; with no backup and an expected
#   revision of 0, the commit created it, so it goes;
# * every fact the journal names that is not among its ``oldEntries`` was
#   created by the commit, so its file goes;
# * every fact among ``oldEntries`` comes back from its backup, when there is one.
#
# Deleting the journal alone — or restoring the backups alone — would keep the
# interrupted commit's new facts (an eleventh fact at a cap of ten). What this
# module returns is the prior content of each file; the caller puts back only
# those that differ (:mod:`deermem.store.markdown.journal`).
# ---------------------------------------------------------------------------


ORIGINAL_PREPARED: Final = "prepared"

OPERATION_ID: Final = re.compile(r"[A-Za-z0-9_-]{1,100}")


# The original backs its manifest up under this name whatever the manifest is called.
_MANIFEST_BACKUP: Final = "memory.json"


def original_undo(journal: Mapping[str, object], user: UserPaths) -> dict[Path, bytes | None]:
    """The prior content of every file an original ``prepared`` journal may have changed.

    Raises:
        CorruptMemoryFile: the journal is not one the original writes (no
            operation id, a fact id or agent that cannot be a path, a path
            outside the user directory).
    """
    operation = journal.get("operationId")
    if not isinstance(operation, str) or not OPERATION_ID.fullmatch(operation):
        raise CorruptMemoryFile(user.journal, f"invalid operationId {operation!r}")
    backups = user.recovery / operation
    old_entries = journal.get("oldEntries", {})
    fact_ids = journal.get("factIds", [])
    if not isinstance(old_entries, dict) or not isinstance(fact_ids, list):
        raise CorruptMemoryFile(user.journal, "'oldEntries' or 'factIds' is malformed")
    undo: dict[Path, bytes | None] = {}
    manifest_backup = read_if_exists(backups / _MANIFEST_BACKUP)
    if manifest_backup is not None:
        undo[user.manifest] = manifest_backup
    elif _expected_revision(journal, user) == 0:
        undo[user.manifest] = None
    created = [fact_id for fact_id in fact_ids if fact_id not in old_entries]
    if created:
        paths = user.agent(_agent(journal, user))
        for fact_id in created:
            undo[paths.fact(_fact_id(fact_id, user))] = None
    for fact_id, entry in old_entries.items():
        backup = read_if_exists(backups / f"{_fact_id(fact_id, user)}.md")
        relative = entry.get("path") if isinstance(entry, dict) else None
        if backup is None or not isinstance(relative, str):
            continue  # the original restores nothing without both
        path = user.inside(relative)
        if path is None:
            raise CorruptMemoryFile(
                user.journal, f"journal path {relative!r} escapes the user directory"
            )
        undo[path] = backup
    return undo


def _expected_revision(journal: Mapping[str, object], user: UserPaths) -> int:
    value = journal.get("expectedRevision") or 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise CorruptMemoryFile(user.journal, f"invalid expectedRevision {value!r}")
    return value


def _agent(journal: Mapping[str, object], user: UserPaths) -> str:
    agent = journal.get("agentName")
    if not isinstance(agent, str):
        raise CorruptMemoryFile(user.journal, "the journal names facts without an agentName")
    try:
        return normalise_agent(agent)
    except UnsafeIdentifierError as error:
        raise CorruptMemoryFile(user.journal, str(error)) from None


def _fact_id(value: object, user: UserPaths) -> str:
    if not is_fact_id(value):
        raise CorruptMemoryFile(user.journal, f"the journal names an invalid fact id {value!r}")
    return value


# ---------------------------------------------------------------------------
# Erasing a user: gone whole, or still whole, whenever the process dies
#
# Everything the store holds for a user lives in the user's directory
# (``users/<id>/``: summaries, every agent's facts, archive, sidecars, marks,
# the journal, temporary files, the lock). Erasing it:
#
# 1. under the store's erasure lock and the user's lock, write an *intent*
#    (``.erasing/<token>.json``, naming the user) durably;
# 2. rename the user's directory to ``.erasing/<token>`` — one atomic rename,
#    the commit point: before it the user is intact, after it erased (no
#    reader finds the directory any more);
# 3. delete that directory, then the search index's files if the erase was
#    interrupted (below), then the intent.
#
# A process killed anywhere leaves an intent behind (killed while writing it,
# the intent's temporary file, which names the user as well); the next store
# opened on the root, or the next erase, finishes it (:func:`finish_erasures`):
# a temporary file goes; if the user's directory is still there the rename
# never happened and the intent goes (intact); otherwise what is left of the
# renamed directory goes (erased). A recovered
# erase also deletes the search index's files: rows of the user may have
# stayed in it, and the index is derived data, rebuilt at the next search.
# (An erase that completes leaves the index to the caller, which deletes the
# user's rows and scrubs the file: :meth:`deermem.memory.Memory.erase_user`.)
# ---------------------------------------------------------------------------

ERASING_DIRNAME: Final = ".erasing"
_ERASING_LOCK: Final = ".lock"


@contextmanager
def erasing_lock(root: Path) -> Iterator[None]:
    """One erase, or one recovery of erases, at a time in a store (across processes)."""
    directory = root / ERASING_DIRNAME
    for parent in make_directories(directory):
        fsync_path(parent)
    fd = os.open(directory / _ERASING_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the flock


def begin_erasure(root: Path, user: UserPaths) -> Path:
    """Record the intent to erase ``user`` durably; return where its directory is to go."""
    token = uuid.uuid4().hex
    directory = root / ERASING_DIRNAME
    intent = {"userDirectory": user.user_dir.relative_to(root).as_posix()}
    atomic_write(directory / f"{token}.json", json.dumps(intent).encode("utf-8"))
    return directory / token


def finish_erasures(root: Path, *, recovering: bool = True) -> int:
    """Finish every erase recorded under ``root`` (see above); return how many.

    ``recovering``: the erases were interrupted (the store is opening), so
    the search index may hold rows of their users: its files go too. The
    erase itself finishes its own with ``recovering=False``, under the lock.
    Idempotent: a process killed while finishing leaves the rest to the next.
    A store that cannot be written (read-only) leaves them and says so in the
    log; an erased user's directory is not readable as a user meanwhile.
    """
    if recovering:
        try:
            with erasing_lock(root):
                return _finish_erasures(root, recovering=True)
        except OSError as error:
            _log.warning("%s: unfinished erasures left for a writable open: %s", root, error)
            return 0
    return _finish_erasures(root, recovering=False)


def erasures_pending(root: Path) -> bool:
    """Whether an erase was interrupted: an intent, or an intent's temporary file, is left."""
    try:
        names = [item.name for item in (root / ERASING_DIRNAME).iterdir()]
    except OSError:  # none yet, or unreadable: finish_erasures says so if it matters
        return False
    return any(name.endswith(".json") or is_temporary(name) for name in names)


def _finish_erasures(root: Path, *, recovering: bool) -> int:
    """:func:`finish_erasures` under the erasing lock, which every writer of
    ``.erasing/`` holds: an intent's temporary file there is a killed erase's."""
    directory = root / ERASING_DIRNAME
    for leftover in directory.iterdir():
        if is_temporary(leftover.name):  # it names the user: it goes with the rest
            leftover.unlink(missing_ok=True)
    intents = sorted(directory.glob("*.json"))
    erased = False
    for intent in intents:
        tomb = directory / intent.stem
        try:
            recorded = parse_json(intent.read_bytes())
            user_dir: Path | None = root / str(recorded["userDirectory"])
        except (ValueError, KeyError, TypeError):
            user_dir = None  # cut short while being written: before the rename, so intact
        if tomb.exists():
            erased = True
            shutil.rmtree(tomb)
            fsync_path(directory)
        elif user_dir is not None and not user_dir.exists():
            erased = True  # renamed and deleted; the index may still hold rows
        remove_durably(intent)
    if recovering and erased:
        _drop_search_index(root)
    return len(intents)


def _drop_search_index(root: Path) -> None:
    index = search_index_path(root)
    for suffix in ("", "-wal", "-shm", "-journal"):
        index.with_name(index.name + suffix).unlink(missing_ok=True)
