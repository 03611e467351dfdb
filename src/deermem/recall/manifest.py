"""The injection manifest: what went into the prompt, what did not, and why.

A prompt built under a token budget silently leaves things out; when an agent
"forgets" a correction, the first question is whether the correction was in
the prompt at all. The manifest answers it without showing any fact content:
ids, categories, scores, token costs and reasons only, so it can be logged,
printed by ``deermem context --explain`` or stored next to an evaluation.
Its JSON form (``--json``, the HTTP API, the MCP tools) is pydantic's dump
of these records: their fields under camelCase keys.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from pydantic import ConfigDict
from pydantic.alias_generators import to_camel

__all__ = [
    "OMISSION_REASONS",
    "POOL_GUARANTEED",
    "POOL_RANKED",
    "InjectedFact",
    "InjectionManifest",
    "OmissionReason",
    "OmittedFact",
    "Pool",
]

Pool = Literal["guaranteed", "ranked"]
POOL_GUARANTEED: Final = "guaranteed"
POOL_RANKED: Final = "ranked"

OmissionReason = Literal["over-budget", "after-stop", "invalid-content"]
# The JSON form of the three records below: their fields, camelCase keys (``factId``).
_JSON: Final = ConfigDict(alias_generator=to_camel, serialize_by_alias=True)

OMISSION_REASONS: Final[dict[str, str]] = {
    "over-budget": "its line did not fit in the tokens left in its pool",
    "after-stop": "a higher-ranked line in its pool did not fit; selection stops there",
    "invalid-content": "its content is missing, not text, or blank",
}


@dataclass(frozen=True, slots=True)
class InjectedFact:
    """One fact line in the prompt.

    Attributes:
        fact_id: the fact's id.
        category: its stored category.
        pool: ``guaranteed`` (a protected category, inside the guaranteed
            budget) or ``ranked`` (competing for the rest of the budget; a
            protected fact lands here when the guaranteed budget was full).
        rank: 1-based position in the policy's ranking of all valid facts.
        score: the policy score it was ranked by (its confidence under
            ``confidence``).
        tokens: what its line costs, newline included.
    """

    __pydantic_config__ = _JSON

    fact_id: str
    category: str
    pool: Pool
    rank: int
    score: float
    tokens: int


@dataclass(frozen=True, slots=True)
class OmittedFact:
    """One fact left out of the prompt.

    Attributes:
        fact_id: the fact's id (``""`` if it had none).
        reason: ``over-budget``, ``after-stop`` or ``invalid-content``
            (see :data:`OMISSION_REASONS`).
        category: its category (``None`` for invalid content).
        pool: the pool it competed in (``None`` for invalid content).
        rank: its rank among valid facts (``None`` for invalid content).
        score: its policy score (``None`` for invalid content).
        tokens: what its line would have cost (``None`` for invalid content).
    """

    __pydantic_config__ = _JSON

    fact_id: str
    reason: OmissionReason
    category: str | None = None
    pool: Pool | None = None
    rank: int | None = None
    score: float | None = None
    tokens: int | None = None


@dataclass(frozen=True, slots=True)
class InjectionManifest:
    """How one injected text was put together.

    Attributes:
        enabled: false when injection is switched off (the text is empty).
        policy: the ranking policy (``confidence`` or ``hybrid-v1``).
        token_counting: the configured counting mode.
        token_counter: what was actually counted with; differs from
            ``token_counting`` only when the vocabulary could not be loaded.
        max_tokens: the overall budget.
        guaranteed_token_budget: the budget of the guaranteed pool.
        guaranteed_categories: the protected categories, as configured.
        sections: the section headers present in the text, in order.
        injected: the fact lines, in the order they appear.
        omitted: facts left out, guaranteed pool first, then in rank order;
            facts with invalid content last.
        summary_tokens: budget cost of the summary sections as injected.
        guaranteed_tokens: cost of the guaranteed lines.
        ranked_tokens: cost of the ranked lines.
        budget_tokens: the whole text as the budget counts it (every line
            with its newline, blank separators included).
        summaries_truncated: the summaries were cut to keep the facts.
    """

    __pydantic_config__ = _JSON

    enabled: bool
    policy: str
    token_counting: str
    token_counter: str
    max_tokens: int
    guaranteed_token_budget: int
    guaranteed_categories: tuple[str, ...]
    sections: tuple[str, ...] = ()
    injected: tuple[InjectedFact, ...] = ()
    omitted: tuple[OmittedFact, ...] = ()
    summary_tokens: int = 0
    guaranteed_tokens: int = 0
    ranked_tokens: int = 0
    budget_tokens: int = 0
    summaries_truncated: bool = False

    @property
    def injected_ids(self) -> tuple[str, ...]:
        return tuple(item.fact_id for item in self.injected)

    @property
    def omitted_ids(self) -> tuple[str, ...]:
        return tuple(item.fact_id for item in self.omitted)
