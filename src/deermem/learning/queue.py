"""The update queue: conversations wait here until the user pauses.

An agent reports its conversation after every turn. Extracting after every
turn would call the model for half-finished thoughts and race with the
next turn, so the queue waits: every ``add`` restarts one debounce timer
(``debounce_seconds``, 30 by default), and when it expires the queued
conversations are extracted one after another.

* Items are keyed by ``(thread, user, agent, emergency)``. A newer
  conversation for a queued key **replaces** the messages (it holds the
  older ones anyway) and **unions** the signals (a correction seen two
  turns ago still counts).
* Depth is bounded (``queue_max_depth``, 0 = unlimited). When full, a new
  key without signals is refused with :class:`~deermem.QueueFullError`;
  items with a signal and emergency items are always admitted — losing a
  correction to backpressure is worse than a longer queue.
* Before extraction the marks (:class:`~deermem.learning.watermark.Marks`: a
  store's, or an in-memory :class:`~deermem.learning.watermark.Watermark`)
  cut away what was already extracted; an item with nothing new is done
  without a model call. The mark moves only when processing succeeded.
* The processing function is injected (the wiring passes the real update).
  It returns whether it succeeded; an exception counts as a failure and is
  logged with the ids and the error's type only (its message might quote
  the conversation), so one bad conversation cannot stop the worker.
* :meth:`UpdateQueue.shutdown` stops intake and drains within a time
  budget, and reports every item it could not process — nothing admitted
  disappears without a trace.

Timers and the clock are injected, so tests drive the debounce by hand;
the defaults are real threads.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Final, Generic

from deermem.errors import QueueClosedError, QueueFullError
from deermem.learning.queue_items import (
    FlushReport,
    Processor,
    QueueItem,
    QueueKey,
    QueueStats,
    TimerFactory,
    TimerHandle,
    thread_timer,
)
from deermem.learning.watermark import M, Marks, Watermark

if TYPE_CHECKING:
    from deermem.config import MemoryConfig

__all__ = ["DEFAULT_AGENT", "UpdateQueue"]

DEFAULT_AGENT: Final = "__default__"
_log = logging.getLogger(__name__)


@dataclass
class _Flush:
    processed: int = 0
    failed: list[QueueKey] = field(default_factory=list)


class UpdateQueue(Generic[M]):
    """Debounced, bounded queue of conversations waiting for extraction.

    Args:
        process: the extraction function (see :data:`Processor`).
        debounce_seconds: quiet time after the last ``add`` before processing.
        max_depth: queued items beyond which plain items are refused; 0 = no limit.
        watermark: the extraction marks (by default a fresh in-memory
            :class:`~deermem.learning.watermark.Watermark` of 4096 keys).
        item_delay_seconds: pause between two items of one run (spares the
            model endpoint's rate limit); skipped when draining on shutdown.
        timer_factory: makes the debounce timers.
        sleep: how to pause (injected for tests).
        clock: monotonic seconds, for flush deadlines.
    """

    def __init__(
        self,
        process: Processor[M],
        *,
        debounce_seconds: float = 30.0,
        max_depth: int = 1000,
        watermark: Marks | None = None,
        item_delay_seconds: float = 0.5,
        timer_factory: TimerFactory = thread_timer,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if debounce_seconds < 0 or max_depth < 0 or item_delay_seconds < 0:
            raise ValueError("debounce_seconds, max_depth and item_delay_seconds must be >= 0")
        self._process = process
        self._debounce = debounce_seconds
        self._max_depth = max_depth
        self.watermark: Marks = watermark if watermark is not None else Watermark()
        self._item_delay = item_delay_seconds
        self._timer_factory = timer_factory
        self._sleep = sleep
        self._clock = clock
        self._lock = threading.Lock()
        self._worker = threading.Lock()  # held while items are processed
        self._pending: dict[QueueKey, QueueItem[M]] = {}
        self._taken: list[QueueKey] = []  # taken for processing, not finished yet
        self._timer: TimerHandle | None = None
        self._rerun = False
        self._draining = False
        self._closed = False
        self._flush: _Flush | None = None
        self._stats = QueueStats()

    @classmethod
    def from_config(
        cls, process: Processor[M], config: MemoryConfig, **options: Any
    ) -> UpdateQueue[M]:
        """A queue with ``debounce_seconds`` and ``queue_max_depth`` from the
        configuration (``options`` override the rest)."""
        return cls(
            process,
            debounce_seconds=config.debounce_seconds,
            max_depth=config.queue_max_depth,
            watermark=Watermark(),
            **options,
        )

    # --- intake ------------------------------------------------------------------

    def add(
        self,
        thread_id: str,
        messages: Sequence[M],
        *,
        user_id: str | None = None,
        agent: str = DEFAULT_AGENT,
        signals: Collection[str] = (),
        trace_id: str | None = None,
    ) -> None:
        """Queue a conversation and restart the debounce timer.

        Raises:
            QueueFullError: the queue is full and this is a new item without signals.
            QueueClosedError: the queue was shut down.
        """
        key = QueueKey(thread_id, user_id, agent)
        self._admit(key, messages, signals, trace_id, delay=self._debounce)

    def add_nowait(
        self,
        thread_id: str,
        messages: Sequence[M],
        *,
        user_id: str | None = None,
        agent: str = DEFAULT_AGENT,
        signals: Collection[str] = (),
        trace_id: str | None = None,
    ) -> None:
        """Queue an emergency extraction and process the queue now.

        For a host about to summarise these messages away: they are fed
        whole (the watermark is neither applied nor moved), kept apart from
        the thread's ordinary item, and always admitted.

        Raises:
            QueueClosedError: the queue was shut down.
        """
        key = QueueKey(thread_id, user_id, agent, emergency=True)
        self._admit(key, messages, signals, trace_id, delay=0.0)

    def flush_nowait(self) -> None:
        """Process the queue now instead of when the debounce expires; returns at once."""
        with self._lock:
            if not self._closed and not self._draining:
                self._schedule(0.0)

    def _admit(
        self,
        key: QueueKey,
        messages: Sequence[M],
        signals: Collection[str],
        trace_id: str | None,
        *,
        delay: float,
    ) -> None:
        with self._lock:
            if self._closed:
                raise QueueClosedError(key.thread_id)
            previous = self._pending.get(key)
            if previous is None:
                free = not self._max_depth or len(self._pending) < self._max_depth
                if not (free or signals or key.emergency):
                    self._stats = replace(self._stats, refused=self._stats.refused + 1)
                    raise QueueFullError(key.thread_id, self._max_depth)
                merged_signals = frozenset(signals)
                self._stats = replace(self._stats, admitted=self._stats.admitted + 1)
            else:
                merged_signals = previous.signals | frozenset(signals)
                self._stats = replace(self._stats, merged=self._stats.merged + 1)
            self._pending[key] = QueueItem(key, tuple(messages), merged_signals, trace_id)
            if not self._draining:
                self._schedule(delay)

    # --- state -------------------------------------------------------------------

    @property
    def depth(self) -> int:
        """Items waiting (not counting one being processed)."""
        with self._lock:
            return len(self._pending)

    def pending_keys(self) -> tuple[QueueKey, ...]:
        with self._lock:
            return tuple(self._pending)

    def pending_item(self, key: QueueKey) -> QueueItem[M] | None:
        with self._lock:
            return self._pending.get(key)

    @property
    def stats(self) -> QueueStats:
        with self._lock:
            return self._stats

    @property
    def closed(self) -> bool:
        with self._lock:
            return self._closed

    # --- processing --------------------------------------------------------------

    def _schedule(self, delay: float) -> None:
        """Restart the one debounce timer (the caller holds ``_lock``)."""
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self._timer_factory(delay, self._on_timer)
        self._timer.start()

    def _on_timer(self) -> None:
        with self._lock:
            self._timer = None
            if self._draining or self._closed:
                return  # the drain processes what is queued
        self._run()

    def _run(self) -> None:
        """Process what is queued now; if a run is already going, ask it to run again."""
        if not self._worker.acquire(blocking=False):
            with self._lock:
                self._rerun = True
            return
        try:
            self._process_batch(self._take_batch(), pause=True)
        finally:
            with self._lock:
                again = self._rerun and bool(self._pending) and not self._draining
                self._rerun = False
                if again and not self._closed:
                    self._schedule(0.0)
            self._worker.release()

    def _take_batch(self) -> list[QueueItem[M]]:
        with self._lock:
            batch = list(self._pending.values())
            self._pending.clear()
            self._taken.extend(item.key for item in batch)
            return batch

    def _process_batch(self, batch: list[QueueItem[M]], *, pause: bool) -> None:
        for position, item in enumerate(batch):
            try:
                if pause and position and self._item_delay:
                    self._sleep(self._item_delay)
                self._process_one(item)
            except BaseException:
                # Interpreter shutdown or a signal: what was not attempted goes
                # back to the queue, so a later flush still sees it.
                self._requeue(batch[position + 1 :])
                raise
            finally:
                with self._lock:
                    self._taken.remove(item.key)

    def _requeue(self, items: list[QueueItem[M]]) -> None:
        with self._lock:
            for item in items:
                self._taken.remove(item.key)
                newer = self._pending.get(item.key)
                if newer is None:
                    self._pending[item.key] = item
                else:
                    self._pending[item.key] = replace(newer, signals=newer.signals | item.signals)

    def _process_one(self, item: QueueItem[M]) -> None:
        key = item.key
        if key.emergency:
            feed = item.messages
        else:
            feed = self.watermark.unseen(key.watermark_key, item.messages)
        if not feed:
            self._record(key, ok=True, nothing_new=True)
            return
        try:
            ok = bool(self._process(replace(item, messages=feed)))
        except Exception as error:  # the processor is foreign code: isolate its failure
            # The error's type only: its message may quote what the user said.
            _log.error(
                "memory update failed for thread %r (user %r, agent %r): %s",
                key.thread_id,
                key.user_id,
                key.agent,
                type(error).__name__,
            )
            ok = False
        if ok and not key.emergency:
            self.watermark.advance(key.watermark_key, item.messages)
        self._record(key, ok=ok)

    def _record(self, key: QueueKey, *, ok: bool, nothing_new: bool = False) -> None:
        with self._lock:
            stats = self._stats
            if nothing_new:
                stats = replace(stats, nothing_new=stats.nothing_new + 1)
            elif ok:
                stats = replace(stats, processed=stats.processed + 1)
            else:
                stats = replace(stats, failed=stats.failed + 1)
            self._stats = stats
            if self._flush is not None:
                if ok:
                    self._flush.processed += 1
                else:
                    self._flush.failed.append(key)

    # --- flushing ----------------------------------------------------------------

    def flush(self, timeout: float) -> FlushReport:
        """Process everything queued now, within ``timeout`` seconds.

        Waits for a run in progress, then drains the queue on a daemon
        thread without pauses between items. Returns when the queue is
        empty or the budget is spent; what was not processed by then is
        listed in the report (a drain still running continues in the
        background).
        """
        deadline = self._clock() + max(timeout, 0.0)
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            self._draining = True
            self._flush = record = _Flush()
        try:
            if not self._worker.acquire(timeout=max(deadline - self._clock(), 0.0)):
                return self._report(record, completed=False)
            drain = threading.Thread(target=self._drain, name="deermem-update-drain", daemon=True)
            drain.start()  # the drain releases the worker lock when it is done
            drain.join(max(deadline - self._clock(), 0.0))
            return self._report(record, completed=not drain.is_alive())
        finally:
            with self._lock:
                self._draining = False
                self._flush = None
                if self._pending and not self._closed:
                    self._schedule(self._debounce)

    def shutdown(self, timeout: float) -> FlushReport:
        """Stop taking conversations and flush what is queued (see :meth:`flush`)."""
        with self._lock:
            self._closed = True
        return self.flush(timeout)

    def _drain(self) -> None:
        try:
            while True:
                batch = self._take_batch()
                if not batch:
                    return
                self._process_batch(batch, pause=False)
        finally:
            self._worker.release()

    def _report(self, record: _Flush, *, completed: bool) -> FlushReport:
        with self._lock:
            left = self._taken + list(self._pending)
            return FlushReport(
                completed=completed and not left,
                processed=record.processed,
                failed=tuple(record.failed),
                unflushed=tuple(left),
            )
