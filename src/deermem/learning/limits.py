"""Bounds on what a model's answer may make deermem do.

A model's answer is untrusted input: a confused small model, a prompt
injection in the conversation or a hostile endpoint can return megabytes of
JSON, thousands of entries or strings longer than any fact. Every bound
below is far above what an honest answer to one conversation needs, and
what happens beyond it is fixed:

* the whole answer longer than :data:`MAX_RESPONSE_CHARS`, or needing more
  than :data:`MAX_SCAN_CHARS` of JSON scanning or :data:`MAX_DECODE_ATTEMPTS`
  decode attempts to find the update: **no update** (nothing changes);
* a list longer than its limit: the entries beyond it are **ignored**; the
  first ones still count;
* a new fact whose content, category, confidence text or ``sourceError`` is
  over its limit: the fact is **malformed**, exactly like a fact with no
  content (so a response that also removes facts is rejected whole);
* a summary over its limit: that section is **ignored**;
* an id over :data:`MAX_ID_CHARS`: that entry is **ignored**;
* a reason over :data:`MAX_REASON_CHARS`: **cut** (only its presence is used).

Every entry dropped this way is counted, by the limit it exceeded
(:class:`OverLimits`), and the count reaches the update's report and
``deermem ingest``: a model that keeps running into a limit is a model to
look at, not one to trust in silence.

Deep nesting needs no limit of its own: only fields at fixed depths are
read, and a JSON document nested past the interpreter's recursion limit does
not decode (no update).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Final

from deermem.model import (
    MAX_CATEGORY_CHARS,
    MAX_CONTENT_CHARS,
    MAX_FACT_ID_LENGTH,
    MAX_SOURCE_ERROR_CHARS,
    MAX_SUMMARY_CHARS,
)

__all__ = [
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
    "OverLimits",
]

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
