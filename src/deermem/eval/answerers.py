"""Who answers a QA run's questions: an OpenAI-compatible endpoint, or the embedded model.

The endpoint is named by two environment variables whose *names* the protocol
config holds (``qa.base_url_env``, ``qa.api_key_env``); :func:`resolve_endpoint`
reads them first thing, so a missing one is reported before the dataset is
touched. Calls follow the protocol's retry rule (reference
``eval-harness-spec.md`` §4.2): at most ``qa.max_attempts`` attempts, a fixed
2.0 s pause before each retry; transport errors, timeouts, 429 and 5xx are
retried, any other status and any answer that is not a completion fail at
once. The pause is fixed by the protocol, so a ``Retry-After`` header does not
change it. The HTTP answerer POSTs each task's payload exactly as the task
built it — the bytes whose fingerprint the stored answer records.

With ``--provider local`` the questions go to the embedded SmolLM2 model
(llama.cpp, the ``local`` extra): same messages, same temperature and token
limit, its own model name in the request (and so in every fingerprint). It is
there to run the whole pipeline offline, not to measure anything.

A module of its own because the model clients bring the HTTP stack
(:mod:`deermem.llm`, about 0.15 s to import), which ``grade-qa`` and
``verify`` never need.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Final, NamedTuple

import httpx

from deermem.config import api_key_problem
from deermem.eval import PROVIDER_LOCAL
from deermem.eval.errors import ProviderEnvironmentError
from deermem.eval.protocol import QASettings
from deermem.eval.qa import Answer, Answerer, AnswerTask
from deermem.llm import ChatMessage, ChatResponse, LocalModel, OpenAICompatibleModel, RetryPolicy
from deermem.llm.openai import chat_completions_url

__all__ = ["HttpAnswerer", "LocalAnswerer", "answerer_for", "resolve_endpoint"]

RETRY_PAUSE_SECONDS: Final = 2.0
"""The pause before every retry, fixed by the protocol (reference §4.2)."""


class Endpoint(NamedTuple):
    """Where the answers come from: the API root and the variable holding the key."""

    base_url: str
    api_key_env: str


def resolve_endpoint(qa: QASettings, environ: Mapping[str, str]) -> Endpoint:
    """Read the endpoint's variables; name every missing or blank one.

    Raises:
        ProviderEnvironmentError: a variable is unset or blank (values are
            stripped; the base-URL variable is named first), the base URL
            is not an http(s) URL, or the key is not printable ASCII.
    """
    base_url = environ.get(qa.base_url_env, "").strip()
    key = environ.get(qa.api_key_env, "").strip()
    missing = [
        name for name, value in ((qa.base_url_env, base_url), (qa.api_key_env, key)) if not value
    ]
    if missing:
        raise ProviderEnvironmentError(missing)
    if not base_url.lower().startswith(("http://", "https://")):
        # Otherwise every one of the 90 calls would fail with the same transport error.
        raise ProviderEnvironmentError(
            [qa.base_url_env],
            problem=f"{qa.base_url_env} is not an http:// or https:// URL",
        )
    try:
        httpx.URL(chat_completions_url(base_url))  # what the client would refuse, found now
    except (ValueError, httpx.InvalidURL):
        # Named by its variable (the client would name its own setting, model.base_url);
        # neither parser's message is repeated: either may quote part of a password.
        raise ProviderEnvironmentError(
            [qa.base_url_env],
            problem=f"{qa.base_url_env} is not an http:// or https:// URL that can be parsed "
            "(a host, then optionally ':' and a port number)",
        ) from None
    problem = api_key_problem(environ.get(qa.api_key_env, ""))
    if problem is not None:  # named here, before the dataset is read; never the value
        raise ProviderEnvironmentError([qa.api_key_env], problem=f"{qa.api_key_env} {problem}")
    return Endpoint(base_url=base_url, api_key_env=qa.api_key_env)


class HttpAnswerer:
    """Answers tasks at an OpenAI-compatible endpoint with the protocol's retry rule.

    Args:
        qa: the protocol's QA settings (model, timeout, attempts).
        endpoint: from :func:`resolve_endpoint`.
        environ: where the key is read.
        sleep: the pause between attempts (``time.sleep``); tests pass a recorder.
    """

    def __init__(
        self,
        qa: QASettings,
        endpoint: Endpoint,
        *,
        environ: Mapping[str, str],
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        pauses = RETRY_PAUSE_SECONDS * (qa.max_attempts - 1)
        self._client: OpenAICompatibleModel = OpenAICompatibleModel(
            qa.model,
            base_url=endpoint.base_url,
            api_key_env=endpoint.api_key_env,
            temperature=qa.temperature,
            max_tokens=qa.max_tokens,
            seed=None,
            structured_output="none",
            timeout_seconds=float(qa.timeout_seconds),
            retry=RetryPolicy(
                max_retries=qa.max_attempts - 1,
                backoff_seconds=RETRY_PAUSE_SECONDS,
                backoff_multiplier=1.0,
                max_total_wait_seconds=pauses,
                honour_retry_after=False,
            ),
            environ=environ,
            sleep=sleep,
        )

    @property
    def model(self) -> str:
        return self._client.model

    @property
    def client(self) -> OpenAICompatibleModel:
        """The HTTP client (its ``build_payload`` gives the same body a task sends)."""
        return self._client

    def answer(self, task: AnswerTask) -> Answer:
        return _answer(self._client.send(task.payload))

    def close(self) -> None:
        self._client.close()


class LocalAnswerer:
    """Answers tasks with the embedded llama.cpp model, one at a time.

    Args:
        qa: the protocol's QA settings (temperature and token limit).
        model_path: a GGUF file; the bundled SmolLM2-135M-Instruct by default.

    Raises:
        LLMUnavailable: the ``local`` extra is not installed, or no model file.
    """

    def __init__(self, qa: QASettings, *, model_path: Path | None = None) -> None:
        self._local: LocalModel = LocalModel(
            model_path, max_tokens=qa.max_tokens, temperature=qa.temperature
        )

    @property
    def model(self) -> str:
        return self._local.name

    def answer(self, task: AnswerTask) -> Answer:
        build = {"system": ChatMessage.system, "user": ChatMessage.user}
        messages = [build[message["role"]](message["content"]) for message in task.messages]
        return _answer(self._local.complete(messages))

    def close(self) -> None:
        """Nothing to release: the weights go with the object."""


def answerer_for(
    qa: QASettings,
    provider: str,
    *,
    environ: Mapping[str, str],
    model_path: Path | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> Answerer:
    """Who answers a run: the embedded model (``local``), or the endpoint the config names.

    For the endpoint, its environment variables are read here, first thing.

    Raises:
        ProviderEnvironmentError: the endpoint's variables are unset, blank or unusable.
        LLMUnavailable: ``local`` without the ``local`` extra or a model file.
    """
    if provider == PROVIDER_LOCAL:
        return LocalAnswerer(qa, model_path=model_path)
    return HttpAnswerer(qa, resolve_endpoint(qa, environ), environ=environ, sleep=sleep)


def _answer(response: ChatResponse) -> Answer:
    return Answer(
        prediction=response.text,
        attempts=response.attempts,
        response_model=response.model,
        usage=dict(response.usage.counts),
    )
