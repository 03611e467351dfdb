"""The data model: facts, categories, timestamps and the text boundary. Pure: no I/O, no clock.

Names are imported on first use: a caller that needs only the timestamp
helpers (the evaluation's case builder, for one) does not pay for the
:class:`Fact` dataclasses, whose import alone (with :mod:`dataclasses` and
:mod:`inspect` under it) costs more than validating a protocol bundle.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from deermem._lazy import lazy_exports as _lazy_exports

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    "CORE_CATEGORIES": "deermem.model.categories",
    "DEFAULT_CATEGORY": "deermem.model.categories",
    "canonical_category": "deermem.model.categories",
    "category_key": "deermem.model.categories",
    "FACT_ID_PATTERN": "deermem.model.fact",
    "FACT_SCHEMA_VERSION": "deermem.model.fact",
    "MAX_FACT_ID_LENGTH": "deermem.model.fact",
    "MAX_TITLE_LENGTH": "deermem.model.fact",
    "Fact": "deermem.model.fact",
    "FactScope": "deermem.model.fact",
    "FactSource": "deermem.model.fact",
    "format_timestamp": "deermem.model.timestamps",
    "parse_timestamp": "deermem.model.timestamps",
}

__all__ = [
    "CORE_CATEGORIES",
    "DEFAULT_CATEGORY",
    "FACT_ID_PATTERN",
    "FACT_SCHEMA_VERSION",
    "MAX_FACT_ID_LENGTH",
    "MAX_TITLE_LENGTH",
    "Fact",
    "FactScope",
    "FactSource",
    "canonical_category",
    "category_key",
    "format_timestamp",
    "parse_timestamp",
]

if TYPE_CHECKING:
    from deermem.model.categories import (
        CORE_CATEGORIES,
        DEFAULT_CATEGORY,
        canonical_category,
        category_key,
    )
    from deermem.model.fact import (
        FACT_ID_PATTERN,
        FACT_SCHEMA_VERSION,
        MAX_FACT_ID_LENGTH,
        MAX_TITLE_LENGTH,
        Fact,
        FactScope,
        FactSource,
    )
    from deermem.model.timestamps import format_timestamp, parse_timestamp


__getattr__, __dir__ = _lazy_exports(__name__, globals(), _EXPORTS)
