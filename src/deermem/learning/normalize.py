"""Normalisation: a model's update object as typed, bounded proposals.

The model's JSON is untrusted. Normalisation keeps what has the right shape
and drops the rest, without judging it: whether a fact is *allowed* in is
the gate's business (:mod:`deermem.learning.gate`). The rules are the
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
* **a response none of whose fields has the type the reply schema gives it**
  (:func:`~deermem.learning.schema.response_json_schema`: ``user`` and
  ``history`` objects, ``newFacts`` and the other lists arrays) **is rejected
  whole** too — not the original's rule: such an answer does not propose
  "no change", it cannot be read, and taking it as an update would mark the
  conversation as learnt from. One field of the right type is enough to go
  on: a partly wrong answer keeps what has the right shape, as for entries;
* stale-fact entries need a string id; extensions need ``extend_by_days``
  that truncates to a whole number of at least 1.

Text that reaches a file keeps to the text boundary of facts written by hand
(:mod:`deermem.model`): a new fact whose content, category or
``sourceError`` holds a lone surrogate or a control character (any, in a
category) is malformed; so is a summary section (ignored) and an entry's id
(ignored); a reason that is not valid text is no reason.

Bounds on sizes are in :mod:`deermem.learning.limits`; what they drop is
counted by limit (:class:`~deermem.learning.limits.OverLimits`), and entries
without a usable id or shape are counted per list (``ignored``), so the
report can say what a model's answer lost. Normalising the payload of a
normalised response gives the same response
(:meth:`NormalizedResponse.to_payload`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final

import deermem.learning.limits as limits
from deermem.errors import FactValidationError
from deermem.learning._values import read_confidence, read_positive_days
from deermem.learning.limits import OverLimits
from deermem.learning.responses import (
    NewFactProposal,
    NormalizedResponse,
    ReinforceEntry,
    RejectedResponse,
    RemovalEntry,
    StaleExtension,
    StaleRemoval,
    SummaryProposal,
)
from deermem.learning.schema import response_json_schema
from deermem.learning.state import HISTORY_SECTIONS, USER_SECTIONS
from deermem.model import check_line, check_lines

__all__ = ["normalize_response"]

_MAX_LABEL_CHARS: Final = 64
_PYTHON_TYPES: Final[Mapping[str, type]] = {"object": Mapping, "array": list}
# Each field of an update and the type the reply schema gives it (one source for both).
_FIELD_TYPES: Final[Mapping[str, type]] = {
    name: _PYTHON_TYPES[spec["type"]] for name, spec in response_json_schema()["properties"].items()
}


class _Tally:
    """What normalisation left out: over a limit (by limit), or unusable (by list)."""

    def __init__(self) -> None:
        self.over: dict[str, int] = {}
        self.ignored: dict[str, int] = {}

    def over_limit(self, limit: str, count: int = 1) -> None:
        self.over[limit] = self.over.get(limit, 0) + count

    def skip(self, name: str) -> None:
        self.ignored[name] = self.ignored.get(name, 0) + 1

    def limits(self) -> OverLimits:
        return OverLimits(**self.over)


def normalize_response(data: Mapping[str, object]) -> NormalizedResponse | RejectedResponse:
    """Normalise a decoded update object (see the module docstring for the rules)."""
    if not any(isinstance(data.get(name), kind) for name, kind in _FIELD_TYPES.items()):
        return RejectedResponse("wrong-field-types", malformed_new_facts=-1, removals=0)
    tally = _Tally()
    new_facts, malformed = _new_facts(data.get("newFacts"), tally)
    removals = _removals(data.get("factsToRemove"), tally)
    summaries = _summaries(data, tally)
    reinforce = _reinforcements(data.get("factsToReinforce"), tally)
    stale_remove = _stale_removals(data.get("staleFactsToRemove"), tally)
    stale_extend = _stale_extensions(data.get("staleFactsToExtend"), tally)
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


def _bounded(value: object, limit: int, counter: str, tally: _Tally) -> list[object]:
    """The list's first ``limit`` entries (the rest counted under ``counter``);
    a non-list is an empty list."""
    if not isinstance(value, list):
        return []
    if len(value) > limit:
        tally.over_limit(counter, len(value) - limit)
        return value[:limit]
    return value


def _label(value: object) -> str | None:
    if not isinstance(value, str):
        return None
    label = value.strip().lower()[:_MAX_LABEL_CHARS].strip()
    return label or None


def _text(value: object, limit: int = limits.MAX_REASON_CHARS) -> str:
    # Stripped again after the cut, so normalising a normalised text changes nothing.
    if not isinstance(value, str):
        return ""
    text = value.strip()[:limit].strip()
    return text if _is_text(check_lines, text) else ""


def _is_text(check: Callable[[str, str, int], str], value: str) -> bool:
    """Whether ``value`` passes a text check of :mod:`deermem.model` (lengths
    are checked, and counted, by the caller)."""
    try:
        check("text", value, len(value))
    except FactValidationError:
        return False
    return True


def _usable_id(value: object, name: str, tally: _Tally) -> str | None:
    """The entry's id, or ``None`` with the reason counted: no usable id (``ignored``
    under the list's ``name``) or one over :data:`~deermem.learning.limits.MAX_ID_CHARS`."""
    fact_id = value.strip() if isinstance(value, str) else ""
    if not fact_id:
        tally.skip(name)
        return None
    if len(fact_id) > limits.MAX_ID_CHARS:
        tally.over_limit("ids")
        return None
    if not _is_text(check_line, fact_id):
        tally.skip(name)
        return None
    return fact_id


def _summaries(data: Mapping[str, object], tally: _Tally) -> tuple[SummaryProposal, ...]:
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
                tally.over_limit("summaries")
                continue
            if not _is_text(check_lines, text):
                tally.skip(f"{group}.{name}")
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


def _new_facts(value: object, tally: _Tally) -> tuple[tuple[NewFactProposal, ...], int]:
    """The well-formed facts and how many were malformed (-1: not a list)."""
    if not isinstance(value, list):
        return (), -1
    facts: list[NewFactProposal] = []
    malformed = 0
    for raw in _bounded(value, limits.MAX_NEW_FACTS, "new_facts", tally):
        fact = _new_fact(raw, len(facts), tally)
        if fact is None:
            malformed += 1
        else:
            facts.append(fact)
    return tuple(facts), malformed


def _new_fact(raw: object, index: int, tally: _Tally) -> NewFactProposal | None:
    """A well-formed fact, or ``None`` (malformed; a field over its limit is counted)."""
    if not isinstance(raw, Mapping):
        return None
    content = raw.get("content")
    if not isinstance(content, str) or not content:
        return None
    if len(content) > limits.MAX_CONTENT_CHARS:
        tally.over_limit("content")
        return None
    if not _is_text(check_lines, content):
        return None
    given = raw.get("confidence")
    if isinstance(given, str) and len(given) > limits.MAX_CONFIDENCE_TEXT_CHARS:
        tally.over_limit("confidence")
        return None
    confidence = read_confidence(given)
    if confidence is None:
        return None
    category = raw.get("category")
    category = category.strip() if isinstance(category, str) else ""
    if len(category) > limits.MAX_CATEGORY_CHARS:
        tally.over_limit("category")
        return None
    if not _is_text(check_line, category):
        return None
    source_error = raw.get("sourceError")
    source_error = source_error.strip() if isinstance(source_error, str) else ""
    if len(source_error) > limits.MAX_SOURCE_ERROR_CHARS:
        tally.over_limit("source_error")
        return None
    if not _is_text(check_lines, source_error):
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


def _reinforcements(value: object, tally: _Tally) -> tuple[ReinforceEntry, ...]:
    entries: list[ReinforceEntry] = []
    for raw in _bounded(value, limits.MAX_REINFORCEMENTS, "reinforcements", tally):
        if not isinstance(raw, Mapping):
            tally.skip("factsToReinforce")
            continue
        fact_id = _usable_id(raw.get("id"), "factsToReinforce", tally)
        if fact_id is not None:
            entries.append(
                ReinforceEntry(fact_id, _label(raw.get("scope")), _text(raw.get("reason")))
            )
    return tuple(entries)


def _removals(value: object, tally: _Tally) -> tuple[RemovalEntry, ...]:
    entries: list[RemovalEntry] = []
    for raw in _bounded(value, limits.MAX_REMOVALS, "removals", tally):
        if isinstance(raw, str):
            # The old list-of-ids form: no labels, so the gate will refuse it.
            fact_id = _usable_id(raw, "factsToRemove", tally)
            if fact_id is not None:
                entries.append(RemovalEntry(fact_id, None, ""))
            continue
        if not isinstance(raw, Mapping):
            tally.skip("factsToRemove")
            continue
        fact_id = _usable_id(raw.get("id"), "factsToRemove", tally)
        if fact_id is None:
            continue
        index = raw.get("replacementFactIndex")
        entries.append(
            RemovalEntry(
                fact_id=fact_id,
                scope=_label(raw.get("scope")),
                reason=_text(raw.get("reason")),
                replacement_index=(
                    index if isinstance(index, int) and not isinstance(index, bool) else None
                ),
                replacement_given=index is not None,
            )
        )
    return tuple(entries)


def _stale_removals(value: object, tally: _Tally) -> tuple[StaleRemoval, ...]:
    entries: list[StaleRemoval] = []
    for raw in _bounded(value, limits.MAX_STALE_REMOVALS, "stale_removals", tally):
        if not isinstance(raw, Mapping):
            tally.skip("staleFactsToRemove")
            continue
        fact_id = _usable_id(raw.get("id"), "staleFactsToRemove", tally)
        if fact_id is not None:
            entries.append(StaleRemoval(fact_id, _text(raw.get("reason"))))
    return tuple(entries)


def _stale_extensions(value: object, tally: _Tally) -> tuple[StaleExtension, ...]:
    entries: list[StaleExtension] = []
    for raw in _bounded(value, limits.MAX_EXTENSIONS, "extensions", tally):
        if not isinstance(raw, Mapping):
            tally.skip("staleFactsToExtend")
            continue
        fact_id = _usable_id(raw.get("id"), "staleFactsToExtend", tally)
        if fact_id is None:
            continue
        days = read_positive_days(raw.get("extend_by_days"))
        if days is None:
            tally.skip("staleFactsToExtend")
            continue
        entries.append(StaleExtension(fact_id, days, _text(raw.get("reason"))))
    return tuple(entries)
