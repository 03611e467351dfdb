"""The data model: facts, categories, timestamps and the text boundary. Pure: no I/O, no clock."""

# --- until p21-core lands: its model.py holds these (same names, same behaviour);
# --- at that merge this package gives way to that module.
import uuid as _uuid
from collections.abc import Callable as _Callable
from typing import Final as _Final

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

IdFactory = _Callable[[], str]
"""Returns a candidate fact id: :func:`random_fact_id`, or a seeded one in tests."""

ID_ATTEMPTS: _Final = 20
"""How many candidates :func:`new_fact_id` tries before it calls the factory broken."""


def random_fact_id() -> str:
    """``fact_`` and 8 random lowercase hex digits, as the original DeerMem makes ids."""
    return f"fact_{_uuid.uuid4().hex[:8]}"


def new_fact_id(in_use: _Callable[[str], bool], make: IdFactory = random_fact_id) -> str:
    """A fresh id from ``make`` that ``in_use`` says is free.

    Raises:
        ValueError: ``make`` returned ids in use :data:`ID_ATTEMPTS` times.
    """
    for _ in range(ID_ATTEMPTS):
        candidate = make()
        if not in_use(candidate):
            return candidate
    raise ValueError(f"the fact id factory returned ids already in use {ID_ATTEMPTS} times")


def duplicate_key(text: str) -> str:
    """What two facts must share to be duplicates: the text stripped and case-folded."""
    return text.strip().casefold()


__all__ = [
    "CORE_CATEGORIES",
    "DEFAULT_CATEGORY",
    "FACT_ID_PATTERN",
    "FACT_SCHEMA_VERSION",
    "ID_ATTEMPTS",
    "MAX_FACT_ID_LENGTH",
    "MAX_TITLE_LENGTH",
    "Fact",
    "FactScope",
    "FactSource",
    "IdFactory",
    "canonical_category",
    "category_key",
    "duplicate_key",
    "format_timestamp",
    "new_fact_id",
    "parse_timestamp",
    "random_fact_id",
]
