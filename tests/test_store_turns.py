"""FairTurn: one thread at a time, re-entrant, first come first served."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable

import pytest

from deermem.store.turns import FairTurn


def wait_for(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.001)


def waiting_is(turn: FairTurn, count: int) -> bool:
    return turn.waiting == count


def soon(seconds: float = 10.0) -> float:
    return time.monotonic() + seconds


def test_the_holder_takes_it_again_and_gives_it_back_as_often() -> None:
    turn = FairTurn()
    assert turn.take(soon())
    assert turn.take(soon())
    assert turn.held_here
    assert turn.depth == 2
    turn.give_back()
    assert turn.held_here
    assert turn.depth == 1
    turn.give_back()
    assert not turn.held_here


def test_a_thread_that_does_not_hold_it_cannot_give_it_back() -> None:
    turn = FairTurn()
    with pytest.raises(RuntimeError, match="does not hold"):
        turn.give_back()


def test_another_thread_waits_until_its_deadline_then_leaves_the_line() -> None:
    turn = FairTurn()
    assert turn.take(soon())
    results: list[bool] = []
    thread = threading.Thread(target=lambda: results.append(turn.take(time.monotonic() + 0.05)))
    thread.start()
    thread.join()
    assert results == [False]
    assert turn.waiting == 0
    turn.give_back()


def test_waiters_are_served_in_the_order_they_asked() -> None:
    turn = FairTurn()
    assert turn.take(soon())
    order: list[int] = []

    def waiter(number: int) -> None:
        assert turn.take(soon())
        order.append(number)
        turn.give_back()

    threads = []
    for number in range(5):
        thread = threading.Thread(target=waiter, args=(number,))
        thread.start()
        threads.append(thread)
        wait_for(functools.partial(waiting_is, turn, number + 1))
    turn.give_back()
    assert turn.take(soon())  # asked again at once: behind the five
    order.append(99)
    turn.give_back()
    for thread in threads:
        thread.join()
    assert order == [0, 1, 2, 3, 4, 99]


def test_one_that_gives_up_lets_the_next_in_line_through() -> None:
    turn = FairTurn()
    assert turn.take(soon())
    first = threading.Thread(target=lambda: turn.take(time.monotonic() + 0.2))
    first.start()
    wait_for(lambda: turn.waiting == 1)
    had: list[bool] = []

    def second() -> None:
        had.append(turn.take(soon()))
        turn.give_back()

    thread = threading.Thread(target=second)
    thread.start()
    wait_for(lambda: turn.waiting == 2)
    first.join()  # timed out: the second is first now
    turn.give_back()
    thread.join()
    assert had == [True]
