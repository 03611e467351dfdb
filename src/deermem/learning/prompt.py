"""The memory-update prompt: its templates, the conversation as it shows it, the rendering.

A prompt is a system message and a user message. The system message is the
same for every call (so a provider's prompt cache can reuse it); everything
that changes is in the user message:

* ``current_memory`` — the six summary sections and the bucket's facts as
  JSON (``ensure_ascii=False``, so CJK text stays readable and costs fewer
  tokens), every string value HTML-escaped so stored text cannot close the
  ``<current_memory>`` block; facts written by hand are marked ``[MANUAL]``;
* ``conversation`` — the newest turns within ``max_conversation_chars``
  (:func:`fit_conversation`), as ``User:`` / ``Assistant:`` blocks;
* ``signal_hints`` — one line per detected signal;
* ``staleness_review`` — the aged facts, when a review is due (see
  :func:`deermem.learning.plan.stale_candidates`).

**Templates.** A template is a YAML mapping of named texts (``system``,
``user`` ...) and tables (``signal_hints``). Texts hold placeholders written
``{{ name }}``; each text declares which placeholders it may and must
contain, and a template is checked against that when it is loaded, so an
override with a typo stops start-up instead of sending the model a prompt
without the conversation in it. Where a template comes from, for agent ``a``
and template ``n``:

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

**The conversation.** The signals layer filters a conversation (hidden turns,
tool traffic, trivial acknowledgements) and what is left becomes
:class:`ConversationTurn` values — a role, the text and the message id:

* upload blocks are cut from user turns (:func:`deermem.learning.messages.strip_upload_blocks`)
  — file lists are not facts about the user — and a turn left empty is skipped;
* a text over 1000 characters keeps its first and last 500 with a marker
  between: the start usually states the request and the end the
  conclusion, and one pasted log must not crowd out the memory;
* ``&``, ``<`` and ``>`` are escaped *after* cutting, so no turn can close
  the ``<conversation>`` block and speak as the prompt, and the marker
  stays intact.

What one update sends is bounded too: :func:`fit_conversation` keeps the
newest turns whose blocks fit ``max_conversation_chars`` and leaves the
older ones out, so the cost of one model call does not grow with the
length of a conversation. The newest turn always fits whole: after the cut
above no block is longer than :data:`MAX_TURN_CHARS`, and no cap below
:data:`~deermem.learning.plan.MIN_CONVERSATION_CHARS` is accepted.
"""

from __future__ import annotations

import html
import json
import re
import threading
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import Final, Literal

import yaml

from deermem.errors import PromptNotFoundError, PromptTemplateError
from deermem.learning.answer import MANUAL_MARKER
from deermem.learning.messages import strip_upload_blocks
from deermem.learning.plan import (
    DEFAULT_MAX_CONVERSATION_CHARS,
    MIN_CONVERSATION_CHARS,
    MemoryState,
    UpdateSettings,
    effective_window_days,
    review_clock,
    review_due,
    stale_candidates,
)
from deermem.learning.signals import Signal
from deermem.model import YAML_LOADER, Fact, yaml_problem
from deermem.policy import coerce_confidence

__all__ = [
    "MANUAL_MARKER",
    "MAX_TURN_CHARS",
    "MEMORY_UPDATE",
    "SIGNAL_ORDER",
    "TRUNCATION_MARKER",
    "ConversationTurn",
    "ConversationWindow",
    "PromptLoader",
    "PromptTemplate",
    "UpdatePrompt",
    "build_update_prompt",
    "fit_conversation",
    "format_conversation",
    "render_current_memory",
    "render_turn",
    "sent_text",
    "stale_candidate_lines",
    "truncate_turn",
]


def escape_text(text: str) -> str:
    """Escape ``&``, ``<`` and ``>`` so text cannot open or close a prompt block.

    Quotes are left alone (``quote=False``): they cannot break a tag-delimited
    block, and escaping them would make every quoted phrase harder to read.
    """
    return html.escape(text, quote=False)


def display_category(fact: Fact) -> str:
    """The category as the model should see it: the label it (or a person)
    gave, even when the store files it under ``other``."""
    return fact.categoryExtension or fact.category


# --- templates --------------------------------------------------------------------------

SIGNAL_ORDER: Final = tuple(signal.value for signal in Signal)
"""The signals in the order their hints are listed."""

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
    tables={"signal_hints": frozenset(SIGNAL_ORDER)},
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
        document = yaml.load(raw, Loader=YAML_LOADER)  # safe; a key given twice refused
    except yaml.YAMLError as error:
        raise PromptTemplateError(source, f"is not valid YAML: {yaml_problem(error)}") from None
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


# --- the conversation -----------------------------------------------------------------

TurnRole = Literal["human", "ai"]

TRUNCATE_ABOVE: Final = 1000
"""Texts longer than this many characters are shortened."""
TRUNCATE_KEEP: Final = 500
"""Characters kept from each end of a shortened text."""
TRUNCATION_MARKER: Final = "\n[... middle of this message left out ...]\n"

_LABELS: Final = {"human": "User", "ai": "Assistant"}
_SEPARATOR: Final = "\n\n"

# Escaping turns one character into at most five ("&" -> "&amp;").
MAX_TURN_CHARS: Final = (
    max(len(label) for label in _LABELS.values())
    + len(": ")
    + 2 * TRUNCATE_KEEP * max(len(escape_text(c)) for c in "&<>")
    + len(TRUNCATION_MARKER)
)
"""The longest block one turn can render to (label, shortened and escaped text)."""


@dataclass(frozen=True, slots=True)
class ConversationTurn:
    """One filtered message: who spoke, what they said, and the message id.

    Attributes:
        role: ``human`` (the user) or ``ai`` (the assistant), the roles of
            ``deermem.learning.messages.Message``.
        text: the message text.
        id: the source message's id, if it had one (the queue's watermark
            uses it to tell messages apart).
    """

    role: TurnRole
    text: str
    id: str | None = None

    def __post_init__(self) -> None:
        if self.role not in _LABELS:
            raise ValueError(f"role must be 'human' or 'ai', got {self.role!r}")
        if not isinstance(self.text, str):
            raise TypeError(f"text must be a string, got {type(self.text).__name__}")


def truncate_turn(text: str) -> str:
    """Keep the first and last 500 characters of a text over 1000, with a marker between."""
    if len(text) <= TRUNCATE_ABOVE:
        return text
    return text[:TRUNCATE_KEEP] + TRUNCATION_MARKER + text[-TRUNCATE_KEEP:]


def render_turn(turn: ConversationTurn) -> str:
    """One turn as the prompt shows it (``User: ...``); ``""`` when no text is left.

    Never longer than :data:`MAX_TURN_CHARS`.
    """
    text = sent_text(turn)
    if not text:
        return ""
    return f"{_LABELS[turn.role]}: {escape_text(text)}"


def sent_text(turn: ConversationTurn) -> str:
    """The words of a turn the model reads, before escaping: what signals are detected on.

    Upload blocks and outer whitespace go, and a long text keeps its head and
    tail (:func:`truncate_turn`): a confirmation in a cut-out middle is not
    seen by the model, so it must not count as a signal either.
    """
    text = _spoken(turn)
    return truncate_turn(text) if text else ""


def _spoken(turn: ConversationTurn) -> str:
    """The turn's text without upload blocks (user turns) and outer whitespace."""
    return strip_upload_blocks(turn.text).strip() if turn.role == "human" else turn.text.strip()


def format_conversation(turns: Sequence[ConversationTurn]) -> str:
    """The conversation as escaped ``User:``/``Assistant:`` blocks joined by blank lines.

    Returns ``""`` when no turn has text left; the update then makes no
    model call. Nothing is left out: :func:`fit_conversation` applies the cap.
    """
    return _SEPARATOR.join(block for block in map(render_turn, turns) if block)


@dataclass(frozen=True, slots=True)
class ConversationWindow:
    """The part of a conversation one update sends: the newest turns that fit the cap.

    Attributes:
        text: the blocks sent, oldest first, joined by blank lines (what
            :func:`format_conversation` gives for ``turns[start:]``).
        start: where the part sent begins: ``turns[start:]`` is sent (its
            turns without text add nothing), ``turns[:start]`` is not.
        sent: turns with text in ``text``.
        left_out: turns with text that the cap left out, all older than
            every turn sent.
    """

    text: str
    start: int
    sent: int
    left_out: int


def fit_conversation(
    turns: Sequence[ConversationTurn], max_chars: int = DEFAULT_MAX_CONVERSATION_CHARS
) -> ConversationWindow:
    """The newest turns whose blocks fit in ``max_chars`` characters.

    Turns are taken newest first and kept while the joined text stays within
    ``max_chars``; the first turn that does not fit and every older one are
    left out. A turn is never cut to fit (only the per-turn shortening
    applies), and a gap never opens in the middle: the model reads an
    unbroken stretch of the conversation up to its latest turn. Turns
    without text cost nothing and are not counted.

    Raises:
        ValueError: ``max_chars`` is below :data:`MIN_CONVERSATION_CHARS`.
    """
    if max_chars < MIN_CONVERSATION_CHARS:
        raise ValueError(
            f"max_chars must be at least {MIN_CONVERSATION_CHARS:,} (so the newest turn "
            f"always fits whole), got {max_chars!r}"
        )
    blocks: list[str] = []
    used = -len(_SEPARATOR)  # no separator before the first block
    start = len(turns)
    while start > 0:
        block = render_turn(turns[start - 1])
        if block:
            if used + len(_SEPARATOR) + len(block) > max_chars:
                break
            used += len(_SEPARATOR) + len(block)
            blocks.append(block)
        start -= 1
    left_out = sum(1 for turn in turns[:start] if _spoken(turn))
    blocks.reverse()
    return ConversationWindow(_SEPARATOR.join(blocks), start, len(blocks), left_out)


# --- the prompt -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class UpdatePrompt:
    """The two messages of one memory-update call."""

    system: str
    user: str

    def messages(self) -> list[dict[str, str]]:
        """The messages in the OpenAI wire form (``deermem.llm.ChatMessage`` takes the same)."""
        return [{"role": "system", "content": self.system}, {"role": "user", "content": self.user}]


def build_update_prompt(
    memory: MemoryState,
    conversation: ConversationWindow,
    *,
    signals: Collection[str],
    settings: UpdateSettings,
    now: datetime,
    template: PromptTemplate,
) -> UpdatePrompt | None:
    """Render the memory-update prompt.

    Args:
        memory: the bucket as it is now.
        conversation: the turns to learn from, fitted to the cap by
            :func:`fit_conversation`.
        signals: the signals detected in them (``correction``, ``reinforcement`` ...).
        settings: staleness settings (is a review due, which categories are protected).
        now: the clock the staleness candidates are computed against.
        template: the ``memory_update`` template, from a
            :class:`PromptLoader`.

    Returns:
        The prompt, or ``None`` when no turn sent has any text: there is
        nothing to learn from, so no model call should be made.
    """
    if template.name != MEMORY_UPDATE.name:
        raise ValueError(f"expected the {MEMORY_UPDATE.name!r} template, got {template.name!r}")
    text = conversation.text
    if not text:
        return None
    candidates = stale_candidates(memory.facts, now=now, settings=settings)
    review = review_due(candidates, settings)
    manual = any(fact.source.type == "manual" for fact in memory.facts)
    user = template.fill(
        "user",
        current_memory=render_current_memory(memory),
        conversation=text,
        signal_hints=render_signal_hints(signals, template, manual_facts=manual),
        staleness_review=render_staleness_review(candidates, settings, template) if review else "",
    )
    return UpdatePrompt(system=template.text("system"), user=user)


def render_current_memory(memory: MemoryState) -> str:
    """The memory as escaped JSON: ``{"user": ..., "history": ..., "facts": [...]}``."""
    document: dict[str, object] = {"user": {}, "history": {}}
    for (group, name), section in memory.sections():
        sections = document[group]
        assert isinstance(sections, dict)
        sections[name] = {"summary": section.summary, "updatedAt": section.updatedAt}
    document["facts"] = [_fact_view(fact) for fact in memory.facts]
    return json.dumps(_escaped(document), indent=2, ensure_ascii=False)


def _fact_view(fact: Fact) -> dict[str, object]:
    """What the model needs of a fact: no revisions, scopes or file metadata."""
    manual = fact.source.type == "manual"
    view: dict[str, object] = {
        "id": fact.id,
        "content": MANUAL_MARKER + fact.content if manual else fact.content,
        "category": display_category(fact),
        "confidence": fact.confidence,
        "createdAt": fact.createdAt,
    }
    if fact.lastConfirmedAt is not None:
        view["lastConfirmedAt"] = fact.lastConfirmedAt
    if isinstance(fact.sourceError, str) and fact.sourceError.strip():
        view["sourceError"] = fact.sourceError
    if fact.expected_valid_days is not None:
        view["expected_valid_days"] = fact.expected_valid_days
    return view


def _escaped(value: object) -> object:
    if isinstance(value, str):
        return escape_text(value)
    if isinstance(value, dict):
        return {key: _escaped(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_escaped(item) for item in value]
    return value


def render_signal_hints(
    signals: Collection[str], template: PromptTemplate, *, manual_facts: bool = False
) -> str:
    """The hint block: a header and one line per detected signal (in a fixed
    order), plus the note on hand-written facts; ``""`` when there is nothing to say."""
    hints = template.tables["signal_hints"]
    lines = [f"- {hints[name]}" for name in SIGNAL_ORDER if name in signals]
    if manual_facts:
        lines.append(f"- {template.text('manual_facts_note')}")
    if not lines:
        return ""
    return template.text("signal_hints_header") + "\n" + "\n".join(lines) + "\n\n"


def render_staleness_review(
    candidates: Sequence[Fact], settings: UpdateSettings, template: PromptTemplate
) -> str:
    """The review section listing ``candidates``; ``""`` when there are none."""
    if not candidates:
        return ""
    lines = stale_candidate_lines(candidates, settings)
    return template.fill("staleness_review", candidates=lines).rstrip("\n") + "\n\n"


def stale_candidate_lines(candidates: Sequence[Fact], settings: UpdateSettings) -> str:
    """One line per aged fact, ``- [id | category | conf:0.90 | YYYY-MM-DD | valid:Nd] "content"``.

    The date is the start of the fact's window; id, category and content are
    escaped so a fact cannot close the block it is listed in.
    """
    lines = []
    for fact in candidates:
        start = review_clock(fact)
        day = start.date().isoformat() if start is not None else "unknown"
        window = effective_window_days(fact, settings.staleness_age_days)
        confidence = coerce_confidence(fact.confidence)
        category = escape_text(display_category(fact))
        lines.append(
            f"- [{escape_text(fact.id)} | {category} | conf:{confidence:.2f} | {day}"
            f' | valid:{window}d] "{escape_text(fact.content)}"'
        )
    return "\n".join(lines)
