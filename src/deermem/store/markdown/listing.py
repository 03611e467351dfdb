"""Whose each directory of a Markdown store is, and what the store holds: its users and agents.

A user directory is named after the user id (:func:`~deermem.model.safe_user_id`),
a one-to-one mapping, but a name alone proves nothing: a file system that
ignores case makes ``Alice`` and ``alice`` one directory, and stores written by
the original DeerMem (or by deermem before it) may hold a directory that two
ids shared. So every directory records its owner, and every access checks it:

* **The owner record** — ``users/<dir>/.memory.owner.json``,
  ``{"userId": ...}`` — is written in the same journaled commit as the first
  change deermem makes in the directory, and read before anything else in
  the directory is read or written, for any of the user's agents: the
  summaries (``memory.json``), the facts, the sidecars, the archive, the
  marks. A record that names another id stops the operation
  (:class:`~deermem.OwnerConflictError`, naming the directory only). The
  original's own files (``memory.json``, ``fact-usage.json``,
  ``eviction-audit.json``) cannot hold an owner without breaking the
  original, so they are covered by this record, as are deermem's own
  sidecars; facts (``user_id``), archived facts (``scope``) and thread marks
  (``userId``, ``agentName``) carry their owner themselves as well.
* **A directory without a record** (written by the original, or by an
  earlier deermem) is claimed from its contents: the ``user_id`` of every
  fact and archived fact in it. Several ids, or one whose own directory is
  another, is a collision already on disk: it is reported — by every access
  and by ``deermem scopes`` — and never merged. Nothing in it names an owner
  (summaries alone): it belongs to the id its name is derived from.
* **An agent directory** is named after the agent; a name longer than 254
  characters gets a derived name (:func:`~deermem.model.agent_directory`)
  and the directory holds a record ``{"userId": ..., "agentName": ...}`` that
  names the agent, so it can be listed, and is checked like the user's.

:func:`list_users` and :func:`list_agents` tell what a root holds: every
directory holding memory either lists as a user (an agent) or is reported
with what is wrong with it — none is left out silently.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, NamedTuple

import yaml

from deermem.errors import CorruptMemoryFile, OwnerConflictError, UnsafeIdentifierError
from deermem.model import (
    Scope,
    agent_directory,
    is_bucket,
    is_derived_agent_directory,
    normalise_agent,
    safe_user_id,
    was_kept_user_id,
)
from deermem.store.markdown.paths import (
    JOURNAL_FILENAME,
    LOCK_FILENAME,
    OWNER_FILENAME,
    RETRIEVAL_DIRNAME,
    ScopePaths,
    UserPaths,
)

__all__ = [
    "Owner",
    "Problem",
    "check_agent_owner",
    "check_owner_fields",
    "check_user_owner",
    "encode_owner",
    "holds_store",
    "list_agents",
    "list_users",
    "owner_fields",
    "read_owner",
    "stored_user_ids",
    "user_of_directory",
]

_USERS: Final = "users"
_AGENTS: Final = "agents"
_LOADER: Final[Any] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class Owner(NamedTuple):
    """What an owner record says: the user id (``None``: the single-user layout) and,
    in an agent directory, the agent."""

    user_id: str | None
    agent: str | None = None


@dataclass(frozen=True, slots=True)
class Problem:
    """A directory that holds data no scope can be read from, and why (names no owner)."""

    path: Path
    problem: str

    def __str__(self) -> str:
        return f"{self.path}: {self.problem}"


def holds_store(root: Path, manifest_filename: str, *, settings_filename: str) -> bool:
    """Whether ``root`` holds anything a deermem (or DeerMem) store writes at its top."""
    names = (
        _USERS,
        _AGENTS,
        manifest_filename,
        settings_filename,
        RETRIEVAL_DIRNAME,
        LOCK_FILENAME,
        JOURNAL_FILENAME,
    )
    return any((root / name).exists() for name in names)


# --- owner records ------------------------------------------------------------------------------


def encode_owner(owner: Owner) -> bytes:
    """An owner record: ``{"userId": ...}``, with ``"agentName"`` in an agent directory."""
    value: dict[str, object] = {"userId": owner.user_id}
    if owner.agent is not None:
        value["agentName"] = owner.agent
    return (json.dumps(value, ensure_ascii=False) + "\n").encode("utf-8")


def read_owner(path: Path) -> Owner | None:
    """The owner record at ``path``, or ``None`` if there is none.

    Raises:
        CorruptMemoryFile: the file is not an owner record.
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        raw = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CorruptMemoryFile(path, f"the owner record is not valid JSON: {error}") from None
    if not isinstance(raw, dict) or "userId" not in raw:
        raise CorruptMemoryFile(path, "an owner record must be an object with 'userId'")
    user_id, agent = raw["userId"], raw.get("agentName")
    if not (user_id is None or isinstance(user_id, str)) or not (
        agent is None or isinstance(agent, str)
    ):
        raise CorruptMemoryFile(path, "an owner record holds text (or null) only")
    return Owner(user_id, agent)


def check_user_owner(user: UserPaths, stored: Callable[[], frozenset[str]]) -> bool:
    """Refuse a user directory that is not ``user.user_id``'s; return whether it has a record.

    ``stored`` gives the ids its contents name (:func:`stored_user_ids`); it
    is called only for an existing directory without a record. The
    single-user layout (no user id) has no record: no user id leads to the root.

    Raises:
        OwnerConflictError: the record names another id; or, without one, the
            contents name several ids, or another one.
        CorruptMemoryFile: the record cannot be read.
    """
    if user.user_id is None:
        return True
    record = read_owner(user.owner)
    if record is not None:
        if record != Owner(user.user_id):
            raise OwnerConflictError(
                user.user_dir, "this directory belongs to another user id (its owner record)"
            )
        return True
    found = stored() if user.user_dir.is_dir() else frozenset()
    if len(found) > 1:
        raise _shared(user.user_dir)
    if found and found != {user.user_id}:
        raise OwnerConflictError(
            user.user_dir, "this directory holds another user id's facts (it has no owner record)"
        )
    return False


def _shared(directory: Path) -> OwnerConflictError:
    return OwnerConflictError(
        directory,
        "facts of several user ids share this directory (written before deermem recorded "
        "owners); nothing was merged: move each user's facts to their own directory by hand",
    )


def owner_fields(paths: ScopePaths) -> dict[str, object]:
    """The owner deermem's own files of a scope carry: ``{"userId": ..., "agentName": ...}``."""
    return {"userId": paths.user.user_id, "agentName": paths.agent}


def check_owner_fields(raw: Mapping[str, object], paths: ScopePaths, path: Path) -> None:
    """Refuse a file of the scope whose owner fields name another scope.

    A file without them was written before files carried their owner: the
    directory's owner record covers it.

    Raises:
        OwnerConflictError: ``userId`` or ``agentName`` is another scope's.
    """
    if ("userId" in raw or "agentName" in raw) and (
        raw.get("userId") != paths.user.user_id or raw.get("agentName") != paths.agent
    ):
        raise OwnerConflictError(path, "this file belongs to another user or agent")


def check_agent_owner(paths: ScopePaths, scope: Scope) -> bool:
    """Refuse an agent directory with a derived name that is not this scope's; return
    whether it needs no record written (its name is the agent's, or it has one).

    Raises:
        OwnerConflictError: its record names another agent or user.
        CorruptMemoryFile: the record cannot be read.
    """
    if paths.agent_dir.name == paths.agent:
        return True
    record = read_owner(paths.owner)
    if record is None:
        return False
    if record != Owner(scope.user_id, scope.agent):
        raise OwnerConflictError(
            paths.agent_dir, "this agent directory belongs to another agent (its owner record)"
        )
    return True


# --- what a directory's contents say ----------------------------------------------------------


def stored_user_ids(user_dir: Path) -> frozenset[str]:
    """Every user id the facts and archived facts of a user directory name (all agents)."""
    found = set()
    for agent_dir in _subdirectories(user_dir / _AGENTS):
        for path in sorted(agent_dir.glob("facts/*/*.md")):
            found.add(_fact_user_id(path))
        for path in sorted(agent_dir.glob(".metadata/archive/*.json")):
            found.add(_archived_user_id(path))
    return frozenset(user_id for user_id in found if isinstance(user_id, str))


def _fact_user_id(path: Path) -> str | None:
    try:
        text = path.read_text(encoding="utf-8")
        front = text.removeprefix("---\n").split("\n---\n", 1)[0]
        meta = yaml.load(front, Loader=_LOADER)  # a safe loader (C or Python)
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    user_id = meta.get("user_id") if isinstance(meta, dict) else None
    return user_id if isinstance(user_id, str) else None


def _archived_user_id(path: Path) -> str | None:
    try:
        entry = json.loads(path.read_bytes())
        user_id = entry["fact"]["scope"]["userId"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return user_id if isinstance(user_id, str) else None


def user_of_directory(directory: Path) -> str:
    """The user id a directory under ``users/`` belongs to.

    Its owner record, if it has one (it must name an id whose directory this
    is); else the one id its contents name — an id whose directory this is,
    or one an earlier version kept as its directory name (see
    :func:`~deermem.model.was_kept_user_id`: the store moves that
    directory on its first write); else, nothing naming a user, its own name
    if that is an id's own name.

    Raises:
        OwnerConflictError: the record or the contents name an id whose
            directory is another, or the contents name several.
        CorruptMemoryFile: the record cannot be read, or nothing tells the id
            of a directory whose name is derived.
    """
    record = read_owner(directory / OWNER_FILENAME)
    if record is not None:
        if record.user_id is None or _allowed(record.user_id, directory) != directory.name:
            raise OwnerConflictError(
                directory, "its owner record names a user id whose directory is another"
            )
        return record.user_id
    stored = stored_user_ids(directory)
    if len(stored) == 1:
        [user_id] = stored
        if _allowed(user_id, directory) == directory.name:
            return user_id
        if user_id == directory.name and was_kept_user_id(user_id):
            return user_id
        raise OwnerConflictError(
            directory, "it holds the facts of a user id whose directory is another"
        )
    if stored:
        raise _shared(directory)
    if _safe(directory.name) == directory.name:
        return directory.name  # a kept id is its own directory name
    raise CorruptMemoryFile(
        directory,
        "cannot tell the user id of this directory: its name is derived from the id, and "
        "nothing in it names its user",
    )


def _safe(user_id: str) -> str | None:
    try:
        return safe_user_id(user_id)
    except UnsafeIdentifierError:
        return None


def _allowed(user_id: str, directory: Path) -> str:
    """The directory name of a user id a directory records.

    Raises:
        CorruptMemoryFile: the id breaks the rule for user ids (an earlier
            version kept it): its memory cannot be opened under it.
    """
    try:
        return safe_user_id(user_id)
    except UnsafeIdentifierError as error:
        raise CorruptMemoryFile(
            directory, f"the user id it records is not allowed any more: {error.reason}"
        ) from None


# --- what a root holds --------------------------------------------------------------------------


def list_users(root: Path, manifest_filename: str) -> tuple[list[str | None], list[Problem]]:
    """Every user under ``root`` — the single-user layout's (``None``) first, then by
    directory — and every user directory that holds memory but cannot be listed, with why."""
    users: list[str | None] = []
    problems: list[Problem] = []
    if (root / manifest_filename).is_file() or (root / _AGENTS).is_dir():
        users.append(None)
    found: dict[str, Path] = {}
    for directory in _subdirectories(root / _USERS):
        if not ((directory / manifest_filename).exists() or (directory / _AGENTS).exists()):
            continue  # no memory in it (a lock file at most): no user to list
        try:
            user_id = user_of_directory(directory)
        except CorruptMemoryFile as error:
            problems.append(Problem(directory, error.problem))
            continue
        other = found.get(user_id)
        if other is not None:
            # Only a directory an earlier version named after the id meets the id's own:
            # the store reads the id's own, so the other is the one left behind.
            left = other if directory.name == _safe(user_id) else directory
            found[user_id] = directory if left is other else other
            problems.append(
                Problem(left, "the user's memory is in a directory of its own name too")
            )
            continue
        found[user_id] = directory
    users.extend(found)
    return users, problems


def list_agents(user: UserPaths) -> tuple[list[str], list[Problem]]:
    """The agent buckets of a user directory, sorted, and every agent directory that
    holds data but cannot be read as one (a name that is no bucket's, a derived
    name without its record), with why.

    Directories that hold no memory (no ``facts/``, no ``.metadata/``) are
    another program's and are left alone.
    """
    agents: list[str] = []
    problems: list[Problem] = []
    for directory in _subdirectories(user.user_dir / _AGENTS):
        name = directory.name
        if is_bucket(name) and agent_directory(name) == name:
            agents.append(name)
            continue
        if not ((directory / "facts").exists() or (directory / ".metadata").exists()):
            continue
        if not is_derived_agent_directory(name):
            problems.append(Problem(directory, "the name is not an agent's directory name"))
            continue
        try:
            record = read_owner(directory / OWNER_FILENAME)
        except CorruptMemoryFile as error:
            problems.append(Problem(directory, error.problem))
            continue
        agent = _agent_of(record, user.user_id, name)
        if agent is None:
            problems.append(
                Problem(directory, "a long agent name's directory without a matching owner record")
            )
            continue
        agents.append(agent)
    return sorted(agents), problems


def _agent_of(record: Owner | None, user_id: str | None, name: str) -> str | None:
    if record is None or record.agent is None or record.user_id != user_id:
        return None
    try:
        agent = normalise_agent(record.agent)
    except UnsafeIdentifierError:
        return None
    return agent if agent == record.agent and agent_directory(agent) == name else None


def _subdirectories(directory: Path) -> list[Path]:
    try:
        return sorted(path for path in directory.iterdir() if path.is_dir())
    except (FileNotFoundError, NotADirectoryError):
        return []
