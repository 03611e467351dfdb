"""Prompt templates: bundled YAML files that a ``prompts_dir`` may override.

A template is a YAML mapping of named texts (``system``, ``user`` ...) and
tables (``signal_hints``). Texts hold placeholders written ``{{ name }}``;
each text declares which placeholders it may and must contain, and a
template is checked against that when it is loaded, so an override with a
typo stops start-up instead of sending the model a prompt without the
conversation in it.

Where a template comes from, for agent ``a`` and template ``n``:

1. the bundled ``deermem/learning/prompts/n.yaml`` (complete);
2. ``<prompts_dir>/n.yaml``, if present: every key it defines replaces the
   bundled one (a table entry by entry);
3. ``<prompts_dir>/a/n.yaml``, if present: its keys replace those again,
   for that agent only.

So an override file may be complete, or change only the system message.
Global overrides are checked when the loader is built; an agent's override
when that agent's template is first loaded. Filling a template is one pass
over its text, so a placeholder *inside* a value (a user who types
``{{ conversation }}``) is left as it is.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Final

import yaml

from deermem.errors import PromptNotFoundError, PromptTemplateError

__all__ = [
    "MEMORY_UPDATE",
    "PLACEHOLDER",
    "PromptLoader",
    "PromptTemplate",
    "TemplateSpec",
    "TextSpec",
    "placeholders",
]

PLACEHOLDER: Final = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_AGENT_NAME: Final = re.compile(r"[A-Za-z0-9_-]+")
_SUFFIX: Final = ".yaml"


@dataclass(frozen=True, slots=True)
class TextSpec:
    """The placeholders one text of a template may and must contain."""

    allowed: frozenset[str] = frozenset()
    required: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class TemplateSpec:
    """The shape of one template: its texts and its tables (name → allowed keys)."""

    name: str
    texts: Mapping[str, TextSpec]
    tables: Mapping[str, frozenset[str]]


_SIGNALS: Final = frozenset(
    {"correction", "reinforcement", "preference", "identity", "goal", "decision"}
)
_UPDATE_VARIABLES: Final = frozenset(
    {"current_memory", "conversation", "signal_hints", "staleness_review"}
)

MEMORY_UPDATE: Final = TemplateSpec(
    name="memory_update",
    texts={
        "system": TextSpec(),
        "user": TextSpec(allowed=_UPDATE_VARIABLES, required=_UPDATE_VARIABLES),
        "signal_hints_header": TextSpec(),
        "manual_facts_note": TextSpec(),
        "staleness_review": TextSpec(
            allowed=frozenset({"candidates"}), required=frozenset({"candidates"})
        ),
    },
    tables={"signal_hints": _SIGNALS},
)
"""The memory-update prompt: a system message, a user message with the four
parts, the hint lines per signal, and the staleness-review section."""

_SPECS: Final[Mapping[str, TemplateSpec]] = {MEMORY_UPDATE.name: MEMORY_UPDATE}


def placeholders(text: str) -> frozenset[str]:
    """The placeholder names used in ``text``."""
    return frozenset(PLACEHOLDER.findall(text))


@dataclass(frozen=True, slots=True)
class PromptTemplate:
    """A loaded, checked template.

    Attributes:
        name: the template name, e.g. ``memory_update``.
        sources: the files it was assembled from, bundled first.
        texts: text name → text with placeholders.
        tables: table name → entries.
    """

    name: str
    sources: tuple[str, ...]
    texts: Mapping[str, str]
    tables: Mapping[str, Mapping[str, str]]

    def text(self, key: str) -> str:
        """A text exactly as written (for texts without placeholders)."""
        return self.texts[key]

    def fill(self, key: str, **values: str) -> str:
        """The text ``key`` with every placeholder replaced, in a single pass.

        Raises:
            KeyError: a placeholder of the text has no value (a programming
                error: the spec says which values a text needs).
        """
        return PLACEHOLDER.sub(lambda match: values[match.group(1)], self.texts[key])


class PromptLoader:
    """Loads templates, bundled or overridden, and keeps them once loaded.

    Args:
        prompts_dir: the override directory, or ``None`` for the bundled
            templates only.

    Raises:
        PromptTemplateError: ``prompts_dir`` is not a directory, or one of its
            global overrides is invalid.
    """

    def __init__(self, prompts_dir: str | Path | None = None) -> None:
        self._dir = None if prompts_dir is None else Path(prompts_dir).expanduser()
        self._cache: dict[tuple[str, str | None], PromptTemplate] = {}
        self._lock = threading.Lock()
        if self._dir is not None and not self._dir.is_dir():
            raise PromptTemplateError(str(self._dir), "prompts_dir is not a directory")
        for name in _SPECS:
            self.load(name)

    def load(self, name: str, agent: str | None = None) -> PromptTemplate:
        """The template ``name`` for ``agent`` (``None``: no agent override).

        Raises:
            PromptNotFoundError: no template has this name.
            PromptTemplateError: an override is invalid, or the agent name
                cannot be a directory name.
        """
        spec = _SPECS.get(name)
        if spec is None:
            raise PromptNotFoundError(name, [*self._places(name, agent), "bundled templates"])
        key = (name, None if agent is None else _agent_directory(agent))
        with self._lock:
            cached = self._cache.get(key)
            if cached is None:
                cached = self._assemble(spec, key[1])
                self._cache[key] = cached
        return cached

    def _places(self, name: str, agent: str | None) -> list[str]:
        if self._dir is None:
            return []
        places = [str(self._dir / (name + _SUFFIX))]
        if agent is not None and _AGENT_NAME.fullmatch(agent):
            places.insert(0, str(self._dir / agent.lower() / (name + _SUFFIX)))
        return places

    def _assemble(self, spec: TemplateSpec, agent: str | None) -> PromptTemplate:
        bundled = resources.files("deermem.learning") / "prompts" / (spec.name + _SUFFIX)
        layers = [(f"bundled {spec.name}{_SUFFIX}", bundled.read_text(encoding="utf-8"))]
        if self._dir is not None:
            files = [self._dir / (spec.name + _SUFFIX)]
            if agent is not None:
                files.append(self._dir / agent / (spec.name + _SUFFIX))
            layers.extend((str(path), _read(path)) for path in files if path.exists())
        texts: dict[str, str] = {}
        tables: dict[str, dict[str, str]] = {name: {} for name in spec.tables}
        for source, raw in layers:
            layer_texts, layer_tables = _parse_layer(spec, source, raw)
            texts.update(layer_texts)
            for table, entries in layer_tables.items():
                tables[table].update(entries)
        _check_complete(spec, layers[-1][0], texts, tables)
        return PromptTemplate(
            name=spec.name,
            sources=tuple(source for source, _ in layers),
            texts=texts,
            tables=tables,
        )


def _agent_directory(agent: str) -> str:
    # Agent names become a directory under prompts_dir: nothing that could leave it.
    if not _AGENT_NAME.fullmatch(agent):
        raise PromptTemplateError(agent, "an agent name may hold only letters, digits, '_' and '-'")
    return agent.lower()


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise PromptTemplateError(str(path), f"cannot be read: {error}") from None


def _parse_layer(
    spec: TemplateSpec, source: str, raw: str
) -> tuple[dict[str, str], dict[str, dict[str, str]]]:
    try:
        document = yaml.safe_load(raw)
    except yaml.YAMLError as error:
        raise PromptTemplateError(source, f"is not valid YAML: {error}") from None
    if not isinstance(document, Mapping):
        raise PromptTemplateError(source, "expected a mapping of template keys at top level")
    texts: dict[str, str] = {}
    tables: dict[str, dict[str, str]] = {}
    for key, value in document.items():
        if key in spec.texts:
            texts[key] = _checked_text(source, key, value, spec.texts[key])
        elif key in spec.tables:
            tables[key] = _checked_table(source, key, value, spec.tables[key])
        else:
            known = ", ".join(sorted([*spec.texts, *spec.tables]))
            raise PromptTemplateError(source, f"unknown key {key!r} (known keys: {known})")
    return texts, tables


def _checked_text(source: str, key: str, value: object, text_spec: TextSpec) -> str:
    if not isinstance(value, str) or not value.strip():
        raise PromptTemplateError(source, f"{key!r} must be a non-empty text")
    used = placeholders(value)
    unknown = sorted(used - text_spec.allowed)
    if unknown:
        allowed = ", ".join(sorted(text_spec.allowed)) or "none"
        raise PromptTemplateError(
            source,
            f"{key!r} uses unknown placeholder(s) {', '.join(unknown)} (allowed: {allowed})",
        )
    missing = sorted(text_spec.required - used)
    if missing:
        wanted = ", ".join("{{ " + name + " }}" for name in missing)
        raise PromptTemplateError(source, f"{key!r} must contain {wanted}")
    return value


def _checked_table(source: str, key: str, value: object, allowed: frozenset[str]) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise PromptTemplateError(source, f"{key!r} must be a mapping")
    entries: dict[str, str] = {}
    for name, text in value.items():
        if name not in allowed:
            known = ", ".join(sorted(allowed))
            raise PromptTemplateError(source, f"{key}: unknown entry {name!r} (known: {known})")
        entries[name] = _checked_text(source, f"{key}.{name}", text, TextSpec())
    return entries


def _check_complete(
    spec: TemplateSpec,
    source: str,
    texts: Mapping[str, str],
    tables: Mapping[str, Mapping[str, str]],
) -> None:
    missing = [key for key in spec.texts if key not in texts]
    missing += [
        f"{table}.{entry}"
        for table, allowed in spec.tables.items()
        for entry in sorted(allowed)
        if entry not in tables[table]
    ]
    if missing:
        raise PromptTemplateError(source, "template is incomplete; missing " + ", ".join(missing))
