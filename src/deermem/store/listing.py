"""What a Markdown store root holds: whether it is a store at all, and its users.

The layout (:mod:`deermem.store.paths`) names a user's directory after a
*safe form* of the user id, so the raw id cannot always be read from the
name: ``alice@example.com`` lives in ``users/alice-example-com-ff8d9819fc0e12bf``.
The raw id is stored in every fact and archived fact, so it is read back
from one of them and accepted only if it maps to the directory's name;
failing that, a name made only of ``[A-Za-z0-9_-]`` is listed as the id it
is (``--user`` with that name addresses the directory). A directory whose
id cannot be told either way — written by something else, no fact left in
it — holds no fact to list; it is skipped with a warning naming it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import yaml

from deermem._exceptions import UnsafeIdentifierError
from deermem.store.paths import JOURNAL_FILENAME, LOCK_FILENAME, RETRIEVAL_DIRNAME
from deermem.store.scope import safe_user_id

__all__ = ["holds_store", "list_users"]

_log = logging.getLogger("deermem.store")

_USERS: Final = "users"
_AGENTS: Final = "agents"
_LOADER: Final[Any] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


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


def list_users(root: Path, manifest_filename: str) -> tuple[str | None, ...]:
    """Every user under ``root``: the single-user layout's (``None``) first, then by directory."""
    users: list[str | None] = []
    if (root / manifest_filename).is_file() or (root / _AGENTS).is_dir():
        users.append(None)
    for directory in _subdirectories(root / _USERS):
        user_id = _user_id(directory)
        if user_id is None:
            _log.warning(
                "%s: the user id of this directory cannot be told (its name is derived from "
                "the id, and no fact or archived fact in it names its user); not listed",
                directory,
            )
            continue
        users.append(user_id)
    return tuple(users)


def _user_id(directory: Path) -> str | None:
    for candidate in _stored_user_ids(directory):
        if _safe(candidate) == directory.name:
            return candidate
    if _safe(directory.name) == directory.name:
        return directory.name  # a plain id is its own directory name
    return None


def _stored_user_ids(directory: Path) -> Iterator[str]:
    """The user ids the facts and archived facts of a user directory name, lazily."""
    for agent in _names(directory / _AGENTS):
        agent_dir = directory / _AGENTS / agent
        for path in sorted(agent_dir.glob("facts/*/*.md")):
            found = _fact_user_id(path)
            if found is not None:
                yield found
                break
        for path in sorted(agent_dir.glob(".metadata/archive/*.json")):
            found = _archived_user_id(path)
            if found is not None:
                yield found
                break


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


def _safe(user_id: str) -> str | None:
    try:
        return safe_user_id(user_id)
    except UnsafeIdentifierError:
        return None


def _names(directory: Path) -> list[str]:
    return [path.name for path in _subdirectories(directory)]


def _subdirectories(directory: Path) -> list[Path]:
    try:
        return sorted(path for path in directory.iterdir() if path.is_dir())
    except (FileNotFoundError, NotADirectoryError):
        return []
