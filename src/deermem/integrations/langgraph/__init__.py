"""deermem as LangGraph's long-term memory store: :class:`DeerMemStore` (LangMem's tools run on it).

Importing this package imports ``langgraph.store.base`` (the ``deermem[langgraph]``
extra, package ``langgraph-checkpoint``); nothing else in deermem does. See
docs/integrations.md.
"""

from __future__ import annotations

from deermem.integrations.langgraph.store import (
    AGENT_PREFIX,
    DeerMemStore,
    EvictedOnPutError,
    agent_of,
    labels_of,
    namespace_of,
    scope_of,
)

__all__ = [
    "AGENT_PREFIX",
    "DeerMemStore",
    "EvictedOnPutError",
    "agent_of",
    "labels_of",
    "namespace_of",
    "scope_of",
]
