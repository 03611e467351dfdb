"""Receipts, the archive, the whole document and the user's summaries."""

# No `from __future__ import annotations`: FastAPI reads the parameter annotations,
# which name dependencies bound inside the router functions.

from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Path, Query
from fastapi.responses import JSONResponse

from deermem.memory import Memory
from deermem.service.http.context import ServerContext
from deermem.service.http.http import (
    Dependencies,
    UserPath,
    cursor_key,
    json_response,
    paged,
    problems,
)
from deermem.service.http.schemas import ArchivePage, ImportOut, PurgeOut, ReceiptPage, RestoreOut
from deermem.service.http.tokens import Principal

__all__ = ["router"]

FactId = Annotated[str, Path(min_length=1, max_length=128, description="A fact id.")]


def router(context: ServerContext, deps: Dependencies) -> APIRouter:
    """The audit, archive, document and summary routes of one server."""
    api = APIRouter(tags=["records"])
    Scoped = Annotated[Memory, Depends(deps.scoped)]
    Who = Annotated[Principal, Depends(deps.principal)]
    limits = context.limits
    Limit = Annotated[
        int, Query(ge=1, le=limits.max_page_size, description="Page size (max_page_size).")
    ]
    Cursor = Annotated[str | None, Query(max_length=1024, description="From `nextCursor`.")]
    scope_path = "/v1/users/{user}/agents/{agent}"

    @api.get(f"{scope_path}/audit", response_model=ReceiptPage, responses=problems(401, 404, 422))
    def audit(
        memory: Scoped, limit: Limit = limits.default_page_size, cursor: Cursor = None
    ) -> JSONResponse:
        """Eviction receipts, newest first: what left the library, when and why (no content)."""
        page = paged(
            memory.audit(),
            lambda receipt: cursor_key(receipt.occurred_at, receipt.receipt_id),
            limit=limit,
            cursor=cursor,
            descending=True,
        )
        return json_response(
            {"receipts": [r.to_dict() for r in page.items], "nextCursor": page.next_cursor}
        )

    @api.get(f"{scope_path}/archive", response_model=ArchivePage, responses=problems(401, 404, 422))
    def archive(
        memory: Scoped, limit: Limit = limits.default_page_size, cursor: Cursor = None
    ) -> JSONResponse:
        """Archived facts, newest first, each with why it left."""
        page = paged(
            memory.list_archived(),
            lambda entry: cursor_key(entry.archived_at, entry.fact_id),
            limit=limit,
            cursor=cursor,
            descending=True,
        )
        return json_response(
            {"entries": [e.to_dict() for e in page.items], "nextCursor": page.next_cursor}
        )

    @api.post(
        f"{scope_path}/archive/{{fact_id}}/restore",
        response_model=RestoreOut,
        responses=problems(401, 404, 409, 422),
    )
    def restore(memory: Scoped, fact_id: FactId) -> JSONResponse:
        """Send an archived fact back through the capacity gate; the answer says what it did."""
        return json_response(memory.restore(fact_id).to_dict())

    @api.delete(
        f"{scope_path}/archive/{{fact_id}}",
        response_model=PurgeOut,
        responses=problems(401, 404, 422),
    )
    def purge(memory: Scoped, fact_id: FactId) -> JSONResponse:
        """Delete an archived fact for good; its receipts (no content) stay."""
        memory.purge(fact_id)
        return json_response({"factId": fact_id, "purged": True})

    @api.get(
        f"{scope_path}/document",
        response_model=dict[str, Any],
        responses=problems(401, 404, 422),
    )
    def export(memory: Scoped) -> JSONResponse:
        """The lossless export: summaries and every fact with every field."""
        return json_response(memory.export_document())

    @api.put(
        f"{scope_path}/document",
        response_model=ImportOut,
        responses=problems(401, 404, 409, 413, 422),
    )
    def import_document(
        memory: Scoped,
        document: Annotated[
            dict[str, Any],
            Body(
                description="A document as `GET …/document` returns it; `facts` is required.",
                json_schema_extra={
                    "required": ["facts"],
                    "properties": {"facts": {"type": "array", "items": {"type": "object"}}},
                },
            ),
        ],
    ) -> JSONResponse:
        """Replace this scope's facts and summaries with a document's, through the capacity gate."""
        return json_response(memory.import_document(document).to_dict())

    @api.get(
        "/v1/users/{user}/summaries",
        response_model=dict[str, Any],
        responses=problems(401, 404, 422),
    )
    def summaries(user: UserPath, who: Who) -> JSONResponse:
        """The user's summaries (user context and history), shared by all their agents."""
        memory = context.memory_for(who, user, None)
        return json_response(memory.summaries().to_dict())

    return api
