"""The FastAPI application: :func:`create_app` builds one, wired to one store.

The application is a thin shell over :class:`~deermem.memory.Memory`: each
route (:mod:`~deermem.service.http.routes`) authorises, calls one method and
answers with the result's one description. Around the routes, from the
outside in: :class:`~deermem.service.middleware.RequestIdMiddleware`
(request ids, the access line, and the last word on any failure, so nothing
but a problem+json 500 and one content-free log line come out of a crash),
:class:`~deermem.service.middleware.HostGuardMiddleware` (421/403: DNS
rebinding, other sites' pages), :class:`~deermem.service.middleware.BodyLimitMiddleware`
(413), then FastAPI with the problem handlers: deermem's errors as their
problems (:func:`~deermem.service.problems.problem_for`), invalid requests as
``invalid-request`` naming each field — except a fact's text that breaks the
text boundary, which is the memory's own ``invalid-fact``, as when the memory
refuses it.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Final

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.routing import Match

from deermem import __version__
from deermem.errors import DeerMemError
from deermem.memory import Memory
from deermem.model import MAX_NESTING, NotJsonNumber
from deermem.results import error_location, field_names
from deermem.service.http import mem0
from deermem.service.http.jobs import Job, JobRunner, JobStore
from deermem.service.http.routes import ServerContext, UserSegmentMiddleware, routers
from deermem.service.http.ui import Inspector, SessionStore, inspector_router
from deermem.service.middleware import (
    BodyLimitMiddleware,
    HostGuardMiddleware,
    RequestIdMiddleware,
    problem_response,
)
from deermem.service.problems import (
    PROBLEM_CONTENT_TYPE,
    Problem,
    internal_problem,
    not_found,
    operator_note,
    problem_for,
)
from deermem.service.settings import ServerSettings, is_loopback
from deermem.service.tokens import TokenFile
from deermem.service.warmup import WarmUp

__all__ = ["app_from_environment", "create_app"]

_log = logging.getLogger("deermem.service.http")
OPENAPI_PATH = "/v1/openapi.json"


def create_app(settings: ServerSettings | None = None, *, memory: Memory | None = None) -> FastAPI:
    """Build the HTTP API over one store.

    Once the application starts, it loads in a thread what its first
    requests would wait for (:class:`~deermem.service.warmup.WarmUp`).

    Args:
        settings: host, limits, state directory ...; the store root and
            configuration file in them are used unless ``memory`` is given.
        memory: serve this memory (any store; its own scope, if any, is
            never used) instead of opening the store the settings and the
            configuration name. Its configuration names the model extraction
            uses. The server closes it when it stops, but not its store.

    Raises:
        ConfigError: the configuration is invalid, or the store is a database
            and the settings name no state directory.
        TokenFileError: the tokens file exists but cannot be read.
        DatabaseError / DatabaseSchemaError: the database cannot be used.
    """
    settings = settings or ServerSettings()
    config = settings.load_config() if memory is None else memory.config
    tokens = TokenFile(settings.tokens_path(config))
    state = settings.state_path(config)
    owns_store = memory is None
    if memory is None:
        # Every request names its user: the root memory has no scope of its own.
        memory = Memory.open_unscoped(settings.root, config)
    root_memory = memory

    def learn(job: Job, messages: list[object]) -> dict[str, object]:
        scoped = root_memory.scoped(user=job.user, agent=job.agent)
        return scoped.learn(job.thread_id, messages).report.to_dict()

    jobs = JobRunner(
        JobStore(
            state / "jobs",
            retention_seconds=settings.limits.job_retention_seconds,
        ),
        learn,
        max_pending=settings.limits.max_pending_jobs,
        max_pending_per_user=settings.limits.max_pending_jobs_per_user,
        max_waits_per_token=settings.limits.max_waits_per_token,
        clock=memory.now,
    )
    context = ServerContext(
        settings=settings,
        memory=memory,
        tokens=tokens,
        jobs=jobs,
        auth_required=not is_loopback(settings.host) or tokens.configured(),
        owns_store=owns_store,
    )

    warm_up = WarmUp(memory)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        warm_up.start()  # in a thread: the worker answers meanwhile
        yield
        await run_in_threadpool(warm_up.join)
        await run_in_threadpool(context.close)

    app = FastAPI(
        title="deermem",
        version=__version__,
        summary="Long-term memory for LLM agents that forgets the right things and can say why.",
        openapi_url=OPENAPI_PATH,
        docs_url="/docs",
        redoc_url=None,
        lifespan=lifespan,
    )
    app.state.deermem = context
    for router in [*routers(context), mem0.router(context)]:
        app.include_router(router)
    # The inspector's pages (/ui/): the same context, tokens and store as the API.
    app.include_router(inspector_router(Inspector(context, SessionStore(state, memory.now))))
    _add_problem_handlers(app)
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    app.add_middleware(UserSegmentMiddleware)  # innermost: next to the routing it serves
    app.add_middleware(BodyLimitMiddleware, limit=settings.limits.max_body_bytes)
    app.add_middleware(HostGuardMiddleware, rule=settings.host_rule())
    app.add_middleware(RequestIdMiddleware)  # added last: the outermost layer
    return app


def app_from_environment() -> FastAPI:
    """The factory uvicorn's workers call (``deermem serve`` passes the settings)."""
    return create_app(ServerSettings.from_environment())


def _add_problem_handlers(app: FastAPI) -> None:
    async def deermem_error(request: Request, error: Exception) -> JSONResponse:
        assert isinstance(error, DeerMemError)
        problem = problem_for(error)
        note = operator_note(error, problem)
        if note is not None:
            _log.error("%s", note)
        return problem_response(problem)

    async def invalid_request(request: Request, error: Exception) -> JSONResponse:
        assert isinstance(error, RequestValidationError)
        refused = error.errors()
        # A fact's text that breaks the memory's own rules: the memory's answer.
        causes = [detail.get("ctx", {}).get("error") for detail in refused]
        if causes and all(isinstance(cause, DeerMemError) for cause in causes):
            return problem_response(problem_for(causes[0]))
        return problem_response(_validation_problem(refused, _declared(request)))

    async def http_error(request: Request, error: Exception) -> JSONResponse:
        assert isinstance(error, HTTPException)
        if error.status_code == 404:
            return problem_response(not_found())
        if isinstance(error.__cause__, RecursionError):
            # A body nested past the JSON decoder's own depth guard: the same answer
            # as a value nested past what a fact may hold (deermem.model.MAX_NESTING).
            return problem_response(_validation_problem([_TOO_DEEP], _WHERE))
        if isinstance(error.__cause__, UnicodeDecodeError):  # JSON is UTF-8 (RFC 8259)
            return problem_response(_validation_problem([_NOT_UTF8], _WHERE))
        if isinstance(error.__cause__, NotJsonNumber):  # NaN, Infinity: no JSON numbers
            return problem_response(_validation_problem([_NOT_A_NUMBER], _WHERE))
        if isinstance(error.__cause__, ValueError):
            # FastAPI turns json.loads' syntax errors into validation errors itself; the
            # one ValueError left is an integer past Python's digit limit (valid JSON,
            # which sets no limit): the reader's own bound, answered as the others are.
            return problem_response(_validation_problem([_too_many_digits()], _WHERE))
        title = {405: "Method not allowed", 400: "Bad request"}.get(error.status_code, "Error")
        headers = dict(error.headers or {})
        if error.status_code == 405:
            headers["Allow"] = ", ".join(_methods_of(request))
        return problem_response(
            Problem(error.status_code, "http-error", title, str(error.detail), headers=headers)
        )

    async def unexpected(request: Request, error: Exception) -> JSONResponse:
        return problem_response(internal_problem())

    app.add_exception_handler(DeerMemError, deermem_error)
    app.add_exception_handler(RequestValidationError, invalid_request)
    app.add_exception_handler(HTTPException, http_error)
    app.add_exception_handler(Exception, unexpected)


def _methods_of(request: Request) -> list[str]:
    """Every method the request's path takes (RFC 9110's ``Allow``).

    FastAPI makes a route of each method of a path, and the router's 405
    names the methods of the first route whose path matched: one of them.
    So each method is tried against every route, as the router would.
    """
    routes = request.app.router.routes
    return [
        method
        for method in _METHODS
        if any(
            route.matches({**request.scope, "method": method})[0] is Match.FULL for route in routes
        )
    ]


_METHODS: Final = ("DELETE", "GET", "PATCH", "POST", "PUT")


_NOT_UTF8: Final = {
    "loc": ("body",),
    "msg": "the body is not UTF-8 text; JSON must be sent as UTF-8",
    "type": "json_not_utf8",
}
_NOT_A_NUMBER: Final = {
    "loc": ("body",),
    "msg": "NaN, Infinity and -Infinity are not JSON (RFC 8259); send a number or null",
    "type": "json_not_a_number",
}
_TOO_DEEP: Final = {
    "loc": ("body",),
    "msg": f"lists and objects are nested too deeply (a value may nest {MAX_NESTING} deep)",
    "type": "json_too_deep",
}


def _too_many_digits() -> dict[str, object]:
    """The refusal of a number longer than Python converts (``sys.get_int_max_str_digits``,
    read when it happens: the process may have changed it)."""
    return {
        "loc": ("body",),
        "msg": f"a number has more than {sys.get_int_max_str_digits():,} digits, "
        "more than the server's JSON reader takes",
        "type": "json_number_too_long",
    }


# Where FastAPI says a request's value was: the first part of every location.
_WHERE: Final = frozenset({"body", "query", "path", "header", "cookie"})


def _declared(request: Request) -> frozenset[str]:
    """The names the matched route declares: its parameters and their models' fields.

    A location may show these as written; any other name in it is the
    caller's text (:func:`~deermem.results.error_location`).
    """
    names = set(_WHERE)
    annotations: list[object] = []
    dependants = [getattr(request.scope.get("route"), "dependant", None)]
    while dependants:
        dependant = dependants.pop()
        if dependant is None:
            continue
        dependants.extend(dependant.dependencies)
        for parameter in (
            *dependant.path_params,
            *dependant.query_params,
            *dependant.header_params,
            *dependant.cookie_params,
            *dependant.body_params,
        ):
            names.update((parameter.name, parameter.alias))
            annotations.append(parameter.field_info.annotation)
    return frozenset(names | field_names(*annotations))


def _validation_problem(errors: Any, declared: frozenset[str]) -> Problem:
    """A 422 naming each invalid field and the rule it broke (never the value sent, nor
    a name the caller wrote: an unknown field is described by its length)."""
    listed = [
        {
            "location": error_location(error.get("loc", ()), declared),
            "message": _message(error),
            "rule": str(error.get("type", "")),
        }
        for error in errors
    ]
    first = listed[0] if listed else {"location": "request", "message": "invalid"}
    return Problem(
        422,
        "invalid-request",
        "Invalid request",
        f"{first['location']}: {first['message']}",
        {"errors": listed},
    )


def _message(error: Any) -> str:
    """What a refusal says: a deermem rule's own words (never the value), else pydantic's."""
    cause = error.get("ctx", {}).get("error")
    if isinstance(cause, DeerMemError):
        return problem_for(cause).detail
    return str(error.get("msg", ""))


def _openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's document, with the problem responses under their own media type."""
    if app.openapi_schema is not None:
        return app.openapi_schema
    document = get_openapi(
        title=app.title,
        version=app.version,
        summary=app.summary,
        routes=app.routes,
    )
    for operations in document.get("paths", {}).values():
        for operation in operations.values():
            for status, response in operation.get("responses", {}).items():
                content = response.get("content", {})
                problem = status == "default" or status.startswith(("4", "5"))
                if problem and "application/json" in content:
                    content[PROBLEM_CONTENT_TYPE] = content.pop("application/json")
    app.openapi_schema = document
    return document
