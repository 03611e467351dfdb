"""deermem: long-term memory for LLM agents that forgets the right things and can say why.

The public API is re-exported here. Names are imported lazily on first use, so
``import deermem`` stays cheap: the evaluation commands, for instance, need the
policy layer but neither pydantic, nor the HTTP client, nor the CLI stack.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

# The exception tree is tiny and dependency-free: export it eagerly, so every
# error is importable from ``deermem`` without being listed three times here.
# The evaluation's branch of it lives with the evaluation.
from deermem import _exceptions
from deermem._exceptions import *  # noqa: F403
from deermem._lazy import lazy_exports as _lazy_exports
from deermem.evaluation import errors as _evaluation_errors
from deermem.evaluation.errors import *  # noqa: F403

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    "Fact": "deermem.model",
    "FactScope": "deermem.model",
    "FactSource": "deermem.model",
    "CORE_CATEGORIES": "deermem.model",
    "Memory": "deermem.memory",
    "MemoryConfig": "deermem.config",
    "load_config": "deermem.config",
    "ModelConfig": "deermem.config",
    "ChatMessage": "deermem.llm",
    "ChatModel": "deermem.llm",
    "ChatResponse": "deermem.llm",
    "LocalModel": "deermem.llm",
    "OpenAICompatibleModel": "deermem.llm",
    "build_chat_model": "deermem.llm",
    "Signal": "deermem.signals",
    "POLICY_CONFIDENCE": "deermem.policy",
    "POLICY_HYBRID_V1": "deermem.policy",
    "CapacityDecision": "deermem.policy",
    "CapacityPolicy": "deermem.policy",
    "EvictedFact": "deermem.policy",
    "ShadowComparison": "deermem.policy",
    "select_facts_for_capacity": "deermem.policy",
}

__all__ = [
    *_exceptions.__all__,
    *_evaluation_errors.__all__,
    "CORE_CATEGORIES",
    "POLICY_CONFIDENCE",
    "POLICY_HYBRID_V1",
    "CapacityDecision",
    "CapacityPolicy",
    "ChatMessage",
    "ChatModel",
    "ChatResponse",
    "EvictedFact",
    "Fact",
    "FactScope",
    "FactSource",
    "LocalModel",
    "Memory",
    "MemoryConfig",
    "ModelConfig",
    "OpenAICompatibleModel",
    "ShadowComparison",
    "Signal",
    "__version__",
    "build_chat_model",
    "load_config",
    "select_facts_for_capacity",
]

if TYPE_CHECKING:
    from deermem.config import MemoryConfig, ModelConfig, load_config
    from deermem.llm import (
        ChatMessage,
        ChatModel,
        ChatResponse,
        LocalModel,
        OpenAICompatibleModel,
        build_chat_model,
    )
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
    from deermem.signals import Signal


__getattr__, __dir__ = _lazy_exports(__name__, globals(), _EXPORTS)
