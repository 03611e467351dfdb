"""The extraction machinery behind a :class:`~deermem.memory.Memory`: model, updater, queue.

One :class:`UpdateService` is shared by a ``Memory`` and every view
:meth:`~deermem.memory.Memory.scoped` makes of it, so one queue and one
model serve all users and agents of a store, and ``close()`` on any of them
flushes everything. Each call names its scope.

* The watermark lives in the store (:class:`StoredMarks`): each update reads
  its conversation's mark there and commits the new one with the facts it
  changes, so another process, a new ``Memory`` or ``deermem ingest`` run
  twice never extracts — and never confirms — an applied conversation again.

* The model is built from ``config.model`` on first use (or given); with
  none configured, every extraction raises
  :class:`~deermem.errors.LLMNotConfigured` at once — at ``queue_conversation``
  time, not later in a worker thread where nobody would see it.
* Updates run one at a time (``ChatModel`` backends serve one thread at a
  time, and a thread's watermark must not race with itself).
* The queue holds *filtered* messages: what the model may read, nothing else.
* The extraction machinery (:mod:`deermem.learning`, the signals, the model
  layer) is imported by the first call that needs it, not with this module:
  a ``Memory`` that only reads and searches never loads it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from deermem.model import Scope
from deermem.store import ChangeSet, Store

if TYPE_CHECKING:
    from deermem.config import MemoryConfig
    from deermem.learning import FlushReport, QueueItem, UpdateQueue
    from deermem.learning.report import UpdateResult
    from deermem.learning.signals import KeepHidden, Message
    from deermem.learning.updater import Updater
    from deermem.learning.watermark import M, WatermarkKey
    from deermem.llm import ChatModel

__all__ = ["StoredMarks", "UpdateService"]

_log = logging.getLogger("deermem.memory")


class StoredMarks:
    """The watermark as the store keeps it (see :mod:`deermem.learning.watermark`).

    Read afresh for every update — another process may have moved it — and
    written only by the commit that applies an update, never on its own
    after the fact; so :meth:`advance` has nothing left to do.
    """

    def __init__(self, store: Store) -> None:
        self._store = store

    def unseen(self, key: WatermarkKey, messages: Sequence[M]) -> tuple[M, ...]:
        from deermem.learning.watermark import messages_after

        thread_id, user_id, agent = key
        return messages_after(messages, self._store.watermark(Scope.of(user_id, agent), thread_id))

    def advance(self, key: WatermarkKey, messages: Sequence[M]) -> None:
        """Nothing to do: the update's commit stored the mark."""


class UpdateService:
    """The extraction machinery behind ``Memory.learn`` and ``Memory.queue_conversation``.

    Args:
        store: the store updates commit to.
        config: the configuration (model, gate, queue settings).
        clock: the time of every decision.
        new_id: makes fact ids.
        model: the chat model; built from ``config.model`` on first use when ``None``.
        keep_hidden: the host's rule for hidden human messages (default: only a
            clarification answer is kept).
    """

    def __init__(
        self,
        store: Store,
        config: MemoryConfig,
        *,
        clock: Callable[[], datetime],
        new_id: Callable[[], str],
        model: ChatModel | None = None,
        keep_hidden: KeepHidden | None = None,
    ) -> None:
        self._store = store
        self._config = config
        self._clock = clock
        self._new_id = new_id
        self._model = model
        self._keep_hidden = keep_hidden
        self._updater: Updater | None = None
        self._queue: UpdateQueue[Message] | None = None
        self._setup = threading.Lock()
        self._running = threading.Lock()  # one update at a time
        self.watermark = StoredMarks(store)

    def updater(self) -> Updater:
        """The updater, built on first use.

        Raises:
            LLMNotConfigured: no model is given or configured.
            LLMUnavailable / ConfigError: the configured model cannot be built.
            PatternError / PromptTemplateError: an override file is invalid.
        """
        from deermem.learning.updater import Updater
        from deermem.llm import require_chat_model

        with self._setup:
            if self._updater is None:
                model = self._model if self._model is not None else require_chat_model(self._config)
                self._updater = Updater.from_config(
                    self._config, model, keep_hidden=self._keep_hidden
                )
            return self._updater

    # --- synchronous -------------------------------------------------------------

    def learn(
        self, scope: Scope, thread_id: str, messages: Iterable[object], *, dry_run: bool
    ) -> UpdateResult:
        """Extract from a conversation now (see ``Memory.learn``)."""
        from deermem.learning.report import UpdateReport, UpdateResult

        updater = self.updater()
        prepared = updater.prepare(messages)
        if prepared is None:
            return UpdateResult(UpdateReport(thread_id, "no-conversation", dry_run=dry_run))
        key = (thread_id, scope.user_id, scope.agent)
        feed = self.watermark.unseen(key, prepared.messages)
        if not feed:
            return UpdateResult(UpdateReport(thread_id, "nothing-new", dry_run=dry_run))
        return self._run(scope, thread_id, feed, dry_run=dry_run, marks=True)

    def _run(
        self,
        scope: Scope,
        thread_id: str,
        feed: Sequence[Message],
        *,
        dry_run: bool,
        marks: bool,
    ) -> UpdateResult:
        """One update over ``feed``; with ``marks``, the conversation is marked up to its end.

        The mark goes into the update's own commit. An update that succeeds
        without a commit (nothing left to ask the model after filtering)
        commits the mark alone; one that fails moves nothing.
        """
        from deermem.learning.watermark import mark_of

        updater = self.updater()
        mark = mark_of(feed[-1]) if marks and not dry_run else None
        with self._running:
            now = self._clock()
            result = updater.run(
                self._store,
                scope,
                feed,
                thread_id=thread_id,
                now=now,
                new_id=self._new_id,
                dry_run=dry_run,
                mark=mark,
            )
            report = result.report
            if mark is not None and report.outcome == "no-conversation":
                self._store.commit(scope, ChangeSet(now=now, watermarks={thread_id: mark}))
        _log.info(
            "memory update for thread %r (%s): %s; %s",
            thread_id,
            scope,
            report.outcome,
            ", ".join(f"{name} {count}" for name, count in report.counts().items()),
        )
        return result

    # --- queued ------------------------------------------------------------------

    def queue_conversation(
        self, scope: Scope, thread_id: str, messages: Iterable[object], *, immediate: bool
    ) -> bool:
        """Queue a conversation (see ``Memory.queue_conversation``)."""
        prepared = self.updater().prepare(messages)
        if prepared is None:
            return False
        queue = self.queue()
        add = queue.add_nowait if immediate else queue.add
        add(
            thread_id,
            prepared.messages,
            user_id=scope.user_id,
            agent=scope.agent,
            signals=prepared.signals,
        )
        return True

    def queue(self) -> UpdateQueue[Message]:
        from deermem.learning import UpdateQueue

        with self._setup:
            if self._queue is None:
                self._queue = UpdateQueue(
                    self._process,
                    debounce_seconds=self._config.debounce_seconds,
                    max_depth=self._config.queue_max_depth,
                    watermark=self.watermark,  # shared with learn
                )
            return self._queue

    def _process(self, item: QueueItem[Message]) -> bool:
        """The queue's processing function: one update over the item's new messages."""
        key = item.key
        scope = Scope.of(key.user_id, key.agent)
        # An emergency extraction feeds a conversation whole and never moves its mark.
        result = self._run(
            scope, key.thread_id, item.messages, dry_run=False, marks=not key.emergency
        )
        return result.report.succeeded

    def flush(self, timeout: float | None) -> FlushReport:
        """Process what is queued now, within ``timeout`` (default: the shutdown budget)."""
        from deermem.learning import FlushReport

        with self._setup:
            queue = self._queue
        if queue is None:
            return FlushReport(completed=True)
        return queue.flush(self._timeout(timeout))

    def close(self, timeout: float | None) -> FlushReport:
        """Stop taking conversations, flush the queue (logging what could not be
        flushed), and release the model if this service built it."""
        from deermem.learning import FlushReport

        with self._setup:
            queue = self._queue
        report = FlushReport(completed=True)
        if queue is not None:
            report = queue.shutdown(self._timeout(timeout))
            self._log_unflushed(report)
        with self._setup:
            updater, self._updater = self._updater, None
        if updater is not None and self._model is None:
            close = getattr(updater.model, "close", None)  # the HTTP client's connections
            if callable(close):
                close()
        return report

    @staticmethod
    def _log_unflushed(report: FlushReport) -> None:
        if not report.ok:
            _log.error(
                "memory queue closed with %d conversation(s) failed and %d not processed in "
                "time: %s",
                len(report.failed),
                len(report.unflushed),
                ", ".join(
                    f"thread {key.thread_id!r} (user {key.user_id!r}, agent {key.agent!r})"
                    for key in (*report.failed, *report.unflushed)
                ),
            )

    def _timeout(self, timeout: float | None) -> float:
        return self._config.shutdown_flush_timeout_seconds if timeout is None else timeout
