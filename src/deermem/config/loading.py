"""Reading a :class:`MemoryConfig` from a file, the environment and arguments.

Later sources win: defaults < file < ``DEERMEM_*`` environment variables <
keyword arguments. Every problem is reported at once, each naming the key, the
value, what is allowed and where the value came from, so one run of
``deermem config check`` shows everything that needs fixing.
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Final, get_args

import yaml
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from deermem._exceptions import ConfigError
from deermem.config._errors import describing_origins
from deermem.config.schema import MemoryConfig

__all__ = ["ENV_PREFIX", "config_from_mapping", "load_config", "read_config_file"]

ENV_PREFIX: Final = "DEERMEM_"
# Variables read as a setting under another name: hosting platforms hand a
# database over as ``*_DATABASE_URL``. The setting's own variable wins.
_ENV_ALIASES: Final = {"DEERMEM_DATABASE_URL": "store"}
# A file may hold the settings at top level or under one ``deermem`` table, so
# deermem can share a file with the application that embeds it.
_SECTION: Final = "deermem"


def load_config(
    path: str | os.PathLike[str] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    **overrides: object,
) -> MemoryConfig:
    """Build the effective configuration.

    Args:
        path: a ``.toml``, ``.yaml`` or ``.yml`` file, or ``None`` for none.
        environ: where to read ``DEERMEM_*`` variables; ``os.environ`` by default.
            Pass ``{}`` to ignore the environment.
        **overrides: settings that win over every other source.

    Raises:
        ConfigError: the file cannot be read or parsed, or any value is invalid;
            the error lists every problem.
    """
    values: dict[str, object] = {}
    origins: dict[str, str] = {}
    if path is not None:
        file_values = read_config_file(path)
        values.update(file_values)
        origins.update(dict.fromkeys(file_values, str(path)))
    for location, variable, value in _environment_values(
        os.environ if environ is None else environ
    ):
        _set_value(values, location, value)
        origins[".".join(location)] = f"environment variable {variable}"
    values.update(overrides)
    origins.update(dict.fromkeys(overrides, "keyword argument"))
    source = str(path) if path is not None else None
    return config_from_mapping(values, origins=origins, source=source)


def read_config_file(path: str | os.PathLike[str]) -> dict[str, object]:
    """Parse a TOML or YAML configuration file into a flat mapping of settings."""
    file = Path(path)
    suffix = file.suffix.lower()
    if suffix not in {".toml", ".yaml", ".yml"}:
        raise ConfigError(
            [f"unsupported file type {suffix or '(none)'!r}; use .toml, .yaml or .yml"],
            source=str(file),
        )
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError([f"cannot read the file: {error}"], source=str(file)) from error
    try:
        document: object = tomllib.loads(text) if suffix == ".toml" else yaml.safe_load(text)
    except (tomllib.TOMLDecodeError, yaml.YAMLError) as error:
        raise ConfigError([f"cannot parse the file: {error}"], source=str(file)) from error
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise ConfigError(
            [f"expected a mapping of settings at the top level, found {type(document).__name__}"],
            source=str(file),
        )
    section = document.get(_SECTION)
    if isinstance(section, dict) and len(document) == 1:
        document = section
    return {str(key): value for key, value in document.items()}


def config_from_mapping(
    values: Mapping[str, object],
    *,
    origins: Mapping[str, str] | None = None,
    source: str | None = None,
) -> MemoryConfig:
    """Validate settings; errors name where each bad value came from."""
    with describing_origins(origins or {}, source):
        return MemoryConfig(**values)


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


def _set_value(values: dict[str, object], location: tuple[str, ...], value: object) -> None:
    """Set a top-level setting, or one key of a section, merging into the file's section."""
    key = location[0]
    current = values.get(key)
    if len(location) == 1:
        if isinstance(value, Mapping) and isinstance(current, Mapping):
            value = {**current, **value}
        values[key] = value
        return
    section = dict(current) if isinstance(current, Mapping) else {}
    section[location[1]] = value
    values[key] = section


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
