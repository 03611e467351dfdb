"""What one server process holds, and the two checks every request passes.

:class:`ServerContext` binds the memory, the tokens file and the job runner
of one worker process. Its two checks are the whole of authorisation, kept
free of any web framework so the MCP server's HTTP transport makes the same
decisions:

* :meth:`ServerContext.principal_for` — who is asking (a bearer token, or
  nobody on a loopback server that has no tokens); the check itself is
  :func:`principal_for_header`, which the MCP server calls too;
* :meth:`ServerContext.memory_for` — the memory of the user and agent a
  request names, if the principal may address that user; otherwise the
  same 404 an unknown path gets, so a token never learns whether another
  user's memory exists.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from deermem.memory import Memory
from deermem.service.http.jobs import Job, JobRunner
from deermem.service.http.limits import ServerLimits
from deermem.service.http.problems import ProblemError, not_found, unauthorized
from deermem.service.http.settings import ServerSettings
from deermem.service.http.tokens import Principal, TokenFile

__all__ = ["ServerContext", "close_store", "principal_for_header"]

_log = logging.getLogger("deermem.service.http")
# mem0's clients send "Token <token>" (the mem0-compatible routes); the same tokens, checked alike.
_SCHEMES = frozenset({"bearer", "token"})


def principal_for_header(
    tokens: TokenFile, authorization: str | None, *, auth_required: bool, now: datetime
) -> Principal:
    """Who sends a request with this ``Authorization`` header value (``None``: no header).

    The one bearer check of every deermem server (the HTTP API and the MCP
    server's HTTP transport). Without ``auth_required`` and while tokens are
    not in use (no tokens file) anyone may ask: the open loopback server.
    Once tokens are in use they stay in use, so revoking the last one lets
    nobody in rather than everybody.

    Raises:
        ProblemError: 401 — a token is required and none was sent (``missing``),
            the header is not ``Bearer <token>`` or ``Token <token>`` (mem0's
            scheme) (``malformed``: also a bare
            token, or ``Bearer`` alone), the token is unknown or revoked
            (``invalid``), or its expiry time has come (``expired``).
        TokenFileError: the tokens file became unreadable.
    """
    if not auth_required and not tokens.configured():
        return Principal.unauthenticated()
    if authorization is None:
        raise ProblemError(unauthorized("missing"))
    scheme, _, credentials = authorization.strip().partition(" ")
    token = credentials.strip()
    if scheme.lower() not in _SCHEMES or not token:
        raise ProblemError(unauthorized("malformed"))
    record = tokens.find(token)
    if record is None:
        raise ProblemError(unauthorized("invalid"))
    if record.expired(now):
        raise ProblemError(unauthorized("expired"))
    return record.principal


def close_store(store: object) -> None:
    """Release what a store holds: a database store's connection pool (a Markdown store has none).

    A server's memory is opened by the server, and :meth:`Memory.close
    <deermem.memory.Memory.close>` leaves the store open (its views may
    still be used), so the server closes the store itself when it stops.
    """
    close = getattr(store, "close", None)
    if callable(close):
        close()


@dataclass
class ServerContext:
    """One worker process's memory, tokens and jobs.

    Attributes:
        settings: what ``deermem serve`` was given.
        memory: the root memory; requests work on :meth:`Memory.scoped` views.
        tokens: the tokens file.
        jobs: this process's extraction queue.
        auth_required: fixed at start: true when the server listens beyond
            loopback or tokens are in use (the tokens file exists). A token
            added later turns it on too; revoking every token never turns it
            off, as the tokens file stays (:meth:`TokenFile.configured`).
        owns_store: the server opened the memory's store, so it closes it
            on :meth:`close` (a memory handed in is its owner's to close).
    """

    settings: ServerSettings
    memory: Memory
    tokens: TokenFile
    jobs: JobRunner
    auth_required: bool
    owns_store: bool = False

    @property
    def limits(self) -> ServerLimits:
        return self.settings.limits

    def principal_for(self, authorization: str | None) -> Principal:
        """Who sends a request with this ``Authorization`` header value.

        Raises:
            ProblemError: 401 — a token is required and none, or no valid one, was sent.
            TokenFileError: the tokens file became unreadable.
        """
        return principal_for_header(
            self.tokens, authorization, auth_required=self.auth_required, now=self.memory.now()
        )

    def memory_for(self, principal: Principal, user: str, agent: str | None) -> Memory:
        """The memory of ``user`` and ``agent``, if ``principal`` may address the user.

        Raises:
            ProblemError: 404 — the principal may not address this user.
            UnsafeIdentifierError: the user id or agent name is unusable.
        """
        if not principal.may_address(user):
            _log.info("token %s asked for a user it may not address", principal.token_id)
            raise ProblemError(not_found())
        return self.memory.scoped(user=user, agent=agent)

    def job_for(self, principal: Principal, job_id: str) -> Job:
        """A job of a user the principal may address.

        Raises:
            ProblemError: 404 — no such job, or one of another user's.
        """
        job = self.jobs.get(job_id)
        if job is None or not principal.may_address(job.user):
            raise ProblemError(not_found())
        return job

    def close(self) -> None:
        """Finish or abandon the queued jobs, then close the memory (and the store, if owned)."""
        try:
            self.jobs.close(self.memory.config.shutdown_flush_timeout_seconds)
            self.memory.close()
        finally:
            if self.owns_store:
                close_store(self.memory.store)
