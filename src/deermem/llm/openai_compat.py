"""A chat model behind any OpenAI-compatible HTTP endpoint.

One client for OpenAI, DeepSeek, vLLM, Ollama and llama.cpp's server: it
POSTs ``{base_url}/chat/completions`` and reads the answer leniently (see
:mod:`deermem.llm._completion`). Requests are split in two steps,
:meth:`OpenAICompatibleModel.build_payload` and
:meth:`OpenAICompatibleModel.send`, so a caller that must fingerprint the exact
request (the evaluation does) can hash the payload it is about to send.

The API key is read from an environment variable whose *name* is configured.
It travels only in the ``Authorization`` header: it is not stored in the
payload, not shown by ``repr``, not logged, and removed from any server text
quoted in an error.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Final, Literal

import httpx

from deermem.config import DEFAULT_API_KEY_ENV, DEFAULT_BASE_URL, ModelConfig
from deermem.errors import ConfigError, LLMError
from deermem.llm._completion import InvalidCompletion, parse_completion
from deermem.llm._failures import Failures, short_reason, without_credentials
from deermem.llm.retry import RetryPolicy
from deermem.llm.types import ChatMessage, ChatResponse, JsonSchema

__all__ = ["MAX_RESPONSE_BYTES", "OpenAICompatibleModel", "StructuredOutput", "request_fingerprint"]

logger = logging.getLogger("deermem.llm")

StructuredOutput = Literal["json_schema", "json_object", "none"]
MAX_RESPONSE_BYTES: Final = 32 * 1024 * 1024
"""A completion larger than this is refused rather than read into memory."""

# Transport failures that may pass on their own; anything else (an unsupported
# scheme, a redirect loop, a body that cannot be decoded) would fail again.
_TRANSIENT: Final = (httpx.NetworkError, httpx.RemoteProtocolError, httpx.ProxyError)


class _Retryable(Exception):
    """Internal: an attempt failed in a way that may pass; carries the error to raise."""

    def __init__(self, error: LLMError, retry_after: float | None = None) -> None:
        self.error = error
        self.retry_after = retry_after


class OpenAICompatibleModel:
    """A :class:`~deermem.llm.ChatModel` that talks to an OpenAI-compatible endpoint.

    Args:
        model: the model name the endpoint knows, e.g. ``"deepseek-chat"``.
        base_url: the API root; ``/chat/completions`` is appended.
        api_key_env: the environment variable holding the key, or ``None`` to
            send no ``Authorization`` header (local servers rarely want one).
        temperature: sent when not ``None``.
        max_tokens: sent when not ``None``.
        seed: sent when not ``None``.
        structured_output: how a ``json_schema`` is passed: as
            ``response_format`` ``json_schema`` (OpenAI, vLLM, llama.cpp,
            Ollama), as ``json_object`` (DeepSeek), or not at all.
        timeout_seconds: per attempt, for connecting, sending and the whole answer.
        retry: when and how long to retry.
        http: the ``httpx.Client`` to use (tests may pass one with a mock
            transport); by default the model makes and owns one.
        environ: where to read the key; ``os.environ`` by default.
        sleep: how to wait between attempts (``time.sleep``); injectable for tests.

    Raises:
        ConfigError: ``api_key_env`` names a variable that is unset or empty,
            or a setting is out of range.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str = DEFAULT_BASE_URL,
        api_key_env: str | None = DEFAULT_API_KEY_ENV,
        temperature: float | None = 0.0,
        max_tokens: int | None = 4096,
        seed: int | None = None,
        structured_output: StructuredOutput = "json_schema",
        timeout_seconds: float = 60.0,
        retry: RetryPolicy | None = None,
        http: httpx.Client | None = None,
        environ: Mapping[str, str] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not model.strip():
            raise ConfigError(["model.model is empty: name the model the endpoint serves"])
        if not (math.isfinite(timeout_seconds) and timeout_seconds > 0):
            raise ConfigError([f"model.timeout_seconds = {timeout_seconds!r}: expected > 0"])
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.endpoint = self.base_url + "/chat/completions"
        self.api_key_env = api_key_env
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.seed = seed
        self.structured_output: StructuredOutput = structured_output
        self.timeout_seconds = timeout_seconds
        self.retry = retry or RetryPolicy()
        self._api_key = _read_key(api_key_env, os.environ if environ is None else environ)
        self._owns_http = http is None
        self._http = http if http is not None else httpx.Client()
        self._sleep = sleep
        # Shown in errors and logs: the endpoint without any user:password in it.
        self._shown_endpoint = without_credentials(self.endpoint)
        self._failures = Failures(model, self._shown_endpoint, timeout_seconds, self._api_key)

    @classmethod
    def from_config(
        cls,
        config: ModelConfig,
        *,
        http: httpx.Client | None = None,
        environ: Mapping[str, str] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> OpenAICompatibleModel:
        """Build the client the ``model:`` section describes."""
        return cls(
            config.model,
            base_url=config.base_url,
            api_key_env=config.api_key_env,
            temperature=config.temperature,
            max_tokens=config.max_tokens,
            seed=config.seed,
            structured_output=config.structured_output,
            timeout_seconds=config.timeout_seconds,
            retry=RetryPolicy(
                max_retries=config.max_retries,
                backoff_seconds=config.retry_backoff_seconds,
                max_total_wait_seconds=config.retry_max_wait_seconds,
            ),
            http=http,
            environ=environ,
            sleep=sleep,
        )

    @property
    def name(self) -> str:
        return self.model

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(model={self.model!r}, "
            f"base_url={without_credentials(self.base_url)!r}, "
            f"api_key_env={self.api_key_env!r})"
        )

    def close(self) -> None:
        """Close the HTTP client if this model created it (an injected one stays open)."""
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> OpenAICompatibleModel:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # --- the request, in two steps ------------------------------------------------

    def complete(
        self, messages: Sequence[ChatMessage], *, json_schema: JsonSchema | None = None
    ) -> ChatResponse:
        """Build the payload for ``messages`` and send it; see :meth:`send`."""
        return self.send(self.build_payload(messages, json_schema=json_schema))

    def build_payload(
        self, messages: Sequence[ChatMessage], *, json_schema: JsonSchema | None = None
    ) -> dict[str, object]:
        """The exact JSON object :meth:`complete` would POST; it never holds the key.

        Keys: ``model``, ``messages`` (``{"role", "content"}`` each),
        ``stream`` (always false), and ``temperature`` (as a float),
        ``max_tokens``, ``seed`` and ``response_format`` when they apply.
        """
        if not messages:
            raise ValueError("a request needs at least one message")
        payload: dict[str, object] = {
            "model": self.model,
            "messages": [message.to_dict() for message in messages],
            "stream": False,
        }
        if self.temperature is not None:
            payload["temperature"] = float(self.temperature)
        if self.max_tokens is not None:
            payload["max_tokens"] = self.max_tokens
        if self.seed is not None:
            payload["seed"] = self.seed
        if json_schema is not None and self.structured_output == "json_schema":
            payload["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "response", "strict": True, "schema": dict(json_schema)},
            }
        elif json_schema is not None and self.structured_output == "json_object":
            payload["response_format"] = {"type": "json_object"}
        return payload

    def send(self, payload: Mapping[str, object]) -> ChatResponse:
        """POST ``payload`` as it is, retrying what may pass, and read the answer.

        Raises:
            LLMTimeout: every attempt timed out.
            LLMTransportError: no HTTP answer (after the retries, when transient).
            LLMStatusError: an error status (after the retries, for 429 and 5xx).
            LLMResponseInvalid: a 2xx answer that is not a chat completion.
        """
        try:
            body = json.dumps(payload, ensure_ascii=False, allow_nan=False).encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate in a message: JSON can escape it
            body = json.dumps(payload, allow_nan=False).encode("ascii")
        waited = 0.0
        attempt = 0
        while True:
            attempt += 1
            try:
                return self._attempt(body, attempt)
            except _Retryable as failure:
                wait = self.retry.next_wait(attempt, waited, failure.retry_after)
                if wait is None:
                    raise failure.error from failure.__cause__
                logger.warning(
                    "model %r at %s: %s; retrying in %.2f s (attempt %d of %d)",
                    self.model,
                    self._shown_endpoint,
                    short_reason(failure.error),
                    wait,
                    attempt + 1,
                    self.retry.max_attempts,
                )
                self._sleep(wait)
                waited += wait

    # --- one attempt ---------------------------------------------------------------

    def _attempt(self, body: bytes, attempt: int) -> ChatResponse:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._api_key is not None:
            headers["Authorization"] = f"Bearer {self._api_key}"
        deadline = time.monotonic() + self.timeout_seconds
        try:
            with self._http.stream(
                "POST",
                self.endpoint,
                content=body,
                headers=headers,
                timeout=httpx.Timeout(self.timeout_seconds),
            ) as response:
                raw = self._read_body(response, deadline, attempt)
                status, response_headers = response.status_code, response.headers
        except httpx.TimeoutException as error:
            raise _Retryable(self._failures.timeout(type(error).__name__, attempt)) from error
        except httpx.HTTPError as error:
            failure = self._failures.transport(error, attempt)
            if isinstance(error, _TRANSIENT):
                raise _Retryable(failure) from error
            raise failure from error
        if not 200 <= status < 300:
            refused = self._failures.status(status, response_headers, raw, attempt)
            if refused.retryable:
                raise _Retryable(refused, refused.retry_after)
            raise refused
        return self._parse(raw, attempt)

    def _read_body(self, response: httpx.Response, deadline: float, attempt: int) -> bytes:
        chunks: list[bytes] = []
        size = 0
        for chunk in response.iter_bytes():
            size += len(chunk)
            if size > MAX_RESPONSE_BYTES:
                limit = f"the answer is larger than {MAX_RESPONSE_BYTES} bytes"
                raise self._failures.invalid(limit, attempt)
            if time.monotonic() > deadline:
                # A server trickling bytes would otherwise never hit a per-read timeout.
                raise _Retryable(self._failures.timeout("total time exceeded", attempt))
            chunks.append(chunk)
        return b"".join(chunks)

    def _parse(self, raw: bytes, attempt: int) -> ChatResponse:
        try:
            decoded: object = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as error:
            raise self._failures.invalid("the body is not valid JSON", attempt) from error
        try:
            completion = parse_completion(decoded)
        except InvalidCompletion as error:
            raise self._failures.invalid(error.reason, attempt) from None
        logger.debug(
            "model %r answered in %d attempt(s), usage %s",
            self.model,
            attempt,
            dict(completion.usage.counts),
        )
        return ChatResponse(
            text=completion.text,
            usage=completion.usage,
            model=completion.model,
            finish_reason=completion.finish_reason,
            attempts=attempt,
        )


def request_fingerprint(payload: Mapping[str, object]) -> str:
    """The hex SHA-256 of a payload, as the evaluation records it.

    The payload is serialised with ``json.dumps(sort_keys=True,
    ensure_ascii=False)`` and default separators, then UTF-8 encoded. The key is
    never part of a payload, so the fingerprint is safe to publish.
    """
    text = json.dumps(payload, ensure_ascii=False, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _read_key(variable: str | None, environ: Mapping[str, str]) -> str | None:
    if variable is None:
        return None
    key = environ.get(variable, "").strip()
    if not key:
        raise ConfigError(
            [
                f"model.api_key_env names the environment variable {variable}, which is "
                "unset or empty; set it, or set model.api_key_env to null for a server "
                "that needs no key"
            ],
            source="environment",
        )
    return key
