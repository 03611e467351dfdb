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
* Before extraction the marks (:class:`Marks`, the store's) cut away what was
  already extracted; an item with nothing new is done without a model call.
* The processing function is injected (the wiring passes the real update).
  It returns whether it succeeded; an exception counts as a failure and is
  logged with the ids and the error's type only (its message might quote
  the conversation), so one bad conversation cannot stop the worker.
* :meth:`UpdateQueue.shutdown` stops intake and drains within a time
  budget, and reports every item it could not process — nothing admitted
  disappears without a trace. At the budget's end the queue stops: nothing
  more is started, and the item being processed then commits nothing —
  its processor asks :meth:`UpdateQueue.commit_permit` before it commits,
  and a stopped queue refuses — unless its commit had begun, which the
  report then waits for. So what the report lists as not processed was not
  applied, and nothing is applied after it. The owner's ``then`` (releasing
  the model) runs once no item can use it.

Timers and the clock are injected, so tests drive the debounce by hand;
the defaults are real threads.

**The watermark** — how far each conversation has already been extracted.
An agent hands over the whole conversation after every turn. Extracting all
of it each time would bill the model for the same turns again and again,
offer it the same facts to re-add — and let the same "yes, exactly" confirm
a fact twice. So for each ``(thread, user, agent)`` the store keeps the mark
of the last message of the last *successful* extraction, written by the very
commit that applied it (so a new process never extracts, or confirms, an
applied conversation again), and only the messages after it are fed next time.

* The mark names a position (:func:`conversation_mark`): a digest of the
  conversation's prefix up to the last message extracted, each message
  counted by a digest of its id when it has one, else of its role and text —
  no conversation text is kept. A short reply said twice ("Noted.") is two
  positions with two different prefixes, so the mark never moves back to the
  first one.
* If no prefix matches (the conversation was cut at the front or rewritten),
  the first message *with an id* whose digest is the marked message's own
  counts (that digest alone is the older form of a mark, written before
  marks named a position, and still read the same way): an id names one
  message, so the turns before it were fed. A message without an id never
  places a mark this way — once the marked message is cut away, a newer
  turn may say the same words ("Done.") — so then the whole conversation is
  fed again: re-extracting may feed a turn twice (duplicates are dropped),
  skipping would lose it.
* The mark moves only with a successful extraction's commit; a failed one
  leaves it, so those messages are fed again next time. That commit re-reads
  the mark under the user's lock and applies nothing if another update moved
  it meanwhile (see :class:`deermem.learning.Learner`): concurrent updates of
  one conversation — two threads, two processes — never apply it twice.
* Emergency extractions (a host flushing a conversation it is about to
  summarise away) run at once, but like any other: only what follows the mark
  is fed, and the mark moves with their commit.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Generic, Protocol, TypeVar

from deermem.errors import QueueClosedError, QueueFullError
from deermem.model import DEFAULT_AGENT, FlushReport, QueueKey, WatermarkKey

__all__ = [
    "DEFAULT_AGENT",
    "FlushReport",
    "Marks",
    "Processor",
    "QueueItem",
    "QueueKey",
    "QueueStats",
    "QueueStopped",
    "UpdateQueue",
    "WatermarkKey",
    "conversation_mark",
    "mark_of",
    "messages_after",
]

_log = logging.getLogger(__name__)


class QueueStopped(Exception):
    """A shutdown stopped the queue before the item being processed began to commit.

    Raised by :meth:`UpdateQueue.commit_permit` into the processor, which lets it
    pass (nothing is written); the item goes back to the queue's pending items, as
    the shutdown's report listed it.
    """


# --- marks ------------------------------------------------------------------------------


class Identifiable(Protocol):
    """What the queue needs of a message (``ConversationTurn`` and
    ``deermem.learning.messages.Message`` both have it)."""

    @property
    def role(self) -> str: ...

    @property
    def text(self) -> str: ...

    @property
    def id(self) -> str | None: ...


M = TypeVar("M", bound=Identifiable)


def mark_of(message: Identifiable) -> str:
    """The digest of one message: of its id, else of its role and text.

    On its own it is the mark's *old form* (marks written before the mark
    named a position; still read, see :func:`messages_after`).
    """
    identity = f"id\x1f{message.id}" if message.id else f"text\x1f{message.role}\x1f{message.text}"
    return hashlib.sha256(identity.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _chain(previous: str, message: Identifiable) -> str:
    """The digest of a conversation's prefix: the previous prefix's, then this message's."""
    link = f"{previous}\x1e{mark_of(message)}"
    return hashlib.sha256(link.encode("ascii")).hexdigest()[:32]


def conversation_mark(messages: Sequence[Identifiable]) -> str:
    """The mark of a conversation's end: ``<prefix digest>.<last message's digest>``.

    The prefix digest chains every message up to the last one, so it names
    one position of one conversation unambiguously: a reply said twice
    ("Noted.") has two different prefixes. The last message's own digest
    is kept beside it for conversations whose front was cut or rewritten
    (see :func:`messages_after`).

    Raises:
        ValueError: ``messages`` is empty (there is no end to mark).
    """
    if not messages:
        raise ValueError("an empty conversation has no mark")
    prefix = ""
    for message in messages:
        prefix = _chain(prefix, message)
    return f"{prefix}.{mark_of(messages[-1])}"


def messages_after(messages: Sequence[M], mark: str | None) -> tuple[M, ...]:
    """The messages after the marked one; all of them when none is found.

    * A mark of the current form (:func:`conversation_mark`) is found where
      the conversation's prefix digest equals it — one position at most.
    * When no prefix matches (the conversation was cut or rewritten), and for
      a mark of the old form (one message's digest), the first message with
      an id and that digest counts: an id is one message's, so what precedes
      it was fed. The digest of a message without an id is its role and
      text, which a newer turn may repeat after the marked one was cut away
      ("Done."), so such a message places nothing and everything is fed: a
      turn may be fed twice, never zero times.
    """
    if mark is None:
        return tuple(messages)
    prefix_mark, _, last = mark.rpartition(".")
    if prefix_mark:
        prefix = ""
        for position, message in enumerate(messages):
            prefix = _chain(prefix, message)
            if prefix == prefix_mark:
                return tuple(messages[position + 1 :])
    for position, message in enumerate(messages):
        if message.id and mark_of(message) == last:
            return tuple(messages[position + 1 :])
    return tuple(messages)


class Marks(Protocol):
    """Where a queue finds the marks (the processing function moves them)."""

    def unseen(self, key: WatermarkKey, messages: Sequence[M]) -> tuple[M, ...]:
        """The messages after the conversation's mark."""
        ...


# --- items ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class QueueItem(Generic[M]):
    """A queued conversation.

    When processed, ``messages`` holds only what is new and ``conversation``
    the whole conversation as queued: the mark names a position in the whole
    (:func:`conversation_mark`), so the processing function needs both.
    ``conversation`` is empty while the item waits (``messages`` is whole then).
    """

    key: QueueKey
    messages: tuple[M, ...]
    signals: frozenset[str] = frozenset()
    trace_id: str | None = None
    conversation: tuple[M, ...] = ()


Processor = Callable[[QueueItem[M]], bool]
"""Runs one extraction; returns whether it succeeded."""


class TimerHandle(Protocol):
    """A one-shot timer (``threading.Timer`` is one)."""

    def start(self) -> None: ...

    def cancel(self) -> None: ...


TimerFactory = Callable[[float, Callable[[], None]], TimerHandle]


def thread_timer(delay: float, callback: Callable[[], None]) -> TimerHandle:
    """A daemon ``threading.Timer``: a pending debounce never keeps a process alive."""
    timer = threading.Timer(delay, callback)
    timer.daemon = True
    return timer


@dataclass(frozen=True, slots=True)
class QueueStats:
    """Counters since the queue was created."""

    admitted: int = 0
    merged: int = 0
    refused: int = 0
    processed: int = 0
    failed: int = 0
    nothing_new: int = 0


# --- the queue --------------------------------------------------------------------------


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
        watermark: the extraction marks (a store's); without them every
            conversation is fed whole.
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
        self.watermark = watermark
        self._item_delay = item_delay_seconds
        self._timer_factory = timer_factory
        self._sleep = sleep
        self._clock = clock
        self._lock = threading.Lock()
        self._worker = threading.Lock()  # held while items are processed
        self._pending: dict[QueueKey, QueueItem[M]] = {}
        self._taken: list[QueueKey] = []  # taken for processing, not finished yet
        # Taken items of an erased user, skipped when their turn comes; and the item being
        # processed now, which an erasure waits for (``_idle`` is told when it ends).
        self._dropped: set[QueueKey] = set()
        self._current: QueueKey | None = None
        self._idle = threading.Condition(self._lock)
        self._timer: TimerHandle | None = None
        self._rerun = False
        self._draining = False
        self._closed = False
        # Set when a shutdown's budget ends: no item starts after it (the one being
        # processed finishes), and ``_after_stop`` runs once none is being processed.
        self._stopped = False
        self._after_stop: Callable[[], None] | None = None
        # The item being processed holds the commit permit; ``_applied`` once its commit
        # is through, until the item ends. A shutdown's report waits for both to clear.
        self._committing = False
        self._applied = False
        self._flush: _Flush | None = None
        self._stats = QueueStats()

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

        For a host about to summarise these messages away: kept apart from
        the thread's ordinary item and always admitted. Like any item, only
        what follows the conversation's mark is fed (a conversation already
        extracted is not extracted, nor confirmed, again).

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

    def drop_user(self, user_id: str) -> int:
        """Forget every waiting conversation of a user (its erasure); return how many.

        Waiting includes the items a run has already taken but not reached: they are
        skipped when their turn comes. If one of the user's items is being processed,
        this returns once it has ended, so nothing queued before writes afterwards.
        """
        with self._lock:
            keys = [key for key in self._pending if key.user_id == user_id]
            for key in keys:
                del self._pending[key]
            taken = {k for k in self._taken if k.user_id == user_id and k != self._current}
            self._dropped |= taken
            while self._current is not None and self._current.user_id == user_id:
                self._idle.wait()
            return len(keys) + len(taken)

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
            if self._stopped:
                return []
            batch = list(self._pending.values())
            self._pending.clear()
            self._taken.extend(item.key for item in batch)
            return batch

    def _process_batch(self, batch: list[QueueItem[M]], *, pause: bool) -> None:
        for position, item in enumerate(batch):
            try:
                if pause and position and self._item_delay:
                    self._sleep(self._item_delay)
                with self._lock:
                    if self._stopped:  # a shutdown's budget ended: nothing more starts
                        self._requeue_locked(batch[position:])
                        return
                    if item.key in self._dropped:  # its user was erased meanwhile
                        self._dropped.discard(item.key)
                        self._taken.remove(item.key)
                        continue
                    self._current = item.key
            except BaseException:
                self._requeue(batch[position:])
                raise
            stopped = False
            try:
                stopped = self._process_one(item)
            except BaseException:
                # Interpreter shutdown or a signal: what was not attempted goes
                # back to the queue, so a later flush still sees it.
                self._requeue(batch[position + 1 :])
                raise
            finally:
                self._finished(item, stopped=stopped)

    def _finished(self, item: QueueItem[M], *, stopped: bool) -> None:
        """End the item being processed (back to the pending items if a shutdown stopped
        it before its commit); after a shutdown stopped the queue, run its ``then``."""
        with self._lock:
            if stopped:
                self._requeue_locked([item])
            else:
                self._taken.remove(item.key)
            self._current = None
            self._applied = False
            self._idle.notify_all()
            after_stop, self._after_stop = self._after_stop, None
        if after_stop is not None:  # set only once stopped: no item starts after this one
            after_stop()

    def _requeue(self, items: list[QueueItem[M]]) -> None:
        with self._lock:
            self._requeue_locked(items)

    def _requeue_locked(self, items: list[QueueItem[M]]) -> None:
        """Put taken items back in the queue (the caller holds ``_lock``)."""
        for item in items:
            self._taken.remove(item.key)
            if item.key in self._dropped:
                self._dropped.discard(item.key)
                continue
            newer = self._pending.get(item.key)
            if newer is None:
                self._pending[item.key] = item
            else:
                self._pending[item.key] = replace(newer, signals=newer.signals | item.signals)

    def _process_one(self, item: QueueItem[M]) -> bool:
        """Process one item; return whether a shutdown stopped it before its commit."""
        key = item.key
        # Emergency items too: the mark says what was applied, whoever applied it.
        if self.watermark is None:
            feed = item.messages
        else:
            feed = self.watermark.unseen(key.watermark_key, item.messages)
        if not feed:
            self._record(key, ok=True, nothing_new=True)
            return False
        try:
            ok = bool(self._process(replace(item, messages=feed, conversation=item.messages)))
        except QueueStopped:
            return True
        except Exception as error:  # the processor is foreign code: isolate its failure
            # The error's type only: its message may quote what the user said. No user
            # id: the log outlives an erased user.
            _log.error(
                "memory update failed for thread %r (agent %r): %s",
                key.thread_id,
                key.agent,
                type(error).__name__,
            )
            ok = False
        self._record(key, ok=ok)
        return False

    @contextmanager
    def commit_permit(self) -> Iterator[None]:
        """Hold while the item being processed commits (the processor's part).

        Once a shutdown has stopped the queue, no commit begins: this raises
        :class:`QueueStopped`, which the processor lets through. A commit
        that began before is waited for by the shutdown, which then reports
        its item as processed. So a report never lists as not processed an
        update that is applied, and nothing is applied after it.

        Raises:
            QueueStopped: a shutdown's budget ended before this commit began.
        """
        with self._lock:
            if self._stopped:
                raise QueueStopped
            self._committing = True
        applied = False
        try:
            yield
            applied = True
        finally:
            with self._lock:
                self._committing = False
                self._applied = applied
                self._idle.notify_all()

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
        return self._flush_within(timeout, stop=False, then=None)

    def shutdown(self, timeout: float, *, then: Callable[[], None] | None = None) -> FlushReport:
        """Stop taking conversations, flush what is queued (see :meth:`flush`), then stop.

        When the budget is spent the queue stops: no other item starts — not
        by the drain, not by a run the debounce began — and the item being
        processed (if any) commits nothing unless its commit had begun
        (:meth:`commit_permit`; that commit is waited for, and its item
        counted as processed). Every item not processed is listed in the
        report's ``unflushed`` (still queued, or the one still running, which
        goes back to the queue). So nothing is applied after this returns.
        ``then`` (the owner releasing what the processing uses) runs once no
        item is being processed: before this returns, or when that item ends.
        """
        with self._lock:
            self._closed = True
        return self._flush_within(timeout, stop=True, then=then)

    def _flush_within(
        self, timeout: float, *, stop: bool, then: Callable[[], None] | None
    ) -> FlushReport:
        deadline = self._clock() + max(timeout, 0.0)
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            self._draining = True
            self._flush = record = _Flush()
        at_once = None
        try:
            drained = False
            if self._worker.acquire(timeout=max(deadline - self._clock(), 0.0)):
                drain = threading.Thread(
                    target=self._drain, name="deermem-update-drain", daemon=True
                )
                drain.start()  # the drain releases the worker lock when it is done
                drain.join(max(deadline - self._clock(), 0.0))
                drained = not drain.is_alive()
            if stop:
                at_once = self._stop(then)
            # Once stopped, nothing is processed any more: complete iff nothing is left.
            return self._report(record, completed=drained or stop)
        finally:
            with self._lock:
                self._draining = False
                self._flush = None
                if self._pending and not self._closed:
                    self._schedule(self._debounce)
            if at_once is not None:
                at_once()

    def _stop(self, then: Callable[[], None] | None) -> Callable[[], None] | None:
        """Let no item start or begin to commit from now on, wait for a commit under way
        (and its item's end); ``then`` if it can run now, else leave it to the item
        being processed (:meth:`_finished`)."""
        with self._lock:
            self._stopped = True
            # A commit under way holds no lock of the queue's and ends on its own; its
            # item then ends without asking the model again (the answer is applied).
            while self._committing or self._applied:
                self._idle.wait()
            if self._current is None:
                return then
            self._after_stop = then
            return None

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
