"""``…/conversations`` and ``/v1/jobs/{id}``: learning from a conversation, queued."""

# No `from __future__ import annotations`: FastAPI reads the parameter annotations,
# which name dependencies bound inside the router functions.

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from deermem.learning.messages import parse_messages
from deermem.memory import Memory
from deermem.service.http.context import ServerContext
from deermem.service.http.http import Dependencies, json_response, problems
from deermem.service.http.jobs import Job
from deermem.service.http.problems import Problem, ProblemError
from deermem.service.http.schemas import ConversationIn, JobOut
from deermem.service.http.tokens import Principal

__all__ = ["router"]


def router(context: ServerContext, deps: Dependencies) -> APIRouter:
    """The conversation and job routes of one server."""
    api = APIRouter(tags=["learning"])
    Scoped = Annotated[Memory, Depends(deps.scoped)]
    Who = Annotated[Principal, Depends(deps.principal)]
    limits = context.limits

    def accept(memory: Memory, body: ConversationIn) -> Job:
        """Check the conversation and queue it (in a worker thread: it parses and writes)."""
        if not memory.config.model.configured:
            raise ProblemError(
                Problem(
                    501,
                    "extraction-off",
                    "Extraction is off",
                    "this server has no model configured, so it cannot learn from "
                    "conversations (configure model.model and model.base_url)",
                )
            )
        parse_messages(body.messages)  # a malformed message is a 422 now, not a failed job
        scope = memory.scope
        return context.jobs.submit(
            scope.user_id or "", scope.agent, body.threadId, list(body.messages)
        )

    @api.post(
        "/v1/users/{user}/agents/{agent}/conversations",
        status_code=202,
        response_model=JobOut,
        responses={
            200: {"model": JobOut, "description": "With `wait=true`: the finished job"},
            **problems(401, 404, 413, 422, 429, 501),
        },
    )
    async def post_conversation(
        memory: Scoped,
        who: Who,
        body: ConversationIn,
        wait: Annotated[
            bool, Query(description="Answer when the job is done (up to max_wait_seconds).")
        ] = False,
    ) -> JSONResponse:
        """Queue a conversation for extraction; 202 at once with the job's URL.

        Send the whole thread each time: only what was not learned from before
        goes to the model. `GET /v1/jobs/{jobId}` gives the update report (what
        was added, confirmed, removed and evicted, with receipt ids) once the job
        is done. With `wait=true` the answer waits for the report (200) — or,
        after `max_wait_seconds`, is the 202 of a job still running. A token may
        have `max_waits_per_token` such requests waiting at once (429
        `too-many-waits` beyond, before anything is queued); a user may hold
        `max_pending_jobs_per_user` queued conversations (429 `queue-full`).
        """
        if not wait:
            job = await run_in_threadpool(accept, memory, body)
            return _job_response(job, accepted=not job.finished)
        # The wait is a coroutine woken by the job's end: it holds no worker thread.
        with context.jobs.wait_slot(who.token_id):
            job = await run_in_threadpool(accept, memory, body)
            latest = await context.jobs.wait(job.job_id, limits.max_wait_seconds)
        if latest is None:  # it ended before the wait began: read its record
            latest = await run_in_threadpool(context.jobs.get, job.job_id)
        job = latest or job
        return _job_response(job, accepted=not job.finished)

    @api.get("/v1/jobs/{job_id}", response_model=JobOut, responses=problems(401, 404, 422))
    def get_job(
        who: Who,
        job_id: Annotated[str, Path(min_length=1, max_length=64, description="A job id.")],
    ) -> JSONResponse:
        """An extraction job: queued, running, done (with its report), failed or abandoned."""
        return _job_response(context.job_for(who, job_id), accepted=False)

    return api


def _job_response(job: Job, *, accepted: bool) -> JSONResponse:
    headers = {"Location": f"/v1/jobs/{job.job_id}"}
    return json_response(job.to_dict(), status=202 if accepted else 200, headers=headers)
