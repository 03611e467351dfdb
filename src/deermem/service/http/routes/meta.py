"""``/v1/health`` and ``/v1/config``."""

# No `from __future__ import annotations`: FastAPI reads the parameter annotations,
# which name dependencies bound inside the router functions.

from typing import Annotated, Any
from urllib.parse import urlsplit, urlunsplit

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse

from deermem import __version__
from deermem.service.http.context import ServerContext
from deermem.service.http.http import Dependencies, json_response, problems
from deermem.service.http.schemas import HealthOut
from deermem.service.http.tokens import Principal

__all__ = ["router"]


def router(context: ServerContext, deps: Dependencies) -> APIRouter:
    """The health and configuration routes of one server."""
    api = APIRouter(prefix="/v1", tags=["server"])
    Who = Annotated[Principal, Depends(deps.principal)]

    @api.get("/health", response_model=HealthOut, responses=problems())
    async def health() -> JSONResponse:
        """Whether the server answers (no token needed).

        A coroutine that touches nothing: it needs no worker thread, so it
        answers even while every thread is busy.
        """
        return json_response({"status": "ok", "version": __version__})

    @api.get("/config", response_model=dict[str, Any], responses=problems(401))
    def config(who: Who) -> JSONResponse:
        """The effective memory configuration and the server's limits (no secret).

        The model's API key is never part of the configuration (only the name
        of the variable that holds it); credentials in the model's URL are
        removed.
        """
        memory = context.memory.config.model_dump(mode="json")
        memory["model"]["base_url"] = _without_credentials(memory["model"]["base_url"])
        server = {
            "authRequired": context.auth_required or context.tokens.configured(),
            "workers": context.settings.workers,
            "limits": context.limits.to_dict(),
        }
        return json_response({"memory": memory, "server": server})

    return api


def _without_credentials(url: str) -> str:
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
