"""The update queue and the watermark (catalogue: test_memory_queue.py,
test_memory_queue_user_isolation.py, test_updater_watermark.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from deermem import QueueFullError
from deermem.errors import QueueClosedError
from deermem.learning.learner import StoredMarks
from deermem.learning.prompt import ConversationTurn
from deermem.learning.queue import (
    FlushReport,
    QueueItem,
    QueueKey,
    UpdateQueue,
    conversation_mark,
    mark_of,
    messages_after,
)
from deermem.model import Scope
from deermem.store import ChangeSet, MarkdownStore

Turn = ConversationTurn
NOW = datetime(2026, 8, 13, 12, 0, tzinfo=UTC)


def turns(*texts: str) -> list[Turn]:
    return [Turn("human" if i % 2 == 0 else "ai", text) for i, text in enumerate(texts)]


class ManualTimer:
    def __init__(self, delay: float, callback: Callable[[], None]) -> None:
        self.delay = delay
        self.callback = callback
        self.started = self.cancelled = self.fired = False

    def start(self) -> None:
        self.started = True

    def cancel(self) -> None:
        self.cancelled = True

    def fire(self) -> None:
        assert self.started
        assert not self.cancelled
        assert not self.fired
        self.fired = True
        self.callback()


class ManualTimers:
    """A timer factory whose timers fire only when the test says so."""

    def __init__(self) -> None:
        self.made: list[ManualTimer] = []

    def __call__(self, delay: float, callback: Callable[[], None]) -> ManualTimer:
        timer = ManualTimer(delay, callback)
        self.made.append(timer)
        return timer

    @property
    def live(self) -> list[ManualTimer]:
        return [t for t in self.made if t.started and not t.cancelled and not t.fired]

    def fire(self) -> None:
        (timer,) = self.live
        timer.fire()


class Recorder:
    """The processing function: records each item, answers with ``result``."""

    def __init__(self, result: bool = True) -> None:
        self.items: list[QueueItem[Turn]] = []
        self.result = result
        self.during: Callable[[QueueItem[Turn]], None] | None = None

    def __call__(self, item: QueueItem[Turn]) -> bool:
        self.items.append(item)
        if self.during is not None:
            self.during(item)
        return self.result

    def texts(self) -> list[list[str]]:
        return [[m.text for m in item.messages] for item in self.items]


def make_queue(
    recorder: Recorder, **options: object
) -> tuple[UpdateQueue[Turn], ManualTimers, list[float]]:
    timers = ManualTimers()
    sleeps: list[float] = []
    queue: UpdateQueue[Turn] = UpdateQueue(
        recorder,
        timer_factory=timers,
        sleep=sleeps.append,
        **options,  # type: ignore[arg-type]
    )
    return queue, timers, sleeps


# --- merging and forwarding ---------------------------------------------------------------


@pytest.mark.parametrize("signal", ["correction", "reinforcement"])
def test_a_newer_conversation_keeps_an_earlier_signal(signal: str) -> None:
    queue, _, _ = make_queue(Recorder())
    queue.add("t1", turns("No, use uv", "ok"), signals={signal})
    queue.add("t1", turns("No, use uv", "ok", "thanks", "sure"))
    (key,) = queue.pending_keys()
    item = queue.pending_item(key)
    assert item is not None
    assert [m.text for m in item.messages] == ["No, use uv", "ok", "thanks", "sure"]
    assert item.signals == {signal}
    assert queue.stats.merged == 1


@pytest.mark.parametrize("signal", ["correction", "reinforcement"])
def test_processing_forwards_everything_the_update_needs(signal: str) -> None:
    recorder = Recorder()
    queue, timers, _ = make_queue(recorder)
    queue.add("t1", turns("Exactly right", "great"), signals={signal})
    timers.fire()
    (item,) = recorder.items
    assert item.key == QueueKey("t1", None, "__default__", emergency=False)
    assert item.signals == {signal}
    assert item.trace_id is None
    assert [m.text for m in item.messages] == ["Exactly right", "great"]


def test_the_trace_id_and_user_are_forwarded() -> None:
    recorder = Recorder()
    queue, timers, _ = make_queue(recorder)
    queue.add("t1", turns("a"), user_id="alice", agent="coder", trace_id="trace-7")
    timers.fire()
    (item,) = recorder.items
    assert (item.key.user_id, item.key.agent, item.trace_id) == ("alice", "coder", "trace-7")


def test_every_add_restarts_the_one_debounce_timer() -> None:
    queue, timers, _ = make_queue(Recorder(), debounce_seconds=30)
    queue.add("t1", turns("a"))
    queue.add("t2", turns("b"))
    assert len(timers.made) == 2
    assert timers.made[0].cancelled
    assert [t.delay for t in timers.live] == [30]


def test_flush_nowait_replaces_the_timer_with_an_immediate_one() -> None:
    recorder = Recorder()
    queue, timers, _ = make_queue(recorder)
    queue.add("t1", turns("a"))
    started = time.monotonic()
    queue.flush_nowait()
    assert time.monotonic() - started < 1  # does not wait for the processing
    first, second = timers.made
    assert first.cancelled
    assert second.delay == 0
    assert recorder.items == []
    timers.fire()
    assert len(recorder.items) == 1


def test_add_nowait_queues_an_emergency_item_and_fires_at_once() -> None:
    queue, timers, _ = make_queue(Recorder())
    queue.add("t1", turns("a"), agent="coder")
    queue.add_nowait("t1", turns("a", "b"), agent="coder")
    assert timers.made[0].cancelled
    assert timers.live[0].delay == 0
    assert set(queue.pending_keys()) == {
        QueueKey("t1", None, "coder"),
        QueueKey("t1", None, "coder", emergency=True),
    }


# --- keys --------------------------------------------------------------------------------


def test_different_agents_in_one_thread_are_separate_items_and_updates() -> None:
    recorder = Recorder()
    queue, timers, _ = make_queue(recorder)
    queue.add("t1", turns("a"), agent="coder")
    queue.add("t1", turns("b"), agent="writer")
    queue.add("t1", turns("c"), agent="coder")
    assert queue.depth == 2
    timers.fire()
    assert sorted((i.key.agent, i.messages[0].text) for i in recorder.items) == [
        ("coder", "c"),
        ("writer", "b"),
    ]


def test_different_users_in_one_thread_and_agent_are_separate_items() -> None:
    queue, _, _ = make_queue(Recorder())
    queue.add("t1", turns("a"), user_id="alice")
    queue.add("t1", turns("b"), user_id="bob")
    queue.add("t1", turns("c"), user_id="alice")
    queue.add_nowait("t1", turns("d"), user_id="alice")
    queue.add_nowait("t1", turns("e"), user_id="bob")
    users = sorted((k.user_id or "", k.emergency) for k in queue.pending_keys())
    assert users == [("alice", False), ("alice", True), ("bob", False), ("bob", True)]
    item = queue.pending_item(QueueKey("t1", "alice", "__default__"))
    assert item is not None
    assert item.messages[0].text == "c"


# --- the worker ------------------------------------------------------------------------------


def test_a_timer_firing_during_a_run_asks_for_one_more_run() -> None:
    recorder = Recorder()
    queue, timers, _ = make_queue(recorder)

    def arrive_mid_run(item: QueueItem[Turn]) -> None:
        if item.key.thread_id == "t1":
            queue.add("t2", turns("later"))
            timers.fire()  # the debounce expires while t1 is being processed

    recorder.during = arrive_mid_run
    queue.add("t1", turns("first"))
    timers.fire()
    assert [i.key.thread_id for i in recorder.items] == ["t1"]
    (follow_up,) = timers.live  # exactly one, immediate
    assert follow_up.delay == 0
    follow_up.fire()
    assert [i.key.thread_id for i in recorder.items] == ["t1", "t2"]
    assert timers.live == []


def test_no_follow_up_run_when_nothing_is_left() -> None:
    recorder = Recorder()
    queue, timers, _ = make_queue(recorder)

    def fire_again(item: QueueItem[Turn]) -> None:
        queue.flush_nowait()
        timers.fire()  # the timer fires mid-run, but nothing else is queued

    recorder.during = fire_again
    queue.add("t1", turns("a"))
    timers.fire()
    assert timers.live == []


def test_items_of_a_run_are_spaced_out_but_a_drain_is_not() -> None:
    recorder = Recorder()
    queue, timers, sleeps = make_queue(recorder, item_delay_seconds=0.5)
    queue.add("t1", turns("a"))
    queue.add("t2", turns("b"))
    queue.add("t3", turns("c"))
    timers.fire()
    assert sleeps == [0.5, 0.5]
    queue.add("t4", turns("d"))
    queue.add("t5", turns("e"))
    report = queue.flush(timeout=5)
    assert report.ok
    assert report.processed == 2
    assert sleeps == [0.5, 0.5]


def test_a_failing_update_is_isolated_counted_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    recorder = Recorder()

    def explode(item: QueueItem[Turn]) -> None:
        if item.key.thread_id == "bad":
            raise RuntimeError("could not store: secret text the log must not hold")

    recorder.during = explode
    queue, timers, _ = make_queue(recorder)
    queue.add("bad", turns("secret text the log must not hold"))
    queue.add("good", turns("b"))
    timers.fire()
    assert [i.key.thread_id for i in recorder.items] == ["bad", "good"]
    assert queue.stats.failed == 1
    assert queue.stats.processed == 1
    assert "'bad'" in caplog.text
    assert "RuntimeError" in caplog.text
    assert "secret text" not in caplog.text


# --- depth -------------------------------------------------------------------------------------


def test_a_full_queue_refuses_plain_items_only() -> None:
    queue, _, _ = make_queue(Recorder(), max_depth=2)
    queue.add("t1", turns("a"))
    queue.add("t2", turns("b"))
    with pytest.raises(QueueFullError) as caught:
        queue.add("t3", turns("c"))
    assert (caught.value.thread_id, caught.value.max_depth) == ("t3", 2)
    queue.add("t1", turns("a", "more"))  # an existing item may still be replaced
    queue.add("t4", turns("No, that's wrong"), signals={"correction"})
    queue.add_nowait("t5", turns("flush me"))
    assert queue.depth == 4
    assert queue.stats.refused == 1


def test_a_depth_of_zero_is_unlimited() -> None:
    queue, _, _ = make_queue(Recorder(), max_depth=0)
    for index in range(50):
        queue.add(f"t{index}", turns("x"))
    assert queue.depth == 50


# --- flushing ------------------------------------------------------------------------------------


def test_flushing_an_idle_queue_is_complete() -> None:
    queue, _, _ = make_queue(Recorder())
    report = queue.flush(timeout=1)
    assert report.ok
    assert report.processed == 0


def test_flushing_drains_what_is_queued() -> None:
    recorder = Recorder()
    queue, timers, _ = make_queue(recorder)
    queue.add("t1", turns("a"))
    queue.add("t2", turns("b"))
    report = queue.flush(timeout=5)
    assert report.ok
    assert report.processed == 2
    assert queue.depth == 0
    assert timers.live == []


def test_a_failed_item_is_reported_by_the_flush() -> None:
    queue, _, _ = make_queue(Recorder(result=False))
    queue.add("t1", turns("a"))
    report = queue.flush(timeout=5)
    assert report.completed
    assert not report.ok
    assert report.failed == (QueueKey("t1", None, "__default__"),)


def test_a_flush_that_runs_out_of_time_says_what_is_left() -> None:
    release = threading.Event()
    recorder = Recorder()

    def block(item: QueueItem[Turn]) -> None:
        release.wait(10)

    recorder.during = block
    queue, _, _ = make_queue(recorder)
    queue.add("slow", turns("a"))
    queue.add("next", turns("b"))
    started = time.monotonic()
    report = queue.flush(timeout=0.2)
    assert time.monotonic() - started < 2
    assert not report.completed
    assert {k.thread_id for k in report.unflushed} == {"slow", "next"}
    release.set()


def test_a_flush_waits_for_a_run_in_progress() -> None:
    release = threading.Event()
    entered = threading.Event()
    recorder = Recorder()

    def slow(item: QueueItem[Turn]) -> None:
        entered.set()
        release.wait(10)

    recorder.during = slow
    queue, timers, _ = make_queue(recorder)
    queue.add("busy", turns("a"))
    worker = threading.Thread(target=timers.fire)
    worker.start()
    assert entered.wait(5)
    queue.add("queued", turns("b"))
    report = queue.flush(timeout=0.2)  # the run does not finish in time
    assert not report.completed
    assert report.unflushed[0] == QueueKey("busy", None, "__default__")
    threading.Timer(0.1, release.set).start()
    report = queue.flush(timeout=5)  # now it does, and the queued item is drained
    worker.join(5)
    assert report.ok
    assert [i.key.thread_id for i in recorder.items] == ["busy", "queued"]


def test_a_shutdown_out_of_time_finishes_the_running_item_and_starts_no_other() -> None:
    release = threading.Event()
    recorder = Recorder()

    def slow_first(item: QueueItem[Turn]) -> None:
        if item.key.thread_id == "slow":
            release.wait(10)

    recorder.during = slow_first
    queue, _, _ = make_queue(recorder)
    queue.add("slow", turns("a"))
    queue.add("next", turns("b"))
    stopped = threading.Event()
    report = queue.shutdown(timeout=0.2, then=stopped.set)
    assert not report.completed
    assert {k.thread_id for k in report.unflushed} == {"slow", "next"}
    assert not stopped.is_set()  # the running item still needs what ``then`` releases
    release.set()
    assert stopped.wait(5)
    assert [i.key.thread_id for i in recorder.items] == ["slow"]  # "next" never started
    assert [k.thread_id for k in queue.pending_keys()] == ["next"]
    assert not queue.flush(timeout=0.2).ok  # a stopped queue processes nothing more
    assert len(recorder.items) == 1


def test_a_shutdown_out_of_time_lets_the_running_item_commit_nothing() -> None:
    """The item under way at the deadline (its model call, say) asks for the commit permit
    after the report listed it as not processed: it is refused, commits nothing, and goes
    back to the queue, as the report said."""
    release = threading.Event()
    recorder = Recorder()
    applied: list[str] = []
    queue: UpdateQueue[Turn]

    def answer_then_commit(item: QueueItem[Turn]) -> None:
        release.wait(10)  # the model's answer comes after the deadline
        with queue.commit_permit():
            applied.append(item.key.thread_id)

    recorder.during = answer_then_commit
    queue, _, _ = make_queue(recorder)
    queue.add("slow", turns("a"))
    stopped = threading.Event()
    report = queue.shutdown(timeout=0.2, then=stopped.set)
    assert [k.thread_id for k in report.unflushed] == ["slow"]
    release.set()
    assert stopped.wait(5)
    assert applied == []
    assert [k.thread_id for k in queue.pending_keys()] == ["slow"]
    assert queue.stats.failed == 0
    assert queue.stats.processed == 0


def test_a_shutdown_waits_for_a_commit_under_way_and_counts_it_processed() -> None:
    """A commit that began before the deadline ends before the report is made: the report
    never lists as not processed an update that is applied."""
    committing = threading.Event()
    release = threading.Event()
    recorder = Recorder()
    applied: list[str] = []
    queue: UpdateQueue[Turn]

    def slow_commit(item: QueueItem[Turn]) -> None:
        with queue.commit_permit():
            committing.set()
            release.wait(10)
            applied.append(item.key.thread_id)

    recorder.during = slow_commit
    queue, _, _ = make_queue(recorder)
    queue.add("t1", turns("a"))
    reports: list[FlushReport] = []
    closer = threading.Thread(target=lambda: reports.append(queue.shutdown(timeout=0.2)))
    closer.start()
    assert committing.wait(5)
    time.sleep(0.4)  # past the budget: the shutdown waits for the commit
    assert closer.is_alive()
    release.set()
    closer.join(5)
    (report,) = reports
    assert applied == ["t1"]
    assert report.completed
    assert report.processed == 1
    assert report.unflushed == ()


def test_a_shutdown_stops_a_run_the_debounce_began_after_its_item() -> None:
    release = threading.Event()
    entered = threading.Event()
    recorder = Recorder()

    def slow(item: QueueItem[Turn]) -> None:
        entered.set()
        release.wait(10)

    recorder.during = slow
    queue, timers, _ = make_queue(recorder, item_delay_seconds=0)
    queue.add("busy", turns("a"))
    queue.add("taken", turns("b"))  # in the same run's batch
    worker = threading.Thread(target=timers.fire)
    worker.start()
    assert entered.wait(5)
    stopped = threading.Event()
    report = queue.shutdown(timeout=0.2, then=stopped.set)
    assert {k.thread_id for k in report.unflushed} == {"busy", "taken"}
    release.set()
    worker.join(5)
    assert stopped.is_set()
    assert [i.key.thread_id for i in recorder.items] == ["busy"]


def test_a_shutdown_with_nothing_running_runs_then_before_it_returns() -> None:
    recorder = Recorder()
    queue, _, _ = make_queue(recorder)
    queue.add("t1", turns("a"))
    stopped: list[int] = []
    assert queue.shutdown(timeout=5, then=lambda: stopped.append(len(recorder.items))).ok
    assert stopped == [1]


def test_shutdown_stops_intake_and_flushes() -> None:
    recorder = Recorder()
    queue, _, _ = make_queue(recorder)
    queue.add("t1", turns("a"))
    report = queue.shutdown(timeout=5)
    assert report.ok
    assert len(recorder.items) == 1
    with pytest.raises(QueueClosedError):
        queue.add("t2", turns("b"))
    with pytest.raises(QueueClosedError):
        queue.add_nowait("t2", turns("b"))
    assert queue.closed


# --- the watermark ----------------------------------------------------------------------------
#
# The marks are the store's (what a Memory's queue reads); the processing function
# moves them as the Learner does: with a successful update, emergency or not.


class Marking(Recorder):
    """A processing function that marks what it extracted in the store."""

    def __init__(self, store: MarkdownStore) -> None:
        super().__init__()
        self.store = store

    def __call__(self, item: QueueItem[Turn]) -> bool:
        ok = super().__call__(item)
        key = item.key
        if ok:
            mark = {key.thread_id: conversation_mark(item.conversation)}
            self.store.commit(Scope.of(key.user_id, key.agent), ChangeSet(now=NOW, watermarks=mark))
        return ok


def marking_queue(tmp_path: Path) -> tuple[Marking, UpdateQueue[Turn], ManualTimers]:
    store = MarkdownStore(tmp_path)
    recorder = Marking(store)
    queue, timers, _ = make_queue(recorder, watermark=StoredMarks(store))
    return recorder, queue, timers


def run(
    queue: UpdateQueue[Turn], timers: ManualTimers, thread: str, messages: list[Turn], **kw: str
) -> None:
    queue.add(thread, messages, **kw)
    timers.fire()


def test_an_identical_second_conversation_is_not_extracted_again(tmp_path: Path) -> None:
    recorder, queue, timers = marking_queue(tmp_path)
    conversation = turns("I use uv", "noted")
    run(queue, timers, "t1", conversation)
    run(queue, timers, "t1", conversation)
    assert len(recorder.items) == 1
    assert queue.stats.nothing_new == 1


def test_only_new_turns_are_fed_when_a_conversation_grows(tmp_path: Path) -> None:
    recorder, queue, timers = marking_queue(tmp_path)
    run(queue, timers, "t1", turns("a", "b"))
    run(queue, timers, "t1", turns("a", "b", "c", "d"))
    assert recorder.texts() == [["a", "b"], ["c", "d"]]


def test_marks_are_per_thread_user_and_agent(tmp_path: Path) -> None:
    recorder, queue, timers = marking_queue(tmp_path)
    run(queue, timers, "t1", turns("a", "b"))
    run(queue, timers, "t2", turns("a", "b"))
    run(queue, timers, "t1", turns("a", "b"), user_id="alice")
    run(queue, timers, "t1", turns("a", "b"), agent="coder")
    assert len(recorder.items) == 4


def test_a_conversation_without_the_mark_is_fed_whole(tmp_path: Path) -> None:
    recorder, queue, timers = marking_queue(tmp_path)
    run(queue, timers, "t1", turns("a", "b", "c", "d"))
    run(queue, timers, "t1", turns("x", "y"))  # shorter, and the mark ("d") is gone
    assert recorder.texts()[-1] == ["x", "y"]


def test_turns_after_the_mark_survive_removal_at_the_front(tmp_path: Path) -> None:
    recorder, queue, timers = marking_queue(tmp_path)
    conversation = [Turn("human", t, id=f"m{i}") for i, t in enumerate("abcd")]
    run(queue, timers, "t1", conversation[:2])
    run(queue, timers, "t1", conversation[1:])  # "a" dropped from the front
    assert recorder.texts() == [["a", "b"], ["c", "d"]]


def test_an_emergency_feed_is_what_follows_the_mark(tmp_path: Path) -> None:
    recorder, queue, timers = marking_queue(tmp_path)
    run(queue, timers, "t1", turns("a", "b"))
    queue.add_nowait("t1", turns("a", "b", "c"))
    timers.fire()
    assert recorder.texts()[-1] == ["c"]  # "a" and "b" were extracted already
    queue.add_nowait("t1", turns("a", "b", "c"))
    timers.fire()
    assert len(recorder.items) == 2  # nothing new: the emergency update moved the mark
    assert queue.stats.nothing_new == 1
    run(queue, timers, "t1", turns("a", "b", "c", "d"))
    assert recorder.texts()[-1] == ["d"]


def test_without_marks_every_conversation_is_fed_whole() -> None:
    recorder = Recorder()
    queue, timers, _ = make_queue(recorder)
    run(queue, timers, "t1", turns("a", "b"))
    run(queue, timers, "t1", turns("a", "b", "c"))
    assert recorder.texts() == [["a", "b"], ["a", "b", "c"]]


def test_a_mark_of_the_old_form_is_read_at_the_first_message_with_its_id() -> None:
    # One message's digest: what marks were before they named a position, still in stores.
    said = [Turn("human", text, id=f"m{n}") for n, text in enumerate(["ok", "b", "ok"])]
    assert [m.text for m in messages_after(said, mark_of(said[0]))] == ["b", "ok"]
    assert [m.text for m in messages_after(said[1:], mark_of(said[0]))] == ["b", "ok"]


def test_a_mark_of_the_old_form_without_an_id_feeds_the_whole_conversation() -> None:
    # Its digest is a role and a text, which a newer turn may repeat: no place is safe.
    said = turns("ok", "b", "ok")
    assert messages_after(said, mark_of(Turn("human", "ok"))) == tuple(said)


def test_a_reply_said_twice_is_marked_at_its_own_position() -> None:
    said = turns("I use uv", "Noted.", "yes, exactly", "Noted.")
    grown = [*said, *turns("next", "sure")]
    assert [m.text for m in messages_after(grown, conversation_mark(said))] == ["next", "sure"]
    assert [m.text for m in messages_after(grown, conversation_mark(said[:2]))] == [
        "yes, exactly",
        "Noted.",
        "next",
        "sure",
    ]
    assert messages_after(said, conversation_mark(said)) == ()


def test_a_conversation_cut_at_the_front_is_placed_by_its_marked_message() -> None:
    # No prefix matches once the front is gone: the marked message's own digest places it
    # (its first occurrence: a turn may be fed twice, never lost).
    said = [Turn("human", text, id=f"m{n}") for n, text in enumerate("abcd")]
    assert [m.text for m in messages_after(said[2:], conversation_mark(said[:3]))] == ["d"]
    assert [m.text for m in messages_after(turns("x", "y"), conversation_mark(said))] == [
        "x",
        "y",
    ]


def test_a_conversation_cut_at_the_front_without_ids_is_fed_whole() -> None:
    # The marked "Done." was cut away; the "Done." still there answers a newer turn, which
    # must not be skipped: without ids nothing tells the two apart, so all is fed again.
    said = turns("Let's fix the build.", "Done.")
    later = turns("I indent with tabs.", "Done.", "Now rename the module.", "Renamed.")
    assert messages_after(later, conversation_mark(said)) == tuple(later)
    rewritten = turns("Something else entirely.", "Done.")
    assert messages_after(rewritten, conversation_mark(said)) == tuple(rewritten)


# --- real threads -----------------------------------------------------------------------------


def test_a_real_debounce_merges_a_burst_into_one_update() -> None:
    done = threading.Event()
    recorder = Recorder()
    recorder.during = lambda item: done.set()
    queue: UpdateQueue[Turn] = UpdateQueue(recorder, debounce_seconds=0.05, item_delay_seconds=0)
    queue.add("t1", turns("a"), signals={"correction"})
    queue.add("t1", turns("a", "b", "c"))
    assert done.wait(5)
    time.sleep(0.1)  # a second, wrong update would have started by now
    assert recorder.texts() == [["a", "b", "c"]]
    assert recorder.items[0].signals == {"correction"}
    assert queue.shutdown(timeout=1).ok


def test_an_interrupted_run_puts_unattempted_items_back() -> None:
    recorder = Recorder()

    def interrupt(item: QueueItem[Turn]) -> None:
        if item.key.thread_id == "t1":
            raise KeyboardInterrupt

    recorder.during = interrupt
    queue, timers, _ = make_queue(recorder)
    queue.add("t1", turns("a"))
    queue.add("t2", turns("b"))
    with pytest.raises(KeyboardInterrupt):
        timers.fire()
    assert queue.pending_keys() == (QueueKey("t2", None, "__default__"),)
    recorder.during = None
    assert queue.flush(timeout=5).ok
    assert [i.key.thread_id for i in recorder.items] == ["t1", "t2"]


def test_a_flush_reports_an_update_that_raised() -> None:
    recorder = Recorder()

    def explode(item: QueueItem[Turn]) -> None:
        raise RuntimeError("boom")

    recorder.during = explode
    queue, _, _ = make_queue(recorder)
    queue.add("t1", turns("a"))
    report = queue.flush(timeout=5)
    assert report.completed
    assert not report.ok
    assert report.failed == (QueueKey("t1", None, "__default__"),)
