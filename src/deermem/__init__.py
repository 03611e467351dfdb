"""deermem: long-term memory for LLM agents that forgets the right things and can say why.

The public API: what a program embedding the library starts from (``Memory``
and its configuration), the fact it reads, the capacity policy it can call on
its own, and the errors it may want to catch. Everything else is imported
from the package that owns it (``deermem.llm`` for the model clients,
``deermem.service.errors`` and ``deermem.eval.errors`` for the server's and
the evaluation's errors, ``deermem.errors`` for the rest of the library's
tree).
"""

from __future__ import annotations

from deermem.config import MemoryConfig
from deermem.errors import (
    ArchivedFactError,
    ConfigError,
    CorruptMemoryFile,
    DatabaseError,
    DatabaseReadOnly,
    DatabaseUnavailable,
    DeerMemError,
    DuplicateFactError,
    FactNotFoundError,
    FactValidationError,
    LLMError,
    QueueFullError,
    RevisionConflict,
    StorageError,
    StoreLockTimeout,
    UnsafeIdentifierError,
)
from deermem.memory import Memory
from deermem.model import Fact
from deermem.policy import (
    POLICY_CONFIDENCE,
    POLICY_HYBRID_V1,
    CapacityDecision,
    CapacityPolicy,
    select_facts_for_capacity,
)

__version__ = "0.1.0"

__all__ = [
    "POLICY_CONFIDENCE",
    "POLICY_HYBRID_V1",
    "ArchivedFactError",
    "CapacityDecision",
    "CapacityPolicy",
    "ConfigError",
    "CorruptMemoryFile",
    "DatabaseError",
    "DatabaseReadOnly",
    "DatabaseUnavailable",
    "DeerMemError",
    "DuplicateFactError",
    "Fact",
    "FactNotFoundError",
    "FactValidationError",
    "LLMError",
    "Memory",
    "MemoryConfig",
    "QueueFullError",
    "RevisionConflict",
    "StorageError",
    "StoreLockTimeout",
    "UnsafeIdentifierError",
    "select_facts_for_capacity",
]
