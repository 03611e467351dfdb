"""Bearer tokens: the tokens file, what each token may address, and checking one.

A token is ``dmt_<id>_<secret>``: ``id`` is 12 hex digits that name the token
in listings, logs and ``deermem token revoke``; ``secret`` is 32 random bytes
(256 bits, :func:`secrets.token_urlsafe`). The file keeps only the SHA-256 of
the whole token, so reading the file does not give anyone a token.

Why SHA-256 and not a password KDF (scrypt, Argon2): a KDF makes each guess
expensive so that a *low-entropy* secret — a password a person chose —
survives an offline attack on its hash. A 256-bit random secret cannot be
guessed at any cost per guess, so the slow hash would buy nothing and would
make every request pay for a hash built to be slow (or need a cache of
verified tokens in memory, which is its own risk). Digests are compared in constant time.

Each token is bound to the user ids it may address, or is an *admin* token
that may address every user, and may carry an expiry time after which it is
refused (``expired``). The file is JSON, written atomically with mode 0600
under a lock, and re-read when it changes, so ``deermem token add`` and
``revoke`` take effect in a running server without a restart. A file that
cannot be read is an error — never "no tokens", which would open the server.

**Once tokens are in use, they stay in use.** The file is made by the first
``token add`` and deermem never removes it: revoking the last token leaves
a file with no token in it, which lets nobody in — not everybody. Only an
operator who deletes the file opens a loopback server again.

Nothing here imports a web framework: the HTTP server and the MCP server's
HTTP transport use the same :class:`TokenFile`, :class:`Principal` and bearer
check (:func:`principal_for_header`), and ``deermem token`` the same file.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import os
import re
import secrets
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Annotated, Final, NamedTuple

from pydantic import ConfigDict, Field
from pydantic.alias_generators import to_camel
from pydantic.dataclasses import dataclass as pydantic_dataclass
from pydantic_core import to_jsonable_python

from deermem.model import format_timestamp, parse_timestamp
from deermem.service.errors import TokenFileError, UnknownTokenError
from deermem.service.problems import ProblemError, unauthorized
from deermem.store.markdown.files import atomic_write, make_directories, read_regular_file
from deermem.store.markdown.locks import UserLock, user_lock

__all__ = [
    "BEARER_SCHEMES",
    "MEM0_SCHEMES",
    "Principal",
    "TokenFile",
    "principal_for_header",
]

TOKEN_PREFIX: Final = "dmt"
FILE_VERSION: Final = 1
_TOKEN: Final = re.compile(r"dmt_([0-9a-f]{12})_[A-Za-z0-9_-]{43}")
_TOKEN_ID: Final = re.compile(r"[0-9a-f]{12}")
_DIGEST: Final = re.compile(r"[0-9a-f]{64}")
_LOCK_TIMEOUT: Final = 10.0
BEARER_SCHEMES: Final = frozenset({"bearer"})
"""The ``Authorization`` scheme of the API, the inspector and MCP over HTTP: ``Bearer``, in
any case (schemes are case-insensitive, RFC 9110; the MCP SDK's bearer check reads it so)."""
MEM0_SCHEMES: Final = frozenset({"bearer", "token"})
"""The mem0-compatible routes' schemes: mem0's clients send ``Token <token>`` — the same
tokens, checked alike, and only there."""


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("ascii")).hexdigest()


def token_id_of(token: str) -> str | None:
    """The id part of a well-formed token, else ``None`` (safe to log)."""
    match = _TOKEN.fullmatch(token)
    return match.group(1) if match else None


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a request acts for: a token's grants, or the open loopback server.

    Attributes:
        token_id: the token's id; ``None`` when the server runs without tokens.
        users: the user ids this principal may address (exact strings).
        admin: may address every user.
    """

    token_id: str | None
    users: frozenset[str]
    admin: bool

    @classmethod
    def unauthenticated(cls) -> Principal:
        """The principal of a loopback server that has no tokens: every user."""
        return cls(token_id=None, users=frozenset(), admin=True)

    def may_address(self, user: str) -> bool:
        """Whether this principal may read or write ``user``'s memory."""
        return self.admin or user in self.users


@pydantic_dataclass(
    frozen=True,
    slots=True,
    config=ConfigDict(
        defer_build=True, alias_generator=to_camel, validate_by_name=True, serialize_by_alias=True
    ),
)
class TokenRecord:
    """One line of the tokens file: a token's id, grants and digest (never the token).

    Its JSON form is the file's (``id``, ``name``, ``users``, ``admin``,
    ``createdAt``, ``expiresAt``, ``sha256``); ``deermem token list --json``
    shows it without the digest (:meth:`public`).

    Attributes:
        token_id: 12 hex digits, the public name of the token.
        name: a label for people (``"laptop"``, ``"ci"``).
        users: the user ids it may address.
        admin: may address every user.
        created_at: ISO UTC time of ``token add``.
        expires_at: ISO UTC time from which the token is refused; ``None``:
            it never expires.
        sha256: hex SHA-256 of the whole token.
    """

    token_id: Annotated[str, Field(alias="id")]
    name: str
    users: tuple[str, ...]
    admin: bool
    created_at: str
    expires_at: str | None
    sha256: str

    @property
    def principal(self) -> Principal:
        return Principal(token_id=self.token_id, users=frozenset(self.users), admin=self.admin)

    def expired(self, now: datetime) -> bool:
        """Whether the token is refused at ``now`` (its expiry time has come)."""
        if self.expires_at is None:
            return False
        expiry = parse_timestamp(self.expires_at)
        return expiry is None or now >= expiry  # from_dict checked it; unreadable = expired

    def public(self) -> dict[str, object]:
        """The record's JSON without its digest (for ``token list --json``)."""
        data: dict[str, object] = to_jsonable_python(self, exclude={"sha256"})
        return data

    @classmethod
    def from_dict(cls, data: object, *, path: Path, index: int) -> TokenRecord:
        where = f"tokens[{index}]"
        if not isinstance(data, Mapping):
            raise TokenFileError(path, f"{where}: expected an object")
        token_id = data.get("id")
        name = data.get("name", "")
        users = data.get("users", [])
        admin = data.get("admin", False)
        created = data.get("createdAt", "")
        expires = data.get("expiresAt")
        digest = data.get("sha256")
        if not isinstance(token_id, str) or not _TOKEN_ID.fullmatch(token_id):
            raise TokenFileError(path, f"{where}.id: expected 12 lowercase hex digits")
        if not isinstance(digest, str) or not _DIGEST.fullmatch(digest):
            raise TokenFileError(path, f"{where}.sha256: expected 64 lowercase hex digits")
        if not isinstance(users, list) or not all(isinstance(u, str) and u for u in users):
            raise TokenFileError(path, f"{where}.users: expected a list of user ids")
        if not isinstance(admin, bool):
            raise TokenFileError(path, f"{where}.admin: expected true or false")
        if not isinstance(name, str) or not isinstance(created, str):
            raise TokenFileError(path, f"{where}: name and createdAt must be strings")
        if expires is not None and (
            not isinstance(expires, str) or parse_timestamp(expires) is None
        ):
            raise TokenFileError(path, f"{where}.expiresAt: expected an ISO 8601 time or null")
        return cls(token_id, name, tuple(users), admin, created, expires, digest)


class IssuedToken(NamedTuple):
    """A token just made: the secret (shown once) and its record."""

    token: str
    record: TokenRecord


class TokenFile:
    """The tokens file: read (cached until it changes), add, revoke, authenticate.

    Args:
        path: the JSON file. It need not exist: a missing file has no tokens.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._signature: tuple[int, int, int] | None = None
        self._records: tuple[TokenRecord, ...] = ()

    def __repr__(self) -> str:
        return f"TokenFile({str(self.path)!r})"

    # --- reading ------------------------------------------------------------------

    def records(self) -> tuple[TokenRecord, ...]:
        """Every token in the file, as of now (expired ones included).

        Raises:
            TokenFileError: the file exists but cannot be read or is malformed.
        """
        return self._load() or ()

    def configured(self) -> bool:
        """Whether tokens are in use: the file exists, even if every token was revoked.

        The first ``token add`` makes the file and nothing in deermem removes
        it, so a server that once needed a token keeps needing one.

        Raises:
            TokenFileError: the file exists but cannot be read or is malformed.
        """
        return self._load() is not None

    def find(self, token: str) -> TokenRecord | None:
        """The record of a presented token (expired or not); ``None`` for an unknown one.

        Raises:
            TokenFileError: the file exists but cannot be read or is malformed.
        """
        token_id = token_id_of(token)
        if token_id is None:
            return None
        digest = _digest(token)
        for record in self.records():
            if record.token_id == token_id and hmac.compare_digest(record.sha256, digest):
                return record
        return None

    def authenticate(self, token: str, *, now: datetime) -> Principal | None:
        """The principal of a presented token; ``None`` for an unknown, malformed or expired one.

        Raises:
            TokenFileError: the file exists but cannot be read or is malformed.
        """
        record = self.find(token)
        if record is None or record.expired(now):
            return None
        return record.principal

    def _load(self) -> tuple[TokenRecord, ...] | None:
        """The file's tokens, re-read when the file changed; ``None`` when there is no file."""
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            return None
        except OSError as error:
            raise TokenFileError(self.path, f"cannot read the file: {error.strerror}") from None
        signature = (stat.st_mtime_ns, stat.st_size, stat.st_ino)
        with self._lock:
            if signature != self._signature:
                self._records = self._read()
                self._signature = signature
            return self._records

    def _read(self) -> tuple[TokenRecord, ...]:
        try:
            text = read_regular_file(self.path).decode("utf-8")
        except FileNotFoundError:
            return ()
        except OSError as error:
            reason = error.strerror or str(error)
            raise TokenFileError(self.path, f"cannot read the file: {reason}") from None
        except UnicodeDecodeError as error:
            raise TokenFileError(self.path, f"cannot read the file: {error}") from None
        try:
            document = json.loads(text)
        except json.JSONDecodeError as error:
            raise TokenFileError(
                self.path, f"not valid JSON (line {error.lineno}, column {error.colno})"
            ) from None
        if not isinstance(document, dict) or not isinstance(document.get("tokens"), list):
            raise TokenFileError(self.path, 'expected {"version": 1, "tokens": [...]}')
        if document.get("version") != FILE_VERSION:
            raise TokenFileError(
                self.path, f"version {document.get('version')!r} is not {FILE_VERSION}"
            )
        records = tuple(
            TokenRecord.from_dict(item, path=self.path, index=index)
            for index, item in enumerate(document["tokens"])
        )
        ids = [record.token_id for record in records]
        if len(set(ids)) != len(ids):
            raise TokenFileError(self.path, "two tokens share an id")
        return records

    # --- changing -------------------------------------------------------------------

    def add(
        self,
        *,
        users: Sequence[str] = (),
        admin: bool = False,
        name: str = "",
        now: datetime,
        expires_at: datetime | None = None,
    ) -> IssuedToken:
        """Make a token bound to ``users`` (or an admin token) and store its digest.

        Args:
            users: the user ids it may address.
            admin: it may address every user instead.
            name: a label for people.
            now: the time of issue (``createdAt``).
            expires_at: refuse it from this time on (``None``: never).

        Raises:
            ValueError: neither users nor admin was given, a user id is blank,
                or ``expires_at`` is not after ``now``.
            TokenFileError: the existing file is malformed (it is not overwritten).
        """
        wanted = tuple(dict.fromkeys(users))
        if not wanted and not admin:
            raise ValueError("a token needs at least one user (--user) or --admin")
        if any(not user for user in wanted):
            raise ValueError("user ids must not be blank")
        if expires_at is not None and expires_at <= now:
            raise ValueError(
                f"the expiry time {format_timestamp(expires_at)} is not in the future "
                f"(now is {format_timestamp(now)})"
            )
        expiry = None if expires_at is None else format_timestamp(expires_at)
        with self._file_lock():
            records = self._read()
            taken = {record.token_id for record in records}
            token_id = secrets.token_hex(6)
            while token_id in taken:
                token_id = secrets.token_hex(6)
            token = f"{TOKEN_PREFIX}_{token_id}_{secrets.token_urlsafe(32)}"
            record = TokenRecord(
                token_id, name, wanted, admin, format_timestamp(now), expiry, _digest(token)
            )
            self._write((*records, record))
        return IssuedToken(token, record)

    def revoke(self, token_id: str) -> TokenRecord:
        """Remove a token; requests that present it fail from the next one on.

        The file stays even when the last token goes: tokens stay in use
        (:meth:`configured`), so nobody gets in until a token is added.

        Raises:
            UnknownTokenError: no token has this id.
            TokenFileError: the file is malformed (it is not overwritten).
        """
        with self._file_lock():
            records = self._read()
            kept = tuple(record for record in records if record.token_id != token_id)
            if len(kept) == len(records):
                raise UnknownTokenError(token_id, self.path)
            self._write(kept)
        return next(record for record in records if record.token_id == token_id)

    def forget_user(self, user: str) -> int:
        """Revoke the tokens bound only to ``user``; drop the user from the others.

        For the user's erasure: afterwards the tokens file does not name the
        user. Returns the tokens revoked. A file that does not exist has none.

        Raises:
            TokenFileError: the file is malformed (it is not overwritten).
        """
        if not self.path.exists():
            return 0
        with self._file_lock():
            records = self._read()
            kept: list[TokenRecord] = []
            for record in records:
                if user not in record.users:
                    kept.append(record)
                elif len(record.users) > 1 or record.admin:
                    users = tuple(u for u in record.users if u != user)
                    kept.append(dataclasses.replace(record, users=users))
            revoked = len(records) - len(kept)
            if kept != list(records):
                self._write(kept)
        return revoked

    def _file_lock(self) -> UserLock:
        make_directories(self.path.parent)
        return user_lock(self.path.with_name(f".{self.path.name}.lock"), _LOCK_TIMEOUT)

    def _write(self, records: Iterable[TokenRecord]) -> None:
        document = {"version": FILE_VERSION, "tokens": to_jsonable_python(list(records))}
        data = (json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
        atomic_write(self.path, data, mode=0o600)  # its owner's only


def principal_for_header(
    tokens: TokenFile,
    authorization: str | None,
    *,
    auth_required: bool,
    now: datetime,
    schemes: frozenset[str] = BEARER_SCHEMES,
) -> Principal:
    """Who sends a request with this ``Authorization`` header value (``None``: no header).

    The one bearer check of every deermem server (the HTTP API and the MCP
    server's HTTP transport). Without ``auth_required`` and while tokens are
    not in use (no tokens file) anyone may ask: the open loopback server.
    Once tokens are in use they stay in use, so revoking the last one lets
    nobody in rather than everybody.

    ``schemes`` are the lower-case schemes accepted: :data:`BEARER_SCHEMES`,
    or on the mem0-compatible routes :data:`MEM0_SCHEMES`.

    Raises:
        ProblemError: 401 — a token is required and none was sent (``missing``),
            the header is not ``Bearer <token>`` (on the mem0 routes, or mem0's
            ``Token <token>``) (``malformed``: also a bare
            token, or ``Bearer`` alone), the token is unknown or revoked
            (``invalid``), or its expiry time has come (``expired``).
        TokenFileError: the tokens file became unreadable.
    """
    if not auth_required and not tokens.configured():
        return Principal.unauthenticated()
    if authorization is None:
        raise ProblemError(unauthorized("missing", token_scheme="token" in schemes))
    scheme, _, credentials = authorization.strip().partition(" ")
    token = credentials.strip()
    if scheme.lower() not in schemes or not token:
        raise ProblemError(unauthorized("malformed", token_scheme="token" in schemes))
    record = tokens.find(token)
    if record is None:
        raise ProblemError(unauthorized("invalid"))
    if record.expired(now):
        raise ProblemError(unauthorized("expired"))
    return record.principal
