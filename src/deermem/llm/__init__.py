"""Language models: the :class:`ChatModel` protocol and the two backends deermem ships.

* :class:`OpenAICompatibleModel` — any OpenAI-compatible HTTP endpoint (OpenAI,
  DeepSeek, vLLM, Ollama, llama.cpp's server), with retries, timeouts and
  errors mapped into deermem's tree;
* :class:`LocalModel` — a GGUF model in-process through llama-cpp-python (the
  optional ``local`` extra), SmolLM2-135M-Instruct by default.

:func:`build_chat_model` turns the ``model:`` configuration section into one
of them, or ``None`` when no model is configured (extraction is then off).
See docs/llm.md.
"""

from deermem.llm.factory import NO_MODEL_CONFIGURED, build_chat_model, require_chat_model
from deermem.llm.local import (
    DEFAULT_LOCAL_MAX_TOKENS,
    LocalModel,
    default_model_path,
    grammar_schema,
)
from deermem.llm.openai_compat import (
    MAX_RESPONSE_BYTES,
    OpenAICompatibleModel,
    StructuredOutput,
    request_fingerprint,
)
from deermem.llm.retry import RetryPolicy, parse_retry_after
from deermem.llm.types import (
    ChatMessage,
    ChatModel,
    ChatResponse,
    ChatRole,
    JsonSchema,
    TokenUsage,
)

__all__ = [
    "DEFAULT_LOCAL_MAX_TOKENS",
    "MAX_RESPONSE_BYTES",
    "NO_MODEL_CONFIGURED",
    "ChatMessage",
    "ChatModel",
    "ChatResponse",
    "ChatRole",
    "JsonSchema",
    "LocalModel",
    "OpenAICompatibleModel",
    "RetryPolicy",
    "StructuredOutput",
    "TokenUsage",
    "build_chat_model",
    "default_model_path",
    "grammar_schema",
    "parse_retry_after",
    "request_fingerprint",
    "require_chat_model",
]
