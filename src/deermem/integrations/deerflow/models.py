"""The model deermem extracts with inside DeerFlow, and the host's view of its calls.

deermem calls models through its own small :class:`~deermem.llm.ChatModel`
protocol. Inside DeerFlow there are two candidates:

* deermem's own OpenAI-compatible client, when ``backend_config.model.model``
  names a model — retries, timeouts and a key that never reaches a log;
* the host's default chat model (a LangChain chat model built by the
  ``host_llm_factory`` hook) otherwise, so a DeerFlow user who configured no
  memory model keeps extraction working, as with the bundled DeerMem.

:class:`HostChatModel` adapts the second without importing LangChain: it
relies only on what every LangChain chat model has (``invoke`` taking a list
of role/content dicts and an optional ``config``, and a reply with
``content``, ``usage_metadata`` and ``response_metadata``). It does not bind
deermem's JSON schema — how a LangChain model is asked for structured output
differs by provider — and needs not: the update prompt describes the answer,
and every answer is parsed and validated whatever the model.

:class:`ObservedModel` wraps either one so the host's ``MemoryCallbacks`` see
every call: ``on_memory_llm_call`` before (its changes to the invoke config
reach a LangChain model, e.g. Langfuse's trace metadata) and
``on_memory_llm_result`` after, on success and on failure. A callback that
raises is logged and ignored: observing must never fail an extraction.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from deermem.errors import LLMError
from deermem.learning.messages import parse_message
from deermem.llm.types import ChatMessage, ChatResponse, JsonSchema, TokenUsage

__all__ = ["HostChatModel", "ObservedModel"]

_log = logging.getLogger("deermem.integrations.deerflow")


class HostChatModel:
    """A :class:`~deermem.llm.ChatModel` over the host's LangChain chat model.

    Args:
        chat_model: anything with LangChain's ``invoke(messages, config=...)``.
    """

    def __init__(self, chat_model: Any) -> None:
        self._model = chat_model

    @property
    def name(self) -> str:
        for attribute in ("model_name", "model"):
            value = getattr(self._model, attribute, None)
            if isinstance(value, str) and value:
                return value
        return type(self._model).__name__

    def complete(
        self, messages: Sequence[ChatMessage], *, json_schema: JsonSchema | None = None
    ) -> ChatResponse:
        """Answer ``messages`` (``json_schema`` is not bound; see the module docstring)."""
        return self.invoke(messages, {})

    def invoke(
        self, messages: Sequence[ChatMessage], invoke_config: dict[str, Any]
    ) -> ChatResponse:
        """Call the model with the host's invoke config (tracing metadata, callbacks).

        Raises:
            LLMError: the model raised; the message names the error's type only
                (its text may quote the prompt, that is, the conversation).
        """
        payload = [message.to_dict() for message in messages]
        try:
            reply = self._model.invoke(payload, config=invoke_config or None)
        except Exception as error:
            failure = f"the host's chat model failed ({type(error).__name__})"
            raise LLMError(failure, model=self.name, attempts=1) from error
        metadata = getattr(reply, "response_metadata", None)
        metadata = metadata if isinstance(metadata, Mapping) else {}
        reported = metadata.get("model_name") or metadata.get("model")
        finish = metadata.get("finish_reason")
        return ChatResponse(
            text=reply if isinstance(reply, str) else parse_message(reply).text,
            usage=_usage(getattr(reply, "usage_metadata", None)),
            model=reported if isinstance(reported, str) else None,
            finish_reason=finish if isinstance(finish, str) else None,
        )


def _usage(metadata: object) -> TokenUsage:
    """LangChain's ``usage_metadata`` (input/output/total tokens) as deermem's usage."""
    if not isinstance(metadata, Mapping):
        return TokenUsage()
    return TokenUsage.from_mapping(
        {
            "prompt_tokens": metadata.get("input_tokens"),
            "completion_tokens": metadata.get("output_tokens"),
            "total_tokens": metadata.get("total_tokens"),
        }
    )


class ObservedModel:
    """A chat model whose calls the host's ``MemoryCallbacks`` observe.

    Args:
        model: deermem's own client or a :class:`HostChatModel`.
        callbacks: the host's callbacks object (``on_memory_llm_call``,
            ``on_memory_llm_result``); either method may be missing.
    """

    def __init__(self, model: Any, callbacks: Any) -> None:
        self.model = model
        self._callbacks = callbacks

    @property
    def name(self) -> str:
        return str(self.model.name)

    def complete(
        self, messages: Sequence[ChatMessage], *, json_schema: JsonSchema | None = None
    ) -> ChatResponse:
        invoke_config: dict[str, Any] = {}
        self._notify(
            "on_memory_llm_call",
            invoke_config,
            thread_id=None,
            user_id=None,
            trace_id=None,
            model_name=self.name,
        )
        prompt = [message.to_dict() for message in messages]
        started = time.perf_counter()
        try:
            if isinstance(self.model, HostChatModel):
                response: ChatResponse = self.model.invoke(messages, invoke_config)
            else:
                response = self.model.complete(messages, json_schema=json_schema)
        except BaseException as error:
            self._result(invoke_config, prompt, None, error, started)
            raise
        self._result(invoke_config, prompt, response.text, None, started)
        return response

    def close(self) -> None:
        """Release the wrapped model's connections, if it holds any."""
        close = getattr(self.model, "close", None)
        if callable(close):
            close()

    def _result(
        self,
        invoke_config: dict[str, Any],
        prompt: list[dict[str, str]],
        response: str | None,
        error: BaseException | None,
        started: float,
    ) -> None:
        self._notify(
            "on_memory_llm_result",
            invoke_config,
            prompt=prompt,
            response=response,
            error=error,
            duration_ms=(time.perf_counter() - started) * 1000.0,
            model_name=self.name,
        )

    def _notify(self, hook: str, invoke_config: dict[str, Any], **details: Any) -> None:
        method = getattr(self._callbacks, hook, None)
        if not callable(method):
            return
        try:
            method(invoke_config, **details)
        except Exception as error:
            _log.warning("the host's %s callback failed (%s); ignored", hook, type(error).__name__)
