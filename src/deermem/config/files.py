"""Reading one configuration file (TOML or YAML) into a flat mapping of settings."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Final

import yaml

from deermem.errors import ConfigError

__all__ = ["read_config_file"]

# A file may hold the settings at top level or under one ``deermem`` table, so
# deermem can share a file with the application that embeds it.
_SECTION: Final = "deermem"


def read_config_file(path: str | os.PathLike[str]) -> dict[str, object]:
    """Parse a TOML or YAML configuration file into a flat mapping of settings.

    Raises:
        ConfigError: the file has another suffix, cannot be read or parsed, or
            does not hold a mapping; the error names the file.
    """
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
