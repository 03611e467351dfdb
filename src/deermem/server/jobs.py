"""Extraction jobs: a conversation is acknowledged at once and learned from in the background.

``POST …/conversations`` makes a :class:`Job`, hands it to this worker
process's :class:`JobRunner` and answers 202 with the job's URL; the runner
learns from the conversations one at a time (the model serves one call at a
time, and a thread's watermark must not race with itself) and records the
:class:`~deermem.update.UpdateReport` — ids and counters, no content — or
the problem that stopped it.

**Several worker processes.** uvicorn's workers share nothing but files, and
a client's ``GET /v1/jobs/{id}`` may land on any of them. So job records are
files — one JSON file per job in the server's state directory
(:class:`JobStore`), written atomically at each step — and any worker reads
any job. The work itself stays with the process that accepted it. A worker
that stops cleanly marks what it had not finished ``abandoned``; a record
whose worker died (its process is gone from this host) reads as
``abandoned`` too, so a client never polls a dead job forever. An abandoned
conversation was not learned from: send it again (only what was not learned
from before reaches the model).

Finished records are pruned after ``job_retention_seconds``.
"""

from __future__ import annotations

import contextvars
import json
import logging
import os
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Final, Literal, get_args

from deermem._exceptions import CorruptMemoryFile, DeerMemError
from deermem.model.timestamps import format_timestamp
from deermem.server.problems import Problem, internal_problem, problem_for
from deermem.store.atomic import atomic_write, make_directories

__all__ = ["Job", "JobRunner", "JobStatus", "JobStore", "Learn", "is_job_id"]

JobStatus = Literal["queued", "running", "done", "failed", "abandoned"]
_STATUSES: Final = frozenset(get_args(JobStatus))
_FINAL: Final = frozenset({"done", "failed", "abandoned"})
_JOB_ID: Final = re.compile(r"job_[0-9a-f]{32}")
_PRUNE_EVERY_SECONDS: Final = 60.0
_HOST: Final = socket.gethostname()

_log = logging.getLogger("deermem.server.jobs")


def is_job_id(text: str) -> bool:
    """Whether ``text`` has the shape of a job id (so it can name a file safely)."""
    return _JOB_ID.fullmatch(text) is not None


@dataclass(frozen=True, slots=True)
class Job:
    """One conversation sent for extraction, and what became of it.

    Attributes:
        job_id: ``job_`` + 32 hex digits (random: ids cannot be guessed).
        status: ``queued``, ``running``, ``done``, ``failed`` or ``abandoned``.
        user / agent: the scope it writes to (checked against the token on reads).
        thread_id: the conversation.
        created_at / started_at / finished_at: ISO UTC times.
        report: the update report when ``done`` (content-free).
        error: the problem when ``failed`` or ``abandoned`` (content-free).
        worker / host: the process that owns the work.
    """

    job_id: str
    status: JobStatus
    user: str
    agent: str
    thread_id: str
    created_at: str
    started_at: str | None = None
    finished_at: str | None = None
    report: Mapping[str, object] | None = None
    error: Mapping[str, object] | None = None
    worker: int = 0
    host: str = ""

    @property
    def finished(self) -> bool:
        return self.status in _FINAL

    def to_dict(self) -> dict[str, object]:
        """The job as clients see it."""
        return {
            "jobId": self.job_id,
            "status": self.status,
            "user": self.user,
            "agent": self.agent,
            "threadId": self.thread_id,
            "createdAt": self.created_at,
            "startedAt": self.started_at,
            "finishedAt": self.finished_at,
            "report": None if self.report is None else dict(self.report),
            "error": None if self.error is None else dict(self.error),
        }

    def to_record(self) -> dict[str, object]:
        return {**self.to_dict(), "worker": self.worker, "host": self.host}

    @classmethod
    def from_record(cls, data: object) -> Job | None:
        """Read a job file's content; ``None`` when it is not a job record."""
        if not isinstance(data, dict):
            return None
        fields = ("jobId", "status", "user", "agent", "threadId", "createdAt")
        values = [data.get(name) for name in fields]
        if not all(isinstance(value, str) for value in values) or data["status"] not in _STATUSES:
            return None
        report, error = data.get("report"), data.get("error")
        worker, host = data.get("worker", 0), data.get("host", "")
        started, finished = data.get("startedAt"), data.get("finishedAt")
        if not (report is None or isinstance(report, dict)) or not (
            error is None or isinstance(error, dict)
        ):
            return None
        if not isinstance(worker, int) or not isinstance(host, str):
            return None
        if not all(value is None or isinstance(value, str) for value in (started, finished)):
            return None
        return cls(
            job_id=data["jobId"],
            status=data["status"],
            user=data["user"],
            agent=data["agent"],
            thread_id=data["threadId"],
            created_at=data["createdAt"],
            started_at=started,
            finished_at=finished,
            report=report,
            error=error,
            worker=worker,
            host=host,
        )


class JobStore:
    """Job records as files: ``<directory>/<job id>.json``, replaced atomically.

    Args:
        directory: where the records live; shared by every worker process.
        retention_seconds: records older than this are pruned.
    """

    def __init__(self, directory: str | os.PathLike[str], *, retention_seconds: float) -> None:
        self.directory = Path(directory)
        self.retention_seconds = retention_seconds
        self._last_prune = 0.0

    def save(self, job: Job) -> None:
        make_directories(self.directory)
        data = json.dumps(job.to_record(), sort_keys=True).encode("utf-8")
        atomic_write(self._path(job.job_id), data)

    def load(self, job_id: str) -> Job | None:
        """The record, or ``None`` when there is none (or the id is not a job id).

        Raises:
            CorruptMemoryFile: the record exists but cannot be read.
        """
        if not is_job_id(job_id):
            return None
        path = self._path(job_id)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as error:
            raise CorruptMemoryFile(path, f"cannot read the job record: {error}") from None
        try:
            job = Job.from_record(json.loads(text))
        except json.JSONDecodeError:
            job = None
        if job is None or job.job_id != job_id:
            raise CorruptMemoryFile(path, "not a job record")
        return job

    def prune(self) -> int:
        """Remove records older than the retention (at most once a minute); return how many."""
        now = time.time()
        if now - self._last_prune < _PRUNE_EVERY_SECONDS:
            return 0
        self._last_prune = now
        removed = 0
        try:
            entries = list(os.scandir(self.directory))
        except FileNotFoundError:
            return 0
        for entry in entries:
            if not (entry.name.endswith(".json") and is_job_id(entry.name[:-5])):
                continue
            try:
                if now - entry.stat().st_mtime > self.retention_seconds:
                    Path(entry.path).unlink()
                    removed += 1
            except FileNotFoundError:
                continue  # another worker pruned it first
        return removed

    def _path(self, job_id: str) -> Path:
        return self.directory / f"{job_id}.json"


Learn = Callable[[Job, list[object]], Mapping[str, object]]
"""Learns from a job's conversation and returns the report's ``to_dict()``."""


@dataclass(slots=True)
class _Pending:
    job: Job
    done: threading.Event
    future: Future[None] | None = None


class JobRunner:
    """This worker process's extraction queue: one job at a time, bounded.

    Args:
        store: where job records are kept.
        learn: does the work of one job (``Memory.learn`` on the job's scope).
        max_pending: jobs queued or running here before :meth:`submit` refuses.
        clock: the time of each step (aware UTC).
    """

    def __init__(
        self,
        store: JobStore,
        learn: Learn,
        *,
        max_pending: int,
        clock: Callable[[], datetime],
    ) -> None:
        self.store = store
        self._learn = learn
        self.max_pending = max_pending
        self._clock = clock
        self._pending: dict[str, _Pending] = {}
        self._lock = threading.Lock()
        self._closed = False
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="deermem-job")

    def submit(self, user: str, agent: str, thread_id: str, messages: list[object]) -> Job | None:
        """Queue a conversation; ``None`` when ``max_pending`` jobs are already here.

        The job runs in a copy of the caller's context, so its log lines carry
        the id of the request that queued it.

        A stopping runner returns ``None`` too.
        """
        job = Job(
            job_id=f"job_{uuid.uuid4().hex}",
            status="queued",
            user=user,
            agent=agent,
            thread_id=thread_id,
            created_at=self._now(),
            worker=os.getpid(),
            host=_HOST,
        )
        with self._lock:
            if self._closed or len(self._pending) >= self.max_pending:
                return None
            pending = _Pending(job, threading.Event())
            self._pending[job.job_id] = pending
        self.store.save(job)
        context = contextvars.copy_context()
        try:
            pending.future = self._executor.submit(context.run, self._execute, job, messages)
        except RuntimeError:  # close() shut the executor down meanwhile
            self._finish(job, "abandoned", error=_abandoned("the server is stopping"))
            return None
        self.store.prune()
        return job

    def get(self, job_id: str) -> Job | None:
        """The job as recorded, with a dead worker's unfinished job read as ``abandoned``."""
        job = self.store.load(job_id)
        if job is None or job.finished or job.worker == os.getpid():
            return job
        if job.host == _HOST and not _alive(job.worker):
            return replace(
                job,
                status="abandoned",
                error=_abandoned("the worker process that took it has stopped"),
            )
        return job

    def wait(self, job_id: str, timeout: float) -> Job | None:
        """Wait up to ``timeout`` seconds for a job of this process, then read it."""
        with self._lock:
            pending = self._pending.get(job_id)
        if pending is not None:
            pending.done.wait(timeout)
        return self.get(job_id)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._pending)

    def close(self, timeout: float) -> None:
        """Stop taking jobs, let the running one finish within ``timeout``, abandon the rest."""
        with self._lock:
            self._closed = True
            pending = list(self._pending.values())
        self._executor.shutdown(wait=False, cancel_futures=True)
        deadline = time.monotonic() + timeout
        for item in pending:
            if item.future is not None and item.future.cancelled():
                self._finish(
                    item.job, "abandoned", error=_abandoned("the server stopped before it ran")
                )
        for item in pending:
            item.done.wait(max(0.0, deadline - time.monotonic()))
        for item in pending:
            if not item.done.is_set():
                self._finish(
                    item.job, "abandoned", error=_abandoned("the server stopped while it ran")
                )

    # --- in the worker thread ---------------------------------------------------------

    def _execute(self, job: Job, messages: list[object]) -> None:
        running = replace(job, status="running", started_at=self._now())
        self.store.save(running)
        try:
            report = self._learn(running, messages)
        except DeerMemError as error:
            problem = problem_for(error)
            _log.warning("job %s failed: %s (%s)", job.job_id, problem.slug, type(error).__name__)
            self._finish(running, "failed", error=problem.to_dict())
        except Exception as error:  # the job must end recorded, whatever broke
            _log.error(
                "job %s failed unexpectedly: %s", job.job_id, type(error).__name__, exc_info=False
            )
            self._finish(running, "failed", error=internal_problem().to_dict())
        else:
            self._finish(running, "done", report=report)

    def _finish(
        self,
        job: Job,
        status: JobStatus,
        *,
        report: Mapping[str, object] | None = None,
        error: Mapping[str, object] | None = None,
    ) -> None:
        with self._lock:
            pending = self._pending.pop(job.job_id, None)
        if pending is None:
            return  # already finished (close() raced with the worker)
        self.store.save(
            replace(job, status=status, finished_at=self._now(), report=report, error=error)
        )
        pending.done.set()

    def _now(self) -> str:
        return format_timestamp(self._clock())


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, as another user's process
    return True


def _abandoned(reason: str) -> dict[str, object]:
    return Problem(
        503,
        "abandoned",
        "Job abandoned",
        f"{reason}; the conversation was not learned from: send it again",
    ).to_dict()
