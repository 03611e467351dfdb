"""Turning pydantic's validation errors into deermem's :class:`ConfigError`.

pydantic reports ``Input should be less than or equal to 500``; a person
fixing a file needs ``max_facts = 501 (from deermem.toml): expected a whole
number between 10 and 500``. This module writes the second from the first.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from types import UnionType
from typing import Annotated, Any, Final, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from deermem.config.database import redact_database_url
from deermem.errors import ConfigError

__all__ = ["config_error", "describing_origins"]

# Where each value came from, for the loader: pydantic calls the model's
# __init__ from deep inside validation, so the loader cannot pass it down.
_ORIGINS: ContextVar[tuple[Mapping[str, str], str | None]] = ContextVar(
    "deermem_config_origins", default=({}, None)
)


# Settings whose rejected value is never repeated in a message: a key pasted
# where the name of its environment variable belongs must not end up in a log.
_UNECHOED: Final = frozenset({"model.api_key_env"})
# Settings whose rejected value is echoed only with its secrets taken out.
_REDACTED: Final = {"store": redact_database_url}


@contextmanager
def describing_origins(origins: Mapping[str, str], source: str | None) -> Iterator[None]:
    """Name ``origins[key]`` and ``source`` in errors raised while constructing a config."""
    token = _ORIGINS.set((origins, source))
    try:
        yield
    finally:
        _ORIGINS.reset(token)


def config_error(
    model: type[BaseModel],
    error: ValidationError,
    values: Mapping[str, object],
    *,
    section: str | None = None,
) -> ConfigError:
    """One :class:`ConfigError` listing every problem pydantic found.

    Args:
        model: the model that failed to validate.
        error: pydantic's error.
        values: the values it was given.
        section: the key of ``model`` inside its parent configuration (``"model"``
            for the ``model:`` section), so problems name ``model.temperature``.
    """
    origins, source = _ORIGINS.get()
    problems: list[str] = []
    for item in error.errors():
        nested = (item.get("ctx") or {}).get("error")
        if isinstance(nested, ConfigError):
            # A section validated itself (its own __init__) and already wrote its lines.
            problems.extend(nested.problems)
        else:
            problems.append(_describe(model, item, values, origins, section))
    return ConfigError(problems, source=source)


def _describe(
    model: type[BaseModel],
    item: Mapping[str, Any],
    values: Mapping[str, object],
    origins: Mapping[str, str],
    section: str | None,
) -> str:
    location = tuple(str(part) for part in item.get("loc") or ())
    key = location[0] if location else ""
    message = str(item.get("msg", "")).removeprefix("Value error, ")
    if not key:
        # A model-level rule (the weights): its message already names the keys.
        return message
    path = ".".join((section, *location) if section else location)
    origin = origins.get(path) or origins.get(path.split(".", 1)[0])
    where = f" (from {origin})" if origin else ""
    if item.get("type") == "extra_forbidden":
        close = difflib.get_close_matches(key, list(model.model_fields), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return f"unknown setting {path!r}{where}{hint}"
    if path in _UNECHOED:
        return f"{path}{where}: {message}"
    value = values.get(key, item.get("input"))
    if path in _REDACTED and isinstance(value, str):
        value = _REDACTED[path](value)
    allowed = message if item.get("type") == "value_error" else _allowed(model, key) or message
    return f"{path} = {value!r}{where}: {allowed}"


def _allowed(model: type[BaseModel], key: str) -> str:
    """Describe what a setting accepts, from its declared type and bounds."""
    info = model.model_fields.get(key)
    if info is None:
        return ""
    low = high = None
    for constraint in _constraints(info.metadata, info.annotation):
        low = getattr(constraint, "ge", low)
        high = getattr(constraint, "le", high)
    annotation, optional = _unwrap_optional(info.annotation)
    if annotation is int:
        kind = "a whole number"
    elif annotation is float:
        kind = "a number"
    elif annotation is bool:
        return "expected true or false"
    elif get_origin(annotation) is Literal:
        choices = ", ".join(repr(choice) for choice in get_args(annotation))
        return f"expected one of {choices}"
    elif isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "expected a table (mapping) of settings"
    elif "tuple" in str(annotation):
        return "expected a list of category names"
    else:
        return ""
    or_null = " (or null)" if optional else ""
    if low is not None and high is not None:
        return f"expected {kind} between {low} and {high}{or_null}"
    if low is not None:
        return f"expected {kind} of at least {low}{or_null}"
    return f"expected {kind}{or_null}"


def _unwrap_optional(annotation: Any) -> tuple[Any, bool]:
    """``X | None`` -> (X, True); ``Annotated[X, ...]`` -> X; anything else unchanged."""
    args = get_args(annotation)
    if get_origin(annotation) in (Union, UnionType) and type(None) in args:
        rest = [arg for arg in args if arg is not type(None)]
        if len(rest) == 1:
            return _unwrap_optional(rest[0])[0], True
    if get_origin(annotation) is Annotated:
        return args[0], False
    return annotation, False


def _constraints(metadata: list[Any], annotation: Any) -> list[Any]:
    """Bounds live in the field's metadata, or inside ``Annotated[...] | None``."""
    found = list(metadata)
    for arg in get_args(annotation):
        if get_origin(arg) is Annotated:
            for extra in get_args(arg)[1:]:
                found.extend(extra.metadata if isinstance(extra, FieldInfo) else [extra])
    return found
