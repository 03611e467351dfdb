"""A store's own settings: ``<root>/deermem.yaml``, written by ``deermem init``.

A store remembers the configuration it was built with, so a later command
that names only the directory uses the same cap and policy: without it,
``deermem why`` on a store built at a cap of 10 would explain evictions
against the default cap of 100. The file is an ordinary configuration file
(the keys of :class:`~deermem.config.MemoryConfig`) under a comment header;
it sits below every explicit source — see :func:`deermem.config.resolve_config`.

What it may not hold: ``storage_path`` and ``store`` (the file is found *at*
a Markdown store's root, so it can neither move it nor name a database —
whose URL may hold a password), and secrets — the model's API key is never a
setting anywhere (``model.api_key_env`` names the variable that holds it). Relative
paths in it (``prompts_dir``, ``patterns_dir``, ``model.model_path``) are
relative to the root, so the store can be moved or shared whole;
:func:`render_store_settings` writes them absolute.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, Literal

import yaml

from deermem.config.files import read_config_file
from deermem.config.schema import MemoryConfig
from deermem.errors import ConfigError, StoreSettingsExistError

__all__ = [
    "NOT_IN_STORE_FILE",
    "STORE_SETTINGS_FILENAME",
    "explicit_settings",
    "read_store_settings",
    "render_store_settings",
    "store_settings_path",
    "write_store_settings",
]

STORE_SETTINGS_FILENAME: Final = "deermem.yaml"
NOT_IN_STORE_FILE: Final = frozenset({"storage_path", "store"})
"""Settings a store's own file cannot hold (and :func:`render_store_settings` leaves out)."""

# Settings holding a path: relative ones in a store's file are relative to its root.
_PATH_SETTINGS: Final = (("prompts_dir",), ("patterns_dir",), ("model", "model_path"))

_HEADER: Final = """\
# The settings of this deermem store, written by `deermem init`.
#
# Every deermem command and Memory.open on this directory use them. Explicit
# choices win over them: a --config file or a configuration passed to
# Memory.open, then DEERMEM_* environment variables, then keyword arguments
# (docs/configuration.md). `deermem config show` says where each value came
# from. No secrets belong here: the model's API key stays in the environment
# variable that model.api_key_env names. Relative paths are relative to this
# directory.
"""


def store_settings_path(root: str | os.PathLike[str]) -> Path:
    """Where a store keeps its settings: ``<root>/deermem.yaml``."""
    return Path(root) / STORE_SETTINGS_FILENAME


def read_store_settings(root: str | os.PathLike[str]) -> dict[str, object] | None:
    """The settings a store's file holds (relative paths resolved), or ``None`` without one.

    Raises:
        ConfigError: the file cannot be read or parsed, or it sets
            ``storage_path``; the error names the file.
    """
    path = store_settings_path(root)
    if not path.is_file():
        if path.exists() or path.is_symlink():
            raise ConfigError(["expected a settings file, found something else"], source=str(path))
        return None
    values = read_config_file(path)
    refused = sorted(NOT_IN_STORE_FILE & values.keys())
    if refused:
        raise ConfigError(
            [f"{key} cannot be set in a store's own settings file" for key in refused],
            source=str(path),
        )
    return _resolved_paths(values, Path(root))


def explicit_settings(config: MemoryConfig) -> dict[str, object]:
    """The settings a configuration was given (by a file, a variable, an argument).

    Defaults it merely took are left out, so laying these over other values
    overrides only what someone chose. A section (``model``) gives only its
    chosen keys.
    """
    values: dict[str, object] = {}
    for key in config.model_fields_set:
        value = getattr(config, key)
        if key == "model":
            value = {name: getattr(value, name) for name in value.model_fields_set}
        values[key] = value
    return values


def render_store_settings(config: MemoryConfig) -> str:
    """The text of a store's settings file for ``config``: its chosen settings only.

    Settings left at their default stay out (a later deermem's defaults
    apply to them), as do the :data:`NOT_IN_STORE_FILE` ones; paths are
    written absolute. Keys follow the schema's order, so the same
    configuration always gives the same bytes.
    """
    chosen = config.model_dump(mode="json", include=_include(config))
    for location in _PATH_SETTINGS:
        value = _get(chosen, location)
        if isinstance(value, str):
            _set(chosen, location, str(Path(value).expanduser().resolve()))
    body = yaml.safe_dump(chosen, sort_keys=False, allow_unicode=True) if chosen else "{}\n"
    return _HEADER + "\n" + body


def write_store_settings(
    root: str | os.PathLike[str], text: str, *, force: bool = False
) -> Literal["created", "unchanged", "replaced"]:
    """Write a store's settings file, never silently replacing other settings.

    The file is replaced atomically (a temporary file, fsynced, renamed), so
    a reader sees the old settings or the new ones; nothing else in the root
    is touched. The root directory is created if needed.

    Raises:
        StoreSettingsExistError: the root already holds different settings
            and ``force`` is false; nothing is written.
    """
    path = store_settings_path(root)
    try:
        current = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        current = None
    except (OSError, UnicodeDecodeError):
        current = ""  # unreadable: different by definition
    if current == text:
        return "unchanged"
    if current is not None and not force:
        raise StoreSettingsExistError(str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        Path(name).replace(path)
    except BaseException:
        Path(name).unlink(missing_ok=True)
        raise
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)  # the rename itself survives a power cut
    finally:
        os.close(directory)
    return "created" if current is None else "replaced"


def _include(config: MemoryConfig) -> dict[str, Any]:
    include: dict[str, Any] = {}
    for key in config.model_fields_set - NOT_IN_STORE_FILE:
        include[key] = set(config.model.model_fields_set) if key == "model" else True
    return include


def _resolved_paths(values: dict[str, object], root: Path) -> dict[str, object]:
    for location in _PATH_SETTINGS:
        value = _get(values, location)
        if isinstance(value, str) and value.strip() and not Path(value).expanduser().is_absolute():
            if len(location) == 2:  # copy a section before changing one of its keys
                section = values.get(location[0])
                values[location[0]] = dict(section) if isinstance(section, Mapping) else section
            _set(values, location, str(root / value))
    return values


def _get(values: Mapping[str, object], location: tuple[str, ...]) -> object:
    current: object = values
    for key in location:
        if not isinstance(current, Mapping):
            return None
        current = current.get(key)
    return current


def _set(values: dict[str, object], location: tuple[str, ...], value: object) -> None:
    target = values
    for key in location[:-1]:
        inner = target.get(key)
        if not isinstance(inner, dict):
            return
        target = inner
    target[location[-1]] = value
