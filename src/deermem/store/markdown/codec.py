"""The on-disk formats: a fact as Markdown with YAML front matter, and ``memory.json``.

A fact file is what the original DeerMem writes for the same fact, byte for
byte::

    ---
    <yaml.safe_dump(allow_unicode=True, sort_keys=False) of every field but
     content and title, in the fact's key order, then user_id and agent_name>
    ---

    # <title>

    <content>

The front matter is written with PyYAML's pure-Python safe dumper — the one
``yaml.safe_dump`` is — because libyaml's escapes emoji and breaks long lines
elsewhere; it is read with libyaml's safe loader when PyYAML has it. The one
deliberate difference: front matter holding U+0085 is written with non-ASCII
characters escaped, because the pure-Python dumper writes that character raw
and every reader reads it back as a space.

The title is the fact's explicit ``title`` if it has one, else the first line
of its content; it is never in the front matter. Reading gives back an
explicit title only when the heading differs from the first content line, so
a title derived from content follows the content when it is edited.

Decoding is strict: anything that is not a well-formed fact of the expected
scope raises :class:`~deermem.CorruptMemoryFile` naming the file and the
problem, because a memory that silently loads as empty is overwritten by the
next write.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import date
from pathlib import Path
from typing import Any, Final

import yaml

from deermem.errors import CorruptMemoryFile, FactValidationError
from deermem.model import MAX_NESTING, TIMESTAMP_FIELDS, Fact, FactScope, Scope
from deermem.store.protocol import Section, SummaryDocument

__all__ = [
    "decode_fact",
    "decode_summaries",
    "encode_fact",
    "encode_summaries",
]

_OPEN: Final = "---\n"
_CLOSE: Final = "\n---\n"
# Keys a fact holds that its front matter does not: the body's, and the
# scope, which is written as the directory's user_id and agent_name.
_NOT_FRONT_MATTER: Final = frozenset({"content", "title", "scope", "user_id", "agent_name"})
# libyaml's safe loader when PyYAML has it; the pure-Python safe dumper,
# whose output is the original's byte for byte.
_LOADER: Final[Any] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_DUMPER: Final[Any] = yaml.SafeDumper


def encode_fact(fact: Fact, scope: Scope) -> bytes:
    """The Markdown file of a fact, with the scope of the directory it goes to."""
    front = {key: value for key, value in fact.to_dict().items() if key not in _NOT_FRONT_MATTER}
    # The original writes the scope last.
    front["user_id"] = scope.user_id
    front["agent_name"] = scope.agent
    yaml_text = _dump_front_matter(front).strip()
    text = f"{_OPEN}{yaml_text}\n---\n\n# {fact.heading()}\n\n{fact.content}\n"
    return text.encode("utf-8")


def _dump_front_matter(front: Mapping[str, object]) -> str:
    """What the original writes: ``yaml.safe_dump(front, allow_unicode=True, sort_keys=False)``.

    One exception: PyYAML's dumper writes U+0085 (NEXT LINE) raw, and every
    YAML reader reads it back as a space; such front matter is written with
    non-ASCII characters escaped instead — lossless, still YAML.
    """
    text: str = yaml.dump(dict(front), Dumper=_DUMPER, allow_unicode=True, sort_keys=False)
    if "\x85" in text:
        text = yaml.dump(dict(front), Dumper=_DUMPER, allow_unicode=False, sort_keys=False)
    return text


def decode_fact(data: bytes, path: str | Path, scope: Scope, expected_id: str) -> Fact:
    """Read a fact file; ``expected_id`` is the file's stem.

    Raises:
        CorruptMemoryFile: malformed front matter, an id that is not the file
            name, a scope that is not the directory's, or an invalid field.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise CorruptMemoryFile(path, f"not UTF-8 text ({error.reason})") from None
    if not text.startswith(_OPEN):
        raise CorruptMemoryFile(path, "does not start with YAML front matter ('---')")
    end = text.find(_CLOSE, len(_OPEN) - 1)
    if end < 0:
        raise CorruptMemoryFile(path, "the front matter is not closed by a '---' line")
    front_text = text[len(_OPEN) : end + 1]
    meta = _front_matter(front_text, path)
    heading, content = _split_body(text[end + len(_CLOSE) :])
    _check_scope(meta, path, scope)
    fact_id = meta.get("id")
    if fact_id != expected_id:
        raise CorruptMemoryFile(
            path, f"the id {fact_id!r} in the front matter does not match the file name"
        )
    meta = {k: v if k in TIMESTAMP_FIELDS else _as_json(v, 0) for k, v in meta.items()}
    meta["scope"] = {"userId": scope.user_id, "agentName": scope.agent}
    meta["content"] = content
    if heading is not None:
        meta["title"] = heading  # the model drops a title that is the derived heading
    try:
        return Fact.from_dict(meta)
    except FactValidationError as error:
        raise CorruptMemoryFile(path, f"invalid fact: {error}") from None


def _front_matter(text: str, path: str | Path) -> dict[str, object]:
    try:
        meta = yaml.load(text, Loader=_LOADER)
    except yaml.YAMLError as error:
        problem = " ".join(str(error).split())
        raise CorruptMemoryFile(path, f"the front matter is not valid YAML: {problem}") from None
    if not isinstance(meta, dict):
        raise CorruptMemoryFile(
            path, f"the front matter must be a mapping, found {type(meta).__name__}"
        )
    if set(map(type, meta)) - {str}:
        key = next(k for k in meta if not isinstance(k, str))
        raise CorruptMemoryFile(path, f"front-matter key {key!r} is not a string")
    for key in ("content", "title"):
        if key in meta:
            raise CorruptMemoryFile(
                path, f"the front matter must not hold {key!r}; it belongs in the body"
            )
    return meta


def _as_json(value: object, depth: int) -> object:
    """A front-matter value with YAML's own timestamps as ISO text.

    A fact also goes to archive entries and exports, which are JSON; an
    unquoted date in a hand-edited file is read as the text it shows. (The
    known timestamp fields are the model's to format.) Below the nesting a
    fact may hold, the value is left as it is: the fact's own check refuses
    it, naming the field, so this never recurses deeper than that.
    """
    if isinstance(value, date):
        return value.isoformat()
    if depth > MAX_NESTING:
        return value
    if isinstance(value, list):
        return [_as_json(item, depth + 1) for item in value]
    if isinstance(value, dict):
        return {_as_json(key, depth + 1): _as_json(item, depth + 1) for key, item in value.items()}
    return value


def _split_body(body: str) -> tuple[str | None, str]:
    """The ``# heading`` line (if any) and the content below it."""
    rest = body.lstrip("\n")
    heading: str | None = None
    if rest.startswith("# "):
        line, _, rest = rest.partition("\n")
        heading = line[2:].strip()
        if rest.startswith("\n"):
            rest = rest[1:]
    return heading, rest.rstrip()


def _check_scope(meta: dict[str, object], path: str | Path, scope: Scope) -> None:
    """The front matter's scope must be the directory's (isolation between scopes)."""
    agent = meta.pop("agent_name", scope.agent)
    user = meta.pop("user_id", scope.user_id)
    stored_scope = meta.pop("scope", None)
    if isinstance(stored_scope, Mapping):
        agent = stored_scope.get("agentName", agent)
        user = stored_scope.get("userId", user)
    if isinstance(agent, str) and agent.lower() != scope.agent:
        raise CorruptMemoryFile(
            path, f"scope mismatch: the fact belongs to agent {agent!r}, not {scope.agent!r}"
        )
    if not isinstance(agent, str):
        raise CorruptMemoryFile(path, f"scope mismatch: agent_name {agent!r} is not a string")
    if user != scope.user_id:
        raise CorruptMemoryFile(
            path, "scope mismatch: the fact belongs to another user than this directory's"
        )


def encode_summaries(document: SummaryDocument) -> bytes:
    """``memory.json``: the summaries only, never facts — as the original writes it.

    A summary read with a lone surrogate (a JSON ``"\\ud800"`` escape) cannot
    be written as UTF-8; such a document is written with every non-ASCII
    character escaped instead, which reads back as the same values.
    """
    data = document.to_dict()
    try:
        return json.dumps(data, indent=2, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(data, indent=2).encode("utf-8")


def decode_summaries(data: bytes, path: str | Path) -> SummaryDocument:
    """Read ``memory.json``.

    Raises:
        CorruptMemoryFile: not a JSON object, a field of the wrong type, or a
            version-1 document that still holds facts (deermem does not
            migrate those; the original's migration tool does).
    """
    try:
        document = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CorruptMemoryFile(path, f"not valid JSON: {error}") from None
    except RecursionError:  # the C decoder's own depth guard; nothing deermem writes
        raise CorruptMemoryFile(path, "nested too deeply to be read") from None
    if not isinstance(document, dict):
        raise CorruptMemoryFile(path, f"expected a JSON object, found {type(document).__name__}")
    if document.get("facts"):
        raise CorruptMemoryFile(
            path,
            "a version-1 document that still holds facts; migrate it with the original "
            "DeerMem's migration tool first (deermem reads the version-2 layout)",
        )
    version = document.get("version", "1.0")
    revision = document.get("revision", 0)
    updated = document.get("lastUpdated", "")
    if not isinstance(version, str):
        raise CorruptMemoryFile(path, f"'version' must be a string, found {version!r}")
    if isinstance(revision, bool) or not isinstance(revision, int) or revision < 0:
        raise CorruptMemoryFile(path, f"'revision' must be a whole number >= 0, found {revision!r}")
    if not isinstance(updated, str):
        raise CorruptMemoryFile(path, f"'lastUpdated' must be a string, found {updated!r}")
    return SummaryDocument(
        version=version,
        revision=revision,
        lastUpdated=updated,
        user=_sections(document, "user", path),
        history=_sections(document, "history", path),
    )


def _sections(
    document: Mapping[str, object], group: str, path: str | Path
) -> Mapping[str, Section]:
    defaults = SummaryDocument()
    base = dict(defaults.user if group == "user" else defaults.history)
    raw = document.get(group)
    if raw is None:
        return base
    if not isinstance(raw, dict):
        raise CorruptMemoryFile(path, f"'{group}' must be an object, found {type(raw).__name__}")
    for name, value in raw.items():
        if not isinstance(value, dict):
            raise CorruptMemoryFile(path, f"'{group}.{name}' must be an object")
        base[name] = Section.from_value(value)
    return base


def stored_scope(fact: Fact, scope: Scope) -> Fact:
    """The fact with its scope set to the store's (what :func:`encode_fact` writes)."""
    wanted = FactScope(userId=scope.user_id, agentName=scope.agent)
    return fact if fact.scope == wanted else fact.replace(scope=wanted)
