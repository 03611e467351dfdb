"""YAML front matter, fast for the shapes facts actually have, PyYAML for the rest.

A fact's front matter is a flat mapping of ids, category names, numbers and
ISO timestamps, with one small nested mapping (``source``) and a list
(``topics``). PyYAML spends most of a cold load building and resolving nodes
for them (≈ 150 µs per fact even with the C parser), so this module reads and
writes exactly that subset directly and hands anything else to PyYAML:

* :func:`dump_mapping` returns what ``yaml.safe_dump(data, allow_unicode=True,
  sort_keys=False)`` returns, byte for byte — the format the original writes;
* :func:`load_mapping` returns what ``yaml.safe_load`` returns.

The fast paths accept only text whose YAML meaning is unambiguous (plain
words that cannot resolve to a boolean, null or number; single-quoted
strings on one line; decimal numbers; block lists and one level of nesting in
PyYAML's own layout) and fall back on anything else, so they can only be
faster, never different. Property tests compare both paths on generated and
fuzzed documents.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any, Final

import yaml

__all__ = ["dump_mapping", "load_mapping"]

_Loader: Final[Any] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

_KEY: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,99}")
_PLAIN_WORD: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
_TIMESTAMP: Final = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?(?:Z|[-+][0-9]{2}:[0-9]{2})"
)
_INT: Final = re.compile(r"-?(?:0|[1-9][0-9]*)")
_FLOAT: Final = re.compile(r"-?(?:0|[1-9][0-9]*)\.[0-9]+(?:e[-+][0-9]+)?")
# Words YAML 1.1 may resolve to booleans or null in some letter case.
_SPECIAL_WORDS: Final = frozenset({"yes", "no", "on", "off", "true", "false", "null", "y", "n"})
# Characters that end a line or are not printable for YAML: never in a fast scalar.
_UNSAFE_CHARS: Final = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff]")


class _Fallback(Exception):
    """The fast path does not handle this input."""


# --- writing ---------------------------------------------------------------


def dump_mapping(data: Mapping[str, object]) -> str:
    """Render a mapping exactly as ``yaml.safe_dump(allow_unicode=True, sort_keys=False)``.

    One exception: PyYAML writes U+0085 (NEXT LINE) raw and reads it back as a
    space, so a mapping holding one is written with non-ASCII characters
    escaped instead — still YAML any reader understands, and lossless.
    """
    try:
        return _dump_fast(data)
    except _Fallback:
        return yaml.safe_dump(dict(data), allow_unicode=not _holds(data, "\x85"), sort_keys=False)


def _holds(value: object, character: str) -> bool:
    """Whether any string in a nested structure (keys included) contains ``character``."""
    if isinstance(value, str):
        return character in value
    if isinstance(value, Mapping):
        return any(_holds(k, character) or _holds(v, character) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(_holds(item, character) for item in value)
    return False


def _dump_fast(data: Mapping[str, object]) -> str:
    if not data:
        raise _Fallback
    lines: list[str] = []
    for key, value in data.items():
        head = _emit_key(key)
        if isinstance(value, Mapping):
            if not value:
                lines.append(f"{head}: {{}}")
                continue
            lines.append(f"{head}:")
            for sub_key, sub_value in value.items():
                lines.append(f"  {_emit_key(sub_key)}: {_emit_scalar(sub_value)}")
        elif isinstance(value, list | tuple):
            if not value:
                lines.append(f"{head}: []")
                continue
            lines.append(f"{head}:")
            lines.extend(f"- {_emit_scalar(item)}" for item in value)
        else:
            lines.append(f"{head}: {_emit_scalar(value)}")
    lines.append("")
    return "\n".join(lines)


def _emit_key(key: object) -> str:
    if not isinstance(key, str) or not _KEY.fullmatch(key) or key.lower() in _SPECIAL_WORDS:
        raise _Fallback
    return key


def _emit_scalar(value: object) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    kind = type(value)
    if kind is int:
        return str(value)
    if kind is float:
        assert isinstance(value, float)
        if not math.isfinite(value):
            raise _Fallback
        text = repr(value).lower()
        if "." not in text and "e" in text:
            text = text.replace("e", ".0e", 1)
        return text
    if kind is str:
        assert isinstance(value, str)
        if value == "":
            return "''"
        if _PLAIN_WORD.fullmatch(value) and value.lower() not in _SPECIAL_WORDS:
            return value
        if _TIMESTAMP.fullmatch(value):
            return f"'{value}'"
    raise _Fallback


# --- reading ---------------------------------------------------------------


def load_mapping(text: str) -> object:
    """Parse front matter as ``yaml.safe_load`` would (fast for the common subset).

    Raises:
        yaml.YAMLError: the text is not valid YAML.
    """
    try:
        return _load_fast(text)
    except _Fallback:
        return yaml.load(text, Loader=_Loader)


def _load_fast(text: str) -> dict[str, object]:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        raise _Fallback
    result: dict[str, object] = {}
    index = 0
    count = len(lines)
    memo = _SCALARS
    while index < count:
        line = lines[index]
        index += 1
        key, colon, rest = line.partition(":")
        if not colon or not _key_is_plain(key):
            raise _Fallback
        if rest:
            # The common case, inlined: "key: value" with a value seen before.
            if rest[0] != " " or len(rest) == 1:
                raise _Fallback
            token = rest[1:]
            if token in memo:
                result[key] = memo[token]
            else:
                result[key] = _collection_or_scalar(token)
            continue
        # "key:" — a nested mapping, a block list, or null.
        if index < count and lines[index].startswith("- "):
            items: list[object] = []
            while index < count and lines[index].startswith("- "):
                items.append(_scalar(lines[index][2:]))
                index += 1
            result[key] = items
        elif index < count and lines[index].startswith("  "):
            nested: dict[str, object] = {}
            while index < count and lines[index].startswith("  "):
                sub_key, sub_rest = _split(lines[index][2:])
                if sub_rest is None:
                    raise _Fallback
                nested[sub_key] = _collection_or_scalar(sub_rest)
                index += 1
            result[key] = nested
        else:
            result[key] = None
        if index < count and lines[index][:1] in (" ", "-", "\t"):
            raise _Fallback
    return result


def _split(line: str) -> tuple[str, str | None]:
    """``key: value`` → (key, value); ``key:`` → (key, None); anything else falls back."""
    key, colon, rest = line.partition(":")
    if not colon or not _key_is_plain(key):
        raise _Fallback
    if not rest:
        return key, None
    if rest[0] != " " or len(rest) == 1:  # "key:value", or "key: " with a trailing space
        raise _Fallback
    return key, rest[1:]


_KEY_VERDICTS: dict[str, bool] = {}


def _key_is_plain(key: str) -> bool:
    """A plain identifier that YAML reads as that string ("on:" is the key True)."""
    verdict = _KEY_VERDICTS.get(key)
    if verdict is None:
        verdict = bool(_KEY.fullmatch(key)) and key.lower() not in _SPECIAL_WORDS
        if len(_KEY_VERDICTS) < _MEMO_LIMIT:
            _KEY_VERDICTS[key] = verdict
    return verdict


def _collection_or_scalar(token: str) -> object:
    # Fresh objects each time: a memoised list or dict would be shared.
    if token == "[]":
        return []
    if token == "{}":
        return {}
    return _scalar(token)


# Values repeat across facts (categories, statuses, numbers): memoise the
# immutable ones. Cleared wholesale when full; a failed token is not stored.
_MEMO_LIMIT: Final = 8192
_SCALARS: dict[str, object] = {}


def _scalar(token: str) -> object:
    try:
        return _SCALARS[token]
    except KeyError:
        pass
    value = _parse_scalar(token)
    if len(_SCALARS) >= _MEMO_LIMIT:
        _SCALARS.clear()
    _SCALARS[token] = value
    return value


def _parse_scalar(token: str) -> object:
    if _UNSAFE_CHARS.search(token) or token != token.strip(" "):
        raise _Fallback
    if token == "null":
        return None
    if token == "true":
        return True
    if token == "false":
        return False
    first = token[0]
    if first == "'":
        return _single_quoted(token)
    if first == "-" or first.isdigit():
        if _INT.fullmatch(token):
            return int(token)
        if _FLOAT.fullmatch(token):
            return float(token)
        raise _Fallback
    if (first.isalpha() or first == "_") and _plain_is_string(token):
        return token
    raise _Fallback


def _plain_is_string(token: str) -> bool:
    """Whether a plain scalar starting with a letter is a string, unchanged, for PyYAML."""
    if token.lower() in _SPECIAL_WORDS or token.endswith(":"):
        return False
    return ": " not in token and " #" not in token and "\t" not in token


def _single_quoted(token: str) -> str:
    if len(token) < 2 or not token.endswith("'"):
        raise _Fallback
    inner = token[1:-1]
    if "'" in inner.replace("''", ""):
        raise _Fallback
    return inner.replace("''", "'")
