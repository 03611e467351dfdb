"""The public memory document: what ``export`` writes and ``import`` reads.

The shape is the original DeerMem's compatibility document::

    {version, revision, lastUpdated, user: {...}, history: {...}, facts: [...]}

but every fact is exported with *all* its fields (``lastConfirmedAt``,
``confirmationCount``, ``expected_valid_days``, ``title`` and unknown keys
included), so an export imported again loses nothing — the original's API
drops those. Summary sections keep their own ``updatedAt``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime

from deermem.errors import FactValidationError
from deermem.library.gate import Proposal, Removal
from deermem.model import MAX_KEPT_SIZE, Fact, check_storable
from deermem.policy import coerce_confidence
from deermem.store.protocol import ScopeSnapshot
from deermem.store.records import REASON_REPLACED, SUMMARY_GROUPS, Section, SummaryKey

__all__ = ["ImportPlan", "export_document", "plan_import"]


def export_document(snapshot: ScopeSnapshot) -> dict[str, object]:
    """The scope as a document: summaries and every fact with every field."""
    document = snapshot.summaries.to_dict()
    document["facts"] = [fact.to_dict() for fact in snapshot.facts]
    return document


@dataclass(frozen=True, slots=True)
class ImportPlan:
    """An import as a gate proposal, and the ids of the document's facts."""

    proposal: Proposal
    fact_ids: tuple[str, ...]


def plan_import(
    document: object,
    snapshot: ScopeSnapshot,
    now: datetime,
    new_id: Callable[[], str],
) -> ImportPlan:
    """Turn a document into a proposal that replaces the scope's facts and summaries.

    The document is what ``export`` writes, so it is held to what the store
    accepts — valid Unicode text, the field types of a fact — not to the
    length limits of facts written by hand (a fact read from the original's
    files may exceed them, and must survive an export and an import).
    Facts without an id get one; a confidence that cannot be read becomes 0.5;
    the document's facts replace the library (stored facts it does not hold
    are removed with reason ``replaced``) and its sections replace the
    summaries (missing ones become empty). A fact that states a ``revision``
    must match the stored one.

    Raises:
        InvalidTextError: a string in a fact or a summary is not valid Unicode.
        FactValidationError: the document is not an object, ``facts`` is
            missing or not a list of objects, two facts share an id, a fact
            is invalid, or a summary section is not an object.
    """
    if not isinstance(document, Mapping):
        raise FactValidationError("document", document, "expected a JSON object")
    if "facts" not in document:
        # An import replaces the library: a document without the key would
        # silently archive every fact, so an empty library must be explicit.
        raise FactValidationError("facts", None, "expected a list of fact objects (may be [])")
    raw_facts = document["facts"]
    if not isinstance(raw_facts, list):
        raise FactValidationError("facts", raw_facts, "expected a list of fact objects")
    new_facts: list[Fact] = []
    updates: list[Fact] = []
    seen: set[str] = set()
    for position, raw in enumerate(raw_facts):
        fact = _imported_fact(raw, position, snapshot, now, new_id)
        if fact.id in seen:
            raise FactValidationError(
                f"facts[{position}].id", fact.id, "each fact id may appear only once"
            )
        seen.add(fact.id)
        (updates if fact.id in snapshot else new_facts).append(fact)
    removals = tuple(
        Removal(fact.id, REASON_REPLACED, expected_revision=fact.revision)
        for fact in snapshot.facts
        if fact.id not in seen
    )
    proposal = Proposal(
        new_facts=tuple(new_facts),
        updates=tuple(updates),
        removals=removals,
        summaries=_summaries(document),
    )
    return ImportPlan(proposal=proposal, fact_ids=tuple(f.id for f in new_facts + updates))


def _imported_fact(
    raw: object,
    position: int,
    snapshot: ScopeSnapshot,
    now: datetime,
    new_id: Callable[[], str],
) -> Fact:
    if not isinstance(raw, Mapping):
        raise FactValidationError(f"facts[{position}]", raw, "expected a fact object")
    data = dict(raw)
    if not data.get("id"):
        data["id"] = new_id()
    data["confidence"] = coerce_confidence(data.get("confidence"))
    data.setdefault("source", "import")
    data.pop("scope", None)
    stored = snapshot.get(data["id"]) if isinstance(data["id"], str) else None
    if stored is not None and "revision" not in data:
        data["revision"] = stored.revision  # no precondition stated: update what is stored
    return Fact.from_dict(data, now=now)


def _summaries(document: Mapping[str, object]) -> dict[SummaryKey, str | Section]:
    sections: dict[SummaryKey, str | Section] = {}
    for group, names in SUMMARY_GROUPS.items():
        raw_group = document.get(group)
        values = raw_group if isinstance(raw_group, Mapping) else {}
        for name in names:
            raw = values.get(name)
            if raw is None:
                sections[(group, name)] = Section()
                continue
            if not isinstance(raw, Mapping):
                raise FactValidationError(
                    f"{group}.{name}", raw, "expected an object {'summary': ..., 'updatedAt': ...}"
                )
            # Any values, as the store reads them (a summary need not be a string),
            # but text that can be written, nested as deep as a fact's values may be;
            # what the section keeps besides its text is bounded as a fact's unknown
            # fields are.
            check_storable(f"{group}.{name}", dict(raw))
            section = Section.from_value(raw)
            check_storable(f"{group}.{name}", dict(section.extra), max_size=MAX_KEPT_SIZE)
            sections[(group, name)] = section
    return sections
