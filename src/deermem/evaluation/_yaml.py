"""Read a protocol config: a fast path for plain YAML, PyYAML for everything else.

Importing PyYAML costs about as much as everything else ``deermem eval
validate`` does before it touches the dataset (≈ 45 ms on a small VM), and a
protocol config uses a tiny part of YAML: nested block mappings, scalars and
one-line ``[a, b]`` lists. :func:`load_yaml` reads exactly that part itself
and hands any document that strays outside it — anchors, tags, block
scalars, multi-line flow collections, ambiguous scalars such as ``1:20`` or an
unquoted timestamp — to ``yaml.safe_load`` unchanged.

The fast path is not a second YAML dialect: whatever it accepts, it returns
exactly what ``yaml.safe_load`` returns (YAML 1.1 scalar rules included, so
``yes`` is ``True`` and ``0.10`` is ``0.1``). A property test holds it to
that. When in doubt it declines, never guesses.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["YAMLSyntaxError", "load_yaml"]


class YAMLSyntaxError(ValueError):
    """The text is not valid YAML; the message says where (line and column)."""


class _Decline(Exception):
    """The document uses YAML beyond the fast path; PyYAML must read it."""


# YAML 1.1 scalars as PyYAML resolves them (the forms the fast path accepts).
_BOOLEANS: Final = {
    **dict.fromkeys(("yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"), True),
    **dict.fromkeys(("no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"), False),
}
_NULLS: Final = frozenset(("~", "null", "Null", "NULL"))
_INT: Final = re.compile(r"[-+]?(?:0|[1-9][0-9]*)")
_FLOAT: Final = re.compile(r"[-+]?[0-9]+\.[0-9]*(?:[eE][-+][0-9]+)?")
# A plain scalar the fast path may take as a string: starts with a letter, a
# slash or an underscore (so it cannot be a number, a timestamp, an
# indicator or ``.inf``), and holds nothing YAML would read as structure.
_PLAIN_STRING: Final = re.compile(r"[A-Za-z_/][A-Za-z0-9_./@+-]*(?: [A-Za-z0-9_./@+()-]+)*")
# Lower-case words that start with a digit but hold a letter (hex digests,
# revisions): strings in YAML 1.1 unless they read as 0b…/0x… integers.
_DIGIT_WORD: Final = re.compile(r"[0-9][0-9a-z]*[a-z][0-9a-z]*")
_LINE: Final = re.compile(r"( *)(- |)([A-Za-z_][A-Za-z0-9_-]*):(?: +(.*))?")


def load_yaml(text: str) -> object:
    """Parse a YAML document as ``yaml.safe_load`` would.

    Raises:
        YAMLSyntaxError: the document is not valid YAML (found by the PyYAML
            fallback; the fast path declines instead of failing).
    """
    try:
        return _parse_document(text)
    except _Decline:
        pass
    import yaml  # deferred: the expensive import, needed only for unusual documents

    try:
        return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as error:
        raise YAMLSyntaxError(" ".join(str(error).split())) from None


def _parse_document(text: str) -> object:
    lines: list[tuple[int, str, str | None]] = []  # (indent, key, inline value or None)
    for raw in text.split("\n"):
        line = _strip_comment(raw.rstrip(" "))
        if not line.strip():
            continue
        if line == "---" and not lines:
            continue
        match = _LINE.fullmatch(line)
        if match is None or match.group(2):  # sequences of mappings: leave to PyYAML
            raise _Decline
        indent, key, value = len(match.group(1)), match.group(3), match.group(4)
        if key in _BOOLEANS or key in _NULLS:  # PyYAML would make it a bool/None key
            raise _Decline
        lines.append((indent, key, value if value else None))
    if not lines or lines[0][0] != 0:
        raise _Decline
    mapping, end = _parse_mapping(lines, 0, 0)
    if end != len(lines):
        raise _Decline
    return mapping


def _parse_mapping(
    lines: list[tuple[int, str, str | None]], start: int, indent: int
) -> tuple[dict[str, object], int]:
    result: dict[str, object] = {}
    position = start
    while position < len(lines):
        line_indent, key, value = lines[position]
        if line_indent < indent:
            break
        if line_indent > indent or key in result:  # duplicate keys: PyYAML keeps the last
            raise _Decline
        position += 1
        if value is not None:
            result[key] = _parse_value(value)
        elif position < len(lines) and lines[position][0] > indent:
            result[key], position = _parse_mapping(lines, position, lines[position][0])
        else:
            result[key] = None
    return result, position


def _parse_value(text: str) -> object:
    if text.startswith("["):
        if not text.endswith("]"):
            raise _Decline
        inner = text[1:-1].strip()
        if not inner:
            return []
        return [_parse_scalar(item.strip()) for item in inner.split(",")]
    return _parse_scalar(text)


def _parse_scalar(text: str) -> object:
    if len(text) >= 2 and text[0] == text[-1] == '"':
        body = text[1:-1]
        if "\\" in body or '"' in body:
            raise _Decline
        return body
    if len(text) >= 2 and text[0] == text[-1] == "'":
        body = text[1:-1]
        if "'" in body.replace("''", ""):
            raise _Decline
        return body.replace("''", "'")
    if text in _BOOLEANS:
        return _BOOLEANS[text]
    if text in _NULLS:
        return None
    if _INT.fullmatch(text):
        return int(text)
    if _FLOAT.fullmatch(text):
        return float(text)
    if _PLAIN_STRING.fullmatch(text) and not _looks_special(text):
        return text
    if _DIGIT_WORD.fullmatch(text) and not text.startswith(("0b", "0x")):
        return text
    raise _Decline


def _looks_special(text: str) -> bool:
    """Plain words PyYAML would not read as a string (``null``-likes, ``.nan``)."""
    return text.lower() in {"null", "nan", "inf"} or text in _BOOLEANS


def _strip_comment(line: str) -> str:
    """Drop a trailing ``# comment``; decline when quotes make that ambiguous."""
    if "#" not in line:
        return line
    if line.lstrip().startswith("#"):
        return ""
    if "'" in line or '"' in line:
        raise _Decline
    cut = line.find(" #")
    if cut < 0:
        raise _Decline  # a '#' inside a plain scalar: legal YAML, rare; let PyYAML read it
    return line[:cut].rstrip(" ")
