"""Language models: the :class:`ChatModel` protocol and the two backends deermem ships.

* :class:`OpenAICompatibleModel` — any OpenAI-compatible HTTP endpoint (OpenAI,
  DeepSeek, vLLM, Ollama, llama.cpp's server), with retries, timeouts and
  errors mapped into deermem's tree;
* :class:`LocalModel` — a GGUF model in-process through llama-cpp-python (the
  optional ``local`` extra), SmolLM2-135M-Instruct by default.

:func:`build_chat_model` turns the ``model:`` configuration section into one
of them, or ``None`` when no model is configured (extraction is then off).
See docs/llm.md.

With no model configured deermem still stores, searches and injects facts;
only extraction from conversations is off. :func:`build_chat_model` returns
``None`` in that case so callers can branch; :func:`require_chat_model`
raises :class:`LLMNotConfigured` with a message that says how to configure one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Final

import httpx

from deermem.config import MemoryConfig, ModelConfig
from deermem.errors import LLMNotConfigured
from deermem.llm.local import LocalModel, default_model_path, grammar_schema
from deermem.llm.openai import (
    INVALID_KEY_PROBLEM,
    OpenAICompatibleModel,
    RetryPolicy,
    is_valid_api_key,
    parse_retry_after,
    request_fingerprint,
)
from deermem.llm.types import ChatMessage, ChatModel, ChatResponse, JsonSchema, TokenUsage

__all__ = [
    "INVALID_KEY_PROBLEM",
    "NO_MODEL_CONFIGURED",
    "ChatMessage",
    "ChatModel",
    "ChatResponse",
    "JsonSchema",
    "LocalModel",
    "OpenAICompatibleModel",
    "RetryPolicy",
    "TokenUsage",
    "build_chat_model",
    "default_model_path",
    "grammar_schema",
    "is_valid_api_key",
    "parse_retry_after",
    "request_fingerprint",
    "require_chat_model",
]

NO_MODEL_CONFIGURED: Final = (
    "no model is configured, so extraction from conversations is off; set model.model "
    "(with model.base_url and model.api_key_env) for an OpenAI-compatible endpoint, or "
    "model.provider = 'local' for the embedded model (see docs/llm.md)"
)


def build_chat_model(
    config: MemoryConfig | ModelConfig,
    *,
    http: httpx.Client | None = None,
    environ: Mapping[str, str] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> ChatModel | None:
    """The model the configuration describes, or ``None`` when none is configured.

    Args:
        config: the whole configuration, or just its ``model`` section.
        http: an ``httpx.Client`` for the HTTP provider (one is made otherwise).
        environ: where the API key is read; ``os.environ`` by default.
        sleep: how the HTTP provider waits between retries.

    Raises:
        ConfigError: the key's environment variable is unset or empty.
        LLMUnavailable: ``provider: local`` without the ``local`` extra or the model file.
    """
    section = config.model if isinstance(config, MemoryConfig) else config
    if not section.configured:
        return None
    if section.provider == "local":
        return LocalModel.from_config(section)
    return OpenAICompatibleModel.from_config(section, http=http, environ=environ, sleep=sleep)


def require_chat_model(
    config: MemoryConfig | ModelConfig,
    *,
    http: httpx.Client | None = None,
    environ: Mapping[str, str] | None = None,
) -> ChatModel:
    """Like :func:`build_chat_model`, but no model is an error.

    Raises:
        LLMNotConfigured: no model is configured (the message says how to set one).
    """
    model = build_chat_model(config, http=http, environ=environ)
    if model is None:
        raise LLMNotConfigured(NO_MODEL_CONFIGURED)
    return model
