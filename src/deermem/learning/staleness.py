"""Staleness review: which aged facts the model is asked about, and what it may do.

A fact is *aged* when its review clock — ``lastConfirmedAt`` when it can be
read, else ``createdAt`` — is older than its window: its own
``expected_valid_days`` when that is a usable day count, else
``staleness_age_days`` (90). Facts of the protected categories (the one
``protected_categories`` rule table, by default ``correction``) are never
aged, and a fact whose clock cannot be read is skipped rather than guessed.

When the review is enabled and at least ``staleness_min_candidates`` facts
are aged, the prompt lists them and the model may propose to remove
(``staleFactsToRemove``) or extend (``staleFactsToExtend``) each. Whatever
it proposes, at apply time:

* only ids that are aged *now* are acted on (also when the review is
  switched off — a model cannot use the stale lists to remove fresh facts);
* at most ``staleness_max_removals_per_cycle`` are removed, lowest
  confidence first (an unreadable confidence counts as 0.5);
* an extension applies only to an aged fact not proposed for removal (even
  one the cap spared), and sets ``expected_valid_days`` to the days since
  creation plus the extension, at most ``staleness_max_extension_days``.

Every date computation is guarded: a window too large for a ``datetime``
means "not aged", never a crash. The clock is an argument.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Final

from deermem.learning._text import display_category, escape_text
from deermem.learning._values import read_positive_days
from deermem.learning.responses import StaleExtension, StaleRemoval
from deermem.learning.settings import UpdateSettings
from deermem.model import Fact, category_key, parse_timestamp
from deermem.policy import coerce_confidence
from deermem.policy.scoring import as_utc

__all__ = [
    "StalenessOutcome",
    "effective_window_days",
    "is_protected",
    "read_expected_valid_days",
    "review_clock",
    "review_due",
    "review_staleness",
    "shift_days",
    "stale_candidate_lines",
    "stale_candidates",
]

_MAX_TIMEDELTA_DAYS: Final = timedelta.max.days


def read_expected_valid_days(fact: Fact) -> int | None:
    """The fact's own window in days, when it holds a usable one (see ``read_positive_days``)."""
    return read_positive_days(fact.expected_valid_days)


def effective_window_days(fact: Fact, age_days: int) -> int:
    """The fact's window: its own ``expected_valid_days``, else ``age_days``.

    A stored window above the creation cap is used as it is: the cap limits
    what a model may *create*, not what a person wrote into a file.
    """
    own = read_expected_valid_days(fact)
    return age_days if own is None else own


def shift_days(moment: datetime, days: int) -> datetime | None:
    """``moment + days``, or ``None`` when the result is outside what ``datetime`` holds."""
    if abs(days) > _MAX_TIMEDELTA_DAYS:
        return None
    try:
        return moment + timedelta(days=days)
    except OverflowError:
        return None


def review_clock(fact: Fact) -> datetime | None:
    """When the fact's window started: last confirmed, else created; ``None`` if unreadable."""
    confirmed = parse_timestamp(fact.lastConfirmedAt)
    return confirmed if confirmed is not None else parse_timestamp(fact.createdAt)


def is_protected(fact: Fact, protected_categories: Collection[str]) -> bool:
    """Whether the fact's category is in the protected rule table (compared as the
    capacity gate compares: stripped and lower-cased)."""
    return category_key(fact.category) in protected_categories


def stale_candidates(
    facts: Sequence[Fact], *, now: datetime, settings: UpdateSettings
) -> tuple[Fact, ...]:
    """The aged, unprotected facts, in library order."""
    now = as_utc(now)
    protected = frozenset(category_key(name) for name in settings.protected_categories)
    aged: list[Fact] = []
    for fact in facts:
        if is_protected(fact, protected):
            continue
        start = review_clock(fact)
        if start is None:
            continue
        deadline = shift_days(start, effective_window_days(fact, settings.staleness_age_days))
        if deadline is not None and deadline < now:
            aged.append(fact)
    return tuple(aged)


def review_due(candidates: Sequence[Fact], settings: UpdateSettings) -> bool:
    """Whether the prompt asks for a review: enabled and enough aged facts."""
    return (
        settings.staleness_review_enabled and len(candidates) >= settings.staleness_min_candidates
    )


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


@dataclass(frozen=True, slots=True)
class StalenessOutcome:
    """The library after the staleness step.

    Attributes:
        facts: the facts left, in order, extended ones replaced.
        removed: ids removed, lowest confidence first.
        extended: id → the new ``expected_valid_days``.
        refused_removals: proposals naming a fact that is not aged now.
        capped_removals: aged proposals left in place by the per-cycle cap.
        refused_extensions: extensions of facts not aged, or proposed for removal.
    """

    facts: tuple[Fact, ...]
    removed: tuple[str, ...] = ()
    extended: Mapping[str, int] = field(default_factory=dict)
    refused_removals: int = 0
    capped_removals: int = 0
    refused_extensions: int = 0


def review_staleness(
    facts: Sequence[Fact],
    removals: Sequence[StaleRemoval],
    extensions: Sequence[StaleExtension],
    *,
    now: datetime,
    settings: UpdateSettings,
) -> StalenessOutcome:
    """Apply the model's stale-fact proposals under the guardrails of the module docstring."""
    if not removals and not extensions:
        return StalenessOutcome(tuple(facts))
    now = as_utc(now)
    candidates = {fact.id: fact for fact in stale_candidates(facts, now=now, settings=settings)}
    proposed = list(dict.fromkeys(entry.fact_id for entry in removals))
    eligible = [fact_id for fact_id in proposed if fact_id in candidates]
    position = {fact.id: index for index, fact in enumerate(facts)}
    eligible.sort(key=lambda i: (coerce_confidence(candidates[i].confidence), position[i]))
    removed = eligible[: settings.staleness_max_removals_per_cycle]
    windows = _extensions(extensions, candidates, set(proposed), now, settings)
    gone = set(removed)
    kept = tuple(
        fact.replace(expected_valid_days=windows[fact.id]) if fact.id in windows else fact
        for fact in facts
        if fact.id not in gone
    )
    return StalenessOutcome(
        facts=kept,
        removed=tuple(removed),
        extended=windows,
        refused_removals=len(proposed) - len(eligible),
        capped_removals=len(eligible) - len(removed),
        refused_extensions=len(extensions) - len(windows),
    )


def _extensions(
    extensions: Sequence[StaleExtension],
    candidates: dict[str, Fact],
    proposed_removals: set[str],
    now: datetime,
    settings: UpdateSettings,
) -> dict[str, int]:
    windows: dict[str, int] = {}
    for entry in extensions:
        fact = candidates.get(entry.fact_id)
        if fact is None or entry.fact_id in proposed_removals or entry.fact_id in windows:
            continue
        created = parse_timestamp(fact.createdAt)
        if created is None:
            continue
        age = max((now - created).days, 0)
        windows[entry.fact_id] = min(
            age + entry.extend_by_days, settings.staleness_max_extension_days
        )
    return windows
