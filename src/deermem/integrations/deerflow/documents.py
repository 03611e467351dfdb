"""The memory document in the shape DeerFlow's gateway and settings page read.

DeerFlow's ``/api/memory*`` endpoints validate every document a backend
returns against their ``MemoryResponse`` model, and its settings page checks
imports against a stricter type guard: ``version``, ``revision``,
``lastUpdated``, the six summary sections as ``{summary, updatedAt}``
strings, and facts whose ``source`` is a *string*. deermem stores a source as
``{type, threadId}``; DeerFlow shows the thread id of a fact learned from a
conversation and the type (``manual``, ``import``) otherwise, which is what
:meth:`~deermem.model.FactSource.legacy_string` gives.

Everything else a deermem fact carries (``lastConfirmedAt``,
``confirmationCount``, ``expected_valid_days``...) is passed along: the
gateway drops what its model does not know, and tools and the embedded
client keep it.
"""

from __future__ import annotations

from typing import Any

from deermem.model import Fact
from deermem.store import ScopeSnapshot

__all__ = ["deerflow_document", "deerflow_fact"]


def deerflow_fact(fact: Fact) -> dict[str, Any]:
    """One fact as DeerFlow shows it: every field, the source as a string."""
    data = fact.to_dict()
    data["source"] = fact.source.legacy_string()
    return data


def deerflow_document(snapshot: ScopeSnapshot) -> dict[str, Any]:
    """A scope as DeerFlow's memory document: summaries, then the facts oldest first."""
    document: dict[str, Any] = snapshot.summaries.to_dict()
    document["facts"] = [deerflow_fact(fact) for fact in snapshot.facts]
    return document
