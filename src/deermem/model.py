"""The data model: facts and what they are made of. Pure: no I/O, no clock.

Everything every layer agrees on about a fact, written once:

* **the text boundary** — which text may reach a file (every string valid
  Unicode, plain data, bounded nesting) and which text a person or a model
  may write now (shape and length limits);
* **timestamps** — ISO 8601 in UTC with a ``Z`` suffix, read leniently;
* **categories** — the nine core ones, and how an unknown label is kept;
* **the capacity policy's defaults** — read by the configuration and by the
  policy, which sit on either side of this module;
* **fact ids and the duplicate rule** — the one fresh-id loop and the one
  answer to "do these two facts say the same thing";
* **the fact** — :class:`Fact`, validated in one place (:meth:`Fact.from_dict`);
* **scopes** — one user's memory for one agent, the identifier rules, and the
  directory names the Markdown store derives from them;
* **the JSON form of records** — one way to write a record as its file or the
  wire carries it: :class:`Record` (a dataclass whose ``to_dict`` is
  :func:`json_form`, driven by its fields' metadata) for the records of the
  layers below the facade, :func:`to_json` for the pydantic results, the
  configuration every result model shares, and the fact's own wire
  description (:data:`FactJson`).
* **secrets** — which credentials never reach a file: :func:`redact` replaces
  each by ``[redacted: KIND]`` and says which kinds it found, never the value.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import hashlib
import itertools
import json
import math
import re
import unicodedata
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import Annotated, Any, ClassVar, Final, Literal, NamedTuple, TypeGuard, cast

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    SerializerFunctionWrapHandler,
    TypeAdapter,
    model_serializer,
)
from pydantic.alias_generators import to_camel
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, core_schema, to_jsonable_python

from deermem.errors import (
    FactValidationError,
    InvalidTextError,
    UnsafeIdentifierError,
    Withheld,
    preview,
)

__all__ = [
    "CORE_CATEGORIES",
    "DEFAULT_ACCESS_HALF_LIFE_DAYS",
    "DEFAULT_ACCESS_WEIGHT",
    "DEFAULT_AGENT",
    "DEFAULT_CATEGORY",
    "DEFAULT_CONFIDENCE_WEIGHT",
    "DEFAULT_CONFIRMATION_HALF_LIFE_DAYS",
    "DEFAULT_CONFIRMATION_WEIGHT",
    "DEFAULT_CORRECTION_RESERVED_FRACTION",
    "DEFAULT_CORRECTION_RESERVED_MAX",
    "DEFAULT_POLICY",
    "DEFAULT_PROTECTED_CATEGORIES",
    "FACT_ID_PATTERN",
    "KINDS",
    "MAX_AGENT_NAME_LENGTH",
    "MAX_CATEGORY_CHARS",
    "MAX_CONTENT_CHARS",
    "MAX_FACT_ID_LENGTH",
    "MAX_KEPT_SIZE",
    "MAX_LINE_CHARS",
    "MAX_NESTING",
    "MAX_SOURCE_ERROR_CHARS",
    "MAX_SUMMARY_CHARS",
    "MAX_TOPICS",
    "MAX_USER_ID_BYTES",
    "MAX_WHOLE_NUMBER",
    "NO_ENTRIES",
    "RANDOM_FACT_ID_PATTERN",
    "RESULT_CONFIG",
    "TIMESTAMP_FIELDS",
    "USER_ID_PATTERN",
    "WEIGHT_TOLERANCE",
    "WIRE_CONFIG",
    "YAML_LOADER",
    "Fact",
    "FactJson",
    "FactOut",
    "FactScope",
    "FactSource",
    "FlushReport",
    "IdFactory",
    "QueueKey",
    "Record",
    "Redaction",
    "RepeatedYamlKey",
    "Scope",
    "WatermarkKey",
    "WireForm",
    "YamlAliasError",
    "agent_directory",
    "canonical_category",
    "category_key",
    "check_fact_id",
    "check_given_category",
    "check_line",
    "check_lines",
    "check_redacted_length",
    "check_storable",
    "check_thread_id",
    "check_user_id",
    "duplicate_digest",
    "duplicate_key",
    "format_timestamp",
    "is_bucket",
    "is_derived_agent_directory",
    "is_fact_id",
    "json_form",
    "json_key",
    "listing_order",
    "marker",
    "new_fact_id",
    "next_confirmation_count",
    "normalise_agent",
    "parse_json",
    "parse_moment",
    "parse_timestamp",
    "random_fact_id",
    "redact",
    "redact_fact",
    "redact_value",
    "safe_user_id",
    "shown_user_id",
    "to_json",
    "was_kept_user_id",
    "weights_sum_to_one",
    "yaml_problem",
]


# ---------------------------------------------------------------------------
# The text boundary: which text may reach a file, decided in one place
#
# Two levels, because stored data and new data differ in what they owe us:
#
# * **Storable** (:func:`check_storable`) — every string a fact or a summary
#   holds, on every path (a file read back, an import, a person, a model),
#   must be valid Unicode: a lone surrogate cannot be written as UTF-8, and it
#   is what an undecodable byte becomes when Python decodes a command-line
#   argument (``surrogateescape``) or what a JSON ``"\ud800"`` escape yields.
#   Values must also be plain data a YAML and a JSON writer can represent,
#   nested at most :data:`MAX_NESTING` deep (the writers recurse: a value
#   nested hundreds deep would fail to be written, or be written by one store
#   and not by the other); and what a fact or a summary section keeps without
#   knowing it — its unknown fields — holds at most :data:`MAX_KEPT_SIZE`.
#   :meth:`deermem.model.Fact.from_dict` applies this to every field, so a
#   fact that exists can be written and read back, on either store.
# * **Authored** (:func:`check_line`, :func:`check_lines`) — text a person or a
#   model writes *now* (``facts add``, ``facts edit``, a model's answer) also
#   keeps to a shape and a length: one-line fields (a category, a topic, a
#   thread id) hold no control character and no line break; multi-line fields
#   (content, summaries, ``sourceError``) hold no control character but tab
#   and line breaks; and each has the length limit of a fact extracted by a
#   model. A person's content, category, topics and ``sourceError`` keep to
#   their limit also with their secrets replaced (:func:`check_redacted_length`),
#   so what a reader gets back can be written back. Data that already exists —
#   files written by the original DeerMem, documents ``deermem export``
#   wrote — is not held to these: reading it, or importing it again, must not
#   fail on a limit it was never written under.
#
# Both raise :class:`~deermem.errors.InvalidTextError` (a
# :class:`~deermem.FactValidationError`) naming the field, the character and
# its position; a length over the limit is a plain ``FactValidationError``.
# ---------------------------------------------------------------------------

MAX_CONTENT_CHARS: Final = 4_000
"""Longest fact content a person or a model may write (about 1,000 tokens)."""
MAX_CATEGORY_CHARS: Final = 64
"""Longest category (or own label, or topic) a person or a model may write."""
MAX_SOURCE_ERROR_CHARS: Final = 2_000
"""Longest ``sourceError`` (what the assistant got wrong) a person or a model may write."""
MAX_SUMMARY_CHARS: Final = 8_000
"""Longest summary section a model may write."""
MAX_LINE_CHARS: Final = 256
"""Longest other one-line value written by hand (a thread id, a source type)."""
MAX_TOPICS: Final = 32
"""Most topics a fact written by hand may carry."""
MAX_NESTING: Final = 32
"""Deepest nesting of lists and mappings in any stored value (no field deermem
knows nests more than two deep; a writer that recurses stays far from its limit)."""
MAX_KEPT_SIZE: Final = 65_536
"""Largest size of the unknown fields a fact keeps together (and of its ``source``,
and of a summary section's unknown keys): characters of text, keys included, plus
one per value."""

LINE_BREAKS: Final = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"
"""Every character :meth:`str.splitlines` breaks a line at."""

# Control characters (C0, DEL, C1) and the two Unicode line separators: none
# belongs in a one-line field.
_NOT_IN_A_LINE: Final = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
# In multi-line text tab, line feed and carriage return are text; U+2028/9
# are left to the writer, who may mean them.
_NOT_IN_LINES: Final = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")

# What YAML's safe dumper and json can both write (and their loaders give back):
# a fact goes to front matter, to archive entries and to exports.
_SCALARS: Final = (str, bool, int, float, type(None))


def check_storable(field: str, value: object, *, max_size: int | None = None) -> int:
    """Refuse a value that cannot be stored as it is: a lone surrogate in any
    string (keys included, at any depth), a type no file format represents,
    lists and mappings nested deeper than :data:`MAX_NESTING`, or (with
    ``max_size``) a value larger than that.

    The walk keeps its own stack, so no value — however deep a JSON or YAML
    reader built it — makes it recurse.

    Args:
        field: the name of the value, for the error (``"topics"``, ``"source"``).
        value: a string, number, boolean, ``None``, or a list (or tuple, which
            is written as a list) or mapping of those: what both YAML and JSON
            hold.
        max_size: the largest size allowed (``None``: any size).

    Returns:
        The value's size: the characters of its text, mapping keys included,
        plus one for each value (a scalar, a list, a mapping).

    Raises:
        InvalidTextError: a string (or a mapping key) holds a lone surrogate;
            ``field`` names where (``"source.threadId"``, ``"topics[2]"``).
        FactValidationError: a value of another type (a tuple, an object),
            nested too deep, or larger than ``max_size``.
    """
    if isinstance(value, str):  # the common cases, without a walk
        _check_unicode(field, value)
        size = 1 + len(value)
    elif isinstance(value, _SCALARS):
        size = 1
    else:
        size = _walk(field, value, max_size)
    if max_size is not None and size > max_size:
        raise _too_large(field, max_size)
    return size


def _walk(field: str, value: object, max_size: int | None) -> int:
    size = 0
    # (where, value, how many lists and mappings hold it), depth first, in order.
    stack: list[tuple[str, object, int]] = [(field, value, 0)]
    while stack:
        where, item, depth = stack.pop()
        size += 1
        if isinstance(item, str):
            _check_unicode(where, item)
            size += len(item)
        elif isinstance(item, Mapping | list | tuple):
            if depth >= MAX_NESTING:
                raise FactValidationError(
                    where,
                    Withheld(f"{type(item).__name__} nested {depth + 1} deep"),
                    f"expected lists and mappings nested at most {MAX_NESTING} deep",
                )
            children: list[tuple[str, object, int]] = []
            if isinstance(item, Mapping):
                for key, child in item.items():
                    if isinstance(key, str):
                        _check_unicode(f"{where} key", key)
                        size += len(key)
                    elif not isinstance(key, _SCALARS):
                        raise FactValidationError(
                            where, item, "expected keys that are plain values"
                        )
                    children.append((f"{where}.{key}", child, depth + 1))
            else:
                children = [(f"{where}[{n}]", child, depth + 1) for n, child in enumerate(item)]
            stack.extend(reversed(children))
        elif not isinstance(item, _SCALARS):
            raise FactValidationError(
                where, item, "expected text, a number, a boolean, null, a list or a mapping"
            )
        if max_size is not None and size > max_size:
            raise _too_large(field, max_size)
    return size


def _too_large(field: str, max_size: int) -> FactValidationError:
    return FactValidationError(
        field,
        Withheld("too large"),  # never the value itself: it may be megabytes
        f"expected at most {max_size:,} characters (and values) in what deermem keeps "
        "without knowing it",
    )


def check_line(field: str, value: str, limit: int) -> str:
    """Check one line of text written now; return it unchanged.

    Raises:
        InvalidTextError: a lone surrogate, a control character or a line break.
        FactValidationError: more than ``limit`` characters.
    """
    return _check_text(field, value, limit, _NOT_IN_A_LINE, "one line of text")


def check_thread_id(value: object) -> str:
    """Apply the one rule for a conversation's id; return it unchanged.

    The id is stored as the source of the facts learned from the
    conversation, so it is checked as a line of a fact is: one line of at
    most 256 characters of valid Unicode; and it names the conversation, so
    an empty or blank one is refused. ``Memory.learn``,
    ``Memory.queue_conversation``, the HTTP API's ``threadId`` and
    ``deermem ingest`` (the file's ``thread_id``, ``--thread``) all apply this
    one function, so no interface accepts an id another refuses.

    Raises:
        FactValidationError: the field ``threadId`` is not a string, is too
            long, or is empty or blank.
        InvalidTextError: it holds a lone surrogate, a control character or a line break.
    """
    if not isinstance(value, str):
        raise FactValidationError("threadId", value, "expected a string")
    check_line("threadId", value, MAX_LINE_CHARS)
    if not value.strip():
        raise FactValidationError(
            "threadId", value, "expected a thread id that is not empty or only spaces"
        )
    return value


def check_lines(field: str, value: str, limit: int) -> str:
    """Check text of one or more lines written now; return it unchanged.

    Raises:
        InvalidTextError: a lone surrogate, or a control character other than
            tab, line feed and carriage return.
        FactValidationError: more than ``limit`` characters.
    """
    return _check_text(field, value, limit, _NOT_IN_LINES, "text")


def _check_text(field: str, value: str, limit: int, refused: re.Pattern[str], kind: str) -> str:
    """The checks of :func:`check_line` and :func:`check_lines`: ``refused`` finds a character
    that ``kind`` of text may not hold."""
    _check_unicode(field, value)
    found = refused.search(value)
    if found is not None:
        raise _control(field, value, found.start(), kind)
    return _check_length(field, value, limit)


def _check_unicode(field: str, value: str) -> None:
    if value.isascii():
        return
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        position = error.start
        character = value[position]
        point = ord(character)
        if 0xDC80 <= point <= 0xDCFF:
            # How Python's surrogateescape carries a byte that is not UTF-8.
            problem = (
                f"byte 0x{point - 0xDC00:02X} at position {position} is not UTF-8; "
                "expected UTF-8 text"
            )
        else:
            problem = (
                f"U+{point:04X} at position {position} is a lone surrogate; "
                "expected valid Unicode text"
            )
        raise InvalidTextError(
            field, value, position=position, character=character, problem=problem
        ) from None


def _control(field: str, value: str, position: int, kind: str) -> InvalidTextError:
    character = value[position]
    return InvalidTextError(
        field,
        value,
        position=position,
        character=character,
        problem=(
            f"control character U+{ord(character):04X} at position {position}; expected {kind} "
            "without control characters"
        ),
    )


def check_redacted_length(field: str, value: str, limit: int) -> str:
    """Check that text written now keeps to ``limit`` with its secrets replaced too; return it.

    A ``[redacted: KIND]`` marker may be longer than the secret it replaces, and
    a text stored over its limit could not be written back as a reader gets it
    (a LangGraph ``put`` of what ``get`` returned, an edit that keeps the
    category): the text must fit both as written and as :func:`redact` would
    store it — whatever ``redact_secrets`` says, so the rule is the same
    everywhere. The error gives lengths, never the text.

    Raises:
        FactValidationError: the text, its secrets replaced, is over ``limit``.
    """
    stored = redact(value).text
    if len(stored) > limit:
        raise FactValidationError(
            field,
            value,
            f"expected at most {limit:,} characters also with its secrets replaced by "
            f"[redacted: KIND] markers, as it is stored; found {len(stored):,}",
        )
    return value


def _check_length(field: str, value: str, limit: int) -> str:
    if len(value) > limit:
        raise FactValidationError(
            field, value, f"expected at most {limit:,} characters, found {len(value):,}"
        )
    return value


# ---------------------------------------------------------------------------
# Timestamps: ISO 8601 in UTC with a Z suffix
#
# Parsing is lenient on purpose: a timestamp that cannot be read must never
# crash an eviction or a review, so :func:`parse_timestamp` returns ``None`` and
# each caller decides what "unknown time" means for its own rule.
# ---------------------------------------------------------------------------

_SPAN: Final = re.compile(r"(\d{1,5})([hdw])")
_SPAN_HOURS: Final = {"h": 1, "d": 24, "w": 24 * 7}


def format_timestamp(moment: datetime) -> str:
    """Render an aware datetime as ISO 8601 UTC with a ``Z`` suffix.

    Microseconds are kept, as the original DeerMem does, so two writes in the
    same second still order correctly. A naive datetime is taken to be UTC.
    """
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def parse_timestamp(value: object) -> datetime | None:
    """Read a stored timestamp into an aware UTC datetime, or ``None``.

    Accepts ``datetime`` objects and ISO 8601 strings (``Z`` or an explicit
    offset); a value without a time zone is taken to be UTC. Anything else —
    ``None``, numbers, booleans, garbage strings — yields ``None``.
    """
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, str):
        if "\x00" in value:  # CPython's fromisoformat reads up to a NUL, ignoring the rest
            return None
        try:
            moment = datetime.fromisoformat(value.strip())
        except ValueError:
            return None
    else:
        return None
    return _in_utc(moment)


def _in_utc(moment: datetime) -> datetime | None:
    """``moment`` in UTC (naive: taken to be UTC), or ``None`` if UTC's calendar cannot
    hold it: ``0001-01-01T00:00:00+01:00`` is a valid ISO 8601 time before year 1 in UTC."""
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    try:
        return moment.astimezone(UTC)
    except OverflowError:
        return None


def parse_moment(text: str, now: datetime, *, option: str, ahead: bool = False) -> datetime:
    """The moment a person names on a command line, as an aware UTC datetime.

    An ISO 8601 date or time (UTC unless it says otherwise; a date is
    midnight at its start), or a span from ``now``: ``N`` hours (``12h``),
    days (``30d``) or weeks (``4w``) — back from now (``--since 30d``), or
    ahead of it with ``ahead`` (``--expires 30d``).

    Args:
        text: what was typed.
        now: the clock's time.
        option: the option's name, for the error (``--since``).
        ahead: a span counts forward from ``now`` instead of back.

    Raises:
        ValueError: naming the option, the value and the accepted forms.
    """
    value = text.strip()
    span = _SPAN.fullmatch(value)
    if span is not None:
        delta = timedelta(hours=int(span.group(1)) * _SPAN_HOURS[span.group(2)])
        return now + delta if ahead else now - delta
    try:
        moment = _in_utc(datetime.fromisoformat(value))
    except ValueError:
        moment = None
    if moment is None:
        direction = "ahead of" if ahead else "back from"
        raise ValueError(
            f"{option} {text!r}: expected an ISO 8601 date or time (2026-01-31, "
            f"2026-01-31T12:00:00Z) between years 1 and 9999 in UTC, or a span "
            f"{direction} now (12h, 30d, 4w)"
        )
    return moment


# ---------------------------------------------------------------------------
# Categories: the ones deermem knows, and how unknown ones are kept
#
# The nine core categories are the original DeerMem's. A category outside the
# core set is not rejected: the fact is stored as ``other`` and the original
# label survives in ``categoryExtension``, so nothing a model or a user wrote is
# lost and every reader can still rely on the core set.
# ---------------------------------------------------------------------------

CORE_CATEGORIES: Final[tuple[str, ...]] = (
    "preference",
    "correction",
    "context",
    "goal",
    "behavior",
    "identity",
    "constraint",
    "decision",
    "other",
)

DEFAULT_CATEGORY: Final = "context"

_CORE_SET: Final = frozenset(CORE_CATEGORIES)


def category_key(category: object) -> str:
    """Normalise a category for comparisons: stripped and lower-cased.

    Rules such as the correction reserve compare categories this way, so
    ``" Correction "`` counts as a correction. Non-strings give ``""``.
    """
    return category.strip().lower() if isinstance(category, str) else ""


def canonical_category(category: str) -> tuple[str, str | None]:
    """Split a raw category into ``(stored category, categoryExtension)``.

    ``""`` becomes the default ``context``; a core category (in any letter
    case) is returned in lower case; anything else is stored as ``other`` with
    the stripped raw label as extension.
    """
    label = category.strip()
    if not label:
        return DEFAULT_CATEGORY, None
    if label.lower() in _CORE_SET:
        return label.lower(), None
    return "other", label


NEAR_MISS_CUTOFF: Final = 0.8
"""How alike (:class:`difflib.SequenceMatcher`'s ratio) a label must be to a core
category to count as its misspelling: ``corection`` (0.95) and ``behaviour``
(0.94) are; ``contact`` (0.71) and ``project`` are labels of their own."""


def check_given_category(category: str) -> None:
    """Refuse a category a person or a tool typed that misspells a core one.

    Stored as ``other`` with the label as extension, ``-c corection`` would
    lose what makes a correction a correction — its reserved slots at the cap
    and its place in the prompt — without a word. A label that is not a core
    category but close to one is therefore refused where a person or a tool
    gives it (the CLI, the HTTP API, MCP, :meth:`Memory.create_fact
    <deermem.Memory.create_fact>`); a model's extraction keeps the original's
    rule (``other`` plus the label), since nobody is there to answer.

    Raises:
        FactValidationError: ``category`` is a near miss of a core category;
            the message names the one it resembles.
    """
    label = category.strip().lower()
    if not label or label in _CORE_SET:
        return
    close = difflib.get_close_matches(label, CORE_CATEGORIES[:-1], n=1, cutoff=NEAR_MISS_CUTOFF)
    if close:
        raise FactValidationError(
            "category",
            category,
            f"did you mean {close[0]!r}? The core categories are {', '.join(CORE_CATEGORIES)}",
        )


# ---------------------------------------------------------------------------
# The capacity policy's default parameters and the weight rule
#
# Two readers need these values: the configuration (the ``eviction_*`` keys of
# :class:`~deermem.config.MemoryConfig`) and the policy object
# (:class:`~deermem.policy.CapacityPolicy`, which is also what
# :func:`~deermem.policy.select_facts_for_capacity` falls back to when a caller
# leaves a keyword out). The configuration sits below the policy layer, so the
# values live here, beneath both, instead of being repeated in each. They are
# the original DeerMem's defaults (reference §3).
# ---------------------------------------------------------------------------

DEFAULT_POLICY: Final = "confidence"

DEFAULT_CONFIDENCE_WEIGHT: Final = 0.65
DEFAULT_CONFIRMATION_WEIGHT: Final = 0.25
DEFAULT_ACCESS_WEIGHT: Final = 0.10

DEFAULT_CONFIRMATION_HALF_LIFE_DAYS: Final = 90
DEFAULT_ACCESS_HALF_LIFE_DAYS: Final = 30

DEFAULT_CORRECTION_RESERVED_FRACTION: Final = 0.10
DEFAULT_CORRECTION_RESERVED_MAX: Final = 10

# The one category rule table's default: reserved in capacity selection,
# guaranteed in prompt injection, exempt from staleness review.
DEFAULT_PROTECTED_CATEGORIES: Final[tuple[str, ...]] = ("correction",)

WEIGHT_TOLERANCE: Final = 1e-9


def weights_sum_to_one(confidence: float, confirmation: float, access: float) -> bool:
    """Whether the three ``hybrid-v1`` weights sum to 1, within :data:`WEIGHT_TOLERANCE`.

    Summed left to right, as the score is, so a configuration accepted here
    is exactly the one the policy accepts.
    """
    total = confidence + confirmation + access
    return math.isclose(total, 1.0, rel_tol=0.0, abs_tol=WEIGHT_TOLERANCE)


# ---------------------------------------------------------------------------
# Fact ids and the duplicate rule
#
# Every path that creates a fact — a manual create, an import, extraction from
# a conversation — takes its id from new_fact_id and asks duplicate_key
# whether a fact says the same as another. One loop and one rule, so the paths
# cannot drift apart: a manual create refused as a duplicate is the fact
# extraction would skip, and the capacity gate finds an archived fact that a
# proposal says again (a *relearned* fact, see deermem.library) by the same key.
# ---------------------------------------------------------------------------

IdFactory = Callable[[], str]
"""Returns a candidate fact id: :func:`random_fact_id`, or a seeded one in tests."""

ID_ATTEMPTS: Final = 20
"""How many candidates :func:`new_fact_id` tries before it calls the factory broken."""


RANDOM_FACT_ID_PATTERN: Final = re.compile(r"fact_[0-9a-f]{8}")
"""The shape of the ids :func:`random_fact_id` makes (a fullmatch). Text that
shows a fact's id for editing reads a string of this shape as an id even when
no fact has it: a model that wrote one meant a fact, not new text."""


def random_fact_id() -> str:
    """``fact_`` and 8 random lowercase hex digits, as the original DeerMem makes ids
    (:data:`RANDOM_FACT_ID_PATTERN`)."""
    return f"fact_{uuid.uuid4().hex[:8]}"


def new_fact_id(in_use: Callable[[str], bool], make: IdFactory = random_fact_id) -> str:
    """A fresh id from ``make`` that ``in_use`` says is free.

    Args:
        in_use: whether an id is taken — by an active fact, and by an archived
            one too (a restore brings its id back), or by a fact planned in
            the same change (``planned.__contains__``).
        make: the candidate factory.

    Raises:
        ValueError: ``make`` returned ids in use :data:`ID_ATTEMPTS` times.
            Eight random hex digits make that practically impossible, so it
            means a broken (seeded) factory, not bad luck.
    """
    for _ in range(ID_ATTEMPTS):
        candidate = make()
        if not in_use(candidate):
            return candidate
    raise ValueError(f"the fact id factory returned ids already in use {ID_ATTEMPTS} times")


def duplicate_key(text: str) -> str:
    """What two facts must share to be duplicates: the text stripped and case-folded."""
    return text.strip().casefold()


def duplicate_digest(text: str) -> str:
    """A short digest of :func:`duplicate_key`, for indexes that must not hold the text.

    Sixteen hex digits: a match is always confirmed against the text itself,
    so a collision costs one extra read, never a wrong answer.
    """
    key = duplicate_key(text).encode("utf-8", "surrogatepass")
    return hashlib.sha256(key).hexdigest()[:16]


# ---------------------------------------------------------------------------
# Records: one way to write a dataclass in its JSON form
#
# A record's file form (a receipt in the audit, an archive entry, a usage entry,
# a regret event ...) is canonical: tests pin it byte for byte. Rather than each
# record spelling its mapping out by hand, a record states it once, in its
# fields: the key (camelCase of the field's name unless ``json_key`` says
# otherwise), whether an unset value is left out (``OMIT_NONE``), and, on the
# class, the order when it is not the fields' (``json_fields``, which may also
# name a property). :func:`json_form` writes every record by those rules.
# ---------------------------------------------------------------------------

OMIT_NONE: Final = MappingProxyType({"omit": True})
"""Field metadata: leave the key out while the value is ``None``."""

FLATTEN: Final = MappingProxyType({"flatten": True})
"""Field metadata: write the mapping's own keys in place of the field's."""

NO_ENTRIES: Final[Mapping[Any, Any]] = MappingProxyType({})
"""The default of an immutable record's mapping field: empty, read-only, so one serves all."""


def json_key(
    key: str | None = None, *, omit_none: bool = False, present_with: str | None = None
) -> Mapping[str, object]:
    """Field metadata for :func:`json_form`.

    Args:
        key: the key to write the field under (default: its name in camelCase).
        omit_none: leave the key out while the value is ``None``.
        present_with: write the key only while that other field is not ``None``.
    """
    return MappingProxyType({"key": key, "omit": omit_none, "with": present_with})


# (attribute, key or None to write a mapping's keys in place, omit None, written only with,
# a method to call)
_Step = tuple[str, str | None, bool, str | None, bool]
_PLANS: Final[dict[type, tuple[_Step, ...]]] = {}
_PLAIN: Final = frozenset({str, int, float, bool, type(None)})


def _json_plan(kind: type) -> tuple[_Step, ...]:
    """How ``kind`` is written, key by key, in order (worked out once per class)."""
    plan = _PLANS.get(kind)
    if plan is None:
        plan = _PLANS[kind] = _plan_of(kind)
    return plan


def _plan_of(kind: type) -> tuple[_Step, ...]:
    declared = {item.name: item for item in fields(kind)}
    names: tuple[str, ...] = getattr(kind, "json_fields", ()) or tuple(declared)
    plan: list[_Step] = []
    for name in names:
        meta = declared[name].metadata if name in declared else {}
        key = None if meta.get("flatten") else str(meta.get("key") or to_camel(name))
        present_with = meta.get("with")
        method = name not in declared and callable(getattr(kind, name))
        plan.append((name, key, bool(meta.get("omit")), present_with and str(present_with), method))
    return tuple(plan)


def _json_value(value: object) -> object:
    if type(value) in _PLAIN:
        return value
    own = getattr(value, "to_dict", None)  # a record, a fact, a report's counters
    if own is not None:
        return own()
    if isinstance(value, Mapping):
        return {key: _json_value(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_json_value(item) for item in value]
    if isinstance(value, set | frozenset):  # sorted, so the same record writes the same bytes
        return sorted(_json_value(item) for item in value)  # type: ignore[type-var]
    return value


def json_form(record: object) -> dict[str, object]:
    """A dataclass record as JSON-ready data, by its fields' rules (see :class:`Record`).

    Nested records, mappings and sequences are written the same way (a
    sequence as a list); a property named in ``json_fields`` is written like
    a field, a method called.
    """
    out: dict[str, object] = {}
    for name, key, omit_none, present_with, method in _json_plan(type(record)):
        if present_with is not None and getattr(record, present_with) is None:
            continue
        value = getattr(record, name)
        if method:
            value = value()
        if value is None and omit_none:
            continue
        if key is None:  # FLATTEN: the mapping's keys in place of the field's
            out.update((k, _json_value(v)) for k, v in cast(Mapping[str, object], value).items())
        else:
            out[key] = value if type(value) in _PLAIN else _json_value(value)
    return out


class Record:
    """A dataclass whose JSON form (:meth:`to_dict`) is :func:`json_form`'s.

    Attributes:
        json_fields: the attributes to write, in order, when that is not the
            fields' order (a property may be among them); empty: every field.
    """

    __slots__ = ()
    json_fields: ClassVar[tuple[str, ...]] = ()

    def to_dict(self) -> dict[str, object]:
        """The record's JSON form: its file's, byte for byte."""
        return json_form(self)


# ---------------------------------------------------------------------------
# The fact: one durable statement about a user, with its metadata
#
# :class:`Fact` is an immutable value. :meth:`Fact.from_dict` is the single place
# where the field rules of the canonical schema are enforced, for facts coming
# from a user, a model, an import or a file on disk, so every layer above can
# trust a ``Fact`` without re-checking it. Field names are the camelCase keys of
# the stored format (``createdAt``, ``lastConfirmedAt`` ...), so the Python
# attribute, the JSON key and the front-matter key are one and the same name.
#
# Unknown keys are not an error: they are kept in :attr:`Fact.extra` and written
# back unchanged, so data from a newer or older writer survives a round trip.
# So is the order of the keys (:attr:`Fact.key_order`): a fact keeps the order
# it was given or read in, and keys it gains are appended, exactly as the
# original DeerMem's dictionaries do — so both write a fact's front matter alike.
# The keys a fact file holds outside its front matter (:data:`BODY_KEYS`) always
# come last, in the order the file gives them back: so a fact has one JSON form
# whichever path made the object — created or changed in this process, read from
# a file or a row by another — and the same fact is the same bytes everywhere.
#
# Every string a fact holds must be valid Unicode (the text boundary above):
# a fact that exists can be written as UTF-8 and read back.
# ---------------------------------------------------------------------------

FACT_ID_PATTERN: Final = re.compile(r"[A-Za-z0-9_-]+")
# Ids become file names: ``<id>.md`` for the fact, ``<id>.json`` in the
# archive. 250 characters keeps both inside the 255-byte name limit of common
# file systems (ids are ASCII), and takes every id the original can write.
MAX_FACT_ID_LENGTH: Final = 250
MAX_TITLE_LENGTH: Final = 160
FACT_SCHEMA_VERSION: Final = 2
MAX_WHOLE_NUMBER: Final = 2**63 - 1
"""The largest revision or count a record may hold: what PostgreSQL's ``bigint`` columns
hold, so a value one store could keep the other is never given (both refuse it alike)."""

# Source types that carry no thread; any other string is a conversation thread id.
_PLAIN_SOURCE_TYPES: Final = frozenset({"manual", "consolidation", "import", "unknown"})

# The storage scope's front-matter keys: the store writes them, a fact never holds them.
_SCOPE_KEYS: Final = frozenset({"user_id", "agent_name"})

# The order of a new fact's keys, as the original DeerMem's manual and
# extraction paths build it ...
_CREATION_ORDER: Final = (
    "id",
    "content",
    "category",
    "confidence",
    "createdAt",
    "source",
    "sourceError",
    "expected_valid_days",
)
# ... and the order in which it appends the keys a fact lacks when it stores
# it (then, later, the keys a confirmation adds). Every key Fact models is here.
_APPEND_ORDER: Final = (
    "id",
    "content",
    "schemaVersion",
    "category",
    "categoryExtension",
    "confidence",
    "status",
    "scope",
    "topics",
    "consolidatedFrom",
    "source",
    "title",
    "createdAt",
    "updatedAt",
    "revision",
    "consolidatedAt",
    "lastConfirmedAt",
    "confirmationCount",
    "sourceError",
    "expected_valid_days",
)
_KNOWN_KEYS: Final = frozenset(_APPEND_ORDER)
BODY_KEYS: Final = ("scope", "content", "title")
"""The keys a fact file holds outside its front matter (the scope in its directory and
``user_id``/``agent_name``, the content and heading in its body): last in every fact's
key order, in this order, as a file read back gives them."""
TIMESTAMP_FIELDS: Final = frozenset({"createdAt", "updatedAt", "lastConfirmedAt", "consolidatedAt"})
"""The fields that hold a time; a ``datetime`` given for one is written as ISO text."""


def _canonical_order(keys: Iterable[str]) -> tuple[str, ...]:
    """``keys`` then every key a fact models, once each, the :data:`BODY_KEYS` last."""
    order = dict.fromkeys((*keys, *_APPEND_ORDER))
    return (*(key for key in order if key not in BODY_KEYS), *BODY_KEYS)


_DEFAULT_ORDER: Final = _canonical_order(_CREATION_ORDER)


@dataclass(frozen=True, slots=True)
class FactSource:
    """Where a fact came from: a conversation thread, or a kind of manual path.

    Attributes:
        type: ``conversation``, ``manual``, ``import``, ``consolidation``,
            ``unknown`` or another writer's own.
        threadId: the conversation's thread, if any.
        extra: other keys of a stored source, kept and written back.
        key_order: the stored keys' order (``threadId`` only if it was
            there), so a source is written back as it was read.
    """

    type: str
    threadId: str | None = None
    # Not hashed (its values may be lists): equal sources still hash alike.
    extra: Mapping[str, object] = field(default_factory=dict, hash=False)
    key_order: tuple[str, ...] = field(default=("type", "threadId"), compare=False, repr=False)

    @classmethod
    def from_value(cls, value: object) -> FactSource:
        """Normalise the loose forms the original accepts into a structured source.

        ``"manual"``, ``"consolidation"``, ``"import"`` and ``"unknown"`` name a
        type without a thread; any other string is a conversation thread id; a
        mapping keeps its ``type`` and ``threadId`` (a missing or non-string
        type reads as ``unknown``, a non-string thread as none) and its other
        keys; anything else is unknown.

        Raises:
            InvalidTextError: a string in it is not valid Unicode.
        """
        if isinstance(value, FactSource):
            return value
        if isinstance(value, str | Mapping):
            check_storable("source", value)
        if isinstance(value, str):
            if value in _PLAIN_SOURCE_TYPES:
                return cls(type=value)
            return cls(type="conversation", threadId=value)
        if isinstance(value, Mapping):
            kind = value.get("type")
            thread = value.get("threadId")
            return cls(
                type=kind if isinstance(kind, str) else "unknown",
                threadId=thread if isinstance(thread, str) else None,
                extra=MappingProxyType(
                    {k: v for k, v in value.items() if k not in ("type", "threadId")}
                ),
                key_order=tuple(dict.fromkeys((*map(str, value), "type"))),
            )
        return cls(type="unknown")

    def to_dict(self) -> dict[str, object]:
        """The stored form: the keys in their order, ``threadId`` if it was there or is set."""
        out: dict[str, object] = {}
        for key in (*self.key_order, "type", "threadId", *self.extra):
            if key in out:
                continue
            if key == "type":
                out[key] = self.type
            elif key == "threadId":
                if self.threadId is not None or key in self.key_order:
                    out[key] = self.threadId
            elif key in self.extra:
                out[key] = self.extra[key]
        return out

    def legacy_string(self) -> str:
        """The single-string form older callers expect (thread id, else type)."""
        if self.type == "conversation" and self.threadId:
            return self.threadId
        return self.type or self.threadId or "unknown"


class FactScope(NamedTuple):
    """The storage bucket a fact lives in: the raw user id and the agent name."""

    userId: str | None
    agentName: str

    def to_dict(self) -> dict[str, str | None]:
        return {"userId": self.userId, "agentName": self.agentName}


@dataclass(frozen=True, slots=True)
class Fact:
    """One stored fact, validated.

    Build facts with :meth:`from_dict` (which validates and normalises) rather
    than the constructor, which trusts its arguments.

    ``extra`` holds the keys :class:`Fact` does not model, and stored values
    of modelled keys that mean nothing and are only kept: a
    ``categoryExtension`` beside a core category (the original keeps one when
    a fact's category changes) and a blank ``lastConfirmedAt`` or
    ``consolidatedAt`` (read as absent). ``key_order`` is the order of the
    fact's keys, for writing — the :data:`BODY_KEYS` last, whatever order the
    fact was given in; it is not part of a fact's value (two facts that
    differ only in it are equal).
    """

    id: str
    content: str
    createdAt: str
    """When the fact was created; ``""`` when stored data does not say."""
    updatedAt: str
    category: str = "context"
    categoryExtension: str | None = None
    confidence: float = 0.5
    status: Literal["active"] = "active"
    schemaVersion: int = FACT_SCHEMA_VERSION
    source: FactSource = field(default_factory=lambda: FactSource(type="unknown"))
    scope: FactScope | None = None
    topics: tuple[str, ...] = ()
    revision: int = 1
    lastConfirmedAt: str | None = None
    confirmationCount: int | None = None
    consolidatedFrom: tuple[str, ...] = ()
    consolidatedAt: str | None = None
    title: str | None = None
    # Passed through verbatim: the original does not validate these at storage.
    sourceError: object = None
    expected_valid_days: object = None
    extra: Mapping[str, object] = field(default_factory=dict)
    key_order: tuple[str, ...] = field(default=_DEFAULT_ORDER, compare=False, repr=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, object], *, now: datetime | None = None) -> Fact:
        """Validate a mapping with canonical keys and build a fact from it.

        Args:
            data: the fact's fields under their canonical camelCase keys.
                Their order is kept (keys the fact lacks are appended).
                ``user_id`` and ``agent_name`` are the store's to write and
                are ignored.
            now: the clock used for ``createdAt`` when the mapping has none;
                without it a missing (or blank) ``createdAt`` is unknown (``""``).

        Raises:
            InvalidTextError: a string anywhere in the fact is not valid
                Unicode (a lone surrogate: an undecodable byte, say).
            FactValidationError: naming the first field whose value is not
                allowed, the value, and what the field accepts.
        """
        raw_id = data.get("id")
        fact_id = raw_id if isinstance(raw_id, str) else None
        try:
            return cls._build(data, now)
        except FactValidationError as error:
            if error.fact_id is not None or not fact_id or error.field == "id":
                raise
            # Name the fact in the message: "which fact" matters as much as "which field".
            raise error.naming(fact_id) from None

    @classmethod
    def _build(cls, data: Mapping[str, object], now: datetime | None) -> Fact:
        # What the fact keeps without knowing it shares one budget; ``source``
        # (which keeps its unknown keys too) has one of its own.
        unknown_budget = MAX_KEPT_SIZE
        for key, value in data.items():
            if not isinstance(key, str):
                raise FactValidationError(repr(key), value, "expected a string key")
            check_storable(key, key)
            if key in _SCOPE_KEYS or isinstance(value, FactSource | FactScope):
                continue
            if key in TIMESTAMP_FIELDS and isinstance(value, datetime):
                continue  # formatted as text below
            if key == "source":
                check_storable(key, value, max_size=MAX_KEPT_SIZE)
            elif key in _KNOWN_KEYS:
                check_storable(key, value)
            else:
                unknown_budget -= check_storable(key, value, max_size=MAX_KEPT_SIZE) + len(key)
                if unknown_budget < 0:
                    raise FactValidationError(
                        key,
                        Withheld("too large"),
                        f"expected the fields deermem does not know to hold at most "
                        f"{MAX_KEPT_SIZE:,} characters (and values) together",
                    )
        content = _content(data.get("content"))
        category, extension, stale_extension = _category(data)
        created = _timestamp(data, "createdAt")
        if created is None:
            created = "" if now is None else format_timestamp(now)
        updated = _timestamp(data, "updatedAt") or created
        consolidated_from = _string_list(data, "consolidatedFrom")
        consolidated_at = _timestamp(data, "consolidatedAt")
        if consolidated_from and consolidated_at is None:
            consolidated_at = updated
        extra = {
            key: value
            for key, value in data.items()
            if key not in _KNOWN_KEYS and key not in _SCOPE_KEYS
        }
        if stale_extension is not None:
            extra["categoryExtension"] = stale_extension
        for name in ("lastConfirmedAt", "consolidatedAt"):
            stored = data.get(name)
            if isinstance(stored, str) and not stored.strip():
                extra[name] = stored  # blank: read as absent, written back as it was
        return cls(
            id=check_fact_id(data.get("id")),
            content=content,
            title=_title(data.get("title"), content),
            category=category,
            categoryExtension=extension,
            confidence=_confidence(data.get("confidence", 0.5)),
            status=_status(data.get("status", "active")),
            schemaVersion=FACT_SCHEMA_VERSION,
            source=FactSource.from_value(data.get("source")),
            scope=_scope(data.get("scope")),
            topics=_string_list(data, "topics"),
            createdAt=created,
            updatedAt=updated,
            revision=_revision(data.get("revision", 1)),
            lastConfirmedAt=_timestamp(data, "lastConfirmedAt"),
            confirmationCount=_confirmation_count(data.get("confirmationCount")),
            consolidatedFrom=consolidated_from,
            consolidatedAt=consolidated_at,
            sourceError=data.get("sourceError"),
            expected_valid_days=data.get("expected_valid_days"),
            # Read-only: facts are shared (e.g. from a store's cache), never copied.
            extra=MappingProxyType(extra),
            key_order=_canonical_order(key for key in data if key not in _SCOPE_KEYS),
        )

    def to_dict(self) -> dict[str, object]:
        """The canonical mapping, in the fact's key order (``scope``, ``content`` and
        ``title`` last, as a file gives them back), unset optional fields omitted.

        ``topics`` and ``consolidatedFrom`` are always there (as lists), as the
        original writes them. ``from_dict(fact.to_dict()) == fact`` holds for
        every valid fact, key order included.
        """
        values: dict[str, object] = {
            "id": self.id,
            "content": self.content,
            "category": self.category,
            "categoryExtension": self.categoryExtension,
            "confidence": self.confidence,
            "status": self.status,
            "schemaVersion": self.schemaVersion,
            "source": self.source.to_dict(),
            "scope": None if self.scope is None else self.scope.to_dict(),
            "topics": list(self.topics),
            "createdAt": self.createdAt,
            "updatedAt": self.updatedAt,
            "revision": self.revision,
            "lastConfirmedAt": self.lastConfirmedAt,
            "confirmationCount": self.confirmationCount,
            "consolidatedFrom": list(self.consolidatedFrom),
            "consolidatedAt": self.consolidatedAt,
            "sourceError": self.sourceError,
            "expected_valid_days": self.expected_valid_days,
            "title": self.title,
        }
        out: dict[str, object] = {}
        for key in (*self.key_order, *_DEFAULT_ORDER, *self.extra):
            if key in out:
                continue
            value = values.get(key)
            if value is not None:
                out[key] = value
            elif key in self.extra:
                out[key] = self.extra[key]
        return out

    def get(self, key: str, default: object = None) -> object:
        """The value stored under ``key`` (a field name or an extra key), else ``default``.

        Reads a fact the way one reads its canonical mapping, so code that
        accepts both — the capacity policies do — reads them alike, without
        converting a fact to a dict. Values are returned as the fact holds
        them (``source`` as a :class:`FactSource`, ``topics`` as a tuple);
        an unset optional field gives ``default``, as its absent key would.
        """
        value = getattr(self, key) if key in _KNOWN_KEYS else self.extra.get(key)
        return default if value is None else value

    def heading(self) -> str:
        """The Markdown heading: the explicit title, else the first content line.

        The first line is what :meth:`str.splitlines` gives, cut to 160
        characters and stripped (see :func:`derived_heading`).
        """
        return self.title if self.title else derived_heading(self.content)

    def replace(self, **changes: object) -> Fact:
        """Return a copy with fields changed, re-validated through :meth:`from_dict`.

        A field that was unset and is set now goes after the fact's other keys
        (before the :data:`BODY_KEYS`, which stay last).
        """
        data = self.to_dict()
        for key, value in changes.items():
            if key in ("extra", "key_order"):
                raise TypeError(f"change extra keys by name, not through {key!r}")
            data[key] = value.to_dict() if isinstance(value, FactSource | FactScope) else value
        return Fact.from_dict(data)

    def with_scope(self, scope: FactScope) -> Fact:
        """The fact in ``scope``: what ``replace(scope=scope)`` returns, key order included.

        Nothing is checked again: the other fields were checked when the fact
        was built (``from_dict(fact.to_dict()) == fact``), and a scope holds
        no text a fact's rules apply to — a store sets it from its own
        :class:`Scope`, on every fact it writes, so it is not built twice.
        """
        if self.scope == scope:
            return self
        # The scope's place in the key order is fixed (BODY_KEYS): it does not move.
        return dataclasses.replace(self, scope=scope)


def derived_heading(content: str) -> str:
    """The heading a fact without a title gets: its first line, cut to 160, stripped.

    As the original DeerMem writes it: the first of :meth:`str.splitlines`
    (which also breaks at U+2028, U+0085 ...). Stripped after the cut too, so
    the heading read back from a file is the heading derived from its content.
    """
    lines = content.splitlines()
    return (lines[0].strip() if lines else "")[:MAX_TITLE_LENGTH].rstrip()


def is_fact_id(value: object) -> TypeGuard[str]:
    """Whether ``value`` follows the fact-id rule: ``[A-Za-z0-9_-]``, 1 to 250 characters.

    A store asks before it names a file or a row by an id it was given: any
    other string can be no fact's (and a longer one no file's) id.
    """
    return (
        isinstance(value, str)
        and len(value) <= MAX_FACT_ID_LENGTH
        and FACT_ID_PATTERN.fullmatch(value) is not None
    )


def check_fact_id(value: object) -> str:
    """Apply the fact-id rule (:func:`is_fact_id`); return the id unchanged.

    Raises:
        FactValidationError: the field ``id`` breaks the rule.
    """
    if not is_fact_id(value):
        raise FactValidationError(
            "id",
            value,
            f"expected a non-empty string of letters, digits, '_' or '-' "
            f"of at most {MAX_FACT_ID_LENGTH} characters",
        )
    return value


def _content(value: object) -> str:
    if not isinstance(value, str):
        raise FactValidationError("content", value, "expected a string")
    text = value.strip()
    if not text:
        raise FactValidationError("content", value, "expected text that is not blank")
    return text


_LINE_BREAK_TABLE: Final = dict.fromkeys(map(ord, LINE_BREAKS), " ")


def _title(value: object, content: str) -> str | None:
    """An explicit title on one line, cut to 160; none when it is the derived heading."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise FactValidationError("title", value, "expected a string")
    text = value.translate(_LINE_BREAK_TABLE).strip()[:MAX_TITLE_LENGTH].strip()
    if not text or text == derived_heading(content):
        return None
    return text


def _category(data: Mapping[str, object]) -> tuple[str, str | None, object]:
    """``(category, own label, a categoryExtension beside a core category)``.

    A stored ``categoryExtension`` names an ``other`` fact's own label (and
    wins over the label a non-core category gives, as in the original); one
    beside a core category is returned third, to be kept as it is.
    """
    value = data.get("category", "")
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise FactValidationError("category", value, "expected a string")
    category, extension = canonical_category(value)
    stored = data.get("categoryExtension")
    if category != "other":
        return category, None, stored
    if stored is not None and not isinstance(stored, str):
        raise FactValidationError("categoryExtension", stored, "expected a string")
    return category, stored or extension, None


def _confidence(value: object) -> float:
    allowed = "expected a number between 0 and 1"
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise FactValidationError("confidence", value, allowed)
    number = float(value)
    if not math.isfinite(number) or not 0.0 <= number <= 1.0:
        raise FactValidationError("confidence", value, allowed)
    return number


def _status(value: object) -> Literal["active"]:
    if value != "active":
        raise FactValidationError("status", value, "only 'active' is allowed")
    return "active"


def _scope(value: object) -> FactScope | None:
    if value is None:
        return None
    if isinstance(value, FactScope):
        return value
    allowed = "expected a mapping with 'userId' (string or null) and 'agentName' (string)"
    if not isinstance(value, Mapping):
        raise FactValidationError("scope", value, allowed)
    user_id = value.get("userId")
    agent = value.get("agentName")
    if (user_id is not None and not isinstance(user_id, str)) or not isinstance(agent, str):
        raise FactValidationError("scope", value, allowed)
    return FactScope(userId=user_id, agentName=agent)


def _string_list(data: Mapping[str, object], name: str) -> tuple[str, ...]:
    value = data.get(name)
    if value is None:
        return ()
    if isinstance(value, list | tuple) and all(isinstance(item, str) for item in value):
        return tuple(value)
    raise FactValidationError(name, value, "expected a list of strings")


def _timestamp(data: Mapping[str, object], name: str) -> str | None:
    """A timestamp as stored; ``None`` when missing or blank (blank reads as absent)."""
    value = data.get(name)
    if isinstance(value, datetime):
        return format_timestamp(value)
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if not isinstance(value, str):
        raise FactValidationError(name, value, "expected an ISO 8601 timestamp string")
    return value


def _revision(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_WHOLE_NUMBER:
        raise FactValidationError(
            "revision", value, f"expected a whole number from 1 to {MAX_WHOLE_NUMBER}"
        )
    return value


def _confirmation_count(value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise FactValidationError(
            "confirmationCount", value, "expected a whole number of at least 1"
        )
    return value


def next_confirmation_count(prior: object) -> int:
    """The count after one more confirmation: ``prior + 1``, or 1 when ``prior``
    is not a non-negative whole number (``3`` → 4, ``0`` → 1; ``True``, ``-1``,
    ``"3"``, ``None`` → 1)."""
    if isinstance(prior, bool) or not isinstance(prior, int) or prior < 0:
        return 1
    return prior + 1


# ---------------------------------------------------------------------------
# Scopes and the identifiers that name them, and their directory names
#
# A *scope* is one user's memory for one agent. User ids come from whoever
# calls deermem (an HTTP path, a token, a CLI flag) and agent names from
# configuration, so neither is trusted. Every store takes its scopes from
# :meth:`Scope.of`, so the rules below hold on the Markdown store and on
# PostgreSQL alike, and for the command line, HTTP and MCP, which reach the
# stores through the library:
#
# * a **user id** (:func:`check_user_id`) is any non-empty, valid Unicode
#   string of at most 1,024 bytes in UTF-8 without a control character (Unicode
#   category Cc: NUL, tab, line feed, carriage return ...) or a bidirectional
#   control (U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069), which would
#   let one id be shown as another in a listing, a log or a terminal;
# * an **agent name** (:func:`normalise_agent`) is letters, digits and ``-``
#   (lower-cased; at most 1,024 characters, any length the original DeerMem
#   could store), or the reserved ``__default__`` bucket.
#
# The Markdown store names a directory after each, and that mapping is
# one-to-one by construction, whatever the spelling of an id:
#
# * :func:`safe_user_id` keeps an id as its directory name only when it is
#   made of ``[A-Za-z0-9_-]``, is at most 120 characters long and does not end
#   the way a derived name ends (``-`` and 16 lowercase hex digits); every
#   other id gets a derived name, its safe characters and ``-`` and 16 hex
#   digits of its SHA-256 (``alice@example.com`` →
#   ``alice-example-com-ff8d9819fc0e12bf``, as in the original). A kept name
#   never ends like a derived one and a derived one always does, so no id can
#   take another's directory by being spelled as its derived name — the
#   original keeps such an id as it is, which is how it lets one user into
#   another's directory.
# * :func:`agent_directory` keeps a name of at most 254 characters as it is
#   (the original's directory, lower-cased); a longer name gets a 255-character
#   name: its first 190 characters, ``-`` and the 64 hex digits of its
#   SHA-256. Kept names are shorter than every derived one, so they never meet.
# ---------------------------------------------------------------------------

DEFAULT_AGENT: Final = "__default__"
MAX_AGENT_NAME_LENGTH: Final = 1024
"""Longest agent name: beyond any name the original stores (255 bytes, a file
name's limit), and short enough for PostgreSQL to keep it in an index key
beside a user id and a fact id."""
MAX_USER_ID_BYTES: Final = 1024
"""Longest user id, in UTF-8 bytes (PostgreSQL keys it in a B-tree index)."""

_SAFE_CHARS: Final = re.compile(r"[^A-Za-z0-9_-]")
_AGENT_NAME: Final = re.compile(r"[a-z0-9-]+")
# Control characters (C0, DEL, C1: Unicode category Cc) and the bidirectional
# controls: embeddings, overrides, isolates and the three marks.
_REFUSED: Final = "\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_NOT_IN_AN_ID: Final = re.compile(f"[{_REFUSED}]")
USER_ID_PATTERN: Final = f"^[^{_REFUSED}]+$"
"""The characters of the rule as a JSON Schema pattern (the HTTP API documents user ids so)."""
# How a derived directory name ends: an id that ends so is never kept as it is.
_DERIVED_SUFFIX: Final = re.compile(r"-[0-9a-f]{16}\Z")
# Names stay well inside the 255-byte limit of common file systems.
_MAX_SAFE_USER_LENGTH: Final = 120
_KEPT_PREFIX: Final = 64
# An agent directory name: kept up to 254 characters; derived ones are exactly 255.
_MAX_KEPT_AGENT_DIRECTORY: Final = 254
_AGENT_PREFIX: Final = 190
_DERIVED_AGENT_DIRECTORY: Final = re.compile(r"[a-z0-9-]{190}-[0-9a-f]{64}")


def check_user_id(raw: object) -> str:
    """Apply the one rule for user ids (see the module docstring); return the id unchanged.

    Raises:
        UnsafeIdentifierError: not a non-empty string, not valid Unicode (an
            undecodable byte), a control or bidirectional control character
            (the error names it and its position), or over 1,024 bytes.
    """
    if not isinstance(raw, str) or not raw:
        raise UnsafeIdentifierError("user id", raw, "expected a non-empty string")
    try:
        check_storable("user id", raw)
    except InvalidTextError as error:
        raise UnsafeIdentifierError("user id", raw, error.allowed) from None
    found = _NOT_IN_AN_ID.search(raw)
    if found is not None:
        char = ord(found.group())
        kind = "control character" if char <= 0x9F else "bidirectional control"
        raise UnsafeIdentifierError(
            "user id", raw, f"no {kind} (U+{char:04X} at position {found.start()})"
        )
    if len(raw.encode("utf-8")) > MAX_USER_ID_BYTES:
        raise UnsafeIdentifierError("user id", raw, f"at most {MAX_USER_ID_BYTES} bytes in UTF-8")
    return raw


def shown_user_id(user_id: str) -> str:
    r"""A user id as a listing shows it to a person: what cannot be seen is written out.

    The id rule refuses control and bidirectional characters, but keeps the
    other invisible ones (format characters such as U+200B, line and
    paragraph separators, spaces other than U+0020): ids in the wild hold
    them, in names of scripts that need a joiner, so a store may too. Shown
    as they are, ``admin`` and ``ad\u200bmin`` read alike in a table; written
    as ``\uXXXX`` they never do. A backslash is shown doubled, so a
    written-out character cannot be faked by typing one. JSON needs none of
    this: it keeps ids exact.
    """
    return "".join(_shown_char(char) for char in user_id)


def _shown_char(char: str) -> str:
    if char == "\\":
        return "\\\\"
    if char != " " and unicodedata.category(char) in _INVISIBLE_CATEGORIES:
        return f"\\u{ord(char):04x}" if ord(char) <= 0xFFFF else f"\\U{ord(char):08x}"
    return char


_INVISIBLE_CATEGORIES: Final = frozenset({"Cf", "Zl", "Zp", "Zs"})


def safe_user_id(raw: object) -> str:
    """The directory name of a user id: ``[A-Za-z0-9_-]`` only, and no other id's.

    An id made of those characters, at most 120 long and not ending in ``-``
    and 16 lowercase hex digits is its own name; any other id becomes its
    safe characters (every other character replaced by ``-``; the first 64
    when that would exceed 120 characters), ``-`` and the first 16 hex
    digits of its SHA-256 (``alice@example.com`` →
    ``alice-example-com-ff8d9819fc0e12bf``, as in the original). Kept names
    and derived names never meet, so two ids share a name only if their
    digests do.

    Raises:
        UnsafeIdentifierError: the id breaks the rule of :func:`check_user_id`.
    """
    user_id = check_user_id(raw)
    safe = _SAFE_CHARS.sub("-", user_id)
    if is_kept_user_id(user_id):
        return safe
    digest = hashlib.sha256(user_id.encode("utf-8")).hexdigest()[:16]
    if len(safe) + 17 > _MAX_SAFE_USER_LENGTH:
        safe = safe[:_KEPT_PREFIX]
    return f"{safe}-{digest}"


def is_kept_user_id(user_id: str) -> bool:
    """Whether a (valid) user id is its own directory name under :func:`safe_user_id`."""
    return (
        len(user_id) <= _MAX_SAFE_USER_LENGTH
        and _SAFE_CHARS.search(user_id) is None
        and _DERIVED_SUFFIX.search(user_id) is None
    )


def was_kept_user_id(user_id: str) -> bool:
    """Whether earlier versions (and the original) kept this id as its own directory name,
    where :func:`safe_user_id` no longer does: safe characters, ending like a derived name.

    Such a user's data may sit in ``users/<id>``, which is now the derived
    name of another id; the Markdown store moves it to the user's own name.
    """
    return (
        len(user_id) <= _MAX_SAFE_USER_LENGTH
        and _SAFE_CHARS.search(user_id) is None
        and _DERIVED_SUFFIX.search(user_id) is not None
    )


def normalise_agent(name: str | None) -> str:
    """The bucket name for an agent: lower-cased, or ``__default__`` when omitted.

    ``Lead-Agent``, ``lead-agent`` and ``LEAD-AGENT`` name one bucket.

    Raises:
        UnsafeIdentifierError: anything but letters, digits and ``-`` (or the
            exact ``__default__``), an empty name, or more than 1,024 characters.
    """
    if name is None:
        return DEFAULT_AGENT
    if not isinstance(name, str):
        raise UnsafeIdentifierError("agent name", name, "expected a string")
    if name == DEFAULT_AGENT:
        return name
    lowered = name.lower()
    if not _AGENT_NAME.fullmatch(lowered) or not name.isascii():
        raise UnsafeIdentifierError(
            "agent name", name, f"use letters, digits and '-' only, or {DEFAULT_AGENT!r}"
        )
    if len(lowered) > MAX_AGENT_NAME_LENGTH:
        raise UnsafeIdentifierError(
            "agent name", name, f"at most {MAX_AGENT_NAME_LENGTH} characters"
        )
    return lowered


def is_bucket(name: str) -> bool:
    """Whether ``name`` is an agent bucket name as :func:`normalise_agent` returns them."""
    try:
        return normalise_agent(name) == name
    except UnsafeIdentifierError:
        return False


def agent_directory(agent: str) -> str:
    """The directory name of an agent bucket (a name :func:`normalise_agent` returned).

    A name of at most 254 characters is its own directory, as in the
    original; a longer one, which no file system takes as a name whole, is
    its first 190 characters, ``-`` and its SHA-256 in hex: 255 characters,
    longer than any kept name. The directory's owner record holds the name
    (see :mod:`deermem.store.markdown.files`).
    """
    if len(agent) <= _MAX_KEPT_AGENT_DIRECTORY:
        return agent
    digest = hashlib.sha256(agent.encode("ascii")).hexdigest()
    return f"{agent[:_AGENT_PREFIX]}-{digest}"


def is_derived_agent_directory(name: str) -> bool:
    """Whether ``name`` has the shape of a derived agent directory (:func:`agent_directory`)."""
    return _DERIVED_AGENT_DIRECTORY.fullmatch(name) is not None


@dataclass(frozen=True, slots=True)
class Scope:
    """One user's memory for one agent. Build it with :meth:`of`, which validates.

    Attributes:
        user_id: the raw user id as given (stored in each fact), or ``None``
            for the single-user layout.
        agent: the normalised agent bucket name.
    """

    user_id: str | None
    agent: str

    @classmethod
    def of(cls, user_id: str | None, agent: str | None = None) -> Scope:
        """Validate a user id and an agent name into a scope.

        Raises:
            UnsafeIdentifierError: either breaks its rule (module docstring).
        """
        if user_id is not None:
            check_user_id(user_id)
        return cls(user_id=user_id, agent=normalise_agent(agent))

    def __str__(self) -> str:
        user = "(no user)" if self.user_id is None else repr(self.user_id)
        return f"user {user}, agent {self.agent!r}"


def listing_order(user_id: str | None) -> tuple[bool, str]:
    """The key users are listed by on every store: the single-user layout (``None``)
    first, then the user ids by code point (Python's ``str`` order).

    Neither a directory's name (which the Markdown store derives from the
    id) nor a database's collation (which differs between two databases
    holding the same rows) may decide it: the same memory lists the same on
    every store, and after ``deermem migrate``. Agents are listed by code
    point too (``sorted``).
    """
    return (user_id is not None, user_id or "")


# ---------------------------------------------------------------------------
# Queued conversations: their key and what a flush of the queue achieved
#
# Defined here, below the learning pipeline, so that closing a memory that never
# learned (Memory.close) can report an empty flush without loading the pipeline.

WatermarkKey = tuple[str, str | None, str]
"""``(thread_id, user_id, agent)``."""


class QueueKey(NamedTuple):
    """What makes two queued conversations the same item."""

    thread_id: str
    user_id: str | None
    agent: str
    emergency: bool = False

    @property
    def watermark_key(self) -> WatermarkKey:
        return (self.thread_id, self.user_id, self.agent)


@dataclass(frozen=True, slots=True)
class FlushReport:
    """What a flush achieved.

    Attributes:
        completed: every item was attempted within the time budget.
        processed: items processed successfully (or with nothing new) by the flush.
        failed: items attempted whose processing failed or raised.
        unflushed: items not processed in time: still queued, or still
            running (after a shutdown, the one item that finishes; nothing
            else is started).
    """

    completed: bool
    processed: int = 0
    failed: tuple[QueueKey, ...] = ()
    unflushed: tuple[QueueKey, ...] = ()

    @property
    def ok(self) -> bool:
        """Completed in time with no failure: nothing admitted was lost."""
        return self.completed and not self.failed and not self.unflushed


# ---------------------------------------------------------------------------
# The JSON form of records
#
# A record reaches the CLI's --json, the HTTP API and the MCP tools in one form,
# written by one function: pydantic's dump of the record (a model, or a dataclass
# that states its pydantic config), camelCase keys. A record whose form is its
# file's (a fact, a receipt) keeps that form and describes it to pydantic with an
# annotation (:data:`FactJson`), so the schemas show it without a second writer.
# ---------------------------------------------------------------------------


WIRE_CONFIG: Final = ConfigDict(
    frozen=True,
    alias_generator=to_camel,
    validate_by_name=True,
    validate_by_alias=True,
    serialize_by_alias=True,
)
"""What every result and input model shares: frozen, snake_case in Python, camelCase on the
wire (either name accepted on the way in)."""

# defer_build: a result's validator is built when it is first used, not when deermem is
# imported (a command that lists facts uses none of them).
RESULT_CONFIG: Final = ConfigDict(**WIRE_CONFIG, defer_build=True)
"""The config of a result model: :data:`WIRE_CONFIG`, built on first use."""


class NotJsonNumber(ValueError):
    """A document holds ``NaN``, ``Infinity`` or ``-Infinity``.

    Python's JSON reader takes these words; JSON has no such numbers (RFC
    8259), no answer can carry them, and PostgreSQL's ``jsonb`` refuses them.
    Let into a fact's unknown keys or a summary section, one made every later
    read of it fail. What a person sends (a request body, an imported
    document) is read with them refused (:func:`refuse_json_constant`).
    """

    def __init__(self, word: str) -> None:
        self.word = word
        super().__init__(f"{word} is not a JSON number (RFC 8259); write a number or null")


def refuse_json_constant(word: str) -> object:
    """``json.loads``' ``parse_constant``: refuse ``NaN`` and the infinities."""
    raise NotJsonNumber(word)


def parse_json(data: str | bytes, *, strict_numbers: bool = False) -> Any:
    """``json.loads``, with a document nested past the decoder's depth refused as malformed.

    CPython's decoder recurses once per list or object and raises
    ``RecursionError`` past the interpreter's limit, and a file, a variable
    or a request can nest that deep on purpose. Every reader of JSON from
    outside calls this, so such a document is the malformed input it is —
    a ``json.JSONDecodeError``, reported as any other — never a traceback.
    With ``strict_numbers``, ``NaN`` and the infinities raise
    :class:`NotJsonNumber`; a store's own files are read as the original
    DeerMem wrote them, which may hold them.
    """
    try:
        return json.loads(data, parse_constant=refuse_json_constant if strict_numbers else None)
    except RecursionError:
        raise json.JSONDecodeError("lists and objects nested too deeply", "", 0) from None


class RepeatedYamlKey(yaml.YAMLError):
    """A YAML mapping holds one key twice (PyYAML alone would keep the last value).

    Attributes:
        key: the repeated key.
        line: the line of its second appearance (1-based).
    """

    def __init__(self, key: object, line: int) -> None:
        self.key = key
        self.line = line
        super().__init__(f"the key {preview(key)} appears twice (again on line {line})")


_SAFE_LOADER: Final[Any] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _construct_mapping(loader: Any, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    """The safe loader's mapping, refusing a key given twice.

    PyYAML keeps the last value of a repeated key without a word, so a hand
    edit that adds a line instead of changing one would change a fact or a
    setting silently. The check is on the hot path of every cold load of a
    fact, so it costs an identity test and a length comparison per mapping:
    the loader deletes merge keys (``<<``) from the node's own list in place
    and, when it merges anything, gives the node a new list; so while the
    list is the same object, a mapping shorter than it means a repeated key.
    Only then, or after a merge, are the node's own keys looked at (each
    already constructed, so from the loader's memo); a merged key that an own
    key overrides is what merging is for, not a repetition.
    """
    pairs = node.value  # after the call: the node's own pairs, merge keys removed
    count = len(pairs)
    mapping: dict[Any, Any] = _SAFE_LOADER.construct_mapping(loader, node, deep)
    if node.value is pairs and len(mapping) == count:
        return mapping
    seen: set[object] = set()
    for key_node, _ in pairs:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise RepeatedYamlKey(key, key_node.start_mark.line + 1)
        seen.add(key)
    return mapping


class YamlAliasError(yaml.YAMLError):
    """A YAML document repeats a value by an alias (``*name``, a merge ``<<: *name`` too).

    Aliases are refused in every YAML file deermem reads. None of its files
    needs one — neither deermem nor the original DeerMem writes them — and
    nine lines of aliases, each repeating the one before ten times, stand for
    a billion values: anything that walks the value (a copy, a size check, an
    error's ``repr``) would spend minutes and gigabytes on a file of 800 bytes.

    Attributes:
        line: the line where the repeated value starts, at its anchor (1-based).
    """

    def __init__(self, line: int) -> None:
        self.line = line
        super().__init__(
            f"the value anchored on line {line} is repeated by an alias (*name), "
            "which is not read: write each value out"
        )


def _init_loader(loader: Any, stream: object) -> None:
    _SAFE_LOADER.__init__(loader, stream)
    # Without a '*' there is no alias, and the walk below is skipped.
    loader.may_alias = not isinstance(stream, str) or "*" in stream


def _get_single_data(loader: Any) -> object:
    """The safe loader's document, refusing an alias before anything is constructed.

    The composed document shares a node wherever an alias repeats it, so a
    walk that meets a node twice has found one. Each node is visited at most
    once, so the walk costs what the text's nodes number, however much the
    aliases would have multiplied them.
    """
    node = loader.get_single_node()
    if node is None:
        return None
    if loader.may_alias:
        seen: set[int] = set()
        stack = [node]
        while stack:
            item = stack.pop()
            if id(item) in seen:
                raise YamlAliasError(item.start_mark.line + 1)
            seen.add(id(item))
            if isinstance(item, yaml.MappingNode):
                stack.extend(part for pair in item.value for part in pair)
            elif isinstance(item, yaml.SequenceNode):
                stack.extend(item.value)
    return loader.construct_document(node)


YAML_LOADER: Final[Any] = type(
    "StrictSafeLoader",
    (_SAFE_LOADER,),
    {
        "__init__": _init_loader,
        "construct_mapping": _construct_mapping,
        "get_single_data": _get_single_data,
    },
)
"""The loader of every YAML file deermem reads (``yaml.load(text, Loader=YAML_LOADER)``):
libyaml's safe loader when PyYAML has it, refusing a repeated key
(:class:`RepeatedYamlKey`) and an alias (:class:`YamlAliasError`). Made with
``type()`` because the C loader may be absent."""


def yaml_problem(error: yaml.YAMLError) -> str:
    """A YAML error in one line: where (``line N, column M``) and what, as TOML's are.

    PyYAML's own text spans several lines, quotes the input as ``"<unicode
    string>"`` and points at it with a caret; an error message names the file
    itself and must fit on one line.
    """
    if isinstance(error, yaml.MarkedYAMLError) and error.problem_mark is not None:
        mark = error.problem_mark
        text = f"line {mark.line + 1}, column {mark.column + 1}: {error.problem}"
        if error.context is not None and error.context_mark is not None:
            start = error.context_mark
            where = f"line {start.line + 1}, column {start.column + 1}"
            text += f" ({error.context} that starts on {where})"
        elif error.context is not None:
            text += f" ({error.context})"
        return text
    return " ".join(str(error).split())


@functools.cache
def _adapter(kind: Any) -> TypeAdapter[Any]:
    return TypeAdapter(kind)


def to_json(value: object, kind: Any = None, *, exclude: set[str] | None = None) -> Any:
    """``value`` as JSON-ready data in its wire form (camelCase keys).

    Args:
        value: a result model, a list of them, or any value of ``kind``.
        kind: the type to write ``value`` as, for a record that describes its
            JSON form to pydantic without being a model (the injection
            manifest, the server's limits, ``list[ReceiptJson]`` ...).
        exclude: fields to leave out (their Python names).
    """
    if kind is None:
        return to_jsonable_python(value, exclude=exclude)
    return _adapter(kind).dump_python(value, mode="json", exclude=exclude)


class WireForm:
    """Annotation metadata: a record of a lower layer on the wire, in its own JSON form.

    ``Annotated[Fact, WireForm(Fact.to_dict, FactOut)]`` takes a :class:`Fact`
    as it is (it was validated where it was built; anything else is refused
    with "expected a Fact"), writes it with ``dump`` and shows ``model``'s JSON
    schema. The core schema is made of these three alone: pydantic's
    ``PlainValidator`` and ``PlainSerializer`` would each first build a schema of
    the record's class itself (a dataclass of many fields), only to replace it.
    """

    __slots__ = ("dump", "model")

    def __init__(self, dump: Callable[[Any], object], model: type[BaseModel]) -> None:
        self.dump = dump
        self.model = model

    def __get_pydantic_core_schema__(
        self, source_type: Any, handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        kind: type[Any] = source_type

        def same(value: object) -> Any:
            if isinstance(value, kind):
                return value
            raise ValueError(f"expected a {kind.__name__}")

        return core_schema.no_info_plain_validator_function(
            same,
            serialization=core_schema.plain_serializer_function_ser_schema(
                self.dump, info_arg=False, return_schema=core_schema.any_schema()
            ),
            json_schema_input_schema=core_schema.any_schema(),
        )

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return handler(self.model.__pydantic_core_schema__)


class FactOut(BaseModel):
    """A stored fact with every field (content included: it is the caller's memory).

    The description of :data:`FactJson`: keys are the stored format's; fields
    a fact does not set are left out, and keys deermem does not know are kept.
    An MCP tool answers with it directly (:meth:`of`), as the SDK publishes
    only models.
    """

    model_config = ConfigDict(defer_build=True, extra="allow")

    id: str
    content: str
    category: str
    categoryExtension: str | None = Field(
        None, description="the label of an `other` fact, as given"
    )
    confidence: float
    topics: list[str] = []
    createdAt: str
    updatedAt: str
    lastConfirmedAt: str | None = None
    revision: int = Field(description="grows with every change; pass it as expected_revision")

    @classmethod
    def of(cls, fact: Fact) -> FactOut:
        """The fact in its stored form, every key kept."""
        return cls.model_validate(fact.to_dict())

    # Unannotated on purpose: pydantic takes a serializer's return annotation for the
    # serialization schema, and without one keeps this model's (the tools' output schema).
    @model_serializer(mode="wrap")
    def _as_stored(self, handler: SerializerFunctionWrapHandler):  # type: ignore[no-untyped-def]
        """Keys the fact does not set stay out, as in its stored form and in :data:`FactJson`:
        an MCP tool's fact has the keys the CLI's and the HTTP API's have, no ``null`` more."""
        known = type(self).model_fields
        return {
            k: v for k, v in handler(self).items() if k in self.model_fields_set or k not in known
        }


FactJson = Annotated[Fact, WireForm(Fact.to_dict, FactOut)]
"""A :class:`Fact` on the wire: its stored form, every field."""


# ---------------------------------------------------------------------------
# Secrets: the text a memory keeps never holds a credential
#
# Secret redaction: the text a memory keeps never holds a credential.
#
# People paste credentials into chats ("here's my token: ghp_…"), and a memory
# that learns from chats would otherwise keep them verbatim, in files, indexes,
# exports and prompts, for years. :func:`redact` replaces each secret it finds
# by ``[redacted: KIND]`` before anything is written, and says which kinds it
# found — never the value — so a write's result (and a receipt) can report that
# a redaction happened.
#
# What counts as a secret is a fixed table of shapes (:data:`KINDS`), chosen for
# precision: a memory is mostly prose, code identifiers, ids, hashes, times and
# numbers, and each of those must pass unchanged, because a false positive
# destroys a fact the user wanted kept. So:
#
# * provider keys are recognised by their documented prefix (``ghp_``,
#   ``sk-ant-``, ``AKIA`` …) followed by a body that looks random (it mixes
#   letters and digits or letter cases), so ``ghp_`` in a sentence about
#   GitHub, or a kebab-case identifier after ``sk-``, is left alone;
# * assignments (``password=…``, ``"password": "…"``, ``Authorization: …``,
#   ``aws_secret_access_key = …``, a password in a URL) lose their value and keep
#   their key, so the fact still says *what* was there; obvious placeholders
#   (``${DB_PASSWORD}``, ``<token>``, ``****``, a type annotation, a variable)
#   are not values and stay;
# * a payment card is 13 to 19 digits, in one run or in groups separated by
#   single spaces or dashes, that start like a card network's numbers, have
#   that network's length and pass the Luhn check — dates, phone numbers,
#   timestamps and ids fail one of these; the public test numbers of card
#   networks' documentation (``4242 4242 4242 4242``) are not secrets;
# * a PEM private key goes as a whole block, armour lines included;
# * invisible format characters (a zero-width space, a soft hyphen) inside a
#   secret do not hide it: the rules read the text without them.
#
# Whatever is not in the table passes: a secret of a shape the table does not
# know (a password said in prose, a key of an unlisted provider) is a known
# miss, listed in the privacy documentation. The function is pure and
# deterministic: the same text gives the same result, byte for byte, and
# redacting a redacted text changes nothing.
# ---------------------------------------------------------------------------

KINDS: Final = (
    "anthropic-key",
    "aws-access-key",
    "bearer-token",
    "github-token",
    "gitlab-token",
    "google-api-key",
    "jwt",
    "npm-token",
    "openai-key",
    "password",
    "payment-card",
    "private-key",
    "slack-token",
    "stripe-key",
)
"""Every kind :func:`redact` reports, sorted; the names are stable (they are
written in results and receipts)."""


class Redaction(NamedTuple):
    """The text with every secret replaced, and what was replaced.

    Attributes:
        text: the text, each secret replaced by ``[redacted: KIND]``;
            the input itself (the same object) when nothing was found.
        kinds: the distinct kinds replaced, sorted; empty when none.
    """

    text: str
    kinds: tuple[str, ...]


def marker(kind: str) -> str:
    """The text that stands where a secret of ``kind`` was."""
    return f"[redacted: {kind}]"


# What a secret looks like.

# A match's secret is its group named ``secret`` (or ``secret2`` … when a rule
# has alternatives), else the whole match. A check, when a rule has one, sees
# that secret and may refuse it (a placeholder, a body that is not random).
_Check = Callable[[str], bool]


class _Rule(NamedTuple):
    kind: str
    pattern: re.Pattern[str]
    check: _Check | None = None


def _classes(token: str) -> int:
    """How many of digits, lower-case and upper-case letters ``token`` holds."""
    return (
        any(c.isdigit() for c in token)
        + any(c.islower() for c in token)
        + any(c.isupper() for c in token)
    )


def _random(token: str) -> bool:
    # A generated key's body mixes at least two of digits, lower and upper
    # case (a 20-character base62 body lacks two of them with probability
    # below 1e-7); a word, an identifier or a placeholder rarely does.
    return _classes(token) >= 2


def _very_random(token: str) -> bool:
    # For a prefix as short and common as ``sk-``: all three classes.
    return _classes(token) == 3


# The patterns below are only ever used while redacting: they are kept as text
# and compiled on first use (by _rules(), or by re's own cache), not at import.
_OPENAI_TYPED: Final = r"sk-(?:proj|svcacct|admin|None)-"


def _openai_check(token: str) -> bool:
    # ``sk-proj-…`` and its kin name their type; a bare ``sk-…`` is a short,
    # common prefix, so its body must hold all three classes.
    typed = re.match(_OPENAI_TYPED, token)
    return _random(token[typed.end() :]) if typed else _very_random(token[3:])


def _random_after(prefix: str) -> _Check:
    """A check that the body after ``prefix`` (a regex) looks random: the
    prefix, with its letters and version digits, is no evidence."""
    pattern = re.compile(prefix)

    def check(token: str) -> bool:
        found = pattern.match(token)
        return _random(token[found.end() if found else 0 :])

    return check


# Left edge of a token: not glued to a letter or digit before it.
_EDGE: Final = r"(?<![A-Za-z0-9])"
# The characters of a token after its prefix; the quantifiers are greedy, so a
# token is taken to its end and no tail of it stays in the text.
_T: Final = r"[A-Za-z0-9_\-]"

_PEM_BEGIN: Final = r"-{4,5} ?BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)? ?-{4,5}"
_PEM_END: Final = r"-{4,5} ?END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)? ?-{4,5}"
_PRIVATE_KEY: Final = (
    _PEM_BEGIN
    + "(?:"
    # The whole block, up to its end line (never across another block's start) ...
    + rf"(?:(?!-{{4,5}} ?BEGIN )[\s\S])*?{_PEM_END}"
    # ... or, when the paste was cut, the armour headers and base64 lines that
    # follow (separated by line breaks, or by ``\n`` escapes in a JSON string).
    + r"|(?:(?:\s|\\[nr])+(?:[A-Za-z0-9+/=]{16,}|(?:Proc-Type|DEK-Info|Comment):[^\r\n\\]*))*"
    + ")"
)

_PLACEHOLDER_WORDS: Final = frozenset(
    {
        # Absent values and the words used in their place.
        "",
        "null",
        "none",
        "nil",
        "undefined",
        "true",
        "false",
        "empty",
        "redacted",
        "hidden",
        "secret",
        "password",
        "passwd",
        "pwd",
        "your_password",
        "yourpassword",
        "your-password",
        "mypassword",
        # Type annotations: ``password: str`` in a signature.
        "str",
        "string",
        "bytes",
        "secretstr",
        "optional",
        "any",
        "int",
    }
)
# ``${X}``, ``$X``, ``%s``, ``%(x)s``, ``{{ x }}``, ``{x}``, ``<x>``, ``****``,
# ``xxxx``, ``...``, ``…`` and a marker a redaction left.
_PLACEHOLDER: Final = (
    r"[$%{<]|\*+$|[xX]{3,}$|\.{3}|…|\[redacted\b|"
    # Code: a call, an index, an attribute of a well-known object.
    r"[A-Za-z_][A-Za-z0-9_.]*(?:\(.*\)|\[.*\])$|"
    r"(?:self|this|os|env|process|settings|config|cfg|args|opts|options|params|kwargs|"
    r"request|req|ctx|environ)\."
)


def _is_value(value: str) -> bool:
    """Whether an assigned value is a value, not a placeholder standing for one."""
    return value.lower() not in _PLACEHOLDER_WORDS and re.match(_PLACEHOLDER, value) is None


_KEY_QUOTE: Final = r"(?:\\?[\"'])?"
# A space within a line, as the rules read one: a tab or any Unicode space
# (category Zs) — the no-break spaces a web page, a PDF, a word processor or a
# French keyboard puts where an ASCII space was (U+00A0, U+202F), the
# ideographic space of a CJK input method (U+3000) — never a line break.
_SPACES: Final = " \u00a0\u1680\u2000-\u200a\u202f\u205f\u3000"  # within [...]
_SP: Final = f"[\t{_SPACES}]"
# What joins two digit groups of a card: spaces (any of _SP's but a tab, which
# separates a table's columns; several, as a PDF's or a table's copy gives), or one
# dash (or the non-breaking hyphen a word processor puts there).
_CARD_SEPARATOR: Final = f"(?:[{_SPACES}]+|[\\-\u2010\u2011])"
# After an assignment's sign: spaces on its line, or a line break and the
# indent of a quoted value on the next line (pretty-printed JSON, YAML). An
# unquoted word on the next line is the next line's, not a value.
_AFTER_SIGN: Final = rf"(?:{_SP}*\r?\n{_SP}*(?=\\?[\"'])|{_SP}*)"
# An assignment's sign: ``=``, ``:``, ``=>``, ``:=``, or the full-width ``＝`` and ``：``
# (U+FF1D, U+FF1A) a CJK input method types for ``=`` and ``:``.
_EQUALS: Final = "[=\uff1d]"
_COLON: Final = "[:\uff1a]"
_ASSIGN: Final = rf"{_SP}*(?:=>|:=|{_EQUALS}|{_COLON})" + _AFTER_SIGN
# A quoted value (as in JSON, YAML, code, or JSON inside a JSON string: ``\"``),
# else an unquoted one up to a space, a quote, ``&`` (the next query field), or a ``;``
# or ``,`` that starts the next field of a connection string (``;user=x``, ``,Server=x``:
# there a value holding either is quoted).
_VALUE: Final = (
    r"(?:\\\"(?P<secret>(?:(?!\\\")[^\r\n]){1,256}+)\\\""
    r"|\"(?P<secret2>(?:[^\"\\\r\n]|\\.){1,256}+)\""
    r"|'(?P<secret3>(?:[^'\\\r\n]|\\.){1,256}+)'"
    rf"|(?P<secret4>(?:(?![;,]{_SP}*[A-Za-z][A-Za-z0-9_ .\-]{{0,40}}=)[^\s\"'`<>&])+))"
)
# Password keys: ``password``, ``passwd``, ``passphrase``, ``pwd``, alone or at
# the end of a longer name (``db_password``, ``DB-PASSWORD``, ``user.password``,
# ``dbPassword``, ``PGPASSWORD``); never ``passwords`` or ``password_hash``.
# What comes before the key word does not matter: only its value is replaced.
# ``PWD`` assigned a path (``PWD=/home/alice``, ``~/src``) is a shell's working
# directory, not a password (ODBC's ``PWD=Xk9…`` is one).
_PASSWORD_KEY: Final = (
    rf"(?i:passw(?:or)?d|passphrase|(?<![a-z])pwd(?![\"'\\]*{_SP}*(?:{_EQUALS}|{_COLON}){_SP}*[\"'\\]*[/~]))"
    r"(?![A-Za-z0-9_])"
)
_PASSWORD: Final = (
    _PASSWORD_KEY
    + _KEY_QUOTE
    + rf"{_SP}*(?:=>|:=|{_EQUALS}|(?P<colon>{_COLON}))"
    + _AFTER_SIGN
    # Prose, not an assignment: after a colon, an unquoted word of letters
    # that a sentence continues (``Password: changed yesterday by the admin``).
    + rf"(?(colon)(?![A-Za-z][a-z]*{_SP}+[a-z]))"
    + _VALUE
)
# ``scheme://user:password@host`` (a database URL, a proxy): the password only.
_URL_PASSWORD: Final = (
    r"(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]{0,30}+://[^\s:/?#@\"'<>]{0,256}+:"
    # Raw ``/``, ``?``, ``#`` and ``@`` are not valid there, but a pasted password
    # (a generated one, base64) holds them: it runs to the first ``@`` whose host
    # ends the authority, with no ``@`` in it (``app:Xy7@Q9z@db/app`` -> ``Xy7@Q9z``).
    # A port followed by a path, query or fragment (``host:8080/u/@ann``) is not one.
    r"(?![0-9]*[/?#])(?P<secret>[^\s\"'<>]{1,256}?)"
    r"@[^\s/?#@\"'<>]{0,256}+(?!@)"
)


def _password_check(value: str) -> bool:
    return _is_value(_trim(value))


def _trim(value: str) -> str:
    """An unquoted value without the punctuation of the sentence around it: a
    final ``.``, ``,``, ``;`` or ``:``, and a closing bracket it did not open.
    (``!`` and ``?`` stay: passwords end with them more often than sentences
    end right after one.)"""
    while value:
        last = value[-1]
        opener = _OPENERS.get(last)
        if last in ".,;:" or (opener is not None and value.count(opener) < value.count(last)):
            value = value[:-1]
        else:
            break
    return value


_OPENERS: Final = {")": "(", "]": "[", "}": "{"}


_AWS_SECRET: Final = (
    # A name that says AWS and secret/key/token (``aws_secret_access_key``,
    # ``AWS_SESSION_TOKEN``, ``awsSecretKey``), or ``secret_access_key`` itself ...
    # (the match starts at the key word: what precedes it is kept anyway; the
    # name is bounded and never given back, so no text makes the search slow) ...
    r"(?:aws(?=[A-Za-z0-9_.\-]{0,40}?(?:secret|key|token))|secret_?access_?key)"
    r"[A-Za-z0-9_.\-]{0,60}+"
    + _KEY_QUOTE
    + _ASSIGN
    + r"(?:\\?[\"'])?"
    # ... assigned 40 or more base64 characters (a secret key is 40).
    + r"(?P<secret>[A-Za-z0-9/+]{40,}={0,2})(?![A-Za-z0-9/+=])"
)  # compiled with re.IGNORECASE

# An HTTP credential (RFC 9110's token68), taken whole (greedy); a full stop
# at its end ends the sentence, not the token.
_TOKEN68: Final = r"[A-Za-z0-9\-._~+/]{{{min},}}[A-Za-z0-9\-_~+/]=*"
# The scheme's name is case-insensitive (RFC 9110): ``Bearer``, ``bearer``, ``BEARER``.
_BEARER: Final = _EDGE + rf"(?i:bearer){_SP}+(?P<secret>" + _TOKEN68.format(min=11) + ")"
_AUTHORIZATION: Final = (
    r"(?<![A-Za-z0-9_\-])(?:proxy-)?authorization"
    + _KEY_QUOTE
    + _ASSIGN
    + rf"(?:\\?[\"'])?(?:(?:bearer|basic|token|bot|apikey|api-key|oauth){_SP}+)?"
    + r"(?P<secret>"
    + _TOKEN68.format(min=7)
    + ")"
)  # compiled with re.IGNORECASE


@functools.cache
def _rules() -> tuple[_Rule, ...]:
    """The rules, compiled on the first redaction rather than at import: a
    process that only reads (a listing, a search, a context) never needs
    them, and re takes a few milliseconds to compile them all.

    The order is the preference when two rules find the same span: the most
    specific kind names it (a JWT sent as a bearer token is a ``jwt``; a GitHub
    token assigned to ``password`` is a ``github-token``).
    """
    return (
        _Rule("private-key", re.compile(_PRIVATE_KEY)),
        _Rule(
            "anthropic-key",
            re.compile(_EDGE + rf"sk-ant-{_T}{{20,}}"),
            _random_after(r"sk-ant-(?:[a-z]+[0-9]+-)?"),
        ),
        _Rule(
            "openai-key",
            re.compile(
                _EDGE + rf"sk-(?:(?:proj|svcacct|admin|None)-{_T}{{20,}}|(?!ant-){_T}{{32,}})"
            ),
            _openai_check,
        ),
        _Rule(
            "aws-access-key",
            re.compile(_EDGE + r"(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}(?![A-Za-z0-9])"),
        ),
        _Rule("aws-access-key", re.compile(_AWS_SECRET, re.IGNORECASE), _random),
        _Rule(
            "github-token",
            re.compile(_EDGE + r"(?:gh[pousr]_[A-Za-z0-9_]{36,}|github_pat_[A-Za-z0-9_]{22,})"),
            _random_after(r"github_pat_|gh._"),
        ),
        _Rule(
            "gitlab-token",
            re.compile(
                _EDGE + r"(?:(?:glpat|gldt|glft|glsoat|glrt|glcbt|glimt|glptt|glagent|gloas)-"
                rf"{_T}{{20,}}|GR1348941{_T}{{20,}})"
            ),
            _random_after(r"[a-z]+-|GR1348941"),
        ),
        _Rule(
            "slack-token",
            re.compile(
                _EDGE
                + r"(?:(?:xoxe\.)?xox[abeoprs]-[A-Za-z0-9\-]{10,}|xapp-[0-9]-[A-Za-z0-9\-]{10,})"
            ),
            lambda token: any(c.isdigit() for c in token[5:]),
        ),
        _Rule(
            "slack-token",
            re.compile(
                r"(?:https?://)?hooks\.slack\.com/(?:services|workflows|triggers)/"
                r"[A-Za-z0-9_\-]+/[A-Za-z0-9_/\-]+"
            ),
        ),
        _Rule(
            "stripe-key",
            re.compile(
                _EDGE + r"(?:(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}|whsec_[A-Za-z0-9]{24,})"
            ),
            _random_after(r"[a-z]+_(?:live_|test_)?"),
        ),
        _Rule(
            "google-api-key",
            re.compile(_EDGE + rf"(?:AIza{_T}{{35,}}|GOCSPX-{_T}{{20,}}|ya29\.{_T}{{20,}})"),
            _random_after(r"AIza|GOCSPX-|ya29\."),
        ),
        _Rule("npm-token", re.compile(_EDGE + r"npm_[A-Za-z0-9]{36,}"), _random_after("npm_")),
        _Rule(
            "npm-token",
            re.compile(rf"_authToken{_SP}*={_SP}*(?:[\"'])?(?P<secret>[^\s\"']+)"),
            _password_check,
        ),
        _Rule(
            "jwt",
            re.compile(
                r"(?<![A-Za-z0-9_\-])eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{2,}(?:\.[A-Za-z0-9_\-]+){0,3}"
            ),
        ),
        _Rule("bearer-token", re.compile(_BEARER), _random),
        _Rule("bearer-token", re.compile(_AUTHORIZATION, re.IGNORECASE), _random),
        _Rule("password", re.compile(_PASSWORD), _password_check),
        _Rule("password", re.compile(_URL_PASSWORD), _password_check),
    )


# What every rule's match and every card number holds (a necessary condition,
# far from sufficient): a text without any of these has nothing to redact, so
# the rules and the card scan are not run on it — most text a memory
# keeps (its words, categories, topics, thread ids) is such text. Each
# alternative is a part every match of its rule contains: a literal prefix or
# key word (matched with the rule's own case folding), or, for a card, 13
# digits with at most one separator (_CARD_SEPARATOR) between two. It has no anchor nor
# lookaround, so it also finds what it finds in any part of a text. Keep it in
# step with the rules: tests/privacy/test_redaction.py checks, for text each
# rule's pattern matches, that it is found.
_MAY_HOLD_SECRET: Final = (
    r"PRIVATE KEY"  # private-key
    r"|sk-"  # anthropic-key, openai-key
    r"|AKIA|ASIA|ABIA|ACCA|A3T"  # aws-access-key (a key id)
    r"|(?i:aws|secret)"  # aws-access-key (a secret key, IGNORECASE like its rule)
    r"|gh[pousr]_|github_pat_"  # github-token
    r"|gl[a-z]+-|GR1348941"  # gitlab-token
    r"|xox|xapp-|hooks\.slack\.com/"  # slack-token
    r"|[rs]k_|whsec_"  # stripe-key
    r"|AIza|GOCSPX-|ya29\."  # google-api-key
    r"|npm_|_authToken"  # npm-token
    r"|eyJ"  # jwt
    r"|(?i:bearer|authorization)"  # bearer-token
    r"|(?i:pass|pwd)|://"  # password
    rf"|[0-9](?:{_CARD_SEPARATOR}?[0-9]){{12}}"  # payment-card
)


@functools.cache
def _pre_screen() -> re.Pattern[str]:
    """:data:`_MAY_HOLD_SECRET`, compiled on the first redaction as the rules are."""
    return re.compile(_MAY_HOLD_SECRET)


def _may_hold_secret(text: str) -> bool:
    """Whether :func:`redact` could find anything in ``text``; ``False`` is certain."""
    return _pre_screen().search(text) is not None


@functools.cache
def _priority() -> dict[str, int]:
    """A kind's rank: the position of its first rule; payment cards come last."""
    kinds = [*(rule.kind for rule in _rules()), "payment-card"]
    return {kind: n for n, kind in reversed(list(enumerate(kinds)))}


# --- payment cards ------------------------------------------------------------

# A run of digit groups joined by such separators, not glued to a
# word, nor part of a decimal number, a version or a time.
_DIGIT_RUN: Final = (
    r"(?<![0-9A-Za-z_])(?<![0-9][.:/+\-])[0-9]+"
    + f"(?:{_CARD_SEPARATOR}[0-9]+)*"
    + r"(?![0-9A-Za-z_]|\.[0-9])"
)
_GROUP: Final = re.compile(r"[0-9]+")

# (first digits, lowest and highest, as text of one length) -> allowed lengths.
_NETWORKS: Final = (
    # Visa: 16 and 19 digits (13-digit Visa cards are no longer issued, and a
    # 13-digit id starting with 4 would pass the Luhn check one time in ten).
    (("4", "4"), frozenset({16, 19})),
    (("51", "55"), frozenset({16})),  # Mastercard
    (("2221", "2720"), frozenset({16})),  # Mastercard, 2-series
    (("34", "34"), frozenset({15})),  # American Express
    (("37", "37"), frozenset({15})),
    (("300", "305"), frozenset({14, 15, 16, 17, 18, 19})),  # Diners Club
    (("36", "36"), frozenset({14, 15, 16, 17, 18, 19})),
    (("38", "39"), frozenset({14, 15, 16, 17, 18, 19})),
    (("3528", "3589"), frozenset({16, 17, 18, 19})),  # JCB
    (("50", "50"), frozenset(range(13, 20))),  # Maestro
    (("56", "69"), frozenset(range(13, 20))),  # Maestro, Discover, UnionPay, RuPay
)
# Numbers printed in card networks' and payment providers' documentation for
# tests: public, and worth remembering for a developer.
_TEST_CARDS: Final = frozenset(
    {
        "4242424242424242",
        "4000056655665556",
        "4111111111111111",
        "4012888888881881",
        "4000000000000002",
        "4000000000009995",
        "5555555555554444",
        "5200828282828210",
        "5105105105105100",
        "2223003122003222",
        "378282246310005",
        "371449635398431",
        "6011111111111117",
        "6011000990139424",
        "3056930009020004",
        "36227206271667",
        "3566002020360505",
        "6200000000000005",
    }
)


def _luhn(digits: str) -> bool:
    total = 0
    for n, char in enumerate(reversed(digits)):
        value = ord(char) - 48
        if n % 2:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


def _is_card(digits: str) -> bool:
    """Whether ``digits`` (13 to 19 of them) is a card number, not a public test one."""
    for (low, high), lengths in _NETWORKS:
        if low <= digits[: len(low)] <= high and len(digits) in lengths:
            return _luhn(digits) and digits not in _TEST_CARDS
    return False


# An IBAN's country code and check digits, then its separator: the digits after it are
# the rest of an account number (``FR85 7598 3867 …``), never a card.
_IBAN_START: Final = re.compile(r"(?<![0-9A-Za-z_])[A-Z]{2}[0-9]{2}" + _CARD_SEPARATOR + r"\Z")
# A card word, shortly before a number of 17 to 19 digits written as one group: such a
# number is as often a 64-bit id (a Discord or Twitter snowflake passes the Luhn check one
# time in ten), and only a card's own context says it is one.
_CARD_WORD: Final = re.compile(
    r"(?i:\b(?:cards?|visa|mastercard|maestro|amex|jcb|diners|discover|unionpay|credit|debit"
    r"|cc|pan|payment))\b[^\n]{0,24}\Z"
)
_LONGEST_ID: Final = 17  # an ungrouped number this long needs a _CARD_WORD before it


def _card_spans(text: str) -> list[tuple[int, int]]:
    """The spans of card numbers in each run of digit groups.

    A number printed in groups is a card only from the run's first group (or
    the group after a card): a card window in the middle of a longer number
    is a coincidence of its digits, one in ten of any 16 digits in a card's
    range (a French IBAN in groups of four held one 11 % of the time).
    Groups may follow it (a CVC, an expiry). A group of 13 or more digits is
    a number of its own wherever it is; one of 17 or more is a card only
    after a card word (:data:`_CARD_WORD`). The digits after an IBAN's
    country code are none (:data:`_IBAN_START`).
    """
    spans: list[tuple[int, int]] = []
    for run in re.finditer(_DIGIT_RUN, text):
        if run.end() - run.start() < 13:
            continue
        before = text[max(0, run.start() - 40) : run.start()]
        if _IBAN_START.search(before):
            continue
        groups = [(g.start(), g.end()) for g in _GROUP.finditer(text, run.start(), run.end())]
        first = 0
        # Invariant: ``start`` is where a card printed in groups may begin, the run's
        # first group or the group after the last card found.
        start = 0
        while first < len(groups):
            found = _longest_card(text, groups, first, grouped=first == start)
            if found is None:
                first += 1
            else:
                spans.append((groups[first][0], groups[found][1]))
                first = start = found + 1
    return spans


def _longest_card(
    text: str, groups: list[tuple[int, int]], first: int, *, grouped: bool
) -> int | None:
    """The last group of the longest card number that starts at group ``first``;
    with ``grouped`` false, only the group alone is tried.

    Only windows of at most 19 digits are tried, so a run of any length
    costs at most 19 windows per group.
    """
    found = None
    digits = ""
    start, end = groups[first]
    if end - start >= _LONGEST_ID and not _CARD_WORD.search(text, max(0, start - 40), start):
        return None
    # A number printed in groups starts with a group of four digits; from any
    # other group only the group alone can be a card.
    stop = len(groups) if grouped and end - start == 4 else first + 1
    for last in range(first, stop):
        start, end = groups[last]
        digits += text[start:end]
        if len(digits) > 19:
            break
        if len(digits) < 13:
            continue
        if last > first:
            # Printed in groups: the first of four digits, then groups of four
            # to six (the last may be shorter), one separator throughout.
            window = groups[first : last + 1]
            sizes = [end - start for start, end in window]
            separators = {
                text[end:next_start] for (_, end), (next_start, _) in itertools.pairwise(window)
            }
            if sizes[0] != 4 or any(not 4 <= size <= 6 for size in sizes[1:-1]):
                continue
            if sizes[-1] > 6 or len(separators) != 1:
                continue
        if _is_card(digits):
            found = last
    return found


# Redaction.


def _secret_span(match: re.Match[str]) -> tuple[int, int]:
    groups = match.groupdict()
    for name in ("secret", "secret2", "secret3", "secret4"):
        if groups.get(name) is not None:
            return match.span(name)
    return match.span()


def _findings(text: str) -> list[tuple[int, int, str]]:
    """Every secret any rule finds, as (start, end, kind); they may overlap."""
    found: list[tuple[int, int, str]] = []
    for rule in _rules():
        for match in rule.pattern.finditer(text):
            start, end = _secret_span(match)
            if match.lastgroup == "secret4":
                end = start + len(_trim(text[start:end]))
            if start < end and (rule.check is None or rule.check(text[start:end])):
                found.append((start, end, rule.kind))
    found.extend((start, end, "payment-card") for start, end in _card_spans(text))
    return found


# Format characters (Unicode category Cf: zero-width spaces and joiners, the word
# joiner, the byte order mark, the soft hyphen, bidirectional controls, tags …) are
# invisible. Pasted inside a key from a chat or a PDF, one breaks every pattern, yet
# whoever deletes it has the key back: so the rules read the text as it is seen,
# without them, and a secret's replacement covers those inside it. The class is
# every Cf code point of Unicode 15.1 (tests/privacy/test_redaction.py checks that
# it holds every one the running Python knows).
_FORMAT_CHARACTERS: Final = (
    "[\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e"
    "\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb"
    "\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f]+"
)


@functools.cache
def _format_characters() -> re.Pattern[str]:
    """:data:`_FORMAT_CHARACTERS`, compiled on the first redaction as the rules are."""
    return re.compile(_FORMAT_CHARACTERS)


def _visible(text: str) -> tuple[str, list[int] | None]:
    """``text`` without its format characters, and for each character left its
    position in ``text``; ``None`` when there were none (the same text)."""
    # A format character is never printable (str.isprintable: category "Other"),
    # so one-line text that is all printable, ASCII or not, skips the search.
    if text.isascii() or text.isprintable():
        return text, None
    runs = list(_format_characters().finditer(text))
    if not runs:
        return text, None
    positions: list[int] = []
    kept_from = 0
    for run in runs:
        positions.extend(range(kept_from, run.start()))
        kept_from = run.end()
    positions.extend(range(kept_from, len(text)))
    return _format_characters().sub("", text), positions


def redact(text: str) -> Redaction:
    """Replace every secret in ``text`` by ``[redacted: KIND]``.

    Overlapping findings become one replacement that covers them all (no
    character of a secret stays), named by the most specific kind. Format
    characters (``U+200B``, ``U+00AD`` …) do not hide a secret: the rules
    match the text without them, and a replacement covers those inside it.

    Returns:
        The redacted text and the sorted distinct kinds replaced; ``text``
        itself and no kinds when there is nothing to replace.
    """
    seen, positions = _visible(text)
    if not _may_hold_secret(seen):
        return Redaction(text, ())
    found = _findings(seen)
    if not found:
        return Redaction(text, ())
    if positions is not None:
        # Back in ``text``, a secret runs from its first visible character to
        # its last: the format characters between them go with it.
        found = [(positions[start], positions[end - 1] + 1, kind) for start, end, kind in found]
    # Leftmost first; at one start the longest, then the most specific kind.
    priority = _priority()
    found.sort(key=lambda finding: (finding[0], -finding[1], priority[finding[2]]))
    merged: list[tuple[int, int, str]] = []
    for start, end, kind in found:
        if merged and start < merged[-1][1]:
            first, last, first_kind = merged[-1]
            merged[-1] = (first, max(last, end), first_kind)
        else:
            merged.append((start, end, kind))
    parts: list[str] = []
    position = 0
    for start, end, kind in merged:
        parts += (text[position:start], marker(kind))
        position = end
    parts.append(text[position:])
    return Redaction("".join(parts), tuple(sorted({kind for _, _, kind in merged})))


class _Frame:
    """A list or mapping being rebuilt: its items, and their redacted values so far."""

    __slots__ = ("changed", "items", "node", "values")

    def __init__(self, node: Mapping[object, object] | list[object] | tuple[object, ...]) -> None:
        self.node = node
        self.items: list[object] = list(node.values() if isinstance(node, Mapping) else node)
        self.values: list[object] = []
        self.changed = False

    def add(self, old: object, new: object) -> None:
        self.values.append(new)
        self.changed = self.changed or new is not old

    def build(self) -> object:
        if not self.changed:
            return self.node  # nothing redacted: the very same value
        if isinstance(self.node, Mapping):
            return dict(zip(self.node.keys(), self.values, strict=True))
        return type(self.node)(self.values)


def redact_value(value: object) -> tuple[object, tuple[str, ...]]:
    """Redact every string inside a JSON-like value; mapping keys stay as they are.

    A value is what a JSON or YAML reader builds (and what a fact holds):
    strings, numbers, booleans, ``None``, lists, tuples and mappings of
    those. Strings are redacted with :func:`redact`; an integer that is a
    payment card number (a JSON number, not text) becomes the text
    ``[redacted: payment-card]``; everything else is kept. Lists stay lists,
    tuples stay tuples, mappings become dicts with the same keys in the same
    order — and a list or mapping with nothing to redact is returned itself,
    not a copy. The walk keeps its own stack, so no nesting makes it recurse.

    Returns:
        The redacted value and the sorted distinct kinds replaced anywhere in it.

    Raises:
        ValueError: the value contains itself (a JSON-like value is a tree).
    """
    kinds: set[str] = set()
    root = _redact_leaf(value, kinds)
    if root is not _CONTAINER:
        return root, tuple(sorted(kinds))
    assert isinstance(value, Mapping | list | tuple)
    stack = [_Frame(value)]
    on_path = {id(value)}
    while True:
        frame = stack[-1]
        if len(frame.values) < len(frame.items):
            child = frame.items[len(frame.values)]
            new = _redact_leaf(child, kinds)
            if new is not _CONTAINER:
                frame.add(child, new)
                continue
            assert isinstance(child, Mapping | list | tuple)
            if id(child) in on_path:
                raise ValueError("a value that contains itself cannot be redacted")
            on_path.add(id(child))
            stack.append(_Frame(child))
            continue
        stack.pop()
        on_path.discard(id(frame.node))
        built = frame.build()
        if not stack:
            return built, tuple(sorted(kinds))
        stack[-1].add(frame.node, built)


_CONTAINER: Final = object()


def _redact_leaf(value: object, kinds: set[str]) -> object:
    """The redacted scalar, or :data:`_CONTAINER` for a list, tuple or mapping."""
    if isinstance(value, str):
        result = redact(value)
        kinds.update(result.kinds)
        return result.text
    if isinstance(value, Mapping | list | tuple):
        return _CONTAINER
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        digits = str(value)
        # No card word stands beside a number: 17 digits and more are taken for an id,
        # as they are in text without one (_card_spans).
        if 13 <= len(digits) < _LONGEST_ID and _is_card(digits):
            kinds.add("payment-card")
            return marker("payment-card")
    return value


# The fields of a fact that are not text anyone wrote: ids (references break if
# they change), numbers with fixed meanings and the store's scope. Times are
# redacted like text: a time that reads as one holds nothing a rule matches
# (tests/privacy/test_redaction.py), and one that does not is kept as written —
# text, which may be anything a person pasted.
_NOT_REDACTED: Final = frozenset(
    {
        "id",
        "scope",
        "consolidatedFrom",
        "confidence",
        "revision",
        "status",
        "schemaVersion",
        "confirmationCount",
    }
)


def redact_fact(fact: Fact) -> tuple[Fact, tuple[str, ...]]:
    """The fact with every secret in its text replaced, and the kinds replaced.

    Every field a person or a model wrote is covered: content, title,
    category (and its own label), topics, the source (its unknown keys too),
    ``sourceError``, ``expected_valid_days``, a time that does not read as one
    and every unknown field; ids and numbers are not (see :data:`_NOT_REDACTED`). The fact itself
    comes back when it holds no secret, so the common case costs no copy.
    """
    data = fact.to_dict()
    changed: dict[str, object] = {}
    kinds: set[str] = set()
    for key, value in data.items():
        if key in _NOT_REDACTED:
            continue
        new, found = redact_value(value)
        if found:
            changed[key] = new
            kinds.update(found)
    if not changed:
        return fact, ()
    return Fact.from_dict({**data, **changed}), tuple(sorted(kinds))
