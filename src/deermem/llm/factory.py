"""From the ``model:`` section of the configuration to a :class:`ChatModel`, or to none.

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
from deermem.llm.local import LocalModel
from deermem.llm.openai_compat import OpenAICompatibleModel
from deermem.llm.types import ChatModel

__all__ = ["NO_MODEL_CONFIGURED", "build_chat_model", "require_chat_model"]

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
