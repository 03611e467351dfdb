"""The values a chat model takes and gives back, and the protocol every backend follows.

A backend is anything with a ``name`` and a ``complete(messages, json_schema=)``
method: deermem ships an OpenAI-compatible HTTP client and an in-process
llama.cpp model, and a caller may bring their own (a wrapper around their
agent framework's model, say) without inheriting from anything.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal, Protocol, runtime_checkable

__all__ = [
    "ChatMessage",
    "ChatModel",
    "ChatResponse",
    "ChatRole",
    "JsonSchema",
    "TokenUsage",
]

ChatRole = Literal["system", "user", "assistant"]
JsonSchema = Mapping[str, object]
"""A JSON Schema (draft 2020-12 subset) the answer must follow, as a mapping."""

_ROLES: frozenset[str] = frozenset({"system", "user", "assistant"})


@dataclass(frozen=True, slots=True)
class ChatMessage:
    """One message sent to a model.

    Only the three roles every OpenAI-compatible server understands: deermem
    never sends tool calls, so tool and function roles have no place here.
    """

    role: ChatRole
    content: str

    def __post_init__(self) -> None:
        if self.role not in _ROLES:
            raise ValueError(f"role must be one of system, user, assistant; got {self.role!r}")
        if not isinstance(self.content, str):
            raise TypeError(f"content must be a string; got {type(self.content).__name__}")

    @classmethod
    def system(cls, content: str) -> ChatMessage:
        return cls("system", content)

    @classmethod
    def user(cls, content: str) -> ChatMessage:
        return cls("user", content)

    @classmethod
    def assistant(cls, content: str) -> ChatMessage:
        return cls("assistant", content)

    def to_dict(self) -> dict[str, str]:
        """The wire form, ``{"role": ..., "content": ...}``."""
        return {"role": self.role, "content": self.content}


_MAX_COUNT: Final = 2**53 - 1
"""The largest token count read from a server (JSON's exactly held integers)."""


@dataclass(frozen=True, slots=True)
class TokenUsage:
    """What a call cost, as far as the server said.

    Servers differ: some omit ``usage`` entirely (several llama.cpp and Ollama
    versions on error paths), some add counters of their own
    (``prompt_cache_hit_tokens`` on DeepSeek). The three common counters are
    typed attributes (``None`` when absent); :attr:`counts` keeps every
    integer-valued top-level entry the server sent, sorted by name.
    """

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    counts: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def from_mapping(cls, usage: object) -> TokenUsage:
        """Read a ``usage`` object leniently: anything that is not a count is ignored.

        A count is a whole number from 0 to 2**53 - 1 (what every JSON reader
        holds exactly): a server's negative or absurd figure would otherwise
        reach the update report and the logs as if it had been spent.
        """
        if not isinstance(usage, Mapping):
            return cls()
        counts = {
            str(key): value
            for key, value in sorted(usage.items(), key=lambda item: str(item[0]))
            if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= _MAX_COUNT
        }
        return cls(
            prompt_tokens=counts.get("prompt_tokens"),
            completion_tokens=counts.get("completion_tokens"),
            total_tokens=counts.get("total_tokens"),
            counts=counts,
        )

    @property
    def reported(self) -> bool:
        """Whether the server reported any usage at all."""
        return bool(self.counts)


@dataclass(frozen=True, slots=True)
class ChatResponse:
    """A model's answer.

    Attributes:
        text: the answer's text (content blocks already joined).
        usage: token counts, as reported.
        model: the model name the server reported, when it reported one.
        finish_reason: why generation stopped (``"stop"``, ``"length"`` ...), when known.
            ``"length"`` means the answer was cut off at ``max_tokens``.
        attempts: how many attempts the call took (1 when the first one succeeded).
    """

    text: str
    usage: TokenUsage = field(default_factory=TokenUsage)
    model: str | None = None
    finish_reason: str | None = None
    attempts: int = 1

    @property
    def truncated(self) -> bool:
        """Whether generation stopped at the token limit rather than on its own."""
        return self.finish_reason == "length"


@runtime_checkable
class ChatModel(Protocol):
    """A chat model deermem can call: messages in, text and token usage out.

    Implementations must be safe to call from one thread at a time and should
    raise only :class:`deermem.LLMError` subclasses for failures of the call.
    """

    @property
    def name(self) -> str:
        """A label for the model (its name or file), for reports and metrics; never a secret."""
        ...

    def complete(
        self, messages: Sequence[ChatMessage], *, json_schema: JsonSchema | None = None
    ) -> ChatResponse:
        """Answer ``messages``.

        With ``json_schema``, ask for a JSON answer that follows it. How firmly
        depends on the backend (a grammar for the local model, ``response_format``
        for an endpoint), so callers still validate what they parse.

        Raises:
            LLMError: the call failed; the subclass says how.
        """
        ...
