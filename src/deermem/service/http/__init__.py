"""deermem as a service: the HTTP API (``deermem serve``) and what it is built from.

The modules listed here need no web framework — the MCP server's HTTP
transport reuses them: :mod:`~deermem.service.http.tokens` (the tokens file and
who a token may address), :mod:`~deermem.service.http.problems` (RFC 9457 problem
details for every deermem error), :mod:`~deermem.service.http.request_ids`
(request ids on every log line, as plain ASGI middleware),
:mod:`~deermem.service.http.limits` (bounds, and the ``Host``/``Origin`` rule
against DNS rebinding), :mod:`~deermem.service.http.jobs` (queued
extraction, visible to every worker) and :mod:`~deermem.service.http.context`
(the authorisation checks). The FastAPI application is
:func:`deermem.service.http.app.create_app`; it needs the ``server`` extra
(``pip install 'deermem[server]'``).
"""

from deermem.service.http.context import ServerContext
from deermem.service.http.jobs import Job, JobRunner, JobStore
from deermem.service.http.limits import (
    BodyLimitMiddleware,
    HostGuardMiddleware,
    HostRule,
    ServerLimits,
    is_loopback,
)
from deermem.service.http.problems import PROBLEM_CONTENT_TYPE, Problem, ProblemError, problem_for
from deermem.service.http.request_ids import (
    RequestIdFilter,
    RequestIdMiddleware,
    current_request_id,
)
from deermem.service.http.settings import ServerSettings
from deermem.service.http.tokens import IssuedToken, Principal, TokenFile, TokenRecord

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
