"""The model's answer: what we ask for, how we find it in a reply, and what we keep of it.

The answer is described once, as pydantic models (:class:`Answer` and its
entries). The models are used three ways:

* **the ask** — :func:`response_json_schema` is the models' JSON Schema, sent
  to a backend that supports constrained decoding (the local llama.cpp model,
  OpenAI-compatible servers with ``response_format: json_schema``), which then
  generates only replies of this shape; that matters most for small models.
  The schema is kept plain — objects, arrays, enums, numbers; no ``$ref``, no
  ``null``, no ``oneOf`` — because grammar converters support little else.
  It is stricter than the reading below: every field the models declare
  without a default is required, labels and categories are enums, numbers are
  bounded, lists are bounded by the limits.
* **the reading** — each entry of a reply is validated on its own
  (:func:`normalize_response`), with the original DeerMem's rules, which are
  lenient where a reply is merely untidy and strict where it is unusable; an
  entry that fails is dropped (and counted), never the whole answer, unless
  one of the two whole-answer rules below applies;
* **the payload** — :meth:`NormalizedResponse.to_payload` renders a read
  answer back in the reply's shape; reading that again gives the same answer.

The reading, field by field (the same rules the models state):

* a new fact needs ``content`` that is a non-empty string and a
  ``confidence`` that is a finite number or numeric text in [0, 1] (never a
  boolean); anything else makes it *malformed*. A non-string or empty
  ``category`` becomes ``context``; a ``content`` that starts with the
  prompt's ``[MANUAL]`` marker (a model echoing a hand-written fact) loses
  it, so the marker is never fact text and the duplicate rule sees the fact;
* labels (``scope``, ``durability``, ``authority``) are trimmed and
  lower-cased; a label that is not a string counts as missing (whether a
  label admits a proposal is the label gate's business, :mod:`deermem.learning.plan`);
* a removal given as a bare id string becomes an entry without labels (the
  gate then refuses it as unlabelled); ``replacementFactIndex`` is kept when
  it is a whole number, and marked as unusable when it is anything else;
* stale-fact entries need a string id; extensions need ``extend_by_days``
  that truncates to a whole number of at least 1; a summary's
  ``shouldUpdate`` is ``true`` or the text ``"true"``;
* text that reaches a file keeps to the text boundary of facts written by
  hand (the text boundary of :mod:`deermem.model`): a new fact whose content, category or
  ``sourceError`` holds a lone surrogate or a control character (any, in a
  category) is malformed; so is a summary section (ignored) and an entry's
  id (ignored); a reason that is not valid text is no reason.

Two rules refuse an answer whole (:class:`RejectedResponse`):

* **it removes facts while a new fact was malformed** (or ``newFacts`` is
  not a list) — a removal may point at its replacement by index, and a
  dropped fact would make that pointer unreliable;
* **none of its fields has the type the schema gives it** (``user`` and
  ``history`` objects, the lists arrays) — not the original's rule: such an
  answer does not propose "no change", it cannot be read, and taking it as an
  update would mark the conversation as learnt from. One field of the right
  type is enough to go on.

Finding the answer in a reply (:func:`parse_update_response`): models wrap
JSON in many ways — prose, Markdown fences, ``<think>`` reasoning (closed or
cut off), an example object quoted before the real one, content blocks. The
parser tries a JSON decode at every place an object can start and takes the
first object that *is* a memory update (it has the keys ``user``, ``history``
and ``newFacts``). Closed ``<think>`` blocks are set aside first, so a draft
the model reasoned about loses to the answer it gave. It never raises.

A reply is untrusted input: a confused small model, a prompt injection or a
hostile endpoint can return megabytes of JSON, thousands of entries or
strings longer than any fact. Every bound below is far above what an honest
answer to one conversation needs, and what happens beyond it is fixed: the
whole reply over :data:`MAX_RESPONSE_CHARS` (or needing more than
:data:`MAX_SCAN_CHARS` of scanning, :data:`MAX_DECODE_ATTEMPTS` decodes) is
no update; a list's entries beyond its limit are ignored; a new fact with a
field over its limit is malformed; a summary over its limit, an entry with an
id over its limit are ignored; a reason is cut. Each entry dropped by a limit
is counted once, under the first limit it broke (:class:`OverLimits`), and
the count reaches the report and ``deermem ingest``: a model that keeps
running into a limit is one to look at, not one to trust in silence.
"""

from __future__ import annotations

import copy
import functools
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Annotated, Any, Final, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    WithJsonSchema,
    model_validator,
)
from pydantic_core import PydanticCustomError

from deermem.errors import FactValidationError
from deermem.model import (
    CORE_CATEGORIES,
    MAX_CATEGORY_CHARS,
    MAX_CONTENT_CHARS,
    MAX_FACT_ID_LENGTH,
    MAX_SOURCE_ERROR_CHARS,
    MAX_SUMMARY_CHARS,
    check_line,
    check_lines,
)
from deermem.store.records import HISTORY_SECTIONS, USER_SECTIONS, SummaryKey

__all__ = [
    "AUTHORITY_LABELS",
    "DURABILITY_LABELS",
    "MANUAL_MARKER",
    "MAX_CATEGORY_CHARS",
    "MAX_CONFIDENCE_TEXT_CHARS",
    "MAX_CONTENT_CHARS",
    "MAX_DECODE_ATTEMPTS",
    "MAX_EXTENSIONS",
    "MAX_ID_CHARS",
    "MAX_NEW_FACTS",
    "MAX_REASON_CHARS",
    "MAX_REINFORCEMENTS",
    "MAX_REMOVALS",
    "MAX_RESPONSE_CHARS",
    "MAX_SCAN_CHARS",
    "MAX_SOURCE_ERROR_CHARS",
    "MAX_STALE_REMOVALS",
    "MAX_SUMMARY_CHARS",
    "SCOPE_LABELS",
    "Answer",
    "HistorySections",
    "NewFactProposal",
    "NoUpdate",
    "NormalizedResponse",
    "OverLimits",
    "ReinforceEntry",
    "RejectedResponse",
    "RemovalEntry",
    "StaleExtension",
    "StaleRemoval",
    "SummaryProposal",
    "UpdatePayload",
    "UserSections",
    "normalize_response",
    "parse_update_response",
    "read_confidence",
    "read_positive_days",
    "response_json_schema",
    "response_text",
]

# --- limits ------------------------------------------------------------------------------

MAX_RESPONSE_CHARS: Final = 262_144
"""Longest answer parsed at all (256 Ki characters; ~16 Ki is a long honest one)."""

MAX_SCAN_CHARS: Final = 4 * MAX_RESPONSE_CHARS
"""Characters the JSON decoder may examine while looking for the update object.

Trying a decode at every ``{`` is quadratic on a hostile answer; this budget
keeps the search linear in the answer's length."""

MAX_DECODE_ATTEMPTS: Final = 1_000
"""Places the parser tries a JSON decode at before giving up.

Only a ``{`` followed by ``"`` or ``}`` (whitespace between allowed) can
start an object, so stray braces in prose or code cost nothing; this bounds
the rest (each failed decode also costs the decoder a pass to locate the
error's line)."""

MAX_NEW_FACTS: Final = 50
MAX_REINFORCEMENTS: Final = 100
MAX_REMOVALS: Final = 100
MAX_STALE_REMOVALS: Final = 100
MAX_EXTENSIONS: Final = 100

# The lengths of content, categories, sourceError and summaries are the model
# layer's (imported above), shared with facts written by hand.
MAX_CONFIDENCE_TEXT_CHARS: Final = 32
MAX_REASON_CHARS: Final = 1_000
MAX_ID_CHARS: Final = MAX_FACT_ID_LENGTH
_MAX_LABEL_CHARS: Final = 64


@dataclass(frozen=True, slots=True)
class OverLimits:
    """Entries of one answer dropped for exceeding a limit, counted by limit.

    The list limits differ (50 new facts, 100 of everything else), and so do
    the length limits, so each has its own counter; an entry is counted once,
    under the first limit it broke.

    Attributes:
        new_facts / reinforcements / removals / stale_removals / extensions:
            entries beyond the length limit of ``newFacts``,
            ``factsToReinforce``, ``factsToRemove``, ``staleFactsToRemove``,
            ``staleFactsToExtend``.
        content / category / confidence / source_error: new facts dropped as
            malformed because that field was too long.
        summaries: summary sections dropped for a summary over
            :data:`MAX_SUMMARY_CHARS`.
        ids: entries of the other lists dropped for an id over :data:`MAX_ID_CHARS`.
    """

    new_facts: int = 0
    reinforcements: int = 0
    removals: int = 0
    stale_removals: int = 0
    extensions: int = 0
    content: int = 0
    category: int = 0
    confidence: int = 0
    source_error: int = 0
    summaries: int = 0
    ids: int = 0

    @property
    def total(self) -> int:
        """Every entry dropped over a limit."""
        return sum(getattr(self, item.name) for item in fields(self))

    def items(self) -> list[tuple[str, int, int, str]]:
        """``(name, count, limit, unit)`` of every non-zero counter: ``name`` is the
        answer's JSON key, ``limit`` the bound it exceeded, in ``unit`` (``entries``
        for a list, ``characters`` for a field)."""
        return [
            (_KEYS[item.name], getattr(self, item.name), *_LIMITS[item.name])
            for item in fields(self)
            if getattr(self, item.name)
        ]

    def to_dict(self) -> dict[str, object]:
        """Every counter under the answer's JSON key, and the total."""
        counts: dict[str, object] = {
            _KEYS[item.name]: getattr(self, item.name) for item in fields(self)
        }
        counts["total"] = self.total
        return counts


# The answer's own names for what each counter counts, and the limit it exceeded.
_KEYS: Final = {
    "new_facts": "newFacts",
    "reinforcements": "factsToReinforce",
    "removals": "factsToRemove",
    "stale_removals": "staleFactsToRemove",
    "extensions": "staleFactsToExtend",
    "content": "content",
    "category": "category",
    "confidence": "confidence",
    "source_error": "sourceError",
    "summaries": "summary",
    "ids": "id",
}
_LIMITS: Final = {
    "new_facts": (MAX_NEW_FACTS, "entries"),
    "reinforcements": (MAX_REINFORCEMENTS, "entries"),
    "removals": (MAX_REMOVALS, "entries"),
    "stale_removals": (MAX_STALE_REMOVALS, "entries"),
    "extensions": (MAX_EXTENSIONS, "entries"),
    "content": (MAX_CONTENT_CHARS, "characters"),
    "category": (MAX_CATEGORY_CHARS, "characters"),
    "confidence": (MAX_CONFIDENCE_TEXT_CHARS, "characters"),
    "source_error": (MAX_SOURCE_ERROR_CHARS, "characters"),
    "summaries": (MAX_SUMMARY_CHARS, "characters"),
    "ids": (MAX_ID_CHARS, "characters"),
}
# The counter of each field whose length limit can drop its entry.
_OVER_LIMIT_OF_FIELD: Final = {
    "content": "content",
    "category": "category",
    "confidence": "confidence",
    "sourceError": "source_error",
    "summary": "summaries",
    "id": "ids",
}
_OVER_LIMIT_ERRORS: Final = frozenset({"string_too_long", "too_long", "over_limit"})


# --- reading loose values ----------------------------------------------------------------


def read_positive_days(value: object) -> int | None:
    """A day count of at least 1, or ``None``.

    Whole numbers are taken as they are, however large (an ``int`` is never
    routed through ``float``, so ``10**400`` survives exactly); finite floats
    are truncated (``180.7`` → 180, ``0.9`` → nothing). Booleans, strings,
    ``NaN``, infinities and counts below 1 give ``None``.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 1 else None
    if isinstance(value, float) and math.isfinite(value):
        days = int(value)
        return days if days >= 1 else None
    return None


def read_confidence(value: object) -> float | None:
    """A confidence from a model: a finite number or numeric text in [0, 1], else ``None``.

    ``"0.91"`` is read as 0.91; ``true``, ``"high"``, ``NaN`` and values
    outside [0, 1] are not confidences. (The original accepts any finite
    number here and fails later, at storage; refusing it here keeps one bad
    fact from failing the whole update.)
    """
    if isinstance(value, bool):
        return None
    number: float
    if isinstance(value, int | float):
        try:
            number = float(value)
        except OverflowError:
            return None
    elif isinstance(value, str) and len(value) <= MAX_CONFIDENCE_TEXT_CHARS:
        try:
            number = float(value.strip())
        except ValueError:
            return None
    else:
        return None
    if not math.isfinite(number) or not 0.0 <= number <= 1.0:
        return None
    return number


def _label(value: object) -> str | None:
    if not isinstance(value, str):
        return None
    label = value.strip().lower()[:_MAX_LABEL_CHARS].strip()
    return label or None


def _reason(value: object) -> str:
    # Stripped again after the cut, so reading a read reason changes nothing.
    if not isinstance(value, str):
        return ""
    reason = value.strip()[:MAX_REASON_CHARS].strip()
    return reason if _is_text(check_lines, reason) else ""


def _stripped(value: object) -> str:
    return value.strip() if isinstance(value, str) else ""


MANUAL_MARKER: Final = "[MANUAL] "
"""What the prompt puts before the content of a fact written by hand (never fact text)."""
# The marker a model echoes back at the start of a proposal: with the spaces around it,
# however often it repeats (each repetition consumes the literal, so the match is linear).
_ECHOED_MARKER: Final = re.compile(r"\s*(?:" + re.escape(MANUAL_MARKER.strip()) + r"\s*)+")


def _without_manual_marker(content: str) -> str:
    """A proposal's content without the prompt's ``[MANUAL]`` marker at its start.

    The marker is deermem's annotation of the prompt, not something the user
    said: kept, it would be stored as fact text, and the hand-written fact the
    model proposed again would pass the duplicate rule as a new fact. So it is
    removed as the answer is read, before the label gate and the duplicate rule.
    """
    echoed = _ECHOED_MARKER.match(content)
    return content if echoed is None else content[echoed.end() :]


def _text_or_empty(value: object) -> str:
    return value if isinstance(value, str) else ""


def _truthy(value: object) -> bool:
    # ``true`` or the text "true": a model writing "false" must not update a section.
    return value is True or (isinstance(value, str) and value.strip().lower() == "true")


def _is_text(check: Callable[[str, str, int], str], value: str) -> bool:
    """Whether ``value`` passes a text check of the model's text boundary (lengths
    are checked, and counted, by the field's own limit)."""
    try:
        check("text", value, len(value))
    except FactValidationError:
        return False
    return True


def _text(check: Callable[[str, str, int], str]) -> Callable[[str], str]:
    def checked(value: str) -> str:
        if not _is_text(check, value):
            raise ValueError("not valid text")
        return value

    return checked


def _confidence(value: object) -> float:
    if isinstance(value, str) and len(value) > MAX_CONFIDENCE_TEXT_CHARS:
        raise PydanticCustomError("over_limit", "confidence text over its limit")
    confidence = read_confidence(value)
    if confidence is None:
        raise ValueError("not a confidence")
    return confidence


_INVALID_INDEX: Final = "invalid"


def _replacement(value: object) -> int | str | None:
    # A whole number is kept (a negative one too: the gate refuses it); anything
    # else given is marked, so the gate can refuse the removal for it.
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    return _INVALID_INDEX


# --- the answer's models -----------------------------------------------------------------

SCOPE_LABELS: Final = ("user", "thread", "project")
DURABILITY_LABELS: Final = ("durable", "transient")
AUTHORITY_LABELS: Final = ("descriptive", "transactional")

# Each field type states how a reply's value is read and, where the ask is
# narrower than the reading, what the schema asks for.
Id = Annotated[
    str,
    Field(min_length=1, max_length=MAX_ID_CHARS),
    BeforeValidator(_stripped),
    AfterValidator(_text(check_line)),
]
Reason = Annotated[str, Field(max_length=MAX_REASON_CHARS), BeforeValidator(_reason)]
Scope = Annotated[str | None, BeforeValidator(_label), WithJsonSchema({"enum": list(SCOPE_LABELS)})]
Durability = Annotated[
    str | None, BeforeValidator(_label), WithJsonSchema({"enum": list(DURABILITY_LABELS)})
]
Authority = Annotated[
    str | None, BeforeValidator(_label), WithJsonSchema({"enum": list(AUTHORITY_LABELS)})
]
Days = Annotated[int, Field(ge=1), BeforeValidator(read_positive_days)]
MaybeDays = Annotated[int | None, Field(ge=1), BeforeValidator(read_positive_days)]


# Strict, closed and frozen; built on the first answer read, not when deermem is imported
# (a command that lists facts reads none).
_STRICT: Final = ConfigDict(frozen=True, strict=True, extra="forbid", defer_build=True)


class _Entry(BaseModel):
    """One entry of an answer. Strict: a value is what the field's reading makes of
    it, never what pydantic would coerce it to.

    A reply's entry is read field by field: a key it lacks is read as ``null``
    (so every field's rule sees it), keys the model does not declare are left
    out, and anything but an object is not an entry at all.
    """

    model_config = _STRICT

    @model_validator(mode="before")
    @classmethod
    def _every_field(cls, data: object) -> object:
        if isinstance(data, Mapping):
            return {name: data.get(name) for name in cls.model_fields}
        return data


class SummaryProposal(_Entry):
    """A summary section as the model proposed it (labels not yet checked).

    ``key`` is where the answer put it, ``(group, section)`` (never read from
    the section itself).
    """

    summary: Annotated[
        str,
        Field(max_length=MAX_SUMMARY_CHARS),
        BeforeValidator(_text_or_empty),
        AfterValidator(_text(check_lines)),
    ]
    shouldUpdate: Annotated[bool, BeforeValidator(_truthy)]
    scope: Scope
    authority: Authority
    _key: SummaryKey = PrivateAttr(default=("", ""))

    @property
    def key(self) -> SummaryKey:
        return self._key

    @property
    def should_update(self) -> bool:
        return self.shouldUpdate


class NewFactProposal(_Entry):
    """A well-formed new fact (labels, threshold and duplicates not yet checked).

    The fields are declared in the order they are judged, so a fact with
    several fields over their limits is counted under the first.

    Attributes:
        content: as given (not stripped: blank content is the gate's to refuse),
            without the prompt's ``[MANUAL]`` marker at its start.
        category: trimmed; ``context`` when it was empty or not a string.
        expected_valid_days: a whole number of at least 1, or ``None``.
        index: position among the answer's well-formed new facts, which is what
            a removal's ``replacementFactIndex`` refers to (never read from a reply).
    """

    content: Annotated[
        str,
        Field(min_length=1, max_length=MAX_CONTENT_CHARS),
        AfterValidator(_text(check_lines)),
        AfterValidator(_without_manual_marker),
    ]
    confidence: Annotated[float, Field(ge=0, le=1), BeforeValidator(_confidence)]
    category: Annotated[
        str,
        Field(max_length=MAX_CATEGORY_CHARS),
        BeforeValidator(_stripped),
        AfterValidator(_text(check_line)),
        AfterValidator(lambda category: category or "context"),
        WithJsonSchema({"enum": list(CORE_CATEGORIES)}),
    ]
    scope: Scope
    durability: Durability
    authority: Authority
    sourceError: Annotated[
        str | None,
        Field(max_length=MAX_SOURCE_ERROR_CHARS),
        BeforeValidator(_stripped),
        AfterValidator(_text(check_lines)),
        AfterValidator(lambda text: text or None),
    ] = None
    expected_valid_days: MaybeDays = None
    _index: int = PrivateAttr(default=0)

    @property
    def index(self) -> int:
        return self._index

    @property
    def source_error(self) -> str | None:
        return self.sourceError


class _FactEntry(_Entry):
    """An entry about a stored fact, named by ``id`` (the first field of every such entry)."""

    id: Id

    @property
    def fact_id(self) -> str:
        return self.id


class ReinforceEntry(_FactEntry):
    """A fact the model says the user just confirmed."""

    scope: Scope
    reason: Reason


class RemovalEntry(_FactEntry):
    """A fact the model says the conversation contradicts.

    ``replacementFactIndex`` is the index the model gave when it is a whole
    number (possibly negative: the gate refuses those), ``"invalid"`` when it
    gave something else, ``None`` when it gave none.
    """

    scope: Scope
    reason: Reason
    replacementFactIndex: Annotated[
        int | str | None,
        BeforeValidator(_replacement),
        WithJsonSchema({"type": "integer", "minimum": 0}),
    ] = None

    @property
    def replacement_index(self) -> int | None:
        """The replacement's index when the model gave a whole number."""
        index = self.replacementFactIndex
        return index if isinstance(index, int) else None

    @property
    def replacement_given(self) -> bool:
        """The model gave a replacement index at all (usable or not)."""
        return self.replacementFactIndex is not None


class StaleRemoval(_FactEntry):
    """An aged fact the model proposes to remove."""

    reason: Reason


class StaleExtension(_FactEntry):
    """An aged fact the model proposes to keep for ``extend_by_days`` more days."""

    extend_by_days: Days
    reason: Reason


class _Sections(BaseModel):
    model_config = _STRICT


class UserSections(_Sections):
    workContext: SummaryProposal | None = None
    personalContext: SummaryProposal | None = None
    topOfMind: SummaryProposal | None = None


class HistorySections(_Sections):
    recentMonths: SummaryProposal | None = None
    earlierContext: SummaryProposal | None = None
    longTermBackground: SummaryProposal | None = None


class Answer(BaseModel):
    """A whole memory update, as the model is asked to write it."""

    model_config = _STRICT

    user: UserSections
    history: HistorySections
    newFacts: Annotated[list[NewFactProposal], Field(max_length=MAX_NEW_FACTS)]
    factsToReinforce: Annotated[list[ReinforceEntry], Field(max_length=MAX_REINFORCEMENTS)]
    factsToRemove: Annotated[list[RemovalEntry], Field(max_length=MAX_REMOVALS)]
    staleFactsToRemove: Annotated[list[StaleRemoval], Field(max_length=MAX_STALE_REMOVALS)]
    staleFactsToExtend: Annotated[list[StaleExtension], Field(max_length=MAX_EXTENSIONS)]


assert tuple(UserSections.model_fields) == USER_SECTIONS
assert tuple(HistorySections.model_fields) == HISTORY_SECTIONS


def response_json_schema() -> dict[str, Any]:
    """The reply schema (the models' JSON Schema, plain), as a fresh copy the caller may change."""
    return copy.deepcopy(_reply_schema())


@functools.cache
def _reply_schema() -> dict[str, Any]:
    """:class:`Answer`'s JSON Schema made plain for grammar converters: references
    inlined, and no titles, descriptions, defaults or ``null`` (the ask never offers ``null``:
    a field it does not require may be left out instead)."""
    schema = Answer.model_json_schema()
    definitions = schema.pop("$defs", {})

    def plain(node: object) -> object:
        if isinstance(node, list):
            return [plain(item) for item in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            return plain(definitions[node["$ref"].rsplit("/", 1)[-1]])
        options = node.get("anyOf")
        if options is not None:
            kept = [option for option in options if option != {"type": "null"}]
            if len(kept) == 1:
                return plain(kept[0])
        out: dict[str, object] = {}
        for key, value in node.items():
            if key == "properties":
                out[key] = {name: plain(spec) for name, spec in value.items()}
            elif key not in ("title", "default", "description"):
                out[key] = plain(value)
        return out

    result = plain(schema)
    assert isinstance(result, dict)
    return result


# Each field of an update and the Python type the reply schema gives it (one source for both).
_JSON_TYPES: Final[Mapping[str, type]] = {"object": Mapping, "array": list}


@functools.cache
def _field_types() -> Mapping[str, type]:
    return {name: _JSON_TYPES[spec["type"]] for name, spec in _reply_schema()["properties"].items()}


# --- reading an answer -------------------------------------------------------------------

_E = TypeVar("_E", bound=_Entry)


@dataclass(frozen=True, slots=True)
class NormalizedResponse:
    """Everything usable in a model's update, typed and bounded.

    Attributes:
        summaries: the sections proposed, in the canonical order of the sections.
        malformed_new_facts: new facts dropped as malformed, those with a
            field over its limit included (not compared).
        ignored: per list (``factsToRemove``, ``staleFactsToExtend`` ...),
            entries left out because they were not objects or had no usable
            id or day count (not compared).
        over_limits: entries left out because they exceeded a limit, by limit
            (not compared).
    """

    summaries: tuple[SummaryProposal, ...] = ()
    new_facts: tuple[NewFactProposal, ...] = ()
    reinforce: tuple[ReinforceEntry, ...] = ()
    remove: tuple[RemovalEntry, ...] = ()
    stale_remove: tuple[StaleRemoval, ...] = ()
    stale_extend: tuple[StaleExtension, ...] = ()
    malformed_new_facts: int = field(default=0, compare=False)
    ignored: Mapping[str, int] = field(default_factory=dict, compare=False)
    over_limits: OverLimits = field(default_factory=OverLimits, compare=False)

    def to_payload(self) -> dict[str, object]:
        """The response in the model's JSON shape (normalising it changes nothing)."""
        groups: dict[str, dict[str, SummaryProposal]] = {"user": {}, "history": {}}
        for proposal in self.summaries:
            group, name = proposal.key
            groups[group][name] = proposal
        answer = Answer(
            user=UserSections(**groups["user"]),
            history=HistorySections(**groups["history"]),
            newFacts=list(self.new_facts),
            factsToReinforce=list(self.reinforce),
            factsToRemove=list(self.remove),
            staleFactsToRemove=list(self.stale_remove),
            staleFactsToExtend=list(self.stale_extend),
        )
        return answer.model_dump(exclude_none=True)


@dataclass(frozen=True, slots=True)
class RejectedResponse:
    """A response refused whole, so that nothing of it is applied.

    Attributes:
        reason: ``removals-with-malformed-facts`` (it removes facts while
            some new facts were malformed), or ``wrong-field-types`` (none of
            its fields has the type the reply schema gives it: not an update
            that can be read at all).
        malformed_new_facts: how many new facts were malformed (``-1`` when
            ``newFacts`` was not a list at all).
        removals: how many removals it asked for.
        over_limits: entries that exceeded a limit (facts over a length limit
            are among the malformed ones).
    """

    reason: Literal["removals-with-malformed-facts", "wrong-field-types"]
    malformed_new_facts: int
    removals: int
    over_limits: OverLimits = field(default_factory=OverLimits)


class _Tally:
    """What reading left out: over a limit (by limit), or unusable (by list)."""

    def __init__(self) -> None:
        self.over: dict[str, int] = {}
        self.ignored: dict[str, int] = {}

    def over_limit(self, limit: str, count: int = 1) -> None:
        self.over[limit] = self.over.get(limit, 0) + count

    def skip(self, name: str) -> None:
        self.ignored[name] = self.ignored.get(name, 0) + 1

    def limits(self) -> OverLimits:
        return OverLimits(**self.over)

    def read(self, model: type[_E], raw: object, name: str | None) -> _E | None:
        """One entry, or ``None``: over a limit (counted by limit) or unusable (counted
        under ``name``, when given). The first field that fails decides which."""
        try:
            return model.model_validate(raw)
        except ValidationError as error:
            first = error.errors()[0]
            if first["type"] in _OVER_LIMIT_ERRORS and first["loc"]:
                self.over_limit(_OVER_LIMIT_OF_FIELD[str(first["loc"][0])])
            elif name is not None:
                self.skip(name)
            return None

    def bounded(self, value: object, limit: int, counter: str) -> list[object]:
        """The list's first ``limit`` entries (the rest counted under ``counter``);
        a non-list is an empty list."""
        if not isinstance(value, list):
            return []
        if len(value) > limit:
            self.over_limit(counter, len(value) - limit)
            return value[:limit]
        return value


def normalize_response(data: Mapping[str, object]) -> NormalizedResponse | RejectedResponse:
    """Read a decoded update object (see the module docstring for the rules)."""
    if not any(isinstance(data.get(name), kind) for name, kind in _field_types().items()):
        return RejectedResponse("wrong-field-types", malformed_new_facts=-1, removals=0)
    tally = _Tally()
    new_facts, malformed = _new_facts(data.get("newFacts"), tally)
    removals = _entries(
        # The old list-of-ids form: no labels, so the gate will refuse it.
        [
            {"id": raw} if isinstance(raw, str) else raw
            for raw in tally.bounded(data.get("factsToRemove"), MAX_REMOVALS, "removals")
        ],
        RemovalEntry,
        "factsToRemove",
        tally,
    )
    summaries = _summaries(data, tally)
    reinforce = _entries(
        tally.bounded(data.get("factsToReinforce"), MAX_REINFORCEMENTS, "reinforcements"),
        ReinforceEntry,
        "factsToReinforce",
        tally,
    )
    stale_remove = _entries(
        tally.bounded(data.get("staleFactsToRemove"), MAX_STALE_REMOVALS, "stale_removals"),
        StaleRemoval,
        "staleFactsToRemove",
        tally,
    )
    stale_extend = _entries(
        tally.bounded(data.get("staleFactsToExtend"), MAX_EXTENSIONS, "extensions"),
        StaleExtension,
        "staleFactsToExtend",
        tally,
    )
    if removals and malformed != 0:
        return RejectedResponse(
            "removals-with-malformed-facts", malformed, len(removals), tally.limits()
        )
    return NormalizedResponse(
        summaries=summaries,
        new_facts=new_facts,
        reinforce=reinforce,
        remove=removals,
        stale_remove=stale_remove,
        stale_extend=stale_extend,
        malformed_new_facts=max(malformed, 0),
        ignored=tally.ignored,
        over_limits=tally.limits(),
    )


def _entries(raws: list[object], model: type[_E], name: str, tally: _Tally) -> tuple[_E, ...]:
    entries = (tally.read(model, raw, name) for raw in raws)
    return tuple(entry for entry in entries if entry is not None)


def _summaries(data: Mapping[str, object], tally: _Tally) -> tuple[SummaryProposal, ...]:
    proposals: list[SummaryProposal] = []
    for group, names in (("user", USER_SECTIONS), ("history", HISTORY_SECTIONS)):
        sections = data.get(group)
        if not isinstance(sections, Mapping):
            continue
        for name in names:
            raw = sections.get(name)
            if isinstance(raw, Mapping):
                proposal = tally.read(SummaryProposal, raw, f"{group}.{name}")
                if proposal is not None:
                    proposal._key = (group, name)
                    proposals.append(proposal)
    return tuple(proposals)


def _new_facts(value: object, tally: _Tally) -> tuple[tuple[NewFactProposal, ...], int]:
    """The well-formed facts and how many were malformed (-1: not a list)."""
    if not isinstance(value, list):
        return (), -1
    facts: list[NewFactProposal] = []
    malformed = 0
    for raw in tally.bounded(value, MAX_NEW_FACTS, "new_facts"):
        fact = tally.read(NewFactProposal, raw, None)
        if fact is None:
            malformed += 1
        else:
            fact._index = len(facts)
            facts.append(fact)
    return tuple(facts), malformed


# --- finding the answer in a reply -------------------------------------------------------

UPDATE_KEYS: Final = ("user", "history", "newFacts")
"""The keys that make a JSON object a memory update."""

NoUpdateReason = Literal["empty", "too-large", "no-update-object", "scan-limit"]

_TEXT_BLOCK_TYPES: Final = frozenset({"text", "output_text"})
# Reasoning blocks. Found with bounded patterns and a forward scan, never one
# backtracking pattern: "<think>" repeated 40,000 times must stay linear.
_THINK_OPEN: Final = re.compile(r"<(think|thinking)\b[^<>]{0,64}>", re.IGNORECASE)
_THINK_CLOSE: Final = {
    name: re.compile(rf"</{name}\s{{0,8}}>", re.IGNORECASE) for name in ("think", "thinking")
}
_DECODER: Final = json.JSONDecoder()
# Where an object can start: "{" then a key or the closing brace.
_OBJECT_START: Final = re.compile(r'\{\s*["}]')


@dataclass(frozen=True, slots=True)
class UpdatePayload:
    """The update object found in an answer.

    Attributes:
        data: the decoded object (not yet read: see :func:`normalize_response`).
        offset: where in the answer's text the object began.
    """

    data: Mapping[str, object]
    offset: int


@dataclass(frozen=True, slots=True)
class NoUpdate:
    """The answer holds no usable update; nothing is to change.

    Attributes:
        reason: ``empty`` (no text), ``too-large`` (over
            :data:`MAX_RESPONSE_CHARS`), ``no-update-object`` (no JSON object
            with the update keys), or ``scan-limit`` (the search budget ran
            out first).
    """

    reason: NoUpdateReason


def response_text(content: object) -> str:
    """The text of a model answer given as a string or as content blocks.

    Strings are returned as they are. In a list, adjacent plain strings are
    chunks of one text and are joined directly; each ``{"type": "text",
    "text": ...}`` block is a text of its own; texts are joined with a
    newline, and blocks of other types (images, tool calls) are skipped.
    ``None`` is no text; any other value is rendered with ``str``.
    """
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    if not isinstance(content, Sequence) or isinstance(content, bytes | bytearray):
        return str(content)
    texts: list[str] = []
    chunk: list[str] = []
    for item in content:
        if isinstance(item, str):
            chunk.append(item)
            continue
        if chunk:
            texts.append("".join(chunk))
            chunk = []
        if isinstance(item, Mapping) and item.get("type") in _TEXT_BLOCK_TYPES:
            text = item.get("text")
            if isinstance(text, str):
                texts.append(text)
    if chunk:
        texts.append("".join(chunk))
    return "\n".join(texts)


def is_update_object(value: object) -> bool:
    """Whether a decoded JSON value is a memory update (an object with the update keys)."""
    return isinstance(value, dict) and all(key in value for key in UPDATE_KEYS)


def parse_update_response(content: object) -> UpdatePayload | NoUpdate:
    """Find the first memory-update object in a model's answer.

    Args:
        content: the answer, as a string or content blocks (see :func:`response_text`).

    Returns:
        The update object, or :class:`NoUpdate` saying why there is none.
        Never raises.
    """
    text = response_text(content)
    if not text.strip():
        return NoUpdate("empty")
    if len(text) > MAX_RESPONSE_CHARS:
        return NoUpdate("too-large")
    budget = _Budget(MAX_SCAN_CHARS, MAX_DECODE_ATTEMPTS)
    answer = _blank_reasoning(text)
    found = _first_update(answer, budget)
    if found is None and answer != text and not budget.spent:
        found = _first_update(text, budget)  # the update exists only inside the reasoning
    if found is not None:
        return found
    return NoUpdate("scan-limit" if budget.spent else "no-update-object")


class _Budget:
    """Characters the decoder may still examine, and decode attempts left."""

    def __init__(self, chars: int, attempts: int) -> None:
        self.left = chars
        self.attempts = attempts

    @property
    def spent(self) -> bool:
        return self.left <= 0 or self.attempts <= 0

    def charge(self, chars: int) -> None:
        self.left -= max(chars, 1)
        self.attempts -= 1


def _blank_reasoning(text: str) -> str:
    """``text`` with each closed reasoning block replaced by spaces of the same
    length (so offsets stay offsets into the original); an unclosed block is kept."""
    parts: list[str] = []
    position = 0
    while (opening := _THINK_OPEN.search(text, position)) is not None:
        closing = _THINK_CLOSE[opening.group(1).lower()].search(text, opening.end())
        if closing is None:
            break
        parts.append(text[position : opening.start()])
        parts.append(" " * (closing.end() - opening.start()))
        position = closing.end()
    parts.append(text[position:])
    return "".join(parts)


def _first_update(text: str, budget: _Budget) -> UpdatePayload | None:
    start = _OBJECT_START.search(text)
    while start is not None and not budget.spent:
        position = start.start()
        try:
            value, end = _DECODER.raw_decode(text, position)
        except json.JSONDecodeError as error:
            budget.charge(error.pos - position + 1)
        except ValueError:
            # An integer literal beyond the interpreter's digit limit: not JSON we take.
            budget.charge(len(text) - position)
        except RecursionError:
            # Nested past the recursion limit: how far it scanned is unknown, so
            # charge the rest of the text; no honest answer is nested this deep.
            budget.charge(len(text) - position)
        else:
            budget.charge(end - position)
            if is_update_object(value):
                return UpdatePayload(data=value, offset=position)
        start = _OBJECT_START.search(text, position + 1)
    return None
