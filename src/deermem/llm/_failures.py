"""Building deermem's LLM errors from what went wrong on the wire.

The HTTP client decides *whether* to retry; this module writes *what
happened* in a form people can act on: which model, which endpoint (without
credentials), which status or cause, after how many attempts — with the API
key removed from anything the server said.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

import httpx

from deermem.errors import (
    LLMError,
    LLMResponseInvalid,
    LLMStatusError,
    LLMTimeout,
    LLMTransportError,
)
from deermem.llm._completion import error_detail, redact
from deermem.llm.retry import parse_retry_after

__all__ = ["Failures", "is_retryable_status", "short_reason", "without_credentials"]


def is_retryable_status(status: int) -> bool:
    """429 and 5xx may pass on their own; every other error status will not."""
    return status == 429 or status >= 500


@dataclass(frozen=True, slots=True)
class Failures:
    """Error builders for one model at one endpoint.

    Attributes:
        model: the model name.
        endpoint: the URL called, already without credentials.
        timeout_seconds: the per-attempt limit, for timeout messages.
        secret: the API key to redact from server text, if any.
    """

    model: str
    endpoint: str
    timeout_seconds: float
    secret: str | None

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
            model=self.model,
            endpoint=self.endpoint,
            attempts=attempt,
        )

    def invalid(self, reason: str, attempt: int) -> LLMResponseInvalid:
        return LLMResponseInvalid(
            f"model {self.model!r} at {self.endpoint} sent an answer deermem cannot "
            f"read: {reason}{_after(attempt)}",
            reason=reason,
            model=self.model,
            endpoint=self.endpoint,
            attempts=attempt,
        )

    def timeout(self, cause: str, attempt: int) -> LLMTimeout:
        return LLMTimeout(
            f"model {self.model!r} at {self.endpoint} did not answer within "
            f"{self.timeout_seconds:g} s{_after(attempt)}",
            cause=cause,
            model=self.model,
            endpoint=self.endpoint,
            attempts=attempt,
        )

    def transport(self, error: httpx.HTTPError, attempt: int) -> LLMTransportError:
        text = redact(str(error), self.secret) or "no details"
        return LLMTransportError(
            f"could not reach model {self.model!r} at {self.endpoint}: "
            f"{type(error).__name__} ({text}){_after(attempt)}",
            cause=type(error).__name__,
            model=self.model,
            endpoint=self.endpoint,
            attempts=attempt,
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


def without_credentials(url: str) -> str:
    """``url`` without any ``user:password@`` part, for showing it."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))


def _retry_after(headers: httpx.Headers) -> float | None:
    """The wait a server asked for: ``retry-after-ms`` (OpenAI) first, then ``Retry-After``."""
    milliseconds = parse_retry_after(headers.get("retry-after-ms"))
    if milliseconds is not None:
        return milliseconds / 1000.0
    return parse_retry_after(headers.get("retry-after"))


def _after(attempt: int) -> str:
    return f" (after {attempt} attempts)" if attempt > 1 else ""
