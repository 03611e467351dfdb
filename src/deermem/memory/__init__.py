"""The memory facade: :class:`Memory`, the one object every interface uses."""

from deermem.memory.documents import export_document, plan_import
from deermem.memory.facade import Clock, Memory, random_fact_id, wall_clock
from deermem.memory.results import (
    CreateResult,
    Explanation,
    FactStatus,
    ImportResult,
    ReindexReport,
    RestoreResult,
    ScopeSummary,
    SearchResult,
    Standing,
)

__all__ = [
    "Clock",
    "CreateResult",
    "Explanation",
    "FactStatus",
    "ImportResult",
    "Memory",
    "ReindexReport",
    "RestoreResult",
    "ScopeSummary",
    "SearchResult",
    "Standing",
    "export_document",
    "plan_import",
    "random_fact_id",
    "wall_clock",
]
