"""What the MCP tools return: typed models, so clients get structured content.

The MCP SDK publishes a tool's return model as its ``outputSchema`` and sends
the value both as ``structuredContent`` and as JSON text. The models here are
views of the library's own results (:class:`~deermem.memory.CreateResult`,
:class:`~deermem.memory.Explanation`, the injection manifest ...), with the
camelCase keys those results use everywhere else in deermem, built from the
library's ``to_dict()`` output so there is one spelling of each record.

A fact view carries the fact's content (it is the caller's own memory);
receipts and manifests never do.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from deermem.memory import Explanation, RestoreResult, SearchResult
from deermem.model import Fact
from deermem.recall import InjectionManifest
from deermem.store import EvictionReceipt

__all__ = [
    "AddOutcome",
    "AddResult",
    "ArchiveView",
    "ContextResult",
    "FactView",
    "ForgetResult",
    "InjectedView",
    "ManifestView",
    "OmittedView",
    "ReceiptEntryView",
    "ReceiptView",
    "RestoreView",
    "SearchHitView",
    "SearchResults",
    "StandingView",
    "WhyResult",
]

# Unknown keys in a library record are dropped, not an error: a newer record
# gains fields before this view names them.
_VIEW = ConfigDict(extra="ignore")

AddOutcome = Literal["stored", "duplicate", "evicted"]


class FactView(BaseModel):
    """A stored fact: the fields an agent reads (every field: ``deermem facts show``)."""

    model_config = _VIEW

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
    def of(cls, fact: Fact) -> FactView:
        return cls.model_validate(fact.to_dict())


class ReceiptEntryView(BaseModel):
    """One fact a receipt accounts for: id, category and the decision's numbers."""

    model_config = _VIEW

    factId: str
    category: str
    score: float | None = None
    components: dict[str, float] = {}
    rank: int | None = None
    margin: float | None = Field(None, description="score gap to the lowest fact that stayed")


class ReceiptView(BaseModel):
    """An eviction receipt: why facts left the library (never their content)."""

    model_config = _VIEW

    receiptId: str | None = None
    occurredAt: str
    reason: str = Field(description="capacity, deleted, replaced, staleness ...")
    trigger: str | None = Field(None, description="manual, extraction, import, restore")
    policyVersion: str
    maxFacts: int
    occupancy: int | None = None
    reservedCorrectionSlots: int = 0
    evicted: list[ReceiptEntryView]
    shadow: dict[str, Any] | None = Field(None, description="the shadow policy's view, if on")

    @classmethod
    def of(cls, receipt: EvictionReceipt) -> ReceiptView:
        return cls.model_validate(receipt.to_dict())


def receipts_of(receipts: tuple[EvictionReceipt, ...]) -> list[ReceiptView]:
    return [ReceiptView.of(receipt) for receipt in receipts]


class AddResult(BaseModel):
    """What ``memory_add`` did: the capacity gate's decision, never a silent drop."""

    outcome: AddOutcome = Field(
        description=(
            "stored: the fact is in memory; duplicate: an equal fact was already stored "
            "(nothing changed); evicted: the library was full and the new fact ranked "
            "lowest, so it went straight to the archive (memory_restore can bring it back)"
        )
    )
    factId: str = Field(
        description="the new fact (stored, evicted) or the equal fact already stored (duplicate)"
    )
    evicted: list[str] = Field(description="ids the capacity gate evicted in this change")
    receipts: list[ReceiptView]


class ForgetResult(BaseModel):
    """What ``memory_forget`` did."""

    factId: str
    archived: bool = Field(
        description="true: in the archive, memory_restore brings it back; "
        "false: deleted for good (the server runs with eviction_mode: delete)"
    )


class RestoreView(BaseModel):
    """What the capacity gate did with a restored fact."""

    factId: str
    restored: bool = Field(description="false when the gate evicted it again (library full)")
    evicted: list[str]
    receipts: list[ReceiptView]

    @classmethod
    def of(cls, result: RestoreResult) -> RestoreView:
        return cls(
            factId=result.fact_id,
            restored=result.restored,
            evicted=list(result.evicted),
            receipts=receipts_of(result.receipts),
        )


class SearchHitView(BaseModel):
    fact: FactView
    score: float
    matchType: Literal["fts5", "hybrid", "substring"]
    bm25: float | None = None

    @classmethod
    def of(cls, hit: SearchResult) -> SearchHitView:
        return cls(
            fact=FactView.of(hit.fact), score=hit.score, matchType=hit.match_type, bm25=hit.bm25
        )


class SearchResults(BaseModel):
    """The best matches, best first."""

    results: list[SearchHitView]


class InjectedView(BaseModel):
    """A fact line in the prompt and why it is there."""

    model_config = _VIEW

    factId: str
    category: str
    pool: Literal["guaranteed", "ranked"] = Field(
        description="guaranteed: a protected category (corrections) within its own budget; "
        "ranked: by the capacity policy's score within the rest"
    )
    rank: int
    score: float
    tokens: int


class OmittedView(BaseModel):
    """A fact left out of the prompt and why."""

    model_config = _VIEW

    factId: str
    reason: Literal["over-budget", "after-stop", "invalid-content"]
    category: str | None = None
    pool: Literal["guaranteed", "ranked"] | None = None
    rank: int | None = None
    score: float | None = None
    tokens: int | None = None


class ManifestView(BaseModel):
    """How the prompt text was put together (ids and numbers, no content)."""

    model_config = _VIEW

    enabled: bool
    policy: str
    maxTokens: int
    guaranteedTokenBudget: int
    guaranteedCategories: list[str]
    sections: list[str]
    injected: list[InjectedView]
    omitted: list[OmittedView]
    summaryTokens: int
    guaranteedTokens: int
    rankedTokens: int
    budgetTokens: int
    summariesTruncated: bool

    @classmethod
    def of(cls, manifest: InjectionManifest) -> ManifestView:
        return cls.model_validate(manifest.to_dict())


class ContextResult(BaseModel):
    """The memory block for a prompt, and why each fact is (or is not) in it."""

    text: str = Field(description="the <memory> block to put in the prompt; empty if nothing")
    manifest: ManifestView


class StandingView(BaseModel):
    """Where an active fact ranks under the current policy."""

    model_config = _VIEW

    policyVersion: str
    rank: int = Field(description="1 = kept longest when the library is full")
    occupancy: int
    maxFacts: int
    score: float
    components: dict[str, float]
    protected: bool = Field(description="its category holds reserved slots (hybrid-v1)")


class ArchiveView(BaseModel):
    """Why an archived fact left, and when."""

    model_config = _VIEW

    archivedAt: str
    reason: str
    trigger: str | None = None
    receiptId: str | None = None
    policyVersion: str | None = None
    eviction: ReceiptEntryView | None = None


class WhyResult(BaseModel):
    """Why a fact is active (its rank), archived (why it left) or gone (its receipts)."""

    factId: str
    status: Literal["active", "archived", "gone"]
    fact: FactView | None
    standing: StandingView | None
    archive: ArchiveView | None
    receipts: list[ReceiptView]

    @classmethod
    def of(cls, explanation: Explanation) -> WhyResult:
        entry = explanation.archive_entry
        standing = explanation.standing
        return cls(
            factId=explanation.fact_id,
            status=explanation.status,
            fact=None if explanation.fact is None else FactView.of(explanation.fact),
            standing=None if standing is None else StandingView.model_validate(standing.to_dict()),
            archive=None if entry is None else ArchiveView.model_validate(entry.to_dict()),
            receipts=receipts_of(explanation.receipts),
        )
