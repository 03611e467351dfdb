"""deermem: long-term memory for LLM agents that forgets the right things and can say why.

The public API is re-exported here (``__all__``). The exceptions, the data
model and the capacity policies are imported with the package. The memory,
its configuration and the model clients are imported when one of their names
is first read (PEP 562): a program that opens a memory does not load the HTTP
client it may never call, and ``deermem eval``, which needs only the
policies, loads neither the store nor pydantic's configuration.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from deermem import errors as _errors
from deermem.errors import *  # noqa: F403
from deermem.eval import errors as _evaluation_errors
from deermem.eval.errors import *  # noqa: F403
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

__version__ = "0.1.0"

# The names imported on first use: public name -> the module that defines it.
_ON_FIRST_USE: dict[str, str] = {
    "Memory": "deermem.memory",
    "MemoryConfig": "deermem.config",
    "ModelConfig": "deermem.config",
    "load_config": "deermem.config",
    "ChatMessage": "deermem.llm",
    "ChatModel": "deermem.llm",
    "ChatResponse": "deermem.llm",
    "LocalModel": "deermem.llm",
    "OpenAICompatibleModel": "deermem.llm",
    "build_chat_model": "deermem.llm",
    "Signal": "deermem.learning.signals",
}

__all__ = [
    *_errors.__all__,
    *_evaluation_errors.__all__,
    "CORE_CATEGORIES",
    "POLICY_CONFIDENCE",
    "POLICY_HYBRID_V1",
    "CapacityDecision",
    "CapacityPolicy",
    "EvictedFact",
    "Fact",
    "FactScope",
    "FactSource",
    "ShadowComparison",
    "__version__",
    "select_facts_for_capacity",
    *_ON_FIRST_USE,
]

if TYPE_CHECKING:  # the names of _ON_FIRST_USE, for type checkers (a test keeps them equal)
    from deermem.config import MemoryConfig as MemoryConfig
    from deermem.config import ModelConfig as ModelConfig
    from deermem.config import load_config as load_config
    from deermem.learning.signals import Signal as Signal
    from deermem.llm import ChatMessage as ChatMessage
    from deermem.llm import ChatModel as ChatModel
    from deermem.llm import ChatResponse as ChatResponse
    from deermem.llm import LocalModel as LocalModel
    from deermem.llm import OpenAICompatibleModel as OpenAICompatibleModel
    from deermem.llm import build_chat_model as build_chat_model
    from deermem.memory import Memory as Memory


def __getattr__(name: str) -> object:
    """Import a name of ``_ON_FIRST_USE`` when first read; later reads find it in the namespace."""
    module = _ON_FIRST_USE.get(name)
    if module is None:
        raise AttributeError(f"module 'deermem' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
