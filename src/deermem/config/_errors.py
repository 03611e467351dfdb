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
from typing import Any

from pydantic import BaseModel, ValidationError

from deermem._exceptions import ConfigError

__all__ = ["config_error", "describing_origins"]

# Where each value came from, for the loader: pydantic calls the model's
# __init__ from deep inside validation, so the loader cannot pass it down.
_ORIGINS: ContextVar[tuple[Mapping[str, str], str | None]] = ContextVar(
    "deermem_config_origins", default=({}, None)
)


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
) -> ConfigError:
    """One :class:`ConfigError` listing every problem pydantic found."""
    origins, source = _ORIGINS.get()
    problems = [_describe(model, item, values, origins) for item in error.errors()]
    return ConfigError(problems, source=source)


def _describe(
    model: type[BaseModel],
    item: Mapping[str, Any],
    values: Mapping[str, object],
    origins: Mapping[str, str],
) -> str:
    location = item.get("loc") or ()
    key = str(location[0]) if location else ""
    if not key:
        # A model-level rule (the weights): its message already names the keys.
        return str(item.get("msg", "")).removeprefix("Value error, ")
    where = f" (from {origins[key]})" if key in origins else ""
    if item.get("type") == "extra_forbidden":
        close = difflib.get_close_matches(key, list(model.model_fields), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return f"unknown setting {key!r}{where}{hint}"
    value = values.get(key, item.get("input"))
    message = str(item.get("msg", "")).removeprefix("Value error, ")
    allowed = message if item.get("type") == "value_error" else _allowed(model, key) or message
    return f"{key} = {value!r}{where}: {allowed}"


def _allowed(model: type[BaseModel], key: str) -> str:
    """Describe what a setting accepts, from its declared type and bounds."""
    info = model.model_fields.get(key)
    if info is None:
        return ""
    low = high = None
    for constraint in info.metadata:
        low = getattr(constraint, "ge", low)
        high = getattr(constraint, "le", high)
    annotation = info.annotation
    if annotation is int:
        kind = "a whole number"
    elif annotation is float:
        kind = "a number"
    elif annotation is bool:
        return "expected true or false"
    elif getattr(annotation, "__origin__", None) is not None and "Literal" in str(annotation):
        choices = ", ".join(repr(choice) for choice in annotation.__args__)  # type: ignore[union-attr]
        return f"expected one of {choices}"
    elif "tuple" in str(annotation):
        return "expected a list of category names"
    else:
        return ""
    if low is not None and high is not None:
        return f"expected {kind} between {low} and {high}"
    if low is not None:
        return f"expected {kind} of at least {low}"
    return f"expected {kind}"
