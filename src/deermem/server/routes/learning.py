"""``…/conversations`` and ``/v1/jobs/{id}``: learning from a conversation, queued."""

# No `from __future__ import annotations`: FastAPI reads the parameter annotations,
# which name dependencies bound inside the router functions.

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query
from fastapi.responses import JSONResponse

from deermem.memory import Memory
from deermem.server.context import ServerContext
from deermem.server.http import Dependencies, json_response, problems
from deermem.server.jobs import Job
from deermem.server.problems import Problem, ProblemError
from deermem.server.schemas import ConversationIn, JobOut
from deermem.server.tokens import Principal
from deermem.signals import parse_messages

__all__ = ["router"]


def router(context: ServerContext, deps: Dependencies) -> APIRouter:
    """The conversation and job routes of one server."""
    api = APIRouter(tags=["learning"])
    Scoped = Annotated[Memory, Depends(deps.scoped)]
    Who = Annotated[Principal, Depends(deps.principal)]
    limits = context.limits

    @api.post(
        "/v1/users/{user}/agents/{agent}/conversations",
        status_code=202,
        response_model=JobOut,
        responses={
            200: {"model": JobOut, "description": "With `wait=true`: the finished job"},
            **problems(401, 404, 413, 422, 429, 501),
        },
    )
    def post_conversation(
        memory: Scoped,
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
        after `max_wait_seconds`, is the 202 of a job still running.
        """
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
        job = context.jobs.submit(
            scope.user_id or "", scope.agent, body.threadId, list(body.messages)
        )
        if job is None:
            raise ProblemError(
                Problem(
                    429,
                    "queue-full",
                    "Too many queued conversations",
                    f"this worker holds max_pending_jobs = {limits.max_pending_jobs} "
                    "conversations; retry later",
                    {"limit": limits.max_pending_jobs, "limitName": "max_pending_jobs"},
                    {"Retry-After": "2"},
                )
            )
        if wait:
            job = context.jobs.wait(job.job_id, limits.max_wait_seconds) or job
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
