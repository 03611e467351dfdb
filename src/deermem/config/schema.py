"""``MemoryConfig``: every setting of deermem, validated once at start-up.

Keys and defaults follow the original DeerMem's ``backend_config`` where they
apply. Validation is strict — an unknown key or an out-of-range value stops
start-up with a message naming the key, the value and what is allowed —
because a memory system that silently runs with a typo'd cap forgets the
wrong things for weeks before anyone notices.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from deermem.config._errors import config_error

__all__ = ["WEIGHT_TOLERANCE", "MemoryConfig"]

WEIGHT_TOLERANCE = 1e-9
_MANIFEST_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]*\.json")


class MemoryConfig(BaseModel):
    """The configuration of one deermem deployment.

    Build it with :func:`deermem.config.load_config` to read a file and
    ``DEERMEM_*`` environment variables, or directly with keyword arguments.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)

    def __init__(self, **values: Any) -> None:
        # Constructed directly, the errors still read like deermem's, not pydantic's.
        try:
            super().__init__(**values)
        except ValidationError as error:
            raise config_error(type(self), error, values) from None

    # --- capacity ---------------------------------------------------------
    max_facts: Annotated[int, Field(ge=10, le=500)] = 100
    """Cap on the facts one agent keeps for one user."""

    fact_eviction_policy: Literal["confidence", "hybrid-v1"] = "confidence"
    """How the capacity gate ranks facts; ``hybrid-v1`` is opt-in."""

    fact_eviction_shadow_enabled: bool = False
    """Under ``confidence``, also compute ``hybrid-v1`` and record disagreements."""

    eviction_confidence_weight: Annotated[float, Field(ge=0.0, le=1.0)] = 0.65
    eviction_confirmation_weight: Annotated[float, Field(ge=0.0, le=1.0)] = 0.25
    eviction_access_weight: Annotated[float, Field(ge=0.0, le=1.0)] = 0.10

    eviction_confirmation_half_life_days: Annotated[int, Field(ge=1, le=3650)] = 90
    eviction_access_half_life_days: Annotated[int, Field(ge=1, le=3650)] = 30

    eviction_correction_reserved_fraction: Annotated[float, Field(ge=0.0, le=1.0)] = 0.10
    eviction_correction_reserved_max: Annotated[int, Field(ge=0, le=100)] = 10

    eviction_audit_max_entries: Annotated[int, Field(ge=0, le=10000)] = 200
    """Eviction receipts kept per agent; 0 writes none."""

    # --- storage ------------------------------------------------------------
    storage_path: str = ""
    """Root directory of the Markdown store; empty means ``$DEERMEM_DATA_DIR``,
    else ``~/.deermem``."""

    strict_user_scope: bool = False
    """Refuse operations without a user id instead of using the root's own
    single-user document."""

    manifest_filename: str = "memory.json"
    """Name of each user's summary document (a plain ``*.json`` file name)."""

    file_lock_timeout_seconds: Annotated[float, Field(ge=1, le=120)] = 10
    """How long a writer waits for another process's lock on a user."""

    eviction_mode: Literal["archive", "delete"] = "archive"
    """Where evicted and removed facts go: the agent's archive (restorable)
    or nowhere (``delete``, as the original DeerMem)."""

    archive_max_entries: Annotated[int, Field(ge=1, le=100_000)] = 1000
    """Archived facts kept per agent; the oldest beyond this are purged."""

    archive_max_age_days: Annotated[int, Field(ge=0, le=36_500)] = 365
    """Archived facts older than this are purged; 0 keeps them regardless of age."""

    # --- the one category rule table ------------------------------------------
    protected_categories: tuple[str, ...] = ("correction",)
    """Categories reserved in capacity selection, guaranteed in prompt
    injection and exempt from staleness review — one list for all three, so
    the mechanisms cannot drift apart."""

    @field_validator(
        "max_facts",
        "eviction_confidence_weight",
        "eviction_confirmation_weight",
        "eviction_access_weight",
        "eviction_confirmation_half_life_days",
        "eviction_access_half_life_days",
        "eviction_correction_reserved_fraction",
        "eviction_correction_reserved_max",
        "eviction_audit_max_entries",
        "file_lock_timeout_seconds",
        "archive_max_entries",
        "archive_max_age_days",
        mode="before",
    )
    @classmethod
    def _no_booleans(cls, value: object) -> object:
        # pydantic would read true as 1: a YAML "max_facts: yes" is a mistake, not a cap of 1.
        if isinstance(value, bool):
            raise ValueError("expected a number, not true/false")
        return value

    @field_validator("storage_path")
    @classmethod
    def _storage_directory(cls, value: str) -> str:
        text = value.strip()
        if text and Path(text).expanduser().is_file():
            raise ValueError("expected a directory, but this path is an existing file")
        return text

    @field_validator("manifest_filename")
    @classmethod
    def _plain_json_name(cls, value: str) -> str:
        if not _MANIFEST_NAME.fullmatch(value):
            raise ValueError(
                "expected a plain file name ending in .json (letters, digits, '_', '-', '.'; "
                "no directories)"
            )
        return value

    @field_validator("protected_categories", mode="before")
    @classmethod
    def _category_list(cls, value: object) -> object:
        if isinstance(value, str):
            raise ValueError("expected a list of category names, not a single string")
        return value

    @field_validator("protected_categories")
    @classmethod
    def _normalise_categories(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        names: list[str] = []
        for raw in value:
            name = raw.strip().lower()
            if not name:
                raise ValueError("category names must not be blank")
            if name not in names:
                names.append(name)
        return tuple(names)

    @model_validator(mode="after")
    def _weights_sum_to_one(self) -> MemoryConfig:
        weights = (
            self.eviction_confidence_weight,
            self.eviction_confirmation_weight,
            self.eviction_access_weight,
        )
        total = weights[0] + weights[1] + weights[2]
        if not math.isclose(total, 1.0, rel_tol=0.0, abs_tol=WEIGHT_TOLERANCE):
            raise ValueError(
                "the eviction weights must sum to 1.0 (within 1e-9): "
                f"eviction_confidence_weight={weights[0]!r} + "
                f"eviction_confirmation_weight={weights[1]!r} + "
                f"eviction_access_weight={weights[2]!r} = {total!r}"
            )
        return self
