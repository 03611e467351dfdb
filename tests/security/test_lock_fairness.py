"""Every thread and process that waits for a user's lock gets its turn (issue 20, point 10).

The Markdown store's lock was ``flock`` polled without blocking: a writer
that released the lock and asked again at once had it back before a waiter
polled, so with six processes writing one user four writers and two fresh
reads died of ``StoreLockTimeout`` (five of five writers on a slow disk).
Now threads wait in a line in the process and processes in a line of
tickets beside the lock file (see :mod:`deermem.store.markdown.locks`). These tests
check the order itself (no timing), that a process killed (SIGKILL) or
stopped (SIGSTOP) in line or while holding the lock wedges nobody, and the
six-process workload of ``bench/bench_lock_fairness.py`` on both stores.

The slow disk: every fsync of the Markdown workload's processes waits 20 ms
before it flushes (``bench._fsyncs.slow_fsyncs``). A FUSE file system with
delays would slow more than the flushes, but needs a FUSE library, a mount
and the privilege to make it, none of which CI can count on; the store
flushes while it holds the lock, so slow flushes are what make its holds long.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
from collections.abc import Callable
from multiprocessing.process import BaseProcess
from pathlib import Path

import pytest
from bench.bench_lock_fairness import run

from deermem import StoreLockTimeout
from deermem.store.markdown import locks
from tests.test_memory_queue import wait_for
from tests.test_reliability import append_line


def start(target: Callable[..., None], *args: object) -> BaseProcess:
    """A child process, started; a daemon, so a failing test leaves none behind."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["deermem.store.markdown.locks"])
    process = context.Process(target=target, args=args, daemon=True)
    process.start()
    return process


def take_and_log(lock_path: str, log: str, name: str, timeout: float) -> None:
    """A process that takes the lock in turn, logs that it had it, and lets go."""
    with locks.user_lock(Path(lock_path), timeout):
        append_line(Path(log), name)


def hold_until_killed(lock_path: str, log: str) -> None:
    with locks.user_lock(Path(lock_path), 30):
        append_line(Path(log), "holding")
        threading.Event().wait()


def is_stopped(process: BaseProcess) -> bool:
    # The state field of /proc/PID/stat follows the parenthesised command name.
    stat = Path(f"/proc/{process.pid}/stat").read_text()
    return stat.rpartition(")")[2].split()[0] == "T"


def lines(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def tickets(lock: locks.UserLock) -> list[str]:
    return sorted(path.name for path in lock.queue.iterdir()) if lock.queue.exists() else []


@pytest.fixture
def lock(tmp_path: Path) -> locks.UserLock:
    return locks.user_lock(tmp_path / "users" / "alice" / ".memory.lock", 30)


def test_a_thread_that_asks_again_at_once_goes_behind_the_waiting_one(
    lock: locks.UserLock,
) -> None:
    order: list[str] = []

    def waiter() -> None:
        with lock:
            order.append("waiter")

    with lock:
        thread = threading.Thread(target=waiter)
        thread.start()
        wait_for(lambda: lock._turn.waiting == 1)  # the waiter is in line
    with lock:  # released, and asked again at once
        order.append("owner again")
    thread.join()
    assert order == ["waiter", "owner again"]


def test_a_process_that_asks_again_at_once_goes_behind_the_waiting_one(
    lock: locks.UserLock, tmp_path: Path
) -> None:
    log = tmp_path / "log"
    with lock:
        child = start(take_and_log, str(lock.path), str(log), "waiter", 30)
        wait_for(lambda: len(tickets(lock)) == 1)  # the waiter is in line
    with lock:  # released, and asked again at once
        append_line(log, "owner again")
    child.join(30)
    assert child.exitcode == 0
    assert lines(log) == ["waiter", "owner again"]
    assert tickets(lock) == []  # every ticket is gone with its waiter


def test_many_processes_take_the_lock_in_the_order_they_joined_the_line(
    lock: locks.UserLock, tmp_path: Path
) -> None:
    log = tmp_path / "log"
    children: list[BaseProcess] = []
    with lock:
        for number in range(4):
            children.append(start(take_and_log, str(lock.path), str(log), f"waiter {number}", 30))
            wait_for(lambda: len(tickets(lock)) == len(children))  # in line before the next
    for child in children:
        child.join(30)
        assert child.exitcode == 0
    assert lines(log) == [f"waiter {number}" for number in range(4)]


def test_a_waiter_killed_in_line_holds_up_nobody(lock: locks.UserLock, tmp_path: Path) -> None:
    log = tmp_path / "log"
    with lock:
        doomed = start(take_and_log, str(lock.path), str(log), "doomed", 30)
        wait_for(lambda: len(tickets(lock)) == 1)
        (dead,) = tickets(lock)
        os.kill(doomed.pid, signal.SIGKILL)  # type: ignore[arg-type]
        doomed.join(30)
        assert tickets(lock) == [dead]  # its ticket is left behind, unlocked
        # The next to join the line is first: the dead ticket is cleared away.
        ticket = locks._Ticket.join(lock.queue)
        assert ticket is not None
        assert ticket.first_in_line()
        assert tickets(lock) == [ticket.path.name]
        ticket.leave()
        later = start(take_and_log, str(lock.path), str(log), "later", 30)
        wait_for(lambda: len(tickets(lock)) == 1)
    later.join(30)
    assert later.exitcode == 0
    assert lines(log) == ["later"]
    assert tickets(lock) == []


def test_a_holder_killed_with_a_line_behind_it_passes_the_lock_on(
    lock: locks.UserLock, tmp_path: Path
) -> None:
    log = tmp_path / "log"
    holder = start(hold_until_killed, str(lock.path), str(log))
    wait_for(lambda: lines(log) == ["holding"])
    waiters: list[BaseProcess] = []
    for number in range(2):
        waiters.append(start(take_and_log, str(lock.path), str(log), f"waiter {number}", 30))
        wait_for(lambda: len(tickets(lock)) == len(waiters))
    os.kill(holder.pid, signal.SIGKILL)  # type: ignore[arg-type]
    for waiter in waiters:
        waiter.join(30)
        assert waiter.exitcode == 0
    assert lines(log) == ["holding", "waiter 0", "waiter 1"]
    with lock:  # and the lock is free
        assert tickets(lock) == []


def test_a_process_stopped_first_in_line_makes_nobody_time_out(
    lock: locks.UserLock, tmp_path: Path
) -> None:
    """After half its timeout a waiter tries the lock out of turn, so a process
    stopped (SIGSTOP) at the head of the line delays the others but never fails them."""
    log = tmp_path / "log"
    with lock:
        stopped = start(take_and_log, str(lock.path), str(log), "stopped", 30)
        wait_for(lambda: len(tickets(lock)) == 1)
        os.kill(stopped.pid, signal.SIGSTOP)  # type: ignore[arg-type]
        wait_for(lambda: is_stopped(stopped))  # before the lock is free
    try:
        patient = start(take_and_log, str(lock.path), str(log), "patient", 4)
        patient.join(30)
        assert patient.exitcode == 0  # no StoreLockTimeout
        assert lines(log) == ["patient"]
    finally:
        os.kill(stopped.pid, signal.SIGCONT)  # type: ignore[arg-type]
    stopped.join(30)
    assert stopped.exitcode == 0
    assert lines(log) == ["patient", "stopped"]


def test_a_lock_held_throughout_still_times_out_in_line(lock: locks.UserLock) -> None:
    """Fairness does not wait for ever: a waiter in line times out as before."""
    waiting = locks.UserLock(lock.path, timeout=0.3)  # another "process" (its own object)
    with lock, pytest.raises(StoreLockTimeout, match="could not take the lock"):
        waiting.acquire()
    assert tickets(lock) == []  # the waiter left the line


@pytest.mark.slow
@pytest.mark.parametrize("store", ["markdown", "postgres"])
def test_six_writers_on_one_user_all_get_their_turn(
    store: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Six processes (each opening the store itself) create facts for one user for 12 s
    while three fresh processes read it; on Markdown, on a slow disk. Before issue 20
    most of the writers and some reads died of StoreLockTimeout."""
    if store == "postgres":
        location = request.getfixturevalue("postgres_url")
    else:
        location = str(tmp_path / "store")
    figures = run(
        location,
        tmp_path,
        processes=6,
        seconds=12,
        reads=3,
        fsync_delay=0.02 if store == "markdown" else 0.0,
        lock_timeout=10,
    )
    assert figures["lock_timeouts"] == 0, figures
    assert figures["reads_timed_out"] == 0, figures
    assert figures["reads"] == 3
    assert min(figures["commits_per_writer"]) > 0, figures  # each writer had turns
    assert figures["errors"] == []
    assert figures["lost"] == []  # every acknowledged write kept, or archived with a receipt
