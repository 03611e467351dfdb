"""Scopes and the identifiers that name them: one rule for every store, and their directory names.

A *scope* is one user's memory for one agent. User ids come from whoever
calls deermem (an HTTP path, a token, a CLI flag) and agent names from
configuration, so neither is trusted. Every store takes its scopes from
:meth:`Scope.of`, so the rules below hold on the Markdown store and on
PostgreSQL alike, and for the command line, HTTP and MCP, which reach the
stores through the library:

* a **user id** (:func:`check_user_id`) is any non-empty, valid Unicode
  string of at most 1,024 bytes in UTF-8 without a control character (Unicode
  category Cc: NUL, tab, line feed, carriage return ...) or a bidirectional
  control (U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069), which would
  let one id be shown as another in a listing, a log or a terminal;
* an **agent name** (:func:`normalise_agent`) is letters, digits and ``-``
  (lower-cased; at most 1,024 characters, any length the original DeerMem
  could store), or the reserved ``__default__`` bucket.

The Markdown store names a directory after each, and that mapping is
one-to-one by construction, whatever the spelling of an id:

* :func:`safe_user_id` keeps an id as its directory name only when it is
  made of ``[A-Za-z0-9_-]``, is at most 120 characters long and does not end
  the way a derived name ends (``-`` and 16 lowercase hex digits); every
  other id gets a derived name, its safe characters and ``-`` and 16 hex
  digits of its SHA-256 (``alice@example.com`` →
  ``alice-example-com-ff8d9819fc0e12bf``, as in the original). A kept name
  never ends like a derived one and a derived one always does, so no id can
  take another's directory by being spelled as its derived name — the
  original keeps such an id as it is, which is how it lets one user into
  another's directory.
* :func:`agent_directory` keeps a name of at most 254 characters as it is
  (the original's directory, lower-cased); a longer name gets a 255-character
  name: its first 190 characters, ``-`` and the 64 hex digits of its
  SHA-256. Kept names are shorter than every derived one, so they never meet.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Final

from deermem.errors import InvalidTextError, UnsafeIdentifierError
from deermem.model.text import check_storable

__all__ = [
    "DEFAULT_AGENT",
    "MAX_AGENT_NAME_LENGTH",
    "MAX_USER_ID_BYTES",
    "USER_ID_PATTERN",
    "Scope",
    "agent_directory",
    "check_user_id",
    "is_bucket",
    "is_derived_agent_directory",
    "is_kept_user_id",
    "normalise_agent",
    "safe_user_id",
    "was_kept_user_id",
]

DEFAULT_AGENT: Final = "__default__"
MAX_AGENT_NAME_LENGTH: Final = 1024
"""Longest agent name: beyond any name the original stores (255 bytes, a file
name's limit), and short enough for PostgreSQL to keep it in an index key
beside a user id and a fact id."""
MAX_USER_ID_BYTES: Final = 1024
"""Longest user id, in UTF-8 bytes (PostgreSQL keys it in a B-tree index)."""

_SAFE_CHARS: Final = re.compile(r"[^A-Za-z0-9_-]")
_AGENT_NAME: Final = re.compile(r"[a-z0-9-]+")
# Control characters (C0, DEL, C1: Unicode category Cc) and the bidirectional
# controls: embeddings, overrides, isolates and the three marks.
_REFUSED: Final = "\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_NOT_IN_AN_ID: Final = re.compile(f"[{_REFUSED}]")
USER_ID_PATTERN: Final = f"^[^{_REFUSED}]+$"
"""The characters of the rule as a JSON Schema pattern (the HTTP API documents user ids so)."""
# How a derived directory name ends: an id that ends so is never kept as it is.
_DERIVED_SUFFIX: Final = re.compile(r"-[0-9a-f]{16}\Z")
# Names stay well inside the 255-byte limit of common file systems.
_MAX_SAFE_USER_LENGTH: Final = 120
_KEPT_PREFIX: Final = 64
# An agent directory name: kept up to 254 characters; derived ones are exactly 255.
_MAX_KEPT_AGENT_DIRECTORY: Final = 254
_AGENT_PREFIX: Final = 190
_DERIVED_AGENT_DIRECTORY: Final = re.compile(r"[a-z0-9-]{190}-[0-9a-f]{64}")


def check_user_id(raw: object) -> str:
    """Apply the one rule for user ids (see the module docstring); return the id unchanged.

    Raises:
        UnsafeIdentifierError: not a non-empty string, not valid Unicode (an
            undecodable byte), a control or bidirectional control character
            (the error names it and its position), or over 1,024 bytes.
    """
    if not isinstance(raw, str) or not raw:
        raise UnsafeIdentifierError("user id", raw, "expected a non-empty string")
    try:
        check_storable("user id", raw)
    except InvalidTextError as error:
        raise UnsafeIdentifierError("user id", raw, error.allowed) from None
    found = _NOT_IN_AN_ID.search(raw)
    if found is not None:
        char = ord(found.group())
        kind = "control character" if char <= 0x9F else "bidirectional control"
        raise UnsafeIdentifierError(
            "user id", raw, f"no {kind} (U+{char:04X} at position {found.start()})"
        )
    if len(raw.encode("utf-8")) > MAX_USER_ID_BYTES:
        raise UnsafeIdentifierError("user id", raw, f"at most {MAX_USER_ID_BYTES} bytes in UTF-8")
    return raw


def safe_user_id(raw: object) -> str:
    """The directory name of a user id: ``[A-Za-z0-9_-]`` only, and no other id's.

    An id made of those characters, at most 120 long and not ending in ``-``
    and 16 lowercase hex digits is its own name; any other id becomes its
    safe characters (every other character replaced by ``-``; the first 64
    when that would exceed 120 characters), ``-`` and the first 16 hex
    digits of its SHA-256 (``alice@example.com`` →
    ``alice-example-com-ff8d9819fc0e12bf``, as in the original). Kept names
    and derived names never meet, so two ids share a name only if their
    digests do.

    Raises:
        UnsafeIdentifierError: the id breaks the rule of :func:`check_user_id`.
    """
    user_id = check_user_id(raw)
    safe = _SAFE_CHARS.sub("-", user_id)
    if is_kept_user_id(user_id):
        return safe
    digest = hashlib.sha256(user_id.encode("utf-8")).hexdigest()[:16]
    if len(safe) + 17 > _MAX_SAFE_USER_LENGTH:
        safe = safe[:_KEPT_PREFIX]
    return f"{safe}-{digest}"


def is_kept_user_id(user_id: str) -> bool:
    """Whether a (valid) user id is its own directory name under :func:`safe_user_id`."""
    return (
        len(user_id) <= _MAX_SAFE_USER_LENGTH
        and _SAFE_CHARS.search(user_id) is None
        and _DERIVED_SUFFIX.search(user_id) is None
    )


def was_kept_user_id(user_id: str) -> bool:
    """Whether earlier versions (and the original) kept this id as its own directory name,
    where :func:`safe_user_id` no longer does: safe characters, ending like a derived name.

    Such a user's data may sit in ``users/<id>``, which is now the derived
    name of another id; the Markdown store moves it to the user's own name.
    """
    return (
        len(user_id) <= _MAX_SAFE_USER_LENGTH
        and _SAFE_CHARS.search(user_id) is None
        and _DERIVED_SUFFIX.search(user_id) is not None
    )


def normalise_agent(name: str | None) -> str:
    """The bucket name for an agent: lower-cased, or ``__default__`` when omitted.

    ``Lead-Agent``, ``lead-agent`` and ``LEAD-AGENT`` name one bucket.

    Raises:
        UnsafeIdentifierError: anything but letters, digits and ``-`` (or the
            exact ``__default__``), an empty name, or more than 1,024 characters.
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


def agent_directory(agent: str) -> str:
    """The directory name of an agent bucket (a name :func:`normalise_agent` returned).

    A name of at most 254 characters is its own directory, as in the
    original; a longer one, which no file system takes as a name whole, is
    its first 190 characters, ``-`` and its SHA-256 in hex: 255 characters,
    longer than any kept name. The directory's owner record holds the name
    (see :mod:`deermem.store.markdown.listing`).
    """
    if len(agent) <= _MAX_KEPT_AGENT_DIRECTORY:
        return agent
    digest = hashlib.sha256(agent.encode("ascii")).hexdigest()
    return f"{agent[:_AGENT_PREFIX]}-{digest}"


def is_derived_agent_directory(name: str) -> bool:
    """Whether ``name`` has the shape of a derived agent directory (:func:`agent_directory`)."""
    return _DERIVED_AGENT_DIRECTORY.fullmatch(name) is not None


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
        """Validate a user id and an agent name into a scope.

        Raises:
            UnsafeIdentifierError: either breaks its rule (module docstring).
        """
        if user_id is not None:
            check_user_id(user_id)
        return cls(user_id=user_id, agent=normalise_agent(agent))

    def __str__(self) -> str:
        user = "(no user)" if self.user_id is None else repr(self.user_id)
        return f"user {user}, agent {self.agent!r}"
