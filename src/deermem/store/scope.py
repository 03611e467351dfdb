"""Scopes and the identifiers that name them: safe by construction.

A *scope* is one user's memory for one agent. User ids come from whoever
calls deermem (an HTTP header, a CLI flag) and agent names from
configuration, so neither is trusted: :func:`safe_user_id` maps any user id
to a name made only of ``[A-Za-z0-9_-]``, and :func:`normalise_agent`
accepts only ``[a-z0-9-]`` names (after lower-casing) or the reserved
``__default__`` bucket. A store that maps scopes to paths, keys or table rows
can rely on both.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Final

from deermem._exceptions import InvalidTextError, UnsafeIdentifierError
from deermem.model.text import check_storable

__all__ = [
    "DEFAULT_AGENT",
    "MAX_AGENT_NAME_LENGTH",
    "Scope",
    "is_bucket",
    "normalise_agent",
    "safe_user_id",
]

DEFAULT_AGENT: Final = "__default__"
MAX_AGENT_NAME_LENGTH: Final = 64

_SAFE_CHARS: Final = re.compile(r"[^A-Za-z0-9_-]")
_AGENT_NAME: Final = re.compile(r"[a-z0-9-]+")
# Names stay well inside the 255-byte limit of common file systems.
_MAX_SAFE_USER_LENGTH: Final = 120
_KEPT_PREFIX: Final = 64


def safe_user_id(raw: object) -> str:
    """Map a user id to a directory name made of ``[A-Za-z0-9_-]`` only.

    Every other character becomes ``-``; when anything changed, ``-`` and the
    first 16 hex digits of the id's SHA-256 are appended, so two ids that
    differ only in replaced characters still get different directories
    (``alice@example.com`` → ``alice-example-com-ff8d9819fc0e12bf``, as in the
    original). Ids whose safe form would exceed 120 characters keep their
    first 64 and the digest — the original would fail on them instead.

    Raises:
        UnsafeIdentifierError: the id is not a string, is empty, or is not
            valid Unicode (it is stored in every fact: an undecodable byte
            could not be written).
    """
    if not isinstance(raw, str) or not raw:
        raise UnsafeIdentifierError("user id", raw, "expected a non-empty string")
    try:
        check_storable("user id", raw)
    except InvalidTextError as error:
        raise UnsafeIdentifierError("user id", raw, error.allowed) from None
    safe = _SAFE_CHARS.sub("-", raw)
    if safe == raw and len(safe) <= _MAX_SAFE_USER_LENGTH:
        return safe
    digest = hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    if len(safe) + 17 > _MAX_SAFE_USER_LENGTH:
        safe = safe[:_KEPT_PREFIX]
    return f"{safe}-{digest}"


def normalise_agent(name: str | None) -> str:
    """The bucket name for an agent: lower-cased, or ``__default__`` when omitted.

    ``Lead-Agent``, ``lead-agent`` and ``LEAD-AGENT`` name one bucket.

    Raises:
        UnsafeIdentifierError: anything but letters, digits and ``-`` (or the
            exact ``__default__``), an empty name, or more than 64 characters.
    """
    if name is None:
        return DEFAULT_AGENT
    if not isinstance(name, str):
        raise UnsafeIdentifierError("agent name", name, "expected a string")
    if name == DEFAULT_AGENT:
        return name
    lowered = name.lower()
    if not _AGENT_NAME.fullmatch(lowered) or not name.isascii():
        raise UnsafeIdentifierError(
            "agent name", name, f"use letters, digits and '-' only, or {DEFAULT_AGENT!r}"
        )
    if len(lowered) > MAX_AGENT_NAME_LENGTH:
        raise UnsafeIdentifierError(
            "agent name", name, f"at most {MAX_AGENT_NAME_LENGTH} characters"
        )
    return lowered


def is_bucket(name: str) -> bool:
    """Whether ``name`` is an agent bucket name as :func:`normalise_agent` returns them."""
    try:
        return normalise_agent(name) == name
    except UnsafeIdentifierError:
        return False


@dataclass(frozen=True, slots=True)
class Scope:
    """One user's memory for one agent. Build it with :meth:`of`, which validates.

    Attributes:
        user_id: the raw user id as given (stored in each fact), or ``None``
            for the single-user layout.
        agent: the normalised agent bucket name.
    """

    user_id: str | None
    agent: str

    @classmethod
    def of(cls, user_id: str | None, agent: str | None = None) -> Scope:
        """Validate a user id and an agent name into a scope."""
        if user_id is not None:
            safe_user_id(user_id)  # validates
        return cls(user_id=user_id, agent=normalise_agent(agent))

    def __str__(self) -> str:
        user = "(no user)" if self.user_id is None else repr(self.user_id)
        return f"user {user}, agent {self.agent!r}"
