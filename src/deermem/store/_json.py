"""Indented JSON, byte for byte as ``json.dumps(value, indent=2, ensure_ascii=False)``, faster.

``memory.json`` is written on every commit and an archive entry for every
fact that leaves a library, both indented so people can read them. With
``indent`` set, :mod:`json` falls back to its pure-Python encoder, which
spends about twice as long as needed on these small documents. This module
lays out the indentation itself and leaves each string to the same C
function :mod:`json` uses (``encode_basestring``), each number to the same
``repr``: the output is identical, checked against :mod:`json` by property
tests. Anything outside the plain JSON types (non-string keys, NaN or
infinities, other objects) goes to :func:`json.dumps`, which gives the same
text or the same error as before.
"""

from __future__ import annotations

import json
import math
from json.encoder import encode_basestring
from typing import Final

__all__ = ["dumps_indented"]

_STEP: Final = "  "


class _Fallback(Exception):
    """A value this module leaves to :func:`json.dumps`."""


def dumps_indented(value: object) -> str:
    """``json.dumps(value, indent=2, ensure_ascii=False)``, the same text."""
    parts: list[str] = []
    try:
        _emit(value, parts, "\n")
    except (_Fallback, RecursionError):
        return json.dumps(value, indent=2, ensure_ascii=False)
    return "".join(parts)


def _emit(value: object, out: list[str], newline: str) -> None:
    """Append ``value``'s text; ``newline`` is a line break plus the current indentation."""
    if isinstance(value, str):
        out.append(encode_basestring(value))
    elif value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        out.append(int.__repr__(value))
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise _Fallback
        out.append(float.__repr__(value))
    elif isinstance(value, dict):
        _emit_object(value, out, newline)
    elif isinstance(value, list | tuple):
        _emit_array(value, out, newline)
    else:
        raise _Fallback


def _emit_object(value: dict[object, object], out: list[str], newline: str) -> None:
    if not value:
        out.append("{}")
        return
    inner = newline + _STEP
    separator = "{" + inner
    for key, item in value.items():
        if not isinstance(key, str):
            raise _Fallback  # json converts numbers, booleans and null to keys its own way
        out.append(separator)
        out.append(encode_basestring(key))
        out.append(": ")
        _emit(item, out, inner)
        separator = "," + inner
    out.append(newline + "}")


def _emit_array(value: list[object] | tuple[object, ...], out: list[str], newline: str) -> None:
    if not value:
        out.append("[]")
        return
    inner = newline + _STEP
    separator = "[" + inner
    for item in value:
        out.append(separator)
        _emit(item, out, inner)
        separator = "," + inner
    out.append(newline + "]")
