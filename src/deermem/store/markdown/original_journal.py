"""Undoing a commit the original DeerMem left unfinished, by the original's own rules.

The original's journal (state ``prepared``) names the commit's facts and
keeps the prior contents in backups beside it, not in the journal
(reference §2, "Commit protocol"): ``.recovery/<operationId>/memory.json``
and one ``<fact_id>.md`` per fact that existed. Its recovery, which this
module restates:

* ``memory.json`` comes back from its backup; with no backup and an expected
  revision of 0, the commit created it, so it goes;
* every fact the journal names that is not among its ``oldEntries`` was
  created by the commit, so its file goes;
* every fact among ``oldEntries`` comes back from its backup, when there is one.

Deleting the journal alone — or restoring the backups alone — would keep the
interrupted commit's new facts (an eleventh fact at a cap of ten). What this
module returns is the prior content of each file; the caller puts back only
those that differ (:mod:`deermem.store.markdown.journal`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from deermem.errors import CorruptMemoryFile, UnsafeIdentifierError
from deermem.model import FACT_ID_PATTERN, normalise_agent
from deermem.store.markdown.paths import UserPaths

__all__ = ["OPERATION_ID", "ORIGINAL_PREPARED", "original_undo"]

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
    manifest_backup = _read(backups / _MANIFEST_BACKUP)
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
        backup = _read(backups / f"{_fact_id(fact_id, user)}.md")
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
    if not isinstance(value, str) or not FACT_ID_PATTERN.fullmatch(value):
        raise CorruptMemoryFile(user.journal, f"the journal names an invalid fact id {value!r}")
    return value


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
