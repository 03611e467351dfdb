"""deermem: long-term memory for LLM agents that forgets the right things and can say why.

The public API is re-exported here. Names are imported lazily on first use, so
``import deermem`` stays cheap: the evaluation commands, for instance, need the
policy layer but neither pydantic, nor the HTTP client, nor the CLI stack.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    "DeerMemError": "deermem._exceptions",
    "ConfigError": "deermem._exceptions",
    "FactValidationError": "deermem._exceptions",
    "DuplicateFactError": "deermem._exceptions",
    "FactNotFoundError": "deermem._exceptions",
    "StorageError": "deermem._exceptions",
    "CorruptMemoryFile": "deermem._exceptions",
    "UnsafeIdentifierError": "deermem._exceptions",
    "StoreLockTimeout": "deermem._exceptions",
    "RevisionConflict": "deermem._exceptions",
    "ManifestRevisionConflict": "deermem._exceptions",
    "FactRevisionConflict": "deermem._exceptions",
    "Memory": "deermem.memory",
    "Fact": "deermem.model",
    "FactScope": "deermem.model",
    "FactSource": "deermem.model",
    "CORE_CATEGORIES": "deermem.model",
    "MemoryConfig": "deermem.config",
    "load_config": "deermem.config",
    "POLICY_CONFIDENCE": "deermem.policy",
    "POLICY_HYBRID_V1": "deermem.policy",
    "CapacityDecision": "deermem.policy",
    "CapacityPolicy": "deermem.policy",
    "EvictedFact": "deermem.policy",
    "ShadowComparison": "deermem.policy",
    "select_facts_for_capacity": "deermem.policy",
}

__all__ = [
    "CORE_CATEGORIES",
    "POLICY_CONFIDENCE",
    "POLICY_HYBRID_V1",
    "CapacityDecision",
    "CapacityPolicy",
    "ConfigError",
    "CorruptMemoryFile",
    "DeerMemError",
    "DuplicateFactError",
    "EvictedFact",
    "Fact",
    "FactNotFoundError",
    "FactRevisionConflict",
    "FactScope",
    "FactSource",
    "FactValidationError",
    "ManifestRevisionConflict",
    "Memory",
    "MemoryConfig",
    "RevisionConflict",
    "ShadowComparison",
    "StorageError",
    "StoreLockTimeout",
    "UnsafeIdentifierError",
    "__version__",
    "load_config",
    "select_facts_for_capacity",
]

if TYPE_CHECKING:
    from deermem._exceptions import (
        ConfigError,
        CorruptMemoryFile,
        DeerMemError,
        DuplicateFactError,
        FactNotFoundError,
        FactRevisionConflict,
        FactValidationError,
        ManifestRevisionConflict,
        RevisionConflict,
        StorageError,
        StoreLockTimeout,
        UnsafeIdentifierError,
    )
    from deermem.config import MemoryConfig, load_config
    from deermem.memory import Memory
    from deermem.model import CORE_CATEGORIES, Fact, FactScope, FactSource
    from deermem.policy import (
        POLICY_CONFIDENCE,
        POLICY_HYBRID_V1,
        CapacityDecision,
        CapacityPolicy,
        EvictedFact,
        ShadowComparison,
        select_facts_for_capacity,
    )


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'deermem' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
