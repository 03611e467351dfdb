"""The data model: facts, categories, timestamps and the text boundary. Pure: no I/O, no clock."""

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
