"""deermem as a service: the HTTP API (``deermem serve``) and what it is built from.

The modules listed here need no web framework — the MCP server's HTTP
transport reuses them: :mod:`~deermem.server.tokens` (the tokens file and
who a token may address), :mod:`~deermem.server.problems` (RFC 9457 problem
details for every deermem error), :mod:`~deermem.server.request_ids`
(request ids on every log line, as plain ASGI middleware),
:mod:`~deermem.server.limits` (bounds, and the ``Host``/``Origin`` rule
against DNS rebinding), :mod:`~deermem.server.jobs` (queued
extraction, visible to every worker) and :mod:`~deermem.server.context`
(the authorisation checks). The FastAPI application is
:func:`deermem.server.app.create_app`; it needs the ``server`` extra
(``pip install 'deermem[server]'``).
"""

from deermem.server.context import ServerContext
from deermem.server.jobs import Job, JobRunner, JobStore
from deermem.server.limits import (
    BodyLimitMiddleware,
    HostGuardMiddleware,
    HostRule,
    ServerLimits,
    is_loopback,
)
from deermem.server.problems import PROBLEM_CONTENT_TYPE, Problem, ProblemError, problem_for
from deermem.server.request_ids import RequestIdFilter, RequestIdMiddleware, current_request_id
from deermem.server.settings import ServerSettings
from deermem.server.tokens import IssuedToken, Principal, TokenFile, TokenRecord

__all__ = [
    "PROBLEM_CONTENT_TYPE",
    "BodyLimitMiddleware",
    "HostGuardMiddleware",
    "HostRule",
    "IssuedToken",
    "Job",
    "JobRunner",
    "JobStore",
    "Principal",
    "Problem",
    "ProblemError",
    "RequestIdFilter",
    "RequestIdMiddleware",
    "ServerContext",
    "ServerLimits",
    "ServerSettings",
    "TokenFile",
    "TokenRecord",
    "current_request_id",
    "is_loopback",
    "problem_for",
]
