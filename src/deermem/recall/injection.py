"""Prompt injection: summaries and facts under token budgets, with a guarantee.

:func:`build_injection` is pure: the facts, the summaries, the usage data and
the clock are arguments; it reads no file and no clock. The same input gives
the same text and the same manifest, byte for byte — also when the facts come
in another order, because they are ranked by policy score and then by id.

How the budget is spent:

1. Every valid fact is ranked by the configured capacity policy — the same
   ranking :func:`~deermem.policy.select_facts_for_capacity` computes (by
   confidence under ``confidence``, by the ``hybrid-v1`` score under
   ``hybrid-v1``); nothing here re-implements a score.
2. Facts of the protected categories (``protected_categories``, by default
   ``correction``) are taken first, in rank order, while their lines fit in
   ``guaranteed_token_budget``. This is the guarantee: ten confident
   preferences cannot push a correction out of the prompt.
3. Everything else — and protected facts that did not fit the guaranteed
   budget, which now compete on their rank — is taken in rank order while it
   fits in what is left of ``max_injection_tokens`` after the summaries, the
   ``Facts:`` header and the guaranteed lines.

Both pools are greedy and stop at the first line that does not fit: a shorter,
lower-ranked line never slips in behind a longer, better one, so the ranking
the policy chose is the ranking the model sees. The guaranteed pool can never
take more than its own budget from the rest.

Costs are counted per line, newline included, and summed
(:meth:`~deermem.recall.tokens.TokenCounter.line`), and the sum is never
below the count of the whole text (:meth:`Injection.exact_tokens` counts
the text itself), so a text within the budget as summed is within it as
counted. With ``tiktoken`` lines begin with a non-blank character, so the
sum is the whole text's count give or take a token where a line end merges
with a blank separator; the ``char`` estimate rounds each line up, so its
sum may exceed the whole text's estimate by up to a token a line.

If the summaries are so long that the text would exceed
``max_injection_tokens`` plus the guaranteed lines, the summaries are cut
(ending in ``...``) and the facts are kept. A caller's budget for one prompt
(:attr:`InjectionSettings.strict_budget`) bounds the whole block, the text
in its ``<memory>`` lines, since that is what goes into the prompt: the
guaranteed pool is held to fit in it with the ``Facts:`` header, and the
summaries are cut to what the facts leave of it.

The text is laid out as the original lays it out (:class:`Summaries`,
:func:`fact_line`) and every piece of stored text is made inert before it is
placed (:func:`inert`); the :class:`InjectionManifest` says what went in, what
did not, and why. :func:`memory_injection` reads one scope from a store and
lays it out.
"""

from __future__ import annotations

import dataclasses
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final, Literal, NamedTuple

from pydantic import ConfigDict
from pydantic.alias_generators import to_camel

from deermem.model import Fact, category_key
from deermem.policy import (
    POLICY_HYBRID_V1,
    CapacityPolicy,
    coerce_confidence,
    select_facts_for_capacity,
)
from deermem.recall.tokens import TOKEN_COUNTING_MODES, TokenCounter, token_counter

if TYPE_CHECKING:
    from deermem.config import MemoryConfig
    from deermem.model import Scope
    from deermem.store import Store

__all__ = [
    "FACTS_HEADER",
    "HISTORY_HEADER",
    "MEMORY_CLOSE",
    "MEMORY_OPEN",
    "OMISSION_REASONS",
    "USER_CONTEXT_HEADER",
    "InjectedFact",
    "Injection",
    "InjectionManifest",
    "InjectionSettings",
    "OmittedFact",
    "Summaries",
    "build_injection",
    "fact_line",
    "inert",
    "memory_injection",
    "wrap_memory_block",
]

# --- the layout and its escaping --------------------------------------------------------
#
# How memory is written into a prompt: the sections, the line formats, the escaping.
#
# The injected text sits inside a ``<memory>`` block that the host adds around
# it, and everything in it comes from stored data that a user, a model or an
# import wrote. So every piece of stored text is made inert before it is placed:
#
# * ``&``, ``<`` and ``>`` are HTML-escaped (quotes are left alone, so ordinary
#   text stays byte-identical), so no stored text can open or close the
#   ``<memory>`` block or any other tag (``</memory>``, ``<system>``,
#   ``<|im_start|>``);
# * line breaks of every kind, and other control characters, become single
#   spaces, so a stored text is always exactly one line: it cannot start a new
#   section (``Facts:``), fake a fact line (``- [correction | 1.00] ...``) or a
#   Markdown heading, because those only mean something at the start of a line
#   and every line starts with a prefix deermem writes.
#
# The layout is the original's: ``User Context:``, ``History:`` and ``Facts:``
# sections joined by one blank line, empty ones left out.

USER_CONTEXT_HEADER: Final = "User Context:"
HISTORY_HEADER: Final = "History:"
FACTS_HEADER: Final = "Facts:"
MEMORY_OPEN: Final = "<memory>"
MEMORY_CLOSE: Final = "</memory>"

# Line breaks (every Unicode kind) and the other C0/C1 controls except tab,
# with the spaces around them: all collapse into one space.
_BREAKS: Final = re.compile(r"[ \t]*[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]+[ \t]*")

# Characters that delimit the ``[category | 0.90]`` label; a category cannot
# contain them (stored categories never do; raw mappings might).
_LABEL_DELIMITERS: Final = str.maketrans("", "", "[]|")

# (document section, key, label) in the order they are rendered.
_USER_LINES: Final = (
    ("workContext", "Work"),
    ("personalContext", "Personal"),
    ("topOfMind", "Current Focus"),
)
_HISTORY_LINES: Final = (
    ("recentMonths", "Recent"),
    ("earlierContext", "Earlier"),
    ("longTermBackground", "Background"),
)


def inert(text: str) -> str:
    """Make stored text safe to place on one line of the memory block.

    Escapes ``&``, ``<`` and ``>``, folds every line break and control
    character (with the blanks around it) into one space, and strips the ends.
    Text without any of those characters comes back unchanged.
    """
    if not text.isprintable():  # line breaks, controls and tabs are "not printable"
        text = _BREAKS.sub(" ", text)
    if "&" in text or "<" in text or ">" in text:
        # html.escape(text, quote=False), spelled out: the html module loads
        # its table of 2,000 entities, which nothing here needs.
        text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.strip()


def fact_line(category: str, confidence: float, content: str, avoid: str | None = None) -> str:
    """One fact as the model sees it: ``- [category | 0.90] content``.

    Args:
        category: the stored category (escaped here, and stripped of ``[``,
            ``]`` and ``|`` so it cannot fake a second label).
        confidence: shown with two decimals.
        content: the fact's text (escaped here).
        avoid: for a correction, the mistake it corrects; appended as
            ``(avoid: <error>)`` when not blank.
    """
    label = inert(category).translate(_LABEL_DELIMITERS)
    line = f"- [{label} | {confidence:.2f}] {inert(content)}"
    if avoid is not None:
        error = inert(avoid)
        if error:
            line = f"{line} (avoid: {error})"
    return line


class Summaries(NamedTuple):
    """The six user-global summaries, as plain text (empty when unknown)."""

    work: str = ""
    personal: str = ""
    top_of_mind: str = ""
    recent: str = ""
    earlier: str = ""
    background: str = ""

    @classmethod
    def from_document(cls, document: Mapping[str, object] | None) -> Summaries:
        """Read the summaries from a memory document (``{"user": ..., "history": ...}``).

        Each summary lives at ``document[section][key]["summary"]``. Missing or
        malformed parts read as empty; a summary that is not a string is
        converted with ``str()`` rather than dropped.
        """
        if not isinstance(document, Mapping):
            return cls()
        user = [_summary(document, "user", key) for key, _ in _USER_LINES]
        history = [_summary(document, "history", key) for key, _ in _HISTORY_LINES]
        return cls(*user, *history)

    def sections(self) -> list[list[str]]:
        """The rendered, non-empty summary sections, each a list of lines with its header."""
        user = _section(
            USER_CONTEXT_HEADER, _USER_LINES, (self.work, self.personal, self.top_of_mind)
        )
        history = _section(
            HISTORY_HEADER, _HISTORY_LINES, (self.recent, self.earlier, self.background)
        )
        return [lines for lines in (user, history) if lines]


def wrap_memory_block(body: str) -> str:
    """Wrap injected text in the ``<memory>`` block a host places in the prompt.

    Empty text gives an empty string: no block at all rather than an empty one.
    """
    if not body:
        return ""
    return f"{MEMORY_OPEN}\n{body}\n{MEMORY_CLOSE}"


def _summary(document: Mapping[str, object], section: str, key: str) -> str:
    part = document.get(section)
    entry = part.get(key) if isinstance(part, Mapping) else None
    value = entry.get("summary") if isinstance(entry, Mapping) else None
    if value is None:
        return ""
    return value if isinstance(value, str) else str(value)


def _section(header: str, keys: Iterable[tuple[str, str]], summaries: Iterable[str]) -> list[str]:
    """A section's lines: the header, then each non-empty summary under its key's label."""
    lines = []
    for (_, label), raw in zip(keys, summaries, strict=True):
        text = inert(raw)
        if text:
            lines.append(f"- {label}: {text}")
    return [header, *lines] if lines else []


# --- the manifest ---------------------------------------------------------------------
#
# The injection manifest: what went into the prompt, what did not, and why.
#
# A prompt built under a token budget silently leaves things out; when an agent
# "forgets" a correction, the first question is whether the correction was in
# the prompt at all. The manifest answers it without showing any fact content:
# ids, categories, scores, token costs and reasons only, so it can be logged,
# printed by ``deermem context --explain`` or stored next to an evaluation.

Pool = Literal["guaranteed", "ranked"]
POOL_GUARANTEED: Final = "guaranteed"
POOL_RANKED: Final = "ranked"

OmissionReason = Literal["over-budget", "after-stop", "invalid-content"]
# The JSON form of the three manifest records below (--json, the HTTP API, the MCP tools):
# pydantic's dump of their fields, camelCase keys (``factId``); see deermem.model.to_json.
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
        tokens: what its line costs, newline included (the ``char``
            estimate rounded up).
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
            facts with invalid content last, by id.
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


# --- the injection --------------------------------------------------------------------

ELLIPSIS: Final = "..."
_HEADERS: Final = frozenset({USER_CONTEXT_HEADER, HISTORY_HEADER, FACTS_HEADER})
_PARTIAL_ENTITY: Final = re.compile(r"&[#0-9A-Za-z]*$")
# The fields a capacity policy reads, copied for ranking.
_RANKING_FIELDS: Final = ("confidence", "createdAt", "lastConfirmedAt")


@dataclass(frozen=True, slots=True)
class InjectionSettings:
    """The injection part of the configuration.

    Attributes:
        max_tokens: the overall budget (``max_injection_tokens``).
        guaranteed_token_budget: the budget held for protected categories.
        guaranteed_categories: the protected categories
            (``protected_categories``: the one rule table that also drives
            the capacity reserve and the staleness exemption).
        token_counting: ``tiktoken`` or ``char``.
        enabled: ``injection_enabled``; when false the text is empty.
        ranking: the capacity policy whose ranking orders the facts.
        strict_budget: ``max_tokens`` bounds the whole block
            (:attr:`Injection.block`: the text in its ``<memory>`` lines),
            the guaranteed lines and their header included — a caller's
            budget for one prompt, which must hold. Without it (``max_injection_tokens``)
            the guaranteed lines may take the text beyond ``max_tokens`` by
            their own size.
    """

    max_tokens: int = 2000
    guaranteed_token_budget: int = 500
    guaranteed_categories: tuple[str, ...] = ("correction",)
    token_counting: str = "tiktoken"
    enabled: bool = True
    ranking: CapacityPolicy = field(default_factory=CapacityPolicy)
    strict_budget: bool = False

    def __post_init__(self) -> None:
        categories: object = self.guaranteed_categories  # callers outside mypy pass anything
        if isinstance(categories, str):
            raise TypeError(
                "guaranteed_categories must be a sequence of category names, not one string"
            )
        if self.max_tokens < 0 or self.guaranteed_token_budget < 0:
            raise ValueError(
                "token budgets must not be negative: "
                f"max_tokens={self.max_tokens}, "
                f"guaranteed_token_budget={self.guaranteed_token_budget}"
            )
        if self.token_counting not in TOKEN_COUNTING_MODES:
            raise ValueError(
                f"token_counting must be 'tiktoken' or 'char', got {self.token_counting!r}"
            )

    @classmethod
    def from_config(cls, config: MemoryConfig) -> InjectionSettings:
        """Take the injection keys (and the ranking policy) of a configuration."""
        return cls(
            max_tokens=config.max_injection_tokens,
            guaranteed_token_budget=config.guaranteed_token_budget,
            guaranteed_categories=tuple(config.protected_categories),
            token_counting=config.token_counting,
            enabled=config.injection_enabled,
            ranking=CapacityPolicy.from_config(config),
        )


@dataclass(frozen=True, slots=True)
class Injection:
    """The text to inject and the manifest that explains it."""

    text: str
    counter: TokenCounter = field(repr=False, compare=False)
    manifest: InjectionManifest

    def exact_tokens(self) -> int:
        """The exact token count of :attr:`text`, with the counter the budget used.

        The manifest's ``budget_tokens`` sums the lines, each with its
        newline (the ``char`` estimate of each rounded up); the exact count
        of the joined text is never higher. It is computed on request only:
        the budget already counted every line, and encoding the joined text
        would do that work again.
        """
        return self.counter(self.text)

    @property
    def block(self) -> str:
        """The text inside its ``<memory>`` block (empty when there is no text)."""
        return wrap_memory_block(self.text)


class _Candidate:
    __slots__ = ("category", "fact_id", "fields", "line", "protected", "rank", "score", "tokens")

    def __init__(
        self,
        fact_id: str,
        category: str,
        protected: bool,
        line: str,
        fields: dict[str, object],  # what the policy reads, under a positional id
    ) -> None:
        self.fact_id = fact_id
        self.category = category
        self.protected = protected
        self.line = line
        self.fields = fields
        self.rank = 0
        self.score = 0.0
        self.tokens = 0


def build_injection(
    facts: Sequence[Fact | Mapping[str, Any]],
    *,
    settings: InjectionSettings,
    now: datetime,
    summaries: Summaries | None = None,
    usage: Mapping[str, Mapping[str, object]] | None = None,
    counter: TokenCounter | None = None,
    relevant: Callable[[], Sequence[str]] | None = None,
) -> Injection:
    """Lay out summaries and facts for the prompt, within the token budgets.

    Args:
        facts: the scope's facts (:class:`~deermem.model.Fact` or mappings
            with canonical keys); mappings whose content is missing, not text
            or blank are left out and listed as ``invalid-content``.
        settings: budgets, protected categories, counting mode and policy.
        now: the clock for ``hybrid-v1`` scores (always required, so the
            result never depends on when it is called).
        summaries: the user-global summaries; none when omitted.
        usage: fact id → usage-sidecar entry, read by ``hybrid-v1``.
        counter: the token counter; by default the shared one for
            ``settings.token_counting``.
        relevant: gives the fact ids relevant to the agent's question, most
            relevant first (a search's results). Called only when not every
            fact fits — a search the layout cannot use is never run: within
            each pool (the guaranteed one first, as always) these come first,
            in this order, then the rest in the policy's order. When every
            fact fits, or with none, the text is exactly what it is without.

    Returns:
        The body text (without the ``<memory>`` wrapper; see
        :attr:`Injection.block`) and its manifest.
    """
    count = counter if counter is not None else token_counter(settings.token_counting)
    cost = count.line  # a line with its newline; the sum bounds the whole text's count
    max_tokens = settings.max_tokens
    guaranteed_budget = settings.guaranteed_token_budget
    if settings.strict_budget:
        # A caller's budget is for what goes into the prompt: the block, its <memory>
        # lines included. The guaranteed lines and their header must fit in it themselves.
        max_tokens = max(0, max_tokens - cost(MEMORY_OPEN) - cost(MEMORY_CLOSE))
        guaranteed_budget = min(guaranteed_budget, max(0, max_tokens - cost(FACTS_HEADER)))
    manifest = InjectionManifest(
        enabled=settings.enabled,
        policy=settings.ranking.name,
        token_counting=settings.token_counting,
        token_counter=count.method,
        max_tokens=settings.max_tokens,
        guaranteed_token_budget=guaranteed_budget,
        guaranteed_categories=settings.guaranteed_categories,
    )
    if not settings.enabled:
        return Injection("", count, manifest)

    candidates, invalid = _candidates(facts, settings.guaranteed_categories)
    ranked = _rank(candidates, settings.ranking, usage, now)
    for candidate in ranked:
        candidate.tokens = cost(candidate.line)
    summary_lines = _join_sections((summaries or Summaries()).sections())
    separator = cost("") if summary_lines else 0
    overhead = sum(map(cost, summary_lines)) + separator + cost(FACTS_HEADER)
    guaranteed, chosen, left_out = _select(ranked, max_tokens, guaranteed_budget, overhead)
    order = relevant() if relevant is not None and left_out else ()
    if order:
        place = {fact_id: position for position, fact_id in enumerate(order)}
        # Stable: the relevant facts first by relevance, the others keep the policy's order.
        preferred = sorted(ranked, key=lambda c: place.get(c.fact_id, len(place)))
        guaranteed, chosen, left_out = _select(preferred, max_tokens, guaranteed_budget, overhead)

    fact_lines = [c.line for c in (*guaranteed, *chosen)]
    if fact_lines:
        fact_lines.insert(0, FACTS_HEADER)
    # Overflow: the summaries give way, never the facts. The text may exceed
    # max_tokens by the guaranteed lines, and by nothing else — and under a
    # strict budget not at all (the guaranteed pool was held to fit in it).
    guaranteed_used = sum(c.tokens for c in guaranteed)
    facts_cost = sum(map(cost, fact_lines)) + (separator if fact_lines else 0)
    allowed = max_tokens + (0 if settings.strict_budget else guaranteed_used)
    truncated = bool(summary_lines) and sum(map(cost, summary_lines)) + facts_cost > allowed
    if truncated:
        summary_lines = _truncate(summary_lines, allowed - facts_cost, cost)

    lines = [*summary_lines, *([""] if summary_lines and fact_lines else []), *fact_lines]
    return Injection(
        "\n".join(lines),
        count,
        dataclasses.replace(
            manifest,
            sections=tuple(line.rstrip(":") for line in lines if line in _HEADERS),
            injected=(
                *_injected(guaranteed, POOL_GUARANTEED),
                *_injected(chosen, POOL_RANKED),
            ),
            # By id: the manifest must not depend on the order the facts came in.
            omitted=(*_omissions(left_out), *sorted(invalid, key=lambda o: o.fact_id)),
            summary_tokens=sum(map(cost, summary_lines)),
            guaranteed_tokens=guaranteed_used,
            ranked_tokens=sum(c.tokens for c in chosen),
            budget_tokens=sum(map(cost, lines)),
            summaries_truncated=truncated,
        ),
    )


def _select(
    ranked: list[_Candidate], max_tokens: int, guaranteed_budget: int, overhead: int
) -> tuple[list[_Candidate], list[_Candidate], list[_Candidate]]:
    """Split ranked candidates into (guaranteed, ranked pool, left out).

    ``overhead`` is what the summaries, their separator and the ``Facts:``
    header cost; the ranked pool gets ``max_tokens`` minus that minus the
    guaranteed lines.
    """
    guaranteed, spilled = _take([c for c in ranked if c.protected], guaranteed_budget)
    room = max_tokens - overhead - sum(c.tokens for c in guaranteed)
    spilled_ranks = {c.rank for c in spilled}
    chosen, left_out = _take(
        [c for c in ranked if not c.protected or c.rank in spilled_ranks], room
    )
    return guaranteed, chosen, left_out


def _candidates(
    facts: Iterable[Fact | Mapping[str, Any]], protected_categories: Iterable[str]
) -> tuple[list[_Candidate], list[OmittedFact]]:
    """Render each valid fact's line; list the others as invalid."""
    protected = {category_key(name) for name in protected_categories}
    candidates: list[_Candidate] = []
    invalid: list[OmittedFact] = []
    for fact in facts:
        content: object
        if isinstance(fact, Fact):
            fact_id, category, content = fact.id, fact.category, fact.content
            source_error = fact.sourceError
            fields = {name: getattr(fact, name) for name in _RANKING_FIELDS}
        else:
            raw_id = fact.get("id")
            fact_id = raw_id if isinstance(raw_id, str) else "" if raw_id is None else str(raw_id)
            raw_category = fact.get("category")
            # A fact without an explicit category is shown as the default but
            # never joins a protected pool (not even a protected "context").
            category = raw_category if isinstance(raw_category, str) else ""
            content = fact.get("content")
            source_error = fact.get("sourceError")
            fields = {name: fact.get(name) for name in _RANKING_FIELDS}
        if not isinstance(content, str) or not inert(content):
            invalid.append(OmittedFact(fact_id=fact_id, reason="invalid-content"))
            continue
        key = category_key(category)
        shown = category.strip() or "context"
        avoid = None
        if key == "correction" and source_error is not None:
            avoid = source_error if isinstance(source_error, str) else str(source_error)
        line = fact_line(shown, coerce_confidence(fields["confidence"]), content, avoid)
        candidates.append(_Candidate(fact_id, shown, bool(key) and key in protected, line, fields))
    return candidates, invalid


def _rank(
    candidates: list[_Candidate],
    ranking: CapacityPolicy,
    usage: Mapping[str, Mapping[str, object]] | None,
    now: datetime,
) -> list[_Candidate]:
    """Order candidates by the capacity policy's ranking, ties by fact id.

    The policy is asked to select 0 facts, which makes it score and rank every
    one; its evicted records, read from the last, are the full ranking. Facts
    go in sorted by id under positional ids, so ties break by fact id and
    duplicate ids cannot collide.
    """
    if not candidates:
        return []
    ordered = sorted(candidates, key=lambda c: c.fact_id)
    items = [{"id": str(n), **c.fields} for n, c in enumerate(ordered)]
    positional_usage: dict[str, Mapping[str, object]] = {}
    if usage:
        for n, candidate in enumerate(ordered):
            entry = usage.get(candidate.fact_id)
            if entry is not None:
                positional_usage[str(n)] = entry
    decision = select_facts_for_capacity(
        items, max_facts=0, policy=ranking, usage=positional_usage, now=now
    )
    result: list[_Candidate] = []
    for position, record in enumerate(reversed(decision.evicted), start=1):
        candidate = ordered[int(record.fact_id)]
        candidate.rank = position
        candidate.score = record.score
        result.append(candidate)
    return result


def _take(pool: list[_Candidate], budget: int) -> tuple[list[_Candidate], list[_Candidate]]:
    """Take lines in order while they fit; stop at the first that does not."""
    used = 0
    for position, candidate in enumerate(pool):
        if used + candidate.tokens > budget:
            return pool[:position], pool[position:]
        used += candidate.tokens
    return pool, []


def _injected(chosen: list[_Candidate], pool: Pool) -> Iterable[InjectedFact]:
    for c in chosen:
        yield InjectedFact(c.fact_id, c.category, pool, c.rank, c.score, c.tokens)


def _omissions(left_out: list[_Candidate]) -> Iterable[OmittedFact]:
    for position, c in enumerate(left_out):
        yield OmittedFact(
            fact_id=c.fact_id,
            reason="over-budget" if position == 0 else "after-stop",
            category=c.category,
            pool=POOL_RANKED,
            rank=c.rank,
            score=c.score,
            tokens=c.tokens,
        )


def _join_sections(sections: list[list[str]]) -> list[str]:
    lines: list[str] = []
    for section in sections:
        if lines:
            lines.append("")
        lines.extend(section)
    return lines


def _truncate(lines: list[str], allowance: int, cost: Callable[[str], int]) -> list[str]:
    """The longest prefix of ``lines`` that, ended with ``...``, costs at most ``allowance``.

    Cut by characters (binary search), never inside an HTML entity; an empty
    list when not even a few characters fit.
    """
    text = "\n".join(lines)

    def cut(length: int) -> list[str]:
        head = _PARTIAL_ENTITY.sub("", text[: _character_start(text, length)]).rstrip()
        return f"{head}\n{ELLIPSIS}".split("\n") if head else []

    def fits(length: int) -> bool:
        candidate = cut(length)
        return bool(candidate) and sum(map(cost, candidate)) <= allowance

    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if fits(middle):
            low = middle
        else:
            high = middle - 1
    return cut(low) if low and fits(low) else []


_ZWJ: Final = "\u200d"
_VIRAMA: Final = 9  # the canonical combining class of viramas


def _character_start(text: str, position: int) -> int:
    """``position``, or the nearest before it that starts a user-perceived character.

    A cut by code points would take an accent off its letter (``e`` + U+0301
    would read ``e``), a virama off its consonant, a skin tone, a variation
    selector or the rest of a ZWJ sequence off its emoji, half a flag. This
    backs off past what attaches to the code point before it: marks (variation
    selectors among them), emoji modifiers and tags, both sides of a ZWJ, a
    letter after a virama (an Indic conjunct), the second regional indicator
    of a pair — so the text that stays is whole characters.
    """
    while 0 < position < len(text) and _attaches(text, position):
        position -= 1
    return position


def _attaches(text: str, position: int) -> bool:
    """Whether ``text[position]`` belongs to the character that ``text[position - 1]`` is in."""
    char, before = text[position], text[position - 1]
    code = ord(char)
    if unicodedata.category(char)[0] == "M" or _ZWJ in (char, before):
        return True
    if 0x1F3FB <= code <= 0x1F3FF or 0xE0020 <= code <= 0xE007F:  # skin tones, tags
        return True
    if unicodedata.combining(before) == _VIRAMA and char.isalpha():
        return True
    if _regional(char) and _regional(before):
        run = 0  # regional indicators pair up from the start of their run
        while position - run > 0 and _regional(text[position - run - 1]):
            run += 1
        return run % 2 == 1
    return False


def _regional(char: str) -> bool:
    return 0x1F1E6 <= ord(char) <= 0x1F1FF


def memory_injection(
    store: Store,
    scope: Scope,
    config: MemoryConfig,
    now: datetime,
    *,
    max_tokens: int | None = None,
    facts: bool = True,
    relevant: Callable[[], Sequence[str]] | None = None,
) -> Injection:
    """Lay out one scope's summaries and (unless ``facts`` is off) facts for the prompt
    (see ``build_injection``; ``relevant`` is passed on to it).

    ``max_tokens`` replaces ``max_injection_tokens`` for this one prompt and
    bounds the whole block (a strict budget): the guaranteed budget shrinks to
    fit in it with its header, and the summaries get what the facts leave.
    """
    settings = InjectionSettings.from_config(config)
    if max_tokens is not None:
        settings = dataclasses.replace(settings, max_tokens=max_tokens, strict_budget=True)
    if not settings.enabled:
        return build_injection((), settings=settings, now=now)
    snapshot = store.load(scope)
    usage = None
    if facts and settings.ranking.name == POLICY_HYBRID_V1:
        usage = {key: entry.to_dict() for key, entry in store.usage(scope).items()}
    return build_injection(
        snapshot.facts if facts else (),
        settings=settings,
        now=now,
        summaries=Summaries.from_document(snapshot.summaries.to_dict()),
        usage=usage,
        relevant=relevant,
    )
