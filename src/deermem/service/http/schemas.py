"""The HTTP API's request and response bodies, as pydantic models.

Request models parse and bound what a client sends: unknown keys are
refused, so a typo is a 422, not a silently ignored field; and types are
strict, so ``"confidence": "0.5"`` or ``true`` is a 422 too, never a number
made up from a string or a boolean (a whole number is a number). Response models
describe what the routes return for the OpenAPI document; the routes render
the library's own ``to_dict()`` output, and the property-based test checks
every response against these models. Nested structures that the library
documents field by field elsewhere (receipts, manifests, reports) are
described as objects with their stable keys required and others allowed.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    WithJsonSchema,
    model_validator,
)

from deermem.model import (
    MAX_CATEGORY_CHARS,
    MAX_CONTENT_CHARS,
    MAX_SOURCE_ERROR_CHARS,
    MAX_TOPICS,
)

__all__ = [
    "ArchivePage",
    "ArchivedFact",
    "ContextOut",
    "ConversationIn",
    "CreateOut",
    "DeleteOut",
    "ExplanationOut",
    "FactCreate",
    "FactOut",
    "FactPage",
    "FactPatch",
    "HealthOut",
    "ImportOut",
    "JobOut",
    "ProblemOut",
    "PurgeOut",
    "ReceiptOut",
    "ReceiptPage",
    "RestoreOut",
    "SearchHitOut",
    "SearchOut",
]

_STRICT = ConfigDict(extra="forbid", strict=True)
_OPEN = ConfigDict(extra="allow")

# Python's whitespace (what str.strip removes), spelled out: JSON Schema's \s is not the same set.
_SPACE = "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
# The text boundary of facts written by hand (deermem.model), stated for clients:
# one line holds no control character or line break; text no control character but
# tab, line feed and carriage return.
_ONE_LINE = r"^[^\x00-\x1f\x7f-\x9f\u2028\u2029]*$"
_LINES = r"^[^\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]*$"
# Text that is not blank once stripped (the memory refuses blank content).
Text = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_CONTENT_CHARS,
        json_schema_extra={"pattern": f"[^{_SPACE}]", "allOf": [{"pattern": _LINES}]},
    ),
]


def _a_number(value: object) -> object:
    """A JSON number, never text or a boolean (which lax parsing would turn into one)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("expected a number")
    return value


# With Field(strict=False) before it, an int field takes a whole number as JSON Schema
# counts them: 30 or 30.0, never "30", true or 30.5. (Strict parsing alone would refuse
# 30.0, which the schema's "integer" allows.)
_NUMBER = BeforeValidator(_a_number)

# The roles deermem.learning.messages reads: OpenAI's (role) and LangChain's (type).
_ROLES = ["user", "human", "assistant", "ai", "system", "developer", "tool", "function"]
ChatMessage = Annotated[
    dict[str, Any],
    WithJsonSchema(
        {
            "type": "object",
            "description": "A chat message: `role` (OpenAI) or `type` (LangChain) and `content`.",
            "properties": {
                "content": {"anyOf": [{"type": "string"}, {"type": "array"}, {"type": "null"}]},
                "additional_kwargs": {"anyOf": [{"type": "object"}, {"type": "null"}]},
            },
            "anyOf": [
                {"required": ["role"], "properties": {"role": {"enum": _ROLES}}},
                {
                    "required": ["type"],
                    "properties": {"role": {"type": "null"}, "type": {"enum": _ROLES}},
                },
            ],
        }
    ),
]
Name = Annotated[
    str,
    Field(min_length=1, max_length=MAX_CATEGORY_CHARS, json_schema_extra={"pattern": _ONE_LINE}),
]


# --- requests ---------------------------------------------------------------------------


class FactCreate(BaseModel):
    """A fact to add through the capacity gate."""

    model_config = _STRICT

    content: Text
    category: Name = "context"
    confidence: Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)] = 0.5
    topics: Annotated[list[Name], Field(max_length=MAX_TOPICS)] = []
    sourceError: (
        Annotated[
            str,
            Field(max_length=MAX_SOURCE_ERROR_CHARS, json_schema_extra={"pattern": _LINES}),
        ]
        | None
    ) = None
    expectedValidDays: Annotated[int, Field(ge=1, le=36_500, strict=False), _NUMBER] | None = None


class FactPatch(BaseModel):
    """Fields to change (at least one); omitted ones are kept.

    ``expectedRevision`` refuses the change if the fact changed meanwhile.
    """

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
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

    content: Text | None = None
    category: Name | None = None
    confidence: Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)] | None = None
    expectedRevision: Annotated[int, Field(ge=1, strict=False), _NUMBER] | None = None

    @model_validator(mode="after")
    def _changes_something(self) -> FactPatch:
        if self.content is None and self.category is None and self.confidence is None:
            raise ValueError("give at least one of content, category, confidence")
        return self


class ConversationIn(BaseModel):
    """A conversation to learn from: the whole thread so far, oldest message first.

    Messages are objects in the OpenAI chat shape (``role``, ``content``) or
    the LangChain/DeerFlow shape (``type``, ``content``).
    """

    model_config = _STRICT

    threadId: Annotated[
        str, Field(min_length=1, max_length=200, json_schema_extra={"pattern": _ONE_LINE})
    ]
    messages: Annotated[list[ChatMessage], Field(min_length=1, max_length=2000)]


# --- responses --------------------------------------------------------------------------


class ProblemOut(BaseModel):
    """An RFC 9457 problem; typed members of the error are added beside these."""

    model_config = _OPEN

    type: str
    title: str
    status: int
    detail: str
    requestId: str | None = None


class FactOut(BaseModel):
    """A stored fact with every field (content included: it is the caller's memory)."""

    model_config = _OPEN

    id: str
    content: str
    category: str
    confidence: float
    createdAt: str
    updatedAt: str
    revision: int


class FactPage(BaseModel):
    facts: list[FactOut]
    nextCursor: str | None


class ReceiptOut(BaseModel):
    """An eviction receipt: ids, categories and scores, never content."""

    model_config = _OPEN

    occurredAt: str
    reason: str
    policyVersion: str
    maxFacts: int
    evicted: list[dict[str, Any]]


class ReceiptPage(BaseModel):
    receipts: list[ReceiptOut]
    nextCursor: str | None


class CreateOut(BaseModel):
    """What the capacity gate did with a new fact."""

    factId: str | None = Field(description="the new fact's id; null when the gate evicted it")
    kept: bool
    proposedFactId: str
    relearned: str | None = Field(
        None,
        description="the archived fact that came back instead of a new copy "
        "(it says the same; a regret event records it), else null",
    )
    evicted: list[str]
    receipts: list[ReceiptOut]


class RestoreOut(BaseModel):
    """What the capacity gate did with a restored fact."""

    factId: str
    restored: bool
    evicted: list[str]
    receipts: list[ReceiptOut]


class ImportOut(BaseModel):
    """What an import did: kept, evicted by the gate, replaced (removed)."""

    kept: list[str]
    evicted: list[str]
    replaced: list[str]
    receipts: list[ReceiptOut]


class DeleteOut(BaseModel):
    factId: str
    archived: bool = Field(description="false when eviction_mode is delete: gone for good")


class PurgeOut(BaseModel):
    factId: str
    purged: bool


class ExplanationOut(BaseModel):
    """Why a fact is active, archived or gone."""

    factId: str
    status: Literal["active", "archived", "gone"]
    fact: FactOut | None
    receipts: list[ReceiptOut]
    archive: dict[str, Any] | None
    standing: dict[str, Any] | None


class ArchivedFact(BaseModel):
    """An archived fact and why it left."""

    model_config = _OPEN

    fact: FactOut
    archivedAt: str
    reason: str


class ArchivePage(BaseModel):
    entries: list[ArchivedFact]
    nextCursor: str | None


class ContextOut(BaseModel):
    """The prompt block, its text, and (with ``explain``) the injection manifest."""

    text: str
    block: str
    manifest: dict[str, Any] | None


class SearchHitOut(BaseModel):
    fact: FactOut
    score: float
    matchType: Literal["fts5", "hybrid", "substring"]
    bm25: float | None


class SearchOut(BaseModel):
    results: list[SearchHitOut]


class JobOut(BaseModel):
    """An extraction job; ``report`` is the content-free update report once done."""

    jobId: str
    status: Literal["queued", "running", "done", "failed", "abandoned"]
    user: str
    agent: str
    threadId: str
    createdAt: str
    startedAt: str | None
    finishedAt: str | None
    report: dict[str, Any] | None
    error: dict[str, Any] | None


class HealthOut(BaseModel):
    status: Literal["ok"]
    version: str
