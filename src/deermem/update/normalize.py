"""Normalisation: a model's update object as typed, bounded proposals.

The model's JSON is untrusted. Normalisation keeps what has the right shape
and drops the rest, without judging it: whether a fact is *allowed* in is
the gate's business (:mod:`deermem.update.gate`). The rules are the
original DeerMem's:

* a new fact needs content that is a non-empty string and a confidence that
  is a finite number or numeric text (never a boolean); anything else is
  *malformed* and dropped; a non-string or empty category becomes
  ``context``;
* labels (``scope``, ``durability``, ``authority``) are trimmed and
  lower-cased; a label that is not a string counts as missing;
* a removal given as a bare id string becomes an entry without labels (the
  gate then refuses it as unlabelled);
* **a response that removes facts while any new fact was malformed (or
  ``newFacts`` is not a list) is rejected whole** — a removal may point at
  its replacement by index, and a dropped fact would make that pointer
  unreliable, so nothing of such a response is applied;
* stale-fact entries need a string id; extensions need ``extend_by_days``
  that truncates to a whole number of at least 1.

Bounds on sizes are in :mod:`deermem.update.limits`. Normalising the
payload of a normalised response gives the same response
(:meth:`NormalizedResponse.to_payload`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from deermem.update import limits
from deermem.update._values import read_confidence, read_positive_days
from deermem.update.responses import (
    NewFactProposal,
    NormalizedResponse,
    ReinforceEntry,
    RejectedResponse,
    RemovalEntry,
    StaleExtension,
    StaleRemoval,
    SummaryProposal,
)
from deermem.update.state import HISTORY_SECTIONS, USER_SECTIONS

__all__ = ["normalize_response"]

_MAX_LABEL_CHARS: Final = 64


def normalize_response(data: Mapping[str, object]) -> NormalizedResponse | RejectedResponse:
    """Normalise a decoded update object (see the module docstring for the rules)."""
    ignored: dict[str, int] = {}
    new_facts, malformed = _new_facts(data.get("newFacts"), ignored)
    removals = _removals(data.get("factsToRemove"), ignored)
    if removals and malformed != 0:
        return RejectedResponse("removals-with-malformed-facts", malformed, len(removals))
    return NormalizedResponse(
        summaries=_summaries(data, ignored),
        new_facts=new_facts,
        reinforce=_reinforcements(data.get("factsToReinforce"), ignored),
        remove=removals,
        stale_remove=_stale_removals(data.get("staleFactsToRemove"), ignored),
        stale_extend=_stale_extensions(data.get("staleFactsToExtend"), ignored),
        malformed_new_facts=max(malformed, 0),
        ignored=ignored,
    )


def _bounded(value: object, name: str, limit: int, ignored: dict[str, int]) -> list[object]:
    """The list's first ``limit`` entries; a non-list is an empty list."""
    if not isinstance(value, list):
        return []
    if len(value) > limit:
        ignored[name] = ignored.get(name, 0) + len(value) - limit
        return value[:limit]
    return value


def _skip(name: str, ignored: dict[str, int]) -> None:
    ignored[name] = ignored.get(name, 0) + 1


def _label(value: object) -> str | None:
    if not isinstance(value, str):
        return None
    label = value.strip().lower()[:_MAX_LABEL_CHARS].strip()
    return label or None


def _text(value: object, limit: int = limits.MAX_REASON_CHARS) -> str:
    # Stripped again after the cut, so normalising a normalised text changes nothing.
    return value.strip()[:limit].strip() if isinstance(value, str) else ""


def _entry_fields(raw: object) -> tuple[str, Mapping[str, object]] | None:
    """An entry's id and fields, when it is an object with a usable ``id``."""
    if not isinstance(raw, Mapping):
        return None
    fact_id = _fact_id(raw.get("id"))
    return None if fact_id is None else (fact_id, raw)


def _fact_id(value: object) -> str | None:
    if not isinstance(value, str):
        return None
    fact_id = value.strip()
    return fact_id if fact_id and len(fact_id) <= limits.MAX_ID_CHARS else None


def _summaries(data: Mapping[str, object], ignored: dict[str, int]) -> tuple[SummaryProposal, ...]:
    proposals: list[SummaryProposal] = []
    for group, names in (("user", USER_SECTIONS), ("history", HISTORY_SECTIONS)):
        sections = data.get(group)
        if not isinstance(sections, Mapping):
            continue
        for name in names:
            raw = sections.get(name)
            if not isinstance(raw, Mapping):
                continue
            summary = raw.get("summary")
            text = summary if isinstance(summary, str) else ""
            if len(text) > limits.MAX_SUMMARY_CHARS:
                _skip("summaries", ignored)
                continue
            proposals.append(
                SummaryProposal(
                    key=(group, name),
                    summary=text,
                    should_update=_truthy(raw.get("shouldUpdate")),
                    scope=_label(raw.get("scope")),
                    authority=_label(raw.get("authority")),
                )
            )
    return tuple(proposals)


def _truthy(value: object) -> bool:
    # ``true`` or the text "true": a model writing "false" must not update a section.
    return value is True or (isinstance(value, str) and value.strip().lower() == "true")


def _new_facts(value: object, ignored: dict[str, int]) -> tuple[tuple[NewFactProposal, ...], int]:
    """The well-formed facts and how many were malformed (-1: not a list)."""
    if not isinstance(value, list):
        return (), -1
    facts: list[NewFactProposal] = []
    malformed = 0
    for raw in _bounded(value, "newFacts", limits.MAX_NEW_FACTS, ignored):
        fact = _new_fact(raw, len(facts))
        if fact is None:
            malformed += 1
        else:
            facts.append(fact)
    return tuple(facts), malformed


def _new_fact(raw: object, index: int) -> NewFactProposal | None:
    if not isinstance(raw, Mapping):
        return None
    content = raw.get("content")
    if not isinstance(content, str) or not content or len(content) > limits.MAX_CONTENT_CHARS:
        return None
    confidence = read_confidence(raw.get("confidence"))
    if confidence is None:
        return None
    category = raw.get("category")
    category = category.strip() if isinstance(category, str) else ""
    if len(category) > limits.MAX_CATEGORY_CHARS:
        return None
    source_error = raw.get("sourceError")
    source_error = source_error.strip() if isinstance(source_error, str) else ""
    if len(source_error) > limits.MAX_SOURCE_ERROR_CHARS:
        return None
    return NewFactProposal(
        index=index,
        content=content,
        category=category or "context",
        confidence=confidence,
        scope=_label(raw.get("scope")),
        durability=_label(raw.get("durability")),
        authority=_label(raw.get("authority")),
        source_error=source_error or None,
        expected_valid_days=read_positive_days(raw.get("expected_valid_days")),
    )


def _reinforcements(value: object, ignored: dict[str, int]) -> tuple[ReinforceEntry, ...]:
    entries: list[ReinforceEntry] = []
    for raw in _bounded(value, "factsToReinforce", limits.MAX_REINFORCEMENTS, ignored):
        entry = _entry_fields(raw)
        if entry is None:
            _skip("factsToReinforce", ignored)
            continue
        fact_id, fields = entry
        entries.append(
            ReinforceEntry(fact_id, _label(fields.get("scope")), _text(fields.get("reason")))
        )
    return tuple(entries)


def _removals(value: object, ignored: dict[str, int]) -> tuple[RemovalEntry, ...]:
    entries: list[RemovalEntry] = []
    for raw in _bounded(value, "factsToRemove", limits.MAX_REMOVALS, ignored):
        entry = _removal(raw)
        if entry is None:
            _skip("factsToRemove", ignored)
        else:
            entries.append(entry)
    return tuple(entries)


def _removal(raw: object) -> RemovalEntry | None:
    if isinstance(raw, str):
        # The old list-of-ids form: no labels, so the gate will refuse it.
        fact_id = _fact_id(raw)
        return None if fact_id is None else RemovalEntry(fact_id, None, "")
    if not isinstance(raw, Mapping):
        return None
    fact_id = _fact_id(raw.get("id"))
    if fact_id is None:
        return None
    index = raw.get("replacementFactIndex")
    return RemovalEntry(
        fact_id=fact_id,
        scope=_label(raw.get("scope")),
        reason=_text(raw.get("reason")),
        replacement_index=index if isinstance(index, int) and not isinstance(index, bool) else None,
        replacement_given=index is not None,
    )


def _stale_removals(value: object, ignored: dict[str, int]) -> tuple[StaleRemoval, ...]:
    entries: list[StaleRemoval] = []
    for raw in _bounded(value, "staleFactsToRemove", limits.MAX_STALE_REMOVALS, ignored):
        entry = _entry_fields(raw)
        if entry is None:
            _skip("staleFactsToRemove", ignored)
            continue
        fact_id, fields = entry
        entries.append(StaleRemoval(fact_id, _text(fields.get("reason"))))
    return tuple(entries)


def _stale_extensions(value: object, ignored: dict[str, int]) -> tuple[StaleExtension, ...]:
    entries: list[StaleExtension] = []
    for raw in _bounded(value, "staleFactsToExtend", limits.MAX_EXTENSIONS, ignored):
        if not isinstance(raw, Mapping):
            _skip("staleFactsToExtend", ignored)
            continue
        fact_id = _fact_id(raw.get("id"))
        days = read_positive_days(raw.get("extend_by_days"))
        if fact_id is None or days is None:
            _skip("staleFactsToExtend", ignored)
            continue
        entries.append(StaleExtension(fact_id, days, _text(raw.get("reason"))))
    return tuple(entries)
