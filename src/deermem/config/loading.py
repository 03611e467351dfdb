"""Building a :class:`MemoryConfig` from its sources, and saying where each value came from.

Later sources win:

1. the defaults;
2. the store's own settings file, ``<root>/deermem.yaml`` (``deermem init``),
   when a store root is named;
3. a configuration file given explicitly (``--config``);
4. ``DEERMEM_*`` environment variables;
5. keyword arguments.

A section (``model``) is merged key by key across the sources. Every problem
is reported at once, each naming the key, the value, what is allowed and
where the value came from, so one run of ``deermem config check`` shows
everything that needs fixing; :func:`resolve_config` also returns where each
value came from, for ``deermem config show``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final, get_args

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from deermem.config._errors import describing_origins
from deermem.config.files import read_config_file
from deermem.config.schema import MemoryConfig
from deermem.config.store_file import explicit_settings, read_store_settings, store_settings_path

__all__ = [
    "DEFAULT_SOURCE",
    "ENV_PREFIX",
    "ResolvedConfig",
    "config_from_mapping",
    "load_config",
    "read_config_file",
    "resolve_config",
    "with_store_settings",
]

ENV_PREFIX: Final = "DEERMEM_"
# Variables read as a setting under another name: hosting platforms hand a
# database over as ``*_DATABASE_URL``. The setting's own variable wins.
_ENV_ALIASES: Final = {"DEERMEM_DATABASE_URL": "store"}
DEFAULT_SOURCE: Final = "default"
_ARGUMENT: Final = "keyword argument"


@dataclass(frozen=True, slots=True)
class ResolvedConfig:
    """A configuration, and where each of its values came from.

    Attributes:
        config: the validated configuration.
        sources: setting (``max_facts``, ``model.base_url``) -> the source
            that gave its value: a file's path, ``environment variable
            DEERMEM_…`` or ``keyword argument``; settings left at their
            default are absent.
        store_file: the store's settings file that was read, if any.
    """

    config: MemoryConfig
    sources: Mapping[str, str]
    store_file: Path | None = None

    def source(self, setting: str) -> str:
        """Where a setting's value came from (``default`` when nothing set it)."""
        found = self.sources.get(setting)
        if found is None and "." in setting:
            found = self.sources.get(setting.split(".", 1)[0])
        return found or DEFAULT_SOURCE


def load_config(
    path: str | os.PathLike[str] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    **overrides: object,
) -> MemoryConfig:
    """Build the effective configuration from defaults, a file, the environment and arguments.

    A store's own settings are laid under it where the store is opened
    (:meth:`Memory.open <deermem.memory.Memory.open>`), or read with
    :func:`resolve_config`'s ``root``.

    Args:
        path: a ``.toml``, ``.yaml`` or ``.yml`` file, or ``None`` for none.
        environ: where to read ``DEERMEM_*`` variables; ``os.environ`` by default.
            Pass ``{}`` to ignore the environment.
        **overrides: settings that win over every other source.

    Raises:
        ConfigError: a file cannot be read or parsed, or any value is invalid;
            the error lists every problem.
    """
    return resolve_config(path, environ=environ, overrides=overrides).config


def resolve_config(
    path: str | os.PathLike[str] | None = None,
    *,
    root: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, object] | None = None,
) -> ResolvedConfig:
    """Build the effective configuration and record where each value came from.

    Args:
        path: a ``.toml``, ``.yaml`` or ``.yml`` file, or ``None`` for none.
        root: a store root whose own settings file (``deermem.yaml``) is the
            lowest source after the defaults; ``None`` reads no store's file.
        environ: where to read ``DEERMEM_*`` variables; ``os.environ`` by default.
            Pass ``{}`` to ignore the environment.
        overrides: settings that win over every other source (keyword
            arguments of :func:`load_config`).

    Raises:
        ConfigError: a file cannot be read or parsed, or any value is invalid;
            the error lists every problem.
    """
    values: dict[str, object] = {}
    origins: dict[str, str] = {}
    store_file = None
    if root is not None:
        stored = read_store_settings(root)
        if stored is not None:
            store_file = store_settings_path(root)
            _merge(values, origins, stored, str(store_file))
    if path is not None:
        _merge(values, origins, read_config_file(path), str(path))
    for location, variable, value in _environment_values(
        os.environ if environ is None else environ
    ):
        key, *inner = location
        origin = f"environment variable {variable}"
        _merge(values, origins, {key: {inner[0]: value} if inner else value}, origin)
    _merge(values, origins, overrides or {}, _ARGUMENT)
    source = str(path) if path is not None else str(store_file) if store_file else None
    config = config_from_mapping(values, origins=origins, source=source)
    return ResolvedConfig(config, origins, store_file)


def with_store_settings(config: MemoryConfig, root: str | os.PathLike[str]) -> MemoryConfig:
    """``config`` over the settings the store at ``root`` keeps in its own file.

    The settings ``config`` was given (by its file, the environment or
    arguments: :func:`~deermem.config.store_file.explicit_settings`) win;
    the store's file supplies the rest; defaults the remainder. Without a
    store file, ``config`` itself is returned.

    Raises:
        ConfigError: the store's file is unreadable or invalid (named in the error).
    """
    stored = read_store_settings(root)
    if not stored:
        return config
    values: dict[str, object] = {}
    origins: dict[str, str] = {}
    file = str(store_settings_path(root))
    _merge(values, origins, stored, file)
    _merge(values, origins, explicit_settings(config), "the configuration given")
    return config_from_mapping(values, origins=origins, source=file)


def config_from_mapping(
    values: Mapping[str, object],
    *,
    origins: Mapping[str, str] | None = None,
    source: str | None = None,
) -> MemoryConfig:
    """Validate settings; errors name where each bad value came from."""
    with describing_origins(origins or {}, source):
        return MemoryConfig(**values)


def _merge(
    values: dict[str, object], origins: dict[str, str], new: Mapping[str, object], origin: str
) -> None:
    """Lay ``new`` over ``values``; a section given as a mapping is merged key by key."""
    for key, value in new.items():
        current = values.get(key)
        if isinstance(value, Mapping):
            if isinstance(current, Mapping):
                values[key] = {**current, **value}
            else:
                values[key] = dict(value)
                origins.pop(key, None)
            for inner in value:
                origins[f"{key}.{inner}"] = origin
        else:
            values[key] = value
            for stale in [name for name in origins if name.startswith(f"{key}.")]:
                del origins[stale]
            origins[key] = origin


def _environment_values(
    environ: Mapping[str, str],
) -> list[tuple[tuple[str, ...], str, object]]:
    """``(location, variable, value)`` for every ``DEERMEM_*`` variable that names a setting.

    A section such as ``model`` is read from ``DEERMEM_MODEL`` (a JSON object)
    and from one variable per key, ``DEERMEM_MODEL__BASE_URL``; the per-key
    variables come later, so they win.
    """
    found: list[tuple[tuple[str, ...], str, object]] = []
    for variable, key in _ENV_ALIASES.items():
        if variable in environ and ENV_PREFIX + key.upper() not in environ:
            info = MemoryConfig.model_fields[key]
            found.append(((key,), variable, _parse_env_value(environ[variable], info)))
    for key, info in MemoryConfig.model_fields.items():
        variable = ENV_PREFIX + key.upper()
        section = _section_model(info)
        if variable in environ:
            raw = environ[variable]
            value = _parse_json_object(raw) if section else _parse_env_value(raw, info)
            found.append(((key,), variable, value))
        if section is None:
            continue
        for sub_key, sub_info in section.model_fields.items():
            sub_variable = f"{variable}__{sub_key.upper()}"
            if sub_variable in environ:
                value = _parse_env_value(environ[sub_variable], sub_info)
                found.append(((key, sub_key), sub_variable, value))
    return found


def _section_model(info: FieldInfo) -> type[BaseModel] | None:
    annotation = info.annotation
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def _parse_json_object(raw: str) -> object:
    """A whole section in one variable is a JSON object; anything else is left to fail."""
    try:
        parsed: object = json.loads(raw)
    except json.JSONDecodeError:
        return raw
    return parsed


def _parse_env_value(raw: str, info: FieldInfo) -> object:
    """Environment values are strings; lists may be JSON or comma-separated; ``null``
    clears an optional setting."""
    if raw.strip() == "null" and type(None) in get_args(info.annotation):
        return None
    annotation = str(info.annotation)
    if "tuple" in annotation or "list" in annotation:
        text = raw.strip()
        if text.startswith("["):
            try:
                parsed: object = json.loads(text)
            except json.JSONDecodeError:
                return raw
            return parsed
        return [part.strip() for part in text.split(",") if part.strip()]
    return raw.strip()
