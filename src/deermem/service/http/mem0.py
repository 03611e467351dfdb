"""mem0's REST API, the subset ``mem0ai``'s ``MemoryClient`` uses, on ``deermem serve``.

The wrappers built on mem0's client (CrewAI, Google ADK, LlamaIndex, Vercel's
provider …) reach deermem with ``MemoryClient(api_key=<a deermem token>,
host=<the server's URL>)``. Same process, same tokens, same users as the
native API: a token is sent as ``Authorization: Token <token>`` (mem0's
scheme, accepted beside ``Bearer``), and a token reaches only the users it may
address — any other user id, in a body, a filter or a query, is the 404 an
unknown path gets, with no data.

What maps to what:

* ``user_id`` is the deermem user, ``agent_id`` the agent bucket (default
  ``__default__``); ``app_id`` and ``run_id`` have no deermem counterpart and
  are refused, as is ``metadata`` (a fact holds none), rather than dropped.
* A memory is a fact: ``id`` is the fact id, ``memory`` its content,
  ``categories`` its category, ``score`` the result's ``relevance``, in [0, 1].
* The routes that take an id alone (``get``, ``update``, ``delete``,
  ``history``) look in every scope the token may address. mem0's ids are
  unique in its store; a fact id is unique within one user and agent only, so
  when more than one such scope holds the id (active or archived) the answer
  is 409 ``ambiguous-memory-id``, naming those scopes, and nothing changes.
* ``add`` with ``infer`` (mem0's default) queues the messages for extraction
  by the configured model, as ``POST …/conversations`` does (501 naming the
  setting when no model is configured), under the thread ``mem0`` of the
  scope (each add's messages are new ones, learned whole); its ``event_id``
  is the job, read at ``GET /v1/event/{id}/``. ``infer: false`` stores each user message as a
  fact through the capacity gate, at once: the results say ``ADD`` for each
  kept fact and ``EVICT`` (with the receipt) for each fact the gate evicted,
  a new one included. Every message is checked before the first is stored: an
  add refused (a text a fact cannot hold, one a stored fact or another message
  already says, compared as stored: redacted with ``redact_secrets``) stores
  none, and the problem names the message.
* ``history`` lists, in time order, ``ADD``, ``UPDATE`` (the latest; deermem
  keeps no older text), a ``DELETE`` or ``EVICT`` for each receipt that names
  the fact, with the receipt, and a ``RESTORE`` for each return the regret log
  records (relearned or restored), naming the receipt it undid. ``ADD`` carries
  the text only while the fact is unchanged (``null`` once changed: the added
  text is not kept), ``UPDATE`` the current one. ``EVICT`` and ``RESTORE`` are
  not in mem0's vocabulary: they are deermem's.
* ``delete_all`` takes ``user_id`` (and ``agent_id``) as query parameters.
  mem0's client sends ``delete_all(filters=…)`` as the Python repr of the
  dict, which is not a format: it is refused (400) with what to send instead.

Every route ends with ``/``, as the client sends it (it does not follow
redirects). The routes are not in deermem's OpenAPI document: mem0's describes them.
"""

# No `from __future__ import annotations`: FastAPI reads the parameter annotations.

import logging
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Annotated, Any, Final, Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, StrictBool
from starlette.concurrency import run_in_threadpool

from deermem.errors import DuplicateFactError, FactNotFoundError, FactValidationError
from deermem.learning.messages import parse_messages
from deermem.memory import Memory
from deermem.model import (
    MAX_USER_ID_BYTES,
    Fact,
    Scope,
    duplicate_key,
    parse_timestamp,
    redact,
    to_json,
)
from deermem.results import WHOLE_NUMBER, NewFact
from deermem.service.http.jobs import Job
from deermem.service.http.routes import Dependencies, JsonRoute, ServerContext
from deermem.service.problems import Problem, ProblemError, extraction_off, not_found
from deermem.service.tokens import MEM0_SCHEMES, Principal
from deermem.store import EvictionReceipt
from deermem.store.records import ReceiptJson

__all__ = ["router"]

_log = logging.getLogger("deermem.service.http")

ORG_ID: Final = "deermem"
"""What the ping answers for mem0's organisation and project (the client needs both)."""

MEM0_THREAD: Final = "mem0"
"""The thread an ``add`` with ``infer`` is learned under (the facts' source)."""

_EVENT_STATUS: Final[Mapping[str, str]] = {
    "queued": "PENDING",
    "running": "RUNNING",
    "done": "SUCCEEDED",
    "failed": "FAILED",
    "abandoned": "FAILED",
}

_Strict = ConfigDict(extra="forbid")


class Message(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: str
    content: Any = None


class Filters(BaseModel):
    model_config = _Strict

    user_id: str | None = None
    agent_id: str | None = None


class AddBody(BaseModel):
    model_config = _Strict

    messages: Annotated[list[Message], Field(min_length=1, max_length=2000)]
    user_id: str | None = None
    agent_id: str | None = None
    filters: Filters | None = None
    infer: StrictBool = True  # as the native API: "yes" is no boolean
    metadata: dict[str, Any] | None = None
    app_id: None = Field(None, description="refused: deermem has no apps")
    run_id: None = Field(None, description="refused: deermem has no runs")


class SearchBody(BaseModel):
    model_config = _Strict

    query: Annotated[str, Field(min_length=1, max_length=4000)]
    filters: Filters
    # The types the schema states, nothing lax parsing would make one of ("3", true, "0.5").
    top_k: Annotated[int, Field(ge=1, le=1000, strict=False), WHOLE_NUMBER] = 10
    threshold: Annotated[float, Field(ge=0, le=1, strict=True)] | None = None


class ListBody(BaseModel):
    model_config = _Strict

    filters: Filters


class UpdateBody(BaseModel):
    model_config = _Strict

    text: Annotated[str, Field(min_length=1)]
    metadata: None = Field(None, description="refused: a fact holds no metadata")
    timestamp: None = Field(None, description="refused: deermem's clock sets the time")
    expiration_date: None = Field(None, description="refused: facts do not expire by date")


def router(context: ServerContext) -> APIRouter:
    """The mem0-compatible routes of one server (module docstring)."""
    deps = Dependencies(context, schemes=MEM0_SCHEMES)  # mem0's clients send "Token <token>"
    # mem0's API is described by mem0 (its OpenAPI document): deermem's own leaves it out.
    api = APIRouter(tags=["mem0"], include_in_schema=False, route_class=JsonRoute)
    Who = Annotated[Principal, Depends(deps.principal)]

    def scoped(who: Principal, user: str | None, agent: str | None) -> Memory:
        if user is None:
            raise _bad("user_id is required: deermem keeps one memory per user")
        return context.memory_for(who, user, agent)

    def found(who: Principal, fact_id: str) -> tuple[Memory, Fact | None]:
        """The one scope ``who`` may address that holds ``fact_id``, with the active fact.

        mem0's id routes take the id alone because mem0's ids are unique in its
        whole store. A deermem fact id is unique only within one user and agent
        (an import keeps its ids, a LangGraph key is the caller's), so the id may
        name several memories: then no guess is made — the first in some order
        would act on another user's or agent's memory — and the answer is 409.

        Returns:
            The scope's memory, and its active fact (``None``: only its archive
            holds the id).

        Raises:
            ProblemError: 404 when no addressable scope holds the id, active or
                archived; 409 ``ambiguous-memory-id`` when more than one does.
        """
        store = context.memory.store
        if who.admin:
            scopes: Iterable[Scope] = store.scopes()
        else:
            scopes = (
                Scope.of(user, agent) for user in sorted(who.users) for agent in store.agents(user)
            )
        # Every scope is looked at, not the first match: one holder is the only safe answer.
        holders: list[tuple[Memory, Fact | None]] = []
        for scope in scopes:
            if scope.user_id is None:
                continue
            memory = context.memory.scoped(user=scope.user_id, agent=scope.agent)
            fact = memory.snapshot().get(fact_id)
            if fact is not None or store.archived(scope, fact_id) is not None:
                holders.append((memory, fact))
        if not holders:
            raise ProblemError(not_found())
        if len(holders) > 1:
            raise ProblemError(_ambiguous(fact_id, [memory.scope for memory, _ in holders]))
        return holders[0]

    @api.get("/v1/ping/")
    def ping(who: Who) -> JSONResponse:
        """What mem0's client asks at construction: the token works, and org and project ids."""
        return JSONResponse(
            {"status": "ok", "org_id": ORG_ID, "project_id": ORG_ID, "user_email": None}
        )

    @api.post("/v3/memories/add/")
    async def add(who: Who, body: AddBody) -> JSONResponse:
        """Add memories: extraction by the model (``infer``), or each user message as a fact."""
        user, agent = _scope_of(body.user_id, body.agent_id, body.filters)
        if body.metadata:
            raise _bad("metadata: a deermem fact holds no metadata; send it without")
        memory = scoped(who, user, agent)
        if body.infer:
            job = await run_in_threadpool(_submit, context, memory, body)
            return JSONResponse(
                {
                    "message": "queued for extraction; poll the event",
                    "status": _EVENT_STATUS[job.status],
                    "event_id": job.job_id,
                    "results": [],
                }
            )
        results = await run_in_threadpool(_store_messages, memory, body)
        return JSONResponse(
            {"message": "stored", "status": "SUCCEEDED", "event_id": None, "results": results}
        )

    @api.post("/v3/memories/search/")
    def search(who: Who, body: SearchBody) -> JSONResponse:
        """The facts that best match a query, best first; ``score`` is their relevance, [0, 1]."""
        memory = scoped(who, *_scope_of(body.filters.user_id, body.filters.agent_id, None))
        if body.threshold is None:
            hits = memory.search(body.query, top_k=body.top_k)
        else:
            # A recall counts what the client is answered: the hits under the threshold are
            # dropped before any is counted (and no missed recall is recorded: which archived
            # facts the cut would have kept, the search cannot say).
            found = memory.search(body.query, top_k=body.top_k, record=False)
            hits = tuple(hit for hit in found if hit.relevance >= body.threshold)
            memory.record_access(hit.fact_id for hit in hits)
        results = [{**_memory_json(memory, hit.fact), "score": hit.relevance} for hit in hits]
        return JSONResponse({"results": results})

    @api.post("/v3/memories/")
    def list_memories(
        who: Who,
        body: ListBody,
        request: Request,
        page: Annotated[int, Query(ge=1)] = 1,
        page_size: Annotated[int, Query(ge=1, le=1000)] = 100,
    ) -> JSONResponse:
        """Every active fact of a user (and agent), oldest first, a page at a time."""
        memory = scoped(who, *_scope_of(body.filters.user_id, body.filters.agent_id, None))
        facts = memory.list_facts()
        start = (page - 1) * page_size
        chosen = facts[start : start + page_size]

        def link(number: int) -> str:
            return str(request.url.include_query_params(page=number, page_size=page_size))

        return JSONResponse(
            {
                "count": len(facts),
                "next": link(page + 1) if start + page_size < len(facts) else None,
                "previous": link(page - 1) if page > 1 else None,
                "results": [_memory_json(memory, fact) for fact in chosen],
            }
        )

    @api.get("/v1/memories/{memory_id}/")
    def get_memory(who: Who, memory_id: str) -> JSONResponse:
        """One active fact, by id, among the users the token may address."""
        memory, fact = found(who, memory_id)
        if fact is None:
            raise ProblemError(not_found())
        return JSONResponse(_memory_json(memory, fact))

    @api.put("/v1/memories/{memory_id}/")
    def update_memory(who: Who, memory_id: str, body: UpdateBody) -> JSONResponse:
        """Change a fact's text (never trims the library)."""
        memory, fact = found(who, memory_id)
        if fact is None:
            raise ProblemError(not_found())
        try:
            updated = memory.update_fact(
                memory_id, content=body.text, expected_revision=fact.revision
            )
        except FactValidationError as error:
            # The client sent mem0's "text": a refusal names it, not deermem's "content".
            raise error.as_field("text") if error.field == "content" else error from None
        return JSONResponse(_memory_json(memory, updated))

    @api.delete("/v1/memories/{memory_id}/")
    def delete_memory(
        who: Who, memory_id: str, delete_linked: Annotated[bool, Query()] = False
    ) -> JSONResponse:
        """Archive a fact with a receipt (facts have no links: ``delete_linked`` is moot)."""
        memory, fact = found(who, memory_id)
        if fact is None:
            raise ProblemError(not_found())
        memory.delete_fact(memory_id, expected_revision=fact.revision)
        receipt = _last_receipt(memory.audit(), memory_id)
        return JSONResponse(
            {"message": "Memory deleted successfully!", "cascade_count": 0, "receipt": receipt}
        )

    @api.delete("/v1/memories/")
    def delete_all(
        who: Who,
        user_id: Annotated[str | None, Query(max_length=MAX_USER_ID_BYTES)] = None,
        agent_id: Annotated[str | None, Query(max_length=1024)] = None,
        filters: Annotated[str | None, Query(max_length=4096)] = None,
    ) -> JSONResponse:
        """Archive every fact of a user (every agent's, and the summaries), or of one agent."""
        if filters is not None:
            raise _bad(
                "filters: mem0's client sends this dict as Python text, which is no format; "
                "call delete_all(user_id=..., agent_id=...) instead"
            )
        memory = scoped(who, user_id, agent_id)
        removed = memory.clear() if agent_id is not None else memory.clear_user()
        return JSONResponse({"message": "Memories deleted successfully!", "deleted": removed})

    @api.get("/v1/memories/{memory_id}/history/")
    def history(who: Who, memory_id: str) -> JSONResponse:
        """What happened to a fact: added, changed, deleted or evicted (with receipts)."""
        memory, _ = found(who, memory_id)
        try:
            explanation = memory.why(memory_id)
        except FactNotFoundError:
            raise ProblemError(not_found()) from None
        return JSONResponse(_history(memory, memory_id, explanation.fact, explanation.receipts))

    @api.get("/v1/event/{event_id}/")
    def event(who: Who, event_id: str) -> JSONResponse:
        """An ``add`` queued for extraction: its status, and the update report once done."""
        job = context.job_for(who, event_id)
        return JSONResponse(_event_json(job))

    return api


# --- what the routes answer ----------------------------------------------------------------


def _bad(detail: str) -> ProblemError:
    return ProblemError(Problem(400, "invalid-request", "Invalid request", detail))


MAX_NAMED_SCOPES: Final = 20
"""How many of the scopes holding an ambiguous id its problem names (it counts them all)."""


def _ambiguous(fact_id: str, scopes: list[Scope]) -> Problem:
    """409: ``fact_id`` names a memory in more than one scope the token may address.

    Every scope named is one the token may address (``found`` looks at no
    other), so the problem tells the caller nothing it could not list itself.
    """
    named = [{"userId": scope.user_id, "agentId": scope.agent} for scope in scopes]
    return Problem(
        409,
        "ambiguous-memory-id",
        "Ambiguous memory id",
        f"{len(scopes)} memories this token may address have this id (a deermem fact id is "
        "unique within one user and agent only); nothing was changed. Reach the one meant "
        "by its scope: /v1/users/{user}/agents/{agent}/facts/{id}",
        {"factId": fact_id, "count": len(scopes), "scopes": named[:MAX_NAMED_SCOPES]},
    )


def _scope_of(
    user_id: str | None, agent_id: str | None, filters: Filters | None
) -> tuple[str | None, str | None]:
    """The user and agent a request names, top-level or in ``filters`` (never two different)."""
    pairs = (("user_id", user_id), ("agent_id", agent_id))
    chosen: list[str | None] = []
    for name, given in pairs:
        filtered = getattr(filters, name) if filters is not None else None
        if given is not None and filtered is not None and given != filtered:
            raise _bad(f"{name} and filters.{name} name different ids")
        chosen.append(given if given is not None else filtered)
    return chosen[0], chosen[1]


def _submit(context: ServerContext, memory: Memory, body: AddBody) -> Job:
    if not memory.config.model.configured:
        raise ProblemError(
            extraction_off(
                "add with infer needs a model, and this server has none configured "
                "(model.model and model.base_url); send infer: false to store the messages as "
                "they are"
            )
        )
    messages: list[object] = [m.model_dump() for m in body.messages]
    parse_messages(messages)
    scope = memory.scope
    # One thread per scope: an add sends new messages, not the thread so far, and a batch
    # that does not hold the thread's mark is learned whole (deermem.learning.queue).
    return context.jobs.submit(scope.user_id or "", scope.agent, MEM0_THREAD, messages)


def _store_messages(memory: Memory, body: AddBody) -> list[dict[str, object]]:
    """Each user message as a fact through the gate; what was added and what was evicted.

    Every text is checked before the first is stored — against the fact rules,
    the library and the other messages — so a refused add stores nothing.
    """
    results: list[dict[str, object]] = []
    for text in _texts_to_store(memory, body):
        outcome = memory.create_fact(text)
        for fact_id in outcome.evicted:
            receipt = next((r for r in outcome.receipts if fact_id in r.fact_ids), None)
            results.append({"id": fact_id, "event": "EVICT", "receipt": _receipt_json(receipt)})
        if outcome.fact_id is not None:
            results.append(
                {"id": outcome.fact_id, "data": {"memory": outcome.fact.content}, "event": "ADD"}
            )
    return results


def _texts_to_store(memory: Memory, body: AddBody) -> list[str]:
    """The user messages' texts, each a fact the library does not hold yet.

    Every message is read first by deermem's message rules, as an add with
    ``infer`` reads it: a role they do not know (``USER``, ``wizard``) is
    refused, naming it, rather than passed over as no user's. A user message
    whose text is blank is refused as a blank fact would be: it was sent to
    be stored.

    The duplicate rule is applied to each text as :meth:`Memory.create_fact`
    will store it — trimmed and, with ``redact_secrets``, redacted — since the
    store applies it to that text too: two messages that differ only in a
    secret are one fact, and must be refused here, before the first is stored.

    Raises:
        MessageFormatError: a message breaks the message rules (its role, its content).
        FactValidationError: a user message's text breaks a fact rule, or says what
            an earlier message says; its field names the message (``messages[2].content``).
        DuplicateFactError: a message says what a stored fact says.
    """
    messages = parse_messages([message.model_dump() for message in body.messages])
    held = {duplicate_key(fact.content): fact.id for fact in memory.list_facts()}
    texts: list[str] = []
    said: dict[str, int] = {}
    for index, message in enumerate(messages):
        if message.role != "human":  # "user" or "human", as sent
            continue
        text = message.text
        try:
            content = NewFact.checked(content=text).content
        except FactValidationError as error:
            raise FactValidationError(
                f"messages[{index}].{error.field}", error.value, error.allowed
            ) from None
        if memory.config.redact_secrets:
            content = redact(content).text
        key = duplicate_key(content)
        if key in held:
            raise DuplicateFactError(held[key])
        if key in said:
            raise FactValidationError(
                f"messages[{index}].content",
                text,
                f"expected a text that message {said[key]} does not already say",
            )
        said[key] = index
        texts.append(text)
    return texts


def _memory_json(memory: Memory, fact: Fact) -> dict[str, object]:
    scope = memory.scope
    return {
        "id": fact.id,
        "memory": fact.content,
        "user_id": scope.user_id,
        "agent_id": scope.agent,
        "metadata": {},
        "categories": [fact.categoryExtension or fact.category],
        "created_at": fact.createdAt,
        "updated_at": fact.updatedAt or fact.createdAt,
    }


def _receipt_json(receipt: EvictionReceipt | None) -> object:
    return None if receipt is None else to_json(receipt, ReceiptJson)


def _last_receipt(receipts: Iterable[EvictionReceipt], fact_id: str) -> object:
    named = [r for r in receipts if fact_id in r.fact_ids]
    return _receipt_json(named[-1] if named else None)


def _history(
    memory: Memory, fact_id: str, fact: Fact | None, receipts: Iterable[EvictionReceipt]
) -> list[dict[str, object]]:
    user = memory.scope.user_id
    events: list[dict[str, object]] = []

    def event(kind: str, at: str, text: str | None, **extra: object) -> None:
        events.append(
            {
                "id": f"{fact_id}-{len(events) + 1}",
                "memory_id": fact_id,
                "input": [],
                "old_memory": None,
                "new_memory": text,
                "user_id": user,
                "event": kind,
                "metadata": None,
                "created_at": at,
                "updated_at": at,
                **extra,
            }
        )

    added_text: str | None = None
    if fact is not None:
        # deermem keeps a fact's current text only. Revision 1 is the fact as added, so
        # its text is the added text; after any change the added text is unknown: ADD
        # then says none (never a later text), and the UPDATE carries the current one.
        changed = fact.revision > 1
        added_text = None if changed else fact.content
        event("ADD", fact.createdAt, added_text)
        if changed:
            event("UPDATE", fact.updatedAt or fact.createdAt, fact.content)
    for receipt in receipts:
        kind: Literal["DELETE", "EVICT"] = "DELETE" if receipt.reason == "deleted" else "EVICT"
        event(kind, receipt.occurred_at, None, receipt=_receipt_json(receipt))
    # A fact that left can come back (an add that says what it said relearns it, a restore
    # brings it back): the regret log records each return, naming the receipt it undid.
    # Without them a memory that is back would read as deleted.
    for returned in memory.store.regret_events(memory.scope):
        if (returned.fact_id, returned.role) == (fact_id, "active") and returned.kind in (
            "relearned",
            "restored",
        ):
            event("RESTORE", returned.occurred_at, added_text, receipt_id=returned.receipt_id)
    # mem0's history is in time order; a tie keeps the order above (ADD before all).
    events.sort(key=lambda e: parse_timestamp(e["created_at"]) or _NO_TIME)
    for number, entry in enumerate(events, 1):
        entry["id"] = f"{fact_id}-{number}"
    return events


_NO_TIME: Final = datetime.min.replace(tzinfo=UTC)
"""Where an event whose stored time cannot be read sorts: first."""


def _event_json(job: Job) -> dict[str, object]:
    return {
        "id": job.job_id,
        "event_type": "ADD",
        "status": _EVENT_STATUS[job.status],
        "payload": None,
        "metadata": None,
        "results": None if job.report is None else dict(job.report),
        "error": None if job.error is None else dict(job.error),
        "created_at": job.created_at,
        "updated_at": job.finished_at or job.started_at or job.created_at,
        "started_at": job.started_at,
        "completed_at": job.finished_at,
        "latency": None,
    }
