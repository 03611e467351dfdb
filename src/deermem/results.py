"""What :class:`~deermem.Memory` takes and returns: one description per record.

Every interface reads the same descriptions: the CLI's ``--json`` (through
:func:`to_json`), the HTTP API (its request bodies and ``response_model``\\ s)
and the MCP tools (their input bounds and output schemas). So a field is
named, bounded and documented once, and the three cannot drift apart.

* **Inputs** — :class:`NewFact` and :class:`FactPatch`: what a person, a tool
  or a client may write. Types are strict (``"0.5"`` or ``true`` is not a
  confidence), unknown keys are refused, and text keeps to the boundary of
  :mod:`deermem.model` (the limits of a fact a model extracts). The
  memory validates every write through them; the HTTP API takes them as its
  bodies; the MCP tools take their fields (:data:`Content`, :data:`Category`
  ...) as arguments and leave the text rules to the memory, which reports
  them in its own words.
* **Results** — frozen pydantic models. Python reads snake_case
  attributes; the wire carries the camelCase keys deermem's files and APIs
  use (``factId``, ``policyVersion``), declared once here by an alias
  generator (and explicitly where the wire name is another word). They are
  pydantic models, because that is what FastAPI's ``response_model`` and the
  MCP SDK's output schemas take as they are.

Records of the layers below travel inside these results — a fact, an
eviction receipt, an archive entry. They keep the JSON form their own module
writes (the form of the files they live in); :data:`~deermem.model.FactJson`
and its siblings in :mod:`deermem.store.records` hand that form to pydantic
and describe it for the schemas. A record a feature builds is a model in that
feature's module (:class:`Standing` beside the capacity gate,
:class:`SearchResult` and :class:`ReindexReport` beside the search), so no
feature imports this module; it re-exports them, and the interfaces import
every result from here. (Records that describe their JSON form to pydantic
themselves — the injection manifest, the server's limits — need no wrapper:
:func:`~deermem.model.to_json` writes them.)

Receipts, manifests and reports carry no fact content; facts, archive entries
and search hits do (they are the caller's own memory).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Annotated, Final, Literal, TypeVar, get_args

from pydantic import (
    AfterValidator,
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainValidator,
    ValidationError,
    computed_field,
    model_validator,
)
from pydantic.alias_generators import to_camel

from deermem.errors import FactValidationError
from deermem.library.gate import Standing
from deermem.model import (
    CORE_CATEGORIES,
    DEFAULT_CATEGORY,
    MAX_CATEGORY_CHARS,
    MAX_CONTENT_CHARS,
    MAX_SOURCE_ERROR_CHARS,
    MAX_TOPICS,
    RESULT_CONFIG,
    WIRE_CONFIG,
    FactJson,
    FactOut,
    Scope,
    check_given_category,
    check_line,
    check_lines,
    check_redacted_length,
    check_storable,
    to_json,
)
from deermem.recall.embedding import EMBEDDED_QUERY_CHARS
from deermem.recall.index import MatchType
from deermem.recall.injection import Injection, InjectionManifest
from deermem.recall.search import ReindexReport, SearchResult
from deermem.store.records import (
    ArchivedJson,
    ArchiveEntryJson,
    EvictionReceipt,
    ReceiptEntry,
    ReceiptJson,
)

__all__ = [
    "MAX_QUERY_CHARS",
    "MAX_TOP_K",
    "NOT_BLANK",
    "ONE_LINE",
    "SOMETHING_TO_FIND",
    "WHOLE_NUMBER",
    "ArchiveEntryJson",
    "Category",
    "Confidence",
    "Content",
    "CreateResult",
    "ErasureResult",
    "Explanation",
    "FactJson",
    "FactOut",
    "FactPatch",
    "Forgotten",
    "ImportResult",
    "MatchType",
    "NewFact",
    "PromptContext",
    "Purged",
    "ReceiptJson",
    "RedactedItem",
    "RedactionReport",
    "ReindexReport",
    "RestoreResult",
    "Revision",
    "ScopeSummary",
    "SearchResult",
    "SearchResults",
    "Standing",
    "Topics",
    "UserImportResult",
    "check_query",
    "error_location",
    "field_names",
    "to_json",
]

FactStatus = Literal["active", "archived", "gone"]

# Python's whitespace (what str.strip removes), spelled out: JSON Schema's \s is not the same set.
_SPACE: Final = (
    "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
)
NOT_BLANK: Final = f"[^{_SPACE}]"
"""Not blank, stated for clients in JSON Schema: at least one character that is not a space."""
# The text boundary (deermem.model), stated for clients: one line holds no control
# character or line break; text no control character but tab, line feed and carriage return.
ONE_LINE: Final = r"^[^\x00-\x1f\x7f-\x9f\u2028\u2029]*$"
_LINES: Final = r"^[^\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]*$"

# --- inputs -------------------------------------------------------------------------------


def _a_number(value: object) -> object:
    """A number, never text or a boolean (which lax parsing would turn into one)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("expected a number")
    return value


# With Field(strict=False) before it, an int field takes a whole number as JSON Schema
# counts them: 30 or 30.0, never "30", true or 30.5. (Strict parsing alone would refuse
# 30.0, which the schema's "integer" allows.)
WHOLE_NUMBER: Final = BeforeValidator(_a_number)


def check_query(query: str) -> str:
    """A query that names something: one of only spaces is refused as an empty one is.

    Such a query can match nothing, so answering it "no matches" would hide a
    client's bug (a question lost on its way) behind an ordinary answer.
    """
    if query.isspace():
        raise ValueError("expected words to look for, not only spaces")
    return query


SOMETHING_TO_FIND: Final = AfterValidator(check_query)
"""The one rule for a search query or a prompt's question on the HTTP API and the MCP tools
(the CLI calls :func:`check_query`): not blank. Its schema's side is :data:`NOT_BLANK`."""

Content = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_CONTENT_CHARS,
        description="The fact, as a short statement.",
        json_schema_extra={"pattern": NOT_BLANK, "allOf": [{"pattern": _LINES}]},
    ),
]
"""A fact's text as a client sends it: the wire's bounds (the memory trims it and
checks its characters: :class:`NewFact`)."""
Category = Annotated[
    str,
    Field(
        max_length=MAX_CATEGORY_CHARS,
        json_schema_extra={"pattern": ONE_LINE},
        description="One of: " + ", ".join(CORE_CATEGORIES) + ". Another label is kept "
        "as an `other` fact with that label (a blank one means `context`). Use `correction` "
        "when the user corrects you: corrections go first into the prompt, and the "
        "hybrid-v1 policy reserves room for them when memory is full.",
    ),
]
Confidence = Annotated[
    float,
    Field(
        ge=0.0,
        le=1.0,
        allow_inf_nan=False,
        strict=True,  # a number: never one made from "0.5" or true
        description="How sure the fact is, 0 to 1 (e.g. 0.9 for what the user said "
        "explicitly). The capacity policy keeps surer facts longer.",
    ),
]
Topic = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_CATEGORY_CHARS,
        json_schema_extra={"pattern": NOT_BLANK, "allOf": [{"pattern": ONE_LINE}]},
    ),
]
Topics = Annotated[list[Topic], Field(max_length=MAX_TOPICS, description="Keywords for search.")]
SourceError = Annotated[
    str,
    Field(
        max_length=MAX_SOURCE_ERROR_CHARS,
        json_schema_extra={"pattern": _LINES},
        description="What the assistant got wrong (for a correction).",
    ),
]
ValidDays = Annotated[int, Field(ge=1, le=36_500, strict=False), WHOLE_NUMBER]
Revision = Annotated[
    int,
    Field(
        ge=1,
        strict=False,
        description="Refuse the change if the fact's revision is no longer this one "
        "(someone changed it since it was read).",
    ),
    WHOLE_NUMBER,
]


def _content(given: str) -> str:
    text = given.strip()
    if not text:
        raise FactValidationError("content", given, "expected text that is not blank")
    check_lines("content", text, MAX_CONTENT_CHARS)
    return check_redacted_length("content", text, MAX_CONTENT_CHARS)


def _storable(data: object) -> object:
    """Refuse text that is not valid Unicode before pydantic reads it (naming the field)."""
    if isinstance(data, Mapping):
        for key, value in data.items():
            if isinstance(value, str | list | tuple) and isinstance(key, str):
                check_storable(to_camel(key), value)
    return data


def _category(text: str) -> str:
    """One line, trimmed; blank means the default category; never a misspelled core one
    (:func:`~deermem.model.check_given_category`: a person or a tool gave it)."""
    line = check_line("category", text.strip(), MAX_CATEGORY_CHARS)
    check_redacted_length("category", line, MAX_CATEGORY_CHARS)
    check_given_category(line)
    return line or DEFAULT_CATEGORY


def _topics(tags: list[str]) -> list[str]:
    for n, tag in enumerate(tags):
        check_line(f"topics[{n}]", tag, MAX_CATEGORY_CHARS)
        check_redacted_length(f"topics[{n}]", tag, MAX_CATEGORY_CHARS)
        if not tag.strip():
            raise FactValidationError(f"topics[{n}]", tag, "expected text that is not blank")
    return tags


def _source_error(text: str | None) -> str | None:
    if text is None:
        return None
    line = check_lines("sourceError", text.strip(), MAX_SOURCE_ERROR_CHARS)
    return check_redacted_length("sourceError", line, MAX_SOURCE_ERROR_CHARS) or None


# The wire's bounds plus the text rules: what the memory stores.
_StoredContent = Annotated[Content, AfterValidator(_content)]
_StoredCategory = Annotated[Category, AfterValidator(_category)]

# Built at import, not deferred: FastAPI takes these as request bodies, and a deferred model
# rebuilt under FastAPI's body annotation warns (UnsupportedFieldAttributeWarning).
_INPUT = ConfigDict(**WIRE_CONFIG, extra="forbid", strict=True)


class NewFact(BaseModel):
    """A fact to add through the capacity gate.

    The content is trimmed and may not be blank; text keeps to the limits of
    a fact a model extracts (:mod:`deermem.model`): content of at most
    4,000 characters, a category and up to 32 topics of one line and 64
    characters each, a ``sourceError`` of at most 2,000. A rule the text
    breaks raises :class:`~deermem.FactValidationError` (or
    :class:`~deermem.InvalidTextError`) inside pydantic's error, and
    :meth:`checked` turns any refusal into that error, naming the field.
    """

    model_config = _INPUT

    content: _StoredContent
    category: _StoredCategory = "context"
    confidence: Confidence = 0.5
    topics: Annotated[Topics, AfterValidator(_topics)] = []
    source_error: Annotated[SourceError | None, AfterValidator(_source_error)] = None
    expected_valid_days: ValidDays | None = None

    _unicode = model_validator(mode="before")(_storable)

    @classmethod
    def checked(cls, **fields: object) -> NewFact:
        """Validate Python values (a caller of :meth:`Memory.create_fact`).

        Raises:
            FactValidationError: naming the first field refused, with what it accepts.
        """
        return _checked(cls, fields)


class FactPatch(BaseModel):
    """Fields of a fact to change (at least one); omitted ones are kept.

    ``expectedRevision`` refuses the change if the fact changed meanwhile.
    """

    model_config = ConfigDict(
        **_INPUT,
        json_schema_extra={
            "anyOf": [
                {"required": [name], "properties": {name: {"type": kind}}}
                for name, kind in (
                    ("content", "string"),
                    ("category", "string"),
                    ("confidence", "number"),
                )
            ]
        },
    )

    content: _StoredContent | None = None
    category: _StoredCategory | None = None
    confidence: Confidence | None = None
    expected_revision: Revision | None = None

    _unicode = model_validator(mode="before")(_storable)

    @model_validator(mode="after")
    def _changes_something(self) -> FactPatch:
        if self.content is None and self.category is None and self.confidence is None:
            raise ValueError("give at least one of content, category, confidence")
        return self

    @classmethod
    def checked(cls, **fields: object) -> FactPatch:
        """Validate Python values (a caller of :meth:`Memory.update_fact`).

        Raises:
            FactValidationError: naming the first field refused, with what it accepts.
        """
        return _checked(cls, fields)

    def changes(self) -> dict[str, object]:
        """The fields to change, under the fact's own keys."""
        changed = {
            "content": self.content,
            "category": self.category,
            "confidence": self.confidence,
        }
        return {key: value for key, value in changed.items() if value is not None}


_ModelT = TypeVar("_ModelT", bound=BaseModel)

# What a field accepts, for the refusals pydantic's own checks make (types, ranges and
# sizes); the text rules raise FactValidationError themselves.
_ACCEPTS: Final[dict[str, str]] = {
    "content": "expected a string",
    "category": "expected a string",
    "confidence": "expected a number between 0 and 1",
    "topics": f"expected a list of at most {MAX_TOPICS} topics",
    "sourceError": "expected a string",
    "expectedValidDays": "expected a whole number of days between 1 and 36500",
    "expectedRevision": "expected a whole number of at least 1",
}


def _checked(model: type[_ModelT], fields: Mapping[str, object]) -> _ModelT:
    try:
        return model.model_validate(fields)
    except ValidationError as invalid:
        raise _fact_error(invalid) from None


def _fact_error(invalid: ValidationError) -> FactValidationError:
    """The first refusal of ``invalid`` as deermem's error for a fact field."""
    detail = invalid.errors(include_url=False)[0]
    cause = detail.get("ctx", {}).get("error")
    if isinstance(cause, FactValidationError):
        return cause  # a text rule's own refusal
    given = detail.get("input")
    location = [str(part) for part in detail["loc"]]
    if not location:  # the model's own rule (FactPatch: change something)
        return FactValidationError("fact", given, str(detail["msg"]).removeprefix("Value error, "))
    field = to_camel(location[0]) + "".join(f"[{part}]" for part in location[1:])
    limit = detail.get("ctx", {}).get("max_length")
    if detail["type"] == "string_too_long" and isinstance(given, str):
        return FactValidationError(
            field, given, f"expected at most {limit:,} characters, found {len(given):,}"
        )
    if detail["type"] == "string_too_short":
        return FactValidationError(field, given, "expected text that is not blank")
    if len(location) > 1:  # an item of a list (topics)
        return FactValidationError(field, given, "expected a string")
    return FactValidationError(field, given, _ACCEPTS.get(field, str(detail["msg"])))


def field_names(*annotations: object) -> frozenset[str]:
    """Every field name and alias of the pydantic models an annotation holds, nested ones too
    (each name an ``AliasChoices`` takes: ``thread_id`` beside ``threadId``).

    What :func:`error_location` may show as written: names deermem declared,
    not names a caller sent.
    """
    names: set[str] = set()
    seen: set[type[BaseModel]] = set()
    pending = list(annotations)
    while pending:
        annotation = pending.pop()
        pending.extend(get_args(annotation))  # list[Model], Model | None, Annotated[...]
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            continue
        if annotation in seen:
            continue
        seen.add(annotation)
        for name, info in annotation.model_fields.items():
            names.add(name)
            for alias in (info.alias, info.validation_alias):
                if isinstance(alias, str):
                    names.add(alias)
                elif isinstance(alias, AliasChoices):  # every name it takes
                    names.update(choice for choice in alias.choices if isinstance(choice, str))
            pending.append(info.annotation)
    return frozenset(names)


def error_location(location: Iterable[int | str], declared: Collection[str]) -> str:
    """Where a validation error is, as ``body.topics.3``, without any name a caller wrote.

    A part of pydantic's ``loc`` that is not a declared field name is text
    the caller chose — an unknown field's name, a mapping's key — and may be
    a secret pasted where a name belongs; errors reach logs, tool results and
    models (docs/privacy.md). Such a part is described by its length, as
    content is; declared names and list indexes stay as they are.
    """
    return ".".join(
        str(part)
        if isinstance(part, int) or part in declared
        else f"(a name of {len(part):,} characters)"
        for part in location
    )


# --- records of the layers below, in their own JSON form ----------------------------------


# --- results ------------------------------------------------------------------------------

Receipts = tuple[ReceiptJson, ...]
Ids = tuple[str, ...]
Redacted = Annotated[
    Ids,
    Field(
        description="the kinds of secret replaced by [redacted: KIND] before anything "
        "was written (never the values; docs/privacy.md)"
    ),
]
"""The kinds of secret a write replaced: the same field, described once, on every write's result."""


class CreateResult(BaseModel):
    """The outcome of :meth:`Memory.create_fact`.

    Attributes:
        fact_id: the new fact's id, or ``None`` when the capacity gate evicted
            the new fact itself (it is then in the archive, restorable). For
            a relearned fact, the archived fact's id.
        fact: the fact as proposed (as stored, when it was kept).
        evicted: every fact the gate evicted, lowest-ranked first.
        receipts: the receipts of this commit.
        relearned: the archived fact that came back instead of a new one,
            because it says the same (see docs/regret.md), else ``None``.
        redacted: the kinds of secret replaced before anything was written.
    """

    model_config = RESULT_CONFIG

    fact_id: Annotated[
        str | None, Field(description="the new fact's id; null when the gate evicted it")
    ]
    fact: Annotated[FactJson, Field(exclude=True)]
    evicted: Ids
    receipts: Receipts
    relearned: str | None = Field(
        None,
        description="the archived fact that came back instead of a new copy "
        "(it says the same; a regret event records it), else null",
    )
    redacted: Redacted = ()

    @computed_field  # type: ignore[prop-decorator]
    @property
    def kept(self) -> bool:
        """Whether the new fact (or the relearned one) is in the library."""
        return self.fact_id is not None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def proposed_fact_id(self) -> str:
        """The id the new fact was given (in the archive when it was not kept)."""
        return self.fact.id

    @computed_field(  # type: ignore[prop-decorator]
        description="what happened, in plain words (ids only, never content)"
    )
    @property
    def message(self) -> str:
        """What happened, in plain words, for whoever reads a tool's answer (ids only).

        A fact the gate evicted at once is the case a caller must not miss: a
        ``kept: false`` alone reads like success to an agent that skims.
        """
        others = [fact_id for fact_id in self.evicted if fact_id != self.fact.id]
        made_room = f"; to make room, {', '.join(others)} went to the archive" if others else ""
        if self.kept and self.relearned is not None:
            return (
                f"relearned {self.relearned}: the archive held the same fact, and it came "
                f"back with its history{made_room}"
            )
        if self.kept:
            return f"stored as {self.fact_id}{made_room}"
        return (
            f"NOT KEPT: memory is full and the capacity gate ranked this new fact lowest, so "
            f"it went straight to the archive as {self.fact.id}; ask why to see its score, "
            "or restore it to try again (the gate then decides anew)"
        )

    def __str__(self) -> str:
        # print(result) in a notebook: the sentence, not a dump of every field
        return self.message


class RestoreResult(BaseModel):
    """The outcome of :meth:`Memory.restore`: back in the library, or evicted again."""

    model_config = RESULT_CONFIG

    fact_id: str
    restored: Annotated[
        bool, Field(description="false when the gate evicted it again (library full)")
    ]
    evicted: Ids
    receipts: Receipts
    redacted: Redacted = ()


class ImportResult(BaseModel):
    """The outcome of :meth:`Memory.import_document`.

    Attributes:
        kept: ids of the document's facts now stored.
        evicted: ids the capacity gate evicted.
        replaced: ids of stored facts the document did not contain (removed).
        receipts: the receipts of this commit.
        redacted: the kinds of secret replaced before anything was written.
    """

    model_config = RESULT_CONFIG

    kept: Ids
    evicted: Ids
    replaced: Ids
    receipts: Receipts
    redacted: Redacted = ()


class Explanation(BaseModel):
    """Why a fact is where it is: :meth:`Memory.why`.

    Attributes:
        fact_id: the id asked about.
        status: ``active`` (in the library), ``archived`` (evicted or
            removed, restorable) or ``gone`` (only receipts remain: purged, or
            deleted with ``eviction_mode: delete``).
        fact: the fact, when it is active or archived.
        receipts: the receipts that name the fact, oldest first.
        archive_entry: its archive entry, when archived (``archive`` on the
            wire, without the fact, which is ``fact``).
        standing: its rank under the current policy, when active.
    """

    model_config = RESULT_CONFIG

    fact_id: str
    status: FactStatus
    fact: FactJson | None
    receipts: Receipts
    archive_entry: Annotated[ArchivedJson | None, Field(alias="archive")]
    standing: Standing | None

    @property
    def last_eviction(self) -> tuple[EvictionReceipt | None, ReceiptEntry | None]:
        """The latest receipt naming the fact and its line, falling back to the archive's copy."""
        for receipt in reversed(self.receipts):
            line = receipt.entry_for(self.fact_id)
            if line is not None:
                return receipt, line
        if self.archive_entry is not None:
            return None, self.archive_entry.eviction
        return None, None


class ScopeSummary(BaseModel):
    """One user and agent of a store, and how much it holds (:meth:`Memory.scopes`).

    Attributes:
        scope: the user (``None``: the single-user layout) and agent.
        facts: active facts.
        archived: archived facts (within ``archive_max_age_days``).
    """

    model_config = RESULT_CONFIG

    scope: Annotated[Scope, PlainValidator(lambda value: value), Field(exclude=True)]
    facts: int
    archived: int

    @computed_field  # type: ignore[prop-decorator]
    @property
    def user(self) -> str | None:
        """The user id (``None``: the single-user layout)."""
        return self.scope.user_id

    @computed_field  # type: ignore[prop-decorator]
    @property
    def agent(self) -> str:
        return self.scope.agent


class SearchResults(BaseModel):
    """A search's answer over HTTP and MCP: the best matches, best first."""

    model_config = RESULT_CONFIG

    results: tuple[SearchResult, ...]


MAX_QUERY_CHARS: Final = EMBEDDED_QUERY_CHARS
"""The longest search query (and ``context`` question) the CLI, the HTTP API and the MCP
tools take: a question, not a document to match facts against. Search by meaning embeds no
more of a longer one, from any caller."""

MAX_TOP_K: Final = 50
"""The most results one search may ask for, on every interface: the HTTP API and the MCP
tools default their ``max_top_k`` to it, and the CLI's ``--top-k`` keeps to it."""


class Forgotten(BaseModel):
    """What removing a fact did, as the HTTP API and the MCP tool answer it."""

    model_config = RESULT_CONFIG

    fact_id: str
    archived: Annotated[
        bool,
        Field(
            description="true: in the archive, restorable; false: deleted for good "
            "(the memory runs with eviction_mode: delete)"
        ),
    ]


class PromptContext(BaseModel):
    """A memory's text for a prompt, the same inside its ``<memory>`` block, and why.

    One record for ``deermem context --json``, ``GET …/context`` and the MCP
    tool ``memory_context``: a field means the same wherever it is read, so a
    client that moves between them neither wraps the block twice nor loses it.
    """

    model_config = RESULT_CONFIG

    text: str = Field(description="the memory's text (summaries, then facts); empty if nothing")
    block: str = Field(
        description="the text inside its <memory> block, to put in the prompt; empty if nothing"
    )
    manifest: InjectionManifest | None = Field(
        description="why each fact is in the text or was left out (ids only); null unless asked"
    )

    @classmethod
    def of(cls, injection: Injection, *, explain: bool = True) -> PromptContext:
        return cls(
            text=injection.text,
            block=injection.block,
            manifest=injection.manifest if explain else None,
        )


class Purged(BaseModel):
    """What purging an archived fact did, as the HTTP API and ``archive purge --json`` answer it."""

    model_config = RESULT_CONFIG

    fact_id: str
    purged: bool


class ErasureResult(BaseModel):
    """The outcome of :meth:`Memory.erase_user` (counts only: no content).

    Attributes:
        user_id: the user erased.
        counts: what went, by :data:`deermem.store.protocol.ERASED_COUNTS`, plus
            ``searchRows`` (rows of the search index; on PostgreSQL also the
            user's rows of ``deermem_vectors``) and ``queued``
            (conversations waiting to be learned from); all 0 for a user the
            store did not hold.
    """

    model_config = RESULT_CONFIG

    user_id: str
    counts: Mapping[str, int]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def erased(self) -> bool:
        """Whether anything was held for the user."""
        return any(self.counts.values())


class UserImportResult(BaseModel):
    """The outcome of :meth:`Memory.import_user`: what the export restored (counts only).

    Attributes:
        user_id: the user restored.
        counts: what was written, by :data:`deermem.store.protocol.ERASED_COUNTS`.
        redacted: the kinds of secret replaced before anything was written.
    """

    model_config = RESULT_CONFIG

    user_id: str
    counts: Mapping[str, int]
    redacted: Ids = ()


class RedactedItem(BaseModel):
    """One stored thing that held a secret: where, which id, which kinds (never the value)."""

    model_config = RESULT_CONFIG

    user: str | None
    agent: str
    where: Literal["fact", "archive", "summary", "usage", "records"]
    id: str = Field(
        description="the fact id (fact, archive, usage), the section (summary, e.g. "
        "user.workContext), or the records that held it (records: receipts, regret-events, "
        "shadow-marks, joined by +)"
    )
    kinds: Ids


class RedactionReport(BaseModel):
    """The outcome of :meth:`Memory.redact_stored` (``deermem redact``)."""

    model_config = RESULT_CONFIG

    dry_run: bool
    items: tuple[RedactedItem, ...]
    problems: tuple[str, ...] = Field(
        default=(),
        description="each place in the store that holds memory no scope can be read from, "
        "so that was not checked (Memory.store_problems): a secret may remain there",
    )

    @computed_field  # type: ignore[prop-decorator]
    @property
    def kinds(self) -> Ids:
        """Every kind found, sorted."""
        return tuple(sorted({kind for item in self.items for kind in item.kinds}))
