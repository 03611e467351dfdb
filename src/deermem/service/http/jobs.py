"""Extraction jobs: a conversation is acknowledged at once and learned from in the background.

``POST …/conversations`` makes a :class:`Job`, hands it to this worker
process's :class:`JobRunner` and answers 202 with the job's URL; the runner
learns from the conversations one at a time (the model serves one call at a
time, and a thread's watermark must not race with itself), users taking
turns, and records the :class:`~deermem.learning.UpdateReport` — ids and
counters, no content — or the problem that stopped it. Each user may hold
only a share of the queue, so one user's burst does not refuse the others.

**Several worker processes.** uvicorn's workers share nothing but files, and
a client's ``GET /v1/jobs/{id}`` may land on any of them. So job records are
files — one JSON file per job in the server's state directory
(:class:`JobStore`), written atomically at each step — and any worker reads
any job. The work itself stays with the process that accepted it. A worker
that stops cleanly marks what it had not finished ``abandoned``; a record
whose worker died (its process is gone from this host) reads as
``abandoned`` too, so a client never polls a dead job forever. Send an
abandoned conversation again: a job stopped while it ran may or may not have
committed (a commit is whole or nothing), and only what was not learned from
before reaches the model, so nothing is learned twice.

Finished records are pruned after ``job_retention_seconds``.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import os
import re
import socket
import threading
import time
import uuid
from collections import Counter, deque
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Annotated, Final, Literal

from pydantic import ConfigDict, Field, TypeAdapter, ValidationError
from pydantic.alias_generators import to_camel

from deermem.errors import CorruptMemoryFile, DeerMemError
from deermem.model import format_timestamp
from deermem.results import to_json
from deermem.service.problems import (
    Problem,
    ProblemError,
    internal_problem,
    operator_note,
    problem_for,
)
from deermem.store.markdown.files import atomic_write, make_directories

__all__ = ["Job", "JobRunner", "JobStore"]

JobStatus = Literal["queued", "running", "done", "failed", "abandoned"]
_FINAL: Final = frozenset({"done", "failed", "abandoned"})
_JOB_ID: Final = re.compile(r"job_[0-9a-f]{32}")
_PRUNE_EVERY_SECONDS: Final = 60.0
_HOST: Final = socket.gethostname()

_log = logging.getLogger("deermem.service.http.jobs")


def is_job_id(text: str) -> bool:
    """Whether ``text`` has the shape of a job id (so it can name a file safely)."""
    return _JOB_ID.fullmatch(text) is not None


@dataclass(frozen=True, slots=True)
class Job:
    """One conversation sent for extraction, and what became of it.

    Clients read it with camelCase keys (``jobId``, ``threadId`` ...); its
    record file holds the same, plus the process that owns the work.

    Attributes:
        job_id: ``job_`` + 32 hex digits (random: ids cannot be guessed).
        status: ``queued``, ``running``, ``done``, ``failed`` or ``abandoned``.
        user / agent: the scope it writes to (checked against the token on reads).
        thread_id: the conversation.
        created_at / started_at / finished_at: ISO UTC times.
        report: the update report when ``done`` (content-free).
        error: the problem when ``failed`` or ``abandoned`` (content-free).
        worker / host: the process that owns the work (in the record only).
    """

    __pydantic_config__ = ConfigDict(
        alias_generator=to_camel, serialize_by_alias=True, extra="ignore"
    )

    job_id: str
    status: JobStatus
    user: str
    agent: str
    thread_id: str
    created_at: str
    started_at: str | None = None
    finished_at: str | None = None
    report: dict[str, object] | None = None
    error: dict[str, object] | None = None
    worker: Annotated[int, Field(exclude=True, strict=True)] = 0
    host: Annotated[str, Field(exclude=True)] = ""

    @property
    def finished(self) -> bool:
        return self.status in _FINAL

    def to_record(self) -> dict[str, object]:
        """The record file's content: the job as clients see it, and its owner."""
        return {**to_json(self, Job), "worker": self.worker, "host": self.host}

    @classmethod
    def from_record(cls, data: object) -> Job | None:
        """Read a job file's content; ``None`` when it is not a job record."""
        try:
            job: Job = _RECORD.validate_python(data)
        except ValidationError:
            return None
        return job


_RECORD: Final = TypeAdapter(Job)


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
        for entry in self._records():
            try:
                if now - entry.stat().st_mtime > self.retention_seconds:
                    Path(entry.path).unlink()
                    removed += 1
            except FileNotFoundError:
                continue  # another worker pruned it first
        return removed

    def forget_user(self, user: str) -> int:
        """Delete every record of a user's jobs (the user's erasure); return how many."""
        removed = 0
        for entry in self._records():
            try:
                job = self.load(entry.name[:-5])
            except CorruptMemoryFile:
                continue
            if job is not None and job.user == user:
                Path(entry.path).unlink(missing_ok=True)
                removed += 1
        return removed

    def _path(self, job_id: str) -> Path:
        return self.directory / f"{job_id}.json"

    def _records(self) -> list[os.DirEntry[str]]:
        """The directory's job records (``<job id>.json``); none when it does not exist yet."""
        try:
            entries = list(os.scandir(self.directory))
        except FileNotFoundError:
            return []
        return [
            entry
            for entry in entries
            if entry.name.endswith(".json") and is_job_id(entry.name[:-5])
        ]


Learn = Callable[[Job, list[object]], dict[str, object]]
"""Learns from a job's conversation and returns the report's JSON form."""


@dataclass(slots=True)
class _Pending:
    """A job this process holds, queued or running.

    ``job`` is its latest state (the file holds the same: only this process
    writes it). ``waiters`` wake the requests that wait for it; they are called
    once, from the thread that finishes the job, after the final record is saved.
    ``ending`` is set by the one call that finishes it (the worker's or close()'s).
    """

    job: Job
    messages: list[object]
    context: contextvars.Context
    done: threading.Event = field(default_factory=threading.Event)
    waiters: list[Callable[[], None]] = field(default_factory=list)
    ending: bool = False


class JobRunner:
    """This worker process's extraction queue: one job at a time, bounded, fair across users.

    **Bounds.** The process holds at most ``max_pending`` jobs (queued or
    running), and one user at most ``max_pending_per_user`` of them (their
    *share*): a user at their share is refused while others still get in, so
    one user's burst cannot fill the queue for everyone.

    **Turns.** Users take turns: each turn runs the oldest job of the user
    at the front, then that user (if they have more) goes to the back, behind
    users who are waiting. So a job waits for at most one job of each other
    user queued before it, however many those users sent.

    **Waiting.** :meth:`wait` is a coroutine woken by the job's end: a
    request that waits for its job holds no worker thread, and
    :meth:`wait_slot` bounds how many requests of one token wait at once.

    Args:
        store: where job records are kept.
        learn: does the work of one job (``Memory.learn`` on the job's scope).
        max_pending: jobs queued or running here before :meth:`submit` refuses.
        max_pending_per_user: a user's share of ``max_pending`` (at most all of it).
        max_waits_per_token: requests of one token in :meth:`wait_slot` at once.
        clock: the time of each step (aware UTC).
    """

    def __init__(
        self,
        store: JobStore,
        learn: Learn,
        *,
        max_pending: int,
        max_pending_per_user: int | None = None,
        max_waits_per_token: int = 16,
        clock: Callable[[], datetime],
    ) -> None:
        self.store = store
        self._learn = learn
        self.max_pending = max_pending
        self.share = min(max_pending, max_pending_per_user or max_pending)
        self.max_waits_per_token = max_waits_per_token
        self._clock = clock
        # Invariants (under _lock): _pending holds every queued or running job;
        # _turns holds the queued ones only, by user, users in turn order.
        self._pending: dict[str, _Pending] = {}
        self._turns: dict[str, deque[_Pending]] = {}
        self._waits: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._closed = False
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="deermem-job")

    def submit(self, user: str, agent: str, thread_id: str, messages: list[object]) -> Job:
        """Queue a conversation and return its job.

        The job runs in a copy of the caller's context, so its log lines carry
        the id of the request that queued it.

        Raises:
            ProblemError: 429 ``queue-full`` — this process holds ``max_pending``
                jobs, or ``user`` holds their share; ``limitName`` says which.
                A stopping runner refuses too.
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
        pending = _Pending(job, messages, contextvars.copy_context())
        with self._lock:
            if self._closed or len(self._pending) >= self.max_pending:
                raise ProblemError(_queue_full("max_pending_jobs", self.max_pending))
            if self._held_by(user) >= self.share:
                raise ProblemError(_queue_full("max_pending_jobs_per_user", self.share))
            self._pending[job.job_id] = pending  # counted from here on; runnable below
        try:
            self.store.save(job)  # before it can run, so "queued" never overwrites "running"
        except BaseException:
            with self._lock:
                del self._pending[job.job_id]
            raise
        with self._lock:
            # close() sets _closed under this lock before it shuts the executor down,
            # so while it is unset the executor still takes work.
            accepted = not self._closed
            if accepted:
                self._turns.setdefault(user, deque()).append(pending)
                self._executor.submit(self._run_next)
        if not accepted:
            self._finish(job, "abandoned", error=_abandoned("the server is stopping"))
            raise ProblemError(_queue_full("max_pending_jobs", self.max_pending))
        self.store.prune()
        return job

    def forget_user(self, user: str) -> int:
        """Drop a user's queued jobs and delete the records of all their jobs (their erasure).

        Returns the job records deleted. A job already running finishes first
        (the erasure waits for it), so nothing it writes outlives the erasure.
        """
        with self._lock:
            queued = self._turns.pop(user, deque())
            for pending in queued:
                self._pending.pop(pending.job.job_id, None)
            running = [p for p in self._pending.values() if p.job.user == user]
        for pending in running:
            pending.done.wait()
        return self.store.forget_user(user)

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

    @contextmanager
    def wait_slot(self, token_id: str | None) -> Iterator[None]:
        """Hold one of the ``max_waits_per_token`` waits of a token while the block runs.

        The requests of the open loopback server (no token) share one bound.

        Raises:
            ProblemError: 429 ``too-many-waits`` — the token's waits are all taken.
        """
        holder = token_id or ""
        with self._lock:
            if self._waits[holder] >= self.max_waits_per_token:
                raise ProblemError(_too_many_waits(self.max_waits_per_token))
            self._waits[holder] += 1
        try:
            yield
        finally:
            with self._lock:
                self._waits[holder] -= 1
                if not self._waits[holder]:
                    del self._waits[holder]

    async def wait(self, job_id: str, timeout: float) -> Job | None:
        """Wait up to ``timeout`` seconds for a job of this process to end; its latest state.

        A coroutine on the event loop: the job's thread wakes it, so waiting
        holds no worker thread. ``None`` when the job is not queued or running
        here (it ended already, or another process holds it): read it with
        :meth:`get`.
        """
        loop = asyncio.get_running_loop()
        ended = asyncio.Event()

        def wake() -> None:
            with suppress(RuntimeError):  # the loop has closed: nobody waits any more
                loop.call_soon_threadsafe(ended.set)

        with self._lock:
            pending = self._pending.get(job_id)
            if pending is None:
                return None
            pending.waiters.append(wake)
        try:
            with suppress(TimeoutError):
                await asyncio.wait_for(ended.wait(), timeout)
        finally:
            with self._lock:
                if wake in pending.waiters:
                    pending.waiters.remove(wake)
                latest = pending.job
        return latest

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._pending)

    def close(self, timeout: float) -> None:
        """Stop taking jobs, let the running one finish within ``timeout``, abandon the rest."""
        with self._lock:
            self._closed = True
            queued = [item for turn in self._turns.values() for item in turn]
            self._turns.clear()
            pending = list(self._pending.values())
        self._executor.shutdown(wait=False, cancel_futures=True)
        deadline = time.monotonic() + timeout
        for item in queued:
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

    def _held_by(self, user: str) -> int:
        return sum(1 for item in self._pending.values() if item.job.user == user)

    # --- in the worker thread ---------------------------------------------------------

    def _run_next(self) -> None:
        """Run the job whose turn it is (one call per submitted job, so every job runs)."""
        with self._lock:
            if self._closed or not self._turns:
                return
            user = next(iter(self._turns))
            turn = self._turns.pop(user)
            item = turn.popleft()
            if turn:
                self._turns[user] = turn  # to the back: the others go first
        item.context.run(self._execute, item)

    def _execute(self, item: _Pending) -> None:
        job = item.job
        running = replace(job, status="running", started_at=self._now())
        with self._lock:
            item.job = running
        try:
            self.store.save(running)
            report = self._learn(running, item.messages)
        except DeerMemError as error:
            problem = problem_for(error)
            note = operator_note(error, problem) or f"{problem.slug}: {type(error).__name__}"
            _log.warning("job %s failed: %s", job.job_id, note)
            self._finish(running, "failed", error=problem.body())
        except Exception as error:  # the job must end recorded, whatever broke
            _log.error(
                "job %s failed unexpectedly: %s", job.job_id, type(error).__name__, exc_info=False
            )
            self._finish(running, "failed", error=internal_problem().body())
        else:
            self._finish(running, "done", report=report)

    def _finish(
        self,
        job: Job,
        status: JobStatus,
        *,
        report: dict[str, object] | None = None,
        error: dict[str, object] | None = None,
    ) -> None:
        with self._lock:
            pending = self._pending.get(job.job_id)
            if pending is None or pending.ending:
                return  # finished already, or being finished (close() raced with the worker)
            pending.ending = True
        finished = replace(job, status=status, finished_at=self._now(), report=report, error=error)
        try:
            self.store.save(finished)
        finally:
            # The job leaves the queue once its final record is written (so whoever finds
            # it gone reads that record), and whatever the disk did: wake who waits for it.
            with self._lock:
                del self._pending[job.job_id]
                pending.job = finished
                waiters = list(pending.waiters)
            pending.done.set()
            for wake in waiters:
                wake()

    def _now(self) -> str:
        return format_timestamp(self._clock())


def _queue_full(limit_name: str, limit: int) -> Problem:
    whose = "of this user" if limit_name == "max_pending_jobs_per_user" else "in all"
    return Problem(
        429,
        "queue-full",
        "Too many queued conversations",
        f"this worker holds {limit_name} = {limit} conversations {whose} for extraction; "
        "retry later",
        {"limit": limit, "limitName": limit_name},
        {"Retry-After": "2"},
    )


def _too_many_waits(limit: int) -> Problem:
    return Problem(
        429,
        "too-many-waits",
        "Too many requests waiting for their jobs",
        f"this token already has max_waits_per_token = {limit} requests waiting with "
        "wait=true on this worker; send the conversation without wait=true and poll its "
        "job, or retry later",
        {"limit": limit, "limitName": "max_waits_per_token"},
        {"Retry-After": "2"},
    )


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
        f"{reason}; send the conversation again (what was learned from it already is not "
        "learned twice)",
    ).body()
