"""``/v1/users/{user}/agents/{agent}/facts``: list, add, read, change, remove, explain."""

# No `from __future__ import annotations`: FastAPI reads the parameter annotations,
# which name dependencies bound inside the router functions.

from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Depends, Path, Query
from fastapi.responses import JSONResponse

from deermem.memory import Memory
from deermem.service.http.context import ServerContext
from deermem.service.http.http import (
    Dependencies,
    cursor_key,
    json_response,
    paged,
    problems,
)
from deermem.service.http.schemas import (
    CreateOut,
    DeleteOut,
    ExplanationOut,
    FactCreate,
    FactOut,
    FactPage,
    FactPatch,
)

__all__ = ["router"]

FactId = Annotated[str, Path(min_length=1, max_length=128, description="A fact id.")]


def router(context: ServerContext, deps: Dependencies) -> APIRouter:
    """The fact routes of one server."""
    api = APIRouter(prefix="/v1/users/{user}/agents/{agent}/facts", tags=["facts"])
    Scoped = Annotated[Memory, Depends(deps.scoped)]
    limits = context.limits
    Limit = Annotated[
        int, Query(ge=1, le=limits.max_page_size, description="Page size (max_page_size).")
    ]
    Cursor = Annotated[str | None, Query(max_length=1024, description="From `nextCursor`.")]
    Category = Annotated[str | None, Query(min_length=1, max_length=64)]

    @api.get("", response_model=FactPage, responses=problems(401, 404, 422))
    def list_facts(
        memory: Scoped,
        limit: Limit = limits.default_page_size,
        cursor: Cursor = None,
        category: Category = None,
    ) -> JSONResponse:
        """Active facts, oldest first, one page at a time."""
        page = paged(
            memory.list_facts(category=category),
            lambda fact: cursor_key(fact.createdAt, fact.id),
            limit=limit,
            cursor=cursor,
        )
        return json_response(
            {"facts": [fact.to_dict() for fact in page.items], "nextCursor": page.next_cursor}
        )

    @api.post(
        "",
        status_code=201,
        response_model=CreateOut,
        responses=problems(401, 404, 409, 413, 422),
    )
    def create_fact(memory: Scoped, body: FactCreate) -> JSONResponse:
        """Add a fact through the capacity gate; the answer says what the gate did.

        `kept` is false when the gate evicted the new fact itself (it is then in
        the archive, restorable); `evicted` and `receipts` name every fact that
        left to make room. Never a silent drop.
        """
        result = memory.create_fact(
            body.content,
            category=body.category,
            confidence=body.confidence,
            topics=body.topics,
            source_error=body.sourceError,
            expected_valid_days=body.expectedValidDays,
        )
        where = "facts" if result.kept else "archive"
        return json_response(
            result.to_dict(),
            status=201,
            headers={"Location": f"{_base(memory)}/{where}/{result.fact.id}"},
        )

    @api.get("/{fact_id}", response_model=FactOut, responses=problems(401, 404, 422))
    def get_fact(memory: Scoped, fact_id: FactId) -> JSONResponse:
        """One active fact with every field."""
        return json_response(memory.get_fact(fact_id).to_dict())

    @api.patch("/{fact_id}", response_model=FactOut, responses=problems(401, 404, 409, 413, 422))
    def update_fact(memory: Scoped, fact_id: FactId, body: FactPatch) -> JSONResponse:
        """Change fields of a fact; `expectedRevision` refuses a change made meanwhile (409)."""
        fact = memory.update_fact(
            fact_id,
            content=body.content,
            category=body.category,
            confidence=body.confidence,
            expected_revision=body.expectedRevision,
        )
        return json_response(fact.to_dict())

    @api.delete("/{fact_id}", response_model=DeleteOut, responses=problems(401, 404, 409, 422))
    def delete_fact(
        memory: Scoped,
        fact_id: FactId,
        expected_revision: Annotated[int | None, Query(alias="expectedRevision", ge=1)] = None,
    ) -> JSONResponse:
        """Remove a fact: to the archive (restorable), or for good with `eviction_mode: delete`."""
        memory.delete_fact(fact_id, expected_revision=expected_revision)
        archived = memory.config.eviction_mode == "archive"
        return json_response({"factId": fact_id, "archived": archived})

    @api.get("/{fact_id}/why", response_model=ExplanationOut, responses=problems(401, 404, 422))
    def why(memory: Scoped, fact_id: FactId) -> JSONResponse:
        """Why a fact is active (its rank), archived or gone (its receipts)."""
        return json_response(memory.why(fact_id).to_dict())

    return api


def _base(memory: Memory) -> str:
    scope = memory.scope
    return f"/v1/users/{quote(scope.user_id or '', safe='')}/agents/{scope.agent}"
