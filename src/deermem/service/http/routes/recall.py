"""``…/context`` and ``…/search``: what an agent reads from memory."""

# No `from __future__ import annotations`: FastAPI reads the parameter annotations,
# which name dependencies bound inside the router functions.

from typing import Annotated

from fastapi import APIRouter, Depends, Query
from fastapi.responses import JSONResponse

from deermem.memory import Memory
from deermem.service.http.context import ServerContext
from deermem.service.http.http import Dependencies, json_response, problems
from deermem.service.http.schemas import ContextOut, SearchOut

__all__ = ["router"]

# The range max_injection_tokens accepts in the configuration.
_MAX_PROMPT_TOKENS = 8000


def router(context: ServerContext, deps: Dependencies) -> APIRouter:
    """The recall routes of one server."""
    api = APIRouter(prefix="/v1/users/{user}/agents/{agent}", tags=["recall"])
    Scoped = Annotated[Memory, Depends(deps.scoped)]
    limits = context.limits

    @api.get("/context", response_model=ContextOut, responses=problems(401, 404, 422))
    def memory_context(
        memory: Scoped,
        max_tokens: Annotated[
            int | None,
            Query(ge=1, le=_MAX_PROMPT_TOKENS, description="Budget for this prompt."),
        ] = None,
        explain: Annotated[bool, Query(description="Add the injection manifest.")] = False,
    ) -> JSONResponse:
        """The `<memory>` block for an agent's prompt, within the token budget.

        Protected categories (`correction` by default) come first within their
        guaranteed budget, the rest in the capacity policy's order. With
        `explain=true` the manifest says which facts went in, at what token
        cost, and which were left out and why (ids only). Reading the context
        counts as neither a recall nor a confirmation.
        """
        injection = memory.injection(max_tokens=max_tokens)
        return json_response(
            {
                "text": injection.text,
                "block": injection.block,
                "manifest": injection.manifest.to_dict() if explain else None,
            }
        )

    @api.get("/search", response_model=SearchOut, responses=problems(401, 404, 422))
    def search(
        memory: Scoped,
        q: Annotated[str, Query(min_length=1, max_length=1000, description="What to look for.")],
        top_k: Annotated[
            int, Query(ge=1, le=limits.max_top_k, description="At most this many (max_top_k).")
        ] = 5,
        category: Annotated[str | None, Query(min_length=1, max_length=64)] = None,
        record: Annotated[
            bool, Query(description="Count the hits as recalls (hybrid-v1 reads them).")
        ] = True,
    ) -> JSONResponse:
        """The facts that best match `q`, best first (SQLite FTS5, then substrings)."""
        results = memory.search(q, top_k=top_k, category=category, record=record)
        return json_response({"results": [result.to_dict() for result in results]})

    return api
