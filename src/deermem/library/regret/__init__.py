"""Regret: evidence, from a deployment's own traffic, of when forgetting was a mistake.

The store records regret events with what caused them
(:mod:`deermem.store.records`); this package turns them into what a
deployment reads: what a search reveals (:mod:`~deermem.library.regret.detection`)
and the per-policy report behind ``Memory.regret()`` and ``deermem regret``
(:mod:`~deermem.library.regret.report`). See docs/regret.md.
"""

from deermem.library.regret.detection import Found, search_regret
from deermem.library.regret.report import (
    MOST_REGRETTED,
    REPORT_SCHEMA,
    PolicyRegret,
    RegretReport,
    RegrettedFact,
    TimelinePoint,
    build_report,
)
from deermem.library.regret.window import parse_since

__all__ = [
    "MOST_REGRETTED",
    "REPORT_SCHEMA",
    "Found",
    "PolicyRegret",
    "RegretReport",
    "RegrettedFact",
    "TimelinePoint",
    "build_report",
    "parse_since",
    "search_regret",
]
