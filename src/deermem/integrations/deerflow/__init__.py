"""deermem as DeerFlow's memory backend.

In DeerFlow's ``config.yaml``::

    memory:
      manager_class: deermem.integrations.deerflow.DeerMemManager

:class:`DeerMemManager` is :class:`DeerFlowBackend` bound to DeerFlow's own
``MemoryManager`` base (DeerFlow accepts nothing else), so it exists only
where DeerFlow is installed; it is imported on first access, and the import
error says so elsewhere. :class:`DeerFlowBackend` needs no DeerFlow. See
docs/deerflow.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from deermem.integrations.deerflow.backend import (
    DeerFlowBackend,
    ErrorTypes,
    MemoryConflict,
    MemoryCorruption,
    hidden_message_rule,
)
from deermem.integrations.deerflow.settings import BackendSettings, read_backend_config

if TYPE_CHECKING:
    from deermem.integrations.deerflow.manager import DeerMemManager

__all__ = [
    "BackendSettings",
    "DeerFlowBackend",
    "DeerMemManager",
    "ErrorTypes",
    "MemoryConflict",
    "MemoryCorruption",
    "hidden_message_rule",
    "read_backend_config",
]


def __getattr__(name: str) -> Any:
    # DeerFlow resolves ``manager_class`` with getattr on this module; the
    # binding imports DeerFlow, so it is imported only when asked for.
    if name == "DeerMemManager":
        from deermem.integrations.deerflow.manager import DeerMemManager

        return DeerMemManager
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
