"""A chat model behind any OpenAI-compatible HTTP endpoint.

One client for OpenAI, DeepSeek, vLLM, Ollama and llama.cpp's server: it
POSTs ``{base_url}/chat/completions`` and reads the answer leniently
(:func:`parse_completion`). Requests are split in two steps,
:meth:`OpenAICompatibleModel.build_payload` and
:meth:`OpenAICompatibleModel.send`, so a caller that must fingerprint the exact
request (the evaluation does) can hash the payload it is about to send.

The API key is read from an environment variable whose *name* is configured.
It travels only in the ``Authorization`` header: it is not stored in the
payload, not shown by ``repr``, not logged, and removed from any server text
quoted in an error. Secrets written into ``base_url`` (a password, a
``?api-key=``) are removed the same way, from errors and from httpx's own log
line (:class:`_RedactingFilter`).

``timeout_seconds`` bounds a whole attempt, not each read: every socket
operation of the model's own HTTP client is given at most the time left before
the attempt's deadline (:class:`_DeadlineBackend`), so a server that trickles its
headers or body a byte at a time cannot hold a call open.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, Final, Literal, TypedDict
from urllib.parse import urlsplit, urlunsplit

import httpcore
import httpx

from deermem.config import (
    DEFAULT_API_KEY_ENV,
    DEFAULT_BASE_URL,
    ModelConfig,
    read_api_key,
    redact_url,
    url_secrets,
)
from deermem.errors import (
    ConfigError,
    LLMError,
    LLMResponseInvalid,
    LLMStatusError,
    LLMTimeout,
    LLMTransportError,
)
from deermem.llm.types import ChatMessage, ChatResponse, JsonSchema, TokenUsage
from deermem.model import parse_json

__all__ = [
    "MAX_RESPONSE_BYTES",
    "InvalidCompletion",
    "OpenAICompatibleModel",
    "RetryPolicy",
    "error_detail",
    "parse_completion",
    "parse_retry_after",
    "request_fingerprint",
]


# ---------------------------------------------------------------------------
# When to try a call again, and how long to wait first
#
# Pure arithmetic, kept apart from the HTTP client so the schedule can be read
# and tested on its own: exponential backoff, a server's ``Retry-After`` when it
# sends one, and one cap on the total time a call may spend waiting.
# ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How many times a failed call is retried, and the waits in between.

    Only failures that may pass are retried: transport errors (refused, reset,
    dropped connections), timeouts, HTTP 429 and 5xx. Anything else (a 400,
    a 401, an answer that is not a completion) fails at once.

    Attributes:
        max_retries: retries after the first attempt; 0 never retries.
        backoff_seconds: the wait before the first retry.
        backoff_multiplier: each further wait is the previous one times this
            (1.0 gives a constant wait).
        max_total_wait_seconds: the most one call may spend waiting between
            attempts, summed. A wait that would pass it is shortened to fit; a
            ``Retry-After`` that would pass it ends the call instead (retrying
            early would only earn another 429).
        honour_retry_after: wait what the server asks for, when it asks.
    """

    max_retries: int = 2
    backoff_seconds: float = 1.0
    backoff_multiplier: float = 2.0
    max_total_wait_seconds: float = 60.0
    honour_retry_after: bool = True

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0; got {self.max_retries}")
        for name in ("backoff_seconds", "max_total_wait_seconds"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be a finite number >= 0; got {value!r}")
        if not (math.isfinite(self.backoff_multiplier) and self.backoff_multiplier >= 1.0):
            raise ValueError(f"backoff_multiplier must be >= 1; got {self.backoff_multiplier!r}")

    @property
    def max_attempts(self) -> int:
        return self.max_retries + 1

    def next_wait(
        self, attempt: int, waited: float, retry_after: float | None = None
    ) -> float | None:
        """Seconds to wait before attempt ``attempt + 1``, or ``None`` to give up.

        Args:
            attempt: the attempt that just failed (1 for the first).
            waited: seconds already spent waiting during this call.
            retry_after: what the server asked for, if anything.
        """
        if attempt >= self.max_attempts:
            return None
        remaining = self.max_total_wait_seconds - waited
        if self.honour_retry_after and retry_after is not None:
            return retry_after if retry_after <= remaining else None
        wait = self.backoff_seconds * self.backoff_multiplier ** (attempt - 1)
        if wait > 0 and remaining <= 0:
            return None
        return min(wait, max(remaining, 0.0))


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """Read a ``Retry-After`` (or ``retry-after-ms``-style seconds) header value.

    Accepts delta-seconds (``"2"``, ``"1.5"``) and an HTTP date; a date in the
    past means "now" (0). Anything unreadable is ``None``, as if absent: a
    malformed header must not stop a retry that would otherwise happen.

    Args:
        value: the header value.
        now: the clock for HTTP dates; the current time by default.
    """
    if value is None:
        return None
    text = value.strip()
    seconds: float | None
    try:
        seconds = float(text)
    except ValueError:
        seconds = _seconds_until(text, now)
    if seconds is None or not math.isfinite(seconds):
        return None
    return max(seconds, 0.0)


def _seconds_until(text: str, now: datetime | None) -> float | None:
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return (when - (now or datetime.now(UTC))).total_seconds()


# ---------------------------------------------------------------------------
# Reading a chat-completion body, whoever wrote it
#
# OpenAI, DeepSeek, vLLM, Ollama, llama.cpp's server and llama-cpp-python all
# answer with the same outline (``choices[0].message.content``, ``usage``) and
# differ in the details: content as a string or as a list of blocks, ``usage``
# present or not, extra fields of their own. The reader below accepts all of those
# and rejects, with a reason, what is not a completion at all.
# ---------------------------------------------------------------------------

_DETAIL_LIMIT: Final = 300
REDACTED: Final = "[redacted]"


class InvalidCompletion(ValueError):
    """The body is not a usable completion; ``reason`` says what is wrong."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


@dataclass(frozen=True, slots=True)
class Completion:
    """The parts of a completion deermem uses."""

    text: str
    usage: TokenUsage
    model: str | None
    finish_reason: str | None


def parse_completion(body: object) -> Completion:
    """Take the first choice's text, the usage and the reported model from a decoded body.

    Raises:
        InvalidCompletion: no first choice, no message, or no text in it.
    """
    if not isinstance(body, Mapping):
        raise InvalidCompletion(f"expected a JSON object, got {_kind(body)}")
    choices = body.get("choices")
    if not isinstance(choices, Sequence) or isinstance(choices, str) or not choices:
        raise InvalidCompletion("'choices' is missing or empty")
    choice = choices[0]
    if not isinstance(choice, Mapping):
        raise InvalidCompletion(f"choices[0] is {_kind(choice)}, not an object")
    message = choice.get("message")
    if not isinstance(message, Mapping):
        raise InvalidCompletion("choices[0].message is missing")
    text = _text(message.get("content"))
    if text is None:
        refusal = message.get("refusal")
        if isinstance(refusal, str) and refusal:
            raise InvalidCompletion("the model refused to answer (choices[0].message.refusal)")
        raise InvalidCompletion(
            "choices[0].message.content is "
            f"{_kind(message.get('content'))}, not text or a list of text blocks"
        )
    model = body.get("model")
    finish = choice.get("finish_reason")
    return Completion(
        text=text,
        usage=TokenUsage.from_mapping(body.get("usage")),
        model=model if isinstance(model, str) else None,
        finish_reason=finish if isinstance(finish, str) else None,
    )


def _text(content: object) -> str | None:
    """A string as is; a list of blocks joined (text blocks only); anything else ``None``."""
    if isinstance(content, str):
        return content
    if not isinstance(content, Sequence) or isinstance(content, bytes | bytearray):
        return None
    parts: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, Mapping) and block.get("type", "text") in ("text", "output_text"):
            text = block.get("text")
            if isinstance(text, str):
                parts.append(text)
    if content and not parts:
        return None
    return "".join(parts)


def error_detail(body: bytes, secret: str | Iterable[str] | None) -> str:
    """The server's own explanation of an error status, short and without the secrets.

    OpenAI-style servers send ``{"error": {"message": ...}}``; others send
    ``{"error": "..."}``, ``{"detail": ...}`` or plain text.
    """
    text = body.decode("utf-8", errors="replace").strip()
    try:
        decoded: object = parse_json(text)
    except ValueError:  # not JSON, or nested past the decoder's depth: the text is the detail
        decoded = None
    if isinstance(decoded, Mapping):
        error = decoded.get("error", decoded.get("detail", decoded.get("message")))
        if isinstance(error, Mapping):
            error = error.get("message", error)
        if error is not None:
            text = error if isinstance(error, str) else json.dumps(error, ensure_ascii=False)
    text = " ".join(redact(text, secret).split())
    return text if len(text) <= _DETAIL_LIMIT else text[: _DETAIL_LIMIT - 3] + "..."


def redact(text: str, secret: str | Iterable[str] | None) -> str:
    """``text`` with every occurrence of ``secret`` (or of each secret) replaced by ``[redacted]``.

    Longer secrets go first, so a secret that contains another is replaced whole.
    """
    if not secret:
        return text
    secrets = [secret] if isinstance(secret, str) else list(secret)
    # A library may quote a secret escaped rather than as is: h11 refuses a header
    # value by printing its bytes repr, where a backslash is two characters.
    forms = {
        form
        for each in secrets
        if each
        for form in (
            each,
            repr(each)[1:-1],
            repr(each.encode("utf-8", "backslashreplace"))[2:-1],
            json.dumps(each)[1:-1],
        )
    }
    for each in sorted(forms, key=len, reverse=True):
        text = text.replace(each, REDACTED)
    return text


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Sequence):
        return "a list"
    return type(value).__name__


# ---------------------------------------------------------------------------
# deermem's LLM errors, from what went wrong on the wire
#
# The HTTP client decides *whether* to retry; the builders below write *what
# happened* in a form people can act on: which model, which endpoint (without
# credentials), which status or cause, after how many attempts — with the API
# key removed from anything the server said.
# ---------------------------------------------------------------------------


def is_retryable_status(status: int) -> bool:
    """429 and 5xx may pass on their own; every other error status will not."""
    return status == 429 or status >= 500


class _Where(TypedDict):
    """What every error of :class:`Failures` says of where it happened."""

    model: str
    endpoint: str
    attempts: int


@dataclass(frozen=True, slots=True)
class Failures:
    """Error builders for one model at one endpoint.

    Attributes:
        model: the model name.
        endpoint: the URL called, already without credentials.
        timeout_seconds: the per-attempt limit, for timeout messages.
        secret: what to redact from server text: the API key, and the
            secrets written into ``base_url`` (a server may echo its request line).
    """

    model: str
    endpoint: str
    timeout_seconds: float
    secret: str | tuple[str, ...] | None

    def _where(self, attempt: int) -> _Where:
        return _Where(model=self.model, endpoint=self.endpoint, attempts=attempt)

    def status(
        self, status: int, headers: httpx.Headers, body: bytes, attempt: int
    ) -> LLMStatusError:
        retryable = is_retryable_status(status)
        retry_after = _retry_after(headers) if retryable else None
        detail = error_detail(body, self.secret)
        reason = httpx.codes.get_reason_phrase(status)
        message = (
            f"model {self.model!r} at {self.endpoint} answered HTTP {status}"
            f"{' ' + reason if reason else ''}{': ' + detail if detail else ''}{_after(attempt)}"
        )
        if retry_after is not None:
            message += f" (the server asked to wait {retry_after:g} s)"
        return LLMStatusError(
            message,
            status_code=status,
            retryable=retryable,
            retry_after=retry_after,
            detail=detail,
            **self._where(attempt),
        )

    def invalid(self, reason: str, attempt: int) -> LLMResponseInvalid:
        return LLMResponseInvalid(
            f"model {self.model!r} at {self.endpoint} sent an answer deermem cannot "
            f"read: {reason}{_after(attempt)}",
            reason=reason,
            **self._where(attempt),
        )

    def timeout(self, cause: str, attempt: int) -> LLMTimeout:
        return LLMTimeout(
            f"model {self.model!r} at {self.endpoint} did not answer within "
            f"{self.timeout_seconds:g} s{_after(attempt)}",
            cause=cause,
            **self._where(attempt),
        )

    def transport(self, error: Exception, attempt: int) -> LLMTransportError:
        text = redact(str(error), self.secret) or "no details"
        return LLMTransportError(
            f"could not reach model {self.model!r} at {self.endpoint}: "
            f"{type(error).__name__} ({text}){_after(attempt)}",
            cause=type(error).__name__,
            **self._where(attempt),
        )


def short_reason(error: LLMError) -> str:
    """A few words for a retry log line: ``HTTP 503``, ``timed out``, ``ConnectError``."""
    if isinstance(error, LLMStatusError):
        return f"HTTP {error.status_code}"
    if isinstance(error, LLMTimeout):
        return "timed out"
    if isinstance(error, LLMTransportError):
        return error.cause
    return type(error).__name__


def _retry_after(headers: httpx.Headers) -> float | None:
    """The wait a server asked for: ``retry-after-ms`` (OpenAI) first, then ``Retry-After``."""
    milliseconds = parse_retry_after(headers.get("retry-after-ms"))
    if milliseconds is not None:
        return milliseconds / 1000.0
    return parse_retry_after(headers.get("retry-after"))


def _after(attempt: int) -> str:
    return f" (after {attempt} attempts)" if attempt > 1 else ""


# ---------------------------------------------------------------------------
# The client
# ---------------------------------------------------------------------------

logger = logging.getLogger("deermem.llm")

StructuredOutput = Literal["json_schema", "json_object", "none"]
MAX_RESPONSE_BYTES: Final = 32 * 1024 * 1024
"""A completion larger than this is refused rather than read into memory."""

# Transport failures that may pass on their own; anything else (an unsupported
# scheme, a redirect loop, a body that cannot be decoded) would fail again.
_TRANSIENT: Final = (httpx.NetworkError, httpx.RemoteProtocolError, httpx.ProxyError)


# ---------------------------------------------------------------------------
# One deadline for a whole attempt
#
# httpx's timeouts bound each socket operation: a read that waits longer than
# ``read`` seconds fails, but a server that sends one byte every second never
# makes one wait that long, and could hold a call open for ever — during the
# headers as well as the body. The network backend below gives every operation
# (connect, TLS handshake, each write, each read) at most the time left before
# the deadline of the attempt under way, and fails any operation started after
# it. An attempt therefore ends by its deadline plus one blocking operation's
# overshoot of the socket timeout (milliseconds) — whatever the server does.
# Name resolution (getaddrinfo) is the one step no socket timeout reaches.
# ---------------------------------------------------------------------------

# The deadline (time.monotonic()) of the attempt this thread is making, if any.
# A context variable rather than state on the backend: the client, its pool and
# its pooled connections are shared by every thread calling the model, and each
# socket operation runs in the thread of the request it serves.
_DEADLINE: ContextVar[float | None] = ContextVar("deermem_llm_deadline", default=None)


@contextmanager
def _deadline(at: float) -> Iterator[None]:
    token = _DEADLINE.set(at)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def _budget(timeout: float | None, expired: type[httpcore.TimeoutException]) -> float | None:
    """``timeout`` cut to the time left before the current deadline.

    Raises:
        expired: the deadline has passed (httpx maps it to its own timeout error).
    """
    deadline = _DEADLINE.get()
    if deadline is None:  # a request made outside an attempt: httpx's timeouts only
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise expired("total time exceeded")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    """A connection whose every operation ends by the current attempt's deadline."""

    def __init__(self, stream: httpcore.NetworkStream) -> None:
        self._stream = stream

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, _budget(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, _budget(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(
        self,
        ssl_context: Any,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        budget = _budget(timeout, httpcore.ConnectTimeout)
        return _DeadlineStream(self._stream.start_tls(ssl_context, server_hostname, budget))

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class _DeadlineBackend(httpcore.NetworkBackend):
    """Opens connections as ``backend`` does, each bounded by the current deadline."""

    def __init__(self, backend: httpcore.NetworkBackend) -> None:
        self._backend = backend

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        budget = _budget(timeout, httpcore.ConnectTimeout)
        stream = self._backend.connect_tcp(host, port, budget, local_address, socket_options)
        return _DeadlineStream(stream)

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        budget = _budget(timeout, httpcore.ConnectTimeout)
        return _DeadlineStream(self._backend.connect_unix_socket(path, budget, socket_options))

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)


def _client_with_deadlines() -> httpx.Client:
    """An ``httpx.Client`` whose connections all obey :data:`_DEADLINE`.

    httpx has no setting for a network backend, so the backend of each
    connection pool (the direct one, and those of any proxies httpx set up from
    the environment) is wrapped after the client is made. ``_network_backend`` is
    httpcore's name for it; the test that trickles headers fails if it changes.
    """
    client = httpx.Client()
    transports = [client._transport, *client._mounts.values()]
    for transport in transports:
        pool = getattr(transport, "_pool", None)
        backend = getattr(pool, "_network_backend", None)
        if isinstance(backend, httpcore.NetworkBackend) and not isinstance(
            backend, _DeadlineBackend
        ):
            pool._network_backend = _DeadlineBackend(backend)  # type: ignore[union-attr]
    return client


# ---------------------------------------------------------------------------
# Secrets in base_url, kept out of httpx's log
#
# httpx logs every request at INFO as ``HTTP Request: POST <url> ...`` with the
# URL as sent, so a password or a ``?api-key=`` in ``base_url`` would reach any
# application that logs at INFO. Moving the secret out of the URL is not
# possible for a query key (the server reads it there), and silencing httpx's
# logger would take its log from the host application too. Instead a filter on
# the ``httpx`` logger replaces each deermem endpoint URL that holds a secret by
# its redacted form in the records it passes on. It replaces whole URLs, not the
# secrets alone, so that a short password cannot mangle the host application's
# own records; every other record passes unchanged, and none is dropped.
# ---------------------------------------------------------------------------


class _RedactingFilter(logging.Filter):
    """Shows deermem's endpoint URLs redacted in the ``httpx`` logger's records."""

    def __init__(self) -> None:
        super().__init__("httpx")
        self._lock = threading.Lock()
        # URL as httpx writes it -> the same URL as deermem shows it.
        self._shown: Mapping[str, str] = {}

    def add(self, endpoint: str) -> None:
        """Redact ``endpoint`` from now on, if it holds a secret.

        Endpoints are only ever added: a record logged after its model was closed
        is still redacted, and the map is as small as the URLs configured.
        """
        written = {endpoint, str(httpx.URL(endpoint))}  # httpx may normalise it
        additions = {url: redact_url(url) for url in written if redact_url(url) != url}
        if additions:
            with self._lock:  # copy on write: filter() reads without the lock
                self._shown = {**self._shown, **additions}

    def filter(self, record: logging.LogRecord) -> bool:
        shown = self._shown
        if not shown:
            return True
        message = record.getMessage()
        if any(url in message for url in shown):
            for url in sorted(shown, key=len, reverse=True):
                message = message.replace(url, shown[url])
            record.msg, record.args = message, None
        return True


_HTTPX_LOG_FILTER: Final = _RedactingFilter()
logging.getLogger("httpx").addFilter(_HTTPX_LOG_FILTER)


def chat_completions_url(base_url: str) -> str:
    """``{base_url}/chat/completions``, with the path added to the URL's path.

    A query (``?api-key=…``) stays a query, after the new path; a fragment,
    which is never sent, is dropped.
    """
    parts = urlsplit(base_url.strip())
    path = parts.path.rstrip("/") + "/chat/completions"
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


class _Retryable(Exception):
    """Internal: an attempt failed in a way that may pass; carries the error to raise."""

    def __init__(self, error: LLMError, retry_after: float | None = None) -> None:
        self.error = error
        self.retry_after = retry_after


class OpenAICompatibleModel:
    """A :class:`~deermem.llm.ChatModel` that talks to an OpenAI-compatible endpoint.

    Args:
        model: the model name the endpoint knows, e.g. ``"deepseek-chat"``.
        base_url: the API root; ``/chat/completions`` is added to its path, and a
            query (``?api-key=``) stays the query.
        api_key_env: the environment variable holding the key, or ``None`` to
            send no ``Authorization`` header (local servers rarely want one).
        temperature: sent when not ``None``.
        max_tokens: sent when not ``None``.
        seed: sent when not ``None``.
        structured_output: how a ``json_schema`` is passed: as
            ``response_format`` ``json_schema`` (OpenAI, vLLM, llama.cpp,
            Ollama), as ``json_object`` (DeepSeek), or not at all.
        timeout_seconds: per attempt, in total: connecting, sending, the headers
            and the whole answer (see :class:`_DeadlineBackend`).
        retry: when and how long to retry.
        http: the ``httpx.Client`` to use (tests may pass one with a mock
            transport); by default the model makes and owns one.
        environ: where to read the key; ``os.environ`` by default.
        sleep: how to wait between attempts (``time.sleep``); injectable for tests.

    Raises:
        ConfigError: ``api_key_env`` names a variable that is unset or empty, or
            whose key is not printable ASCII (an HTTP header cannot carry it),
            ``base_url`` cannot be parsed, or a setting is out of range.
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
        self.base_url = base_url.strip()
        try:
            self.endpoint = chat_completions_url(self.base_url)
            httpx.URL(self.endpoint)  # what the first request would find wrong, found now
        except (ValueError, httpx.InvalidURL):
            # Neither message is repeated: either may quote part of a password.
            raise ConfigError(
                [
                    f"model.base_url = {redact_url(self.base_url)!r}: expected an http:// or "
                    "https:// URL that can be parsed (a host, then optionally ':' and a port "
                    "number)"
                ]
            ) from None
        self.api_key_env = api_key_env
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.seed = seed
        self.structured_output: StructuredOutput = structured_output
        self.timeout_seconds = timeout_seconds
        self.retry = retry or RetryPolicy()
        self._api_key = read_api_key(api_key_env, os.environ if environ is None else environ)
        self._owns_http = http is None
        # Only a client made here bounds the headers by the deadline; an injected one
        # keeps its own transport, and the deadline is checked between body chunks.
        self._http = http if http is not None else _client_with_deadlines()
        self._sleep = sleep
        # Shown in errors and logs: the endpoint without any user:password in it.
        self._shown_endpoint = redact_url(self.endpoint)
        _HTTPX_LOG_FILTER.add(self.endpoint)
        secrets = tuple(filter(None, (self._api_key, *url_secrets(self.base_url))))
        self._failures = Failures(model, self._shown_endpoint, timeout_seconds, secrets or None)

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
            f"base_url={redact_url(self.base_url)!r}, "
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
            with (
                _deadline(deadline),
                self._http.stream(
                    "POST",
                    self.endpoint,
                    content=body,
                    headers=headers,
                    timeout=httpx.Timeout(self.timeout_seconds),
                ) as response,
            ):
                raw = self._read_body(response, deadline, attempt)
                status, response_headers = response.status_code, response.headers
        except httpx.TimeoutException as error:
            raise _Retryable(self._failures.timeout(type(error).__name__, attempt)) from error
        except (httpx.HTTPError, httpx.InvalidURL, httpx.StreamError) as error:
            # Every httpx failure becomes deermem's: callers never catch httpx's errors.
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
            # parse_json: a body nested past the decoder's depth is malformed, not a RecursionError.
            decoded: object = parse_json(raw)
        except ValueError as error:  # UnicodeDecodeError included
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
