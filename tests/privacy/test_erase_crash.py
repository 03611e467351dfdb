"""An erase on the Markdown store killed with SIGKILL at each of its steps: intact or erased.

A child process erases a user and kills itself with SIGKILL at its N-th file
system call (a write, a rename, an unlink, a directory removal, an fsync),
for N over every step of the erase. After each kill a copy of the store is
opened as a new process would: the user is either whole (every fact, the
archive, the summaries) or gone (nothing of them in any file), never half;
the other user is untouched; no intent of an erase is left behind.
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import signal
from collections.abc import Callable
from datetime import UTC, datetime
from multiprocessing.context import ForkServerContext
from pathlib import Path
from typing import Any

import pytest

from deermem import Memory, MemoryConfig
from tests.privacy.stored import files_text

pytestmark = pytest.mark.slow

ERIN = "erin-crash-5d1e"
FRANK = "frank-crash-9a0c"
# The calls an erase makes to change files; the child dies at the N-th.
_CALLS = ("open", "write", "rename", "replace", "unlink", "rmdir", "fsync")


def clock() -> datetime:
    return datetime(2026, 8, 13, tzinfo=UTC)


def context() -> ForkServerContext:
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["deermem.memory", "tests.privacy.test_erase_crash"])
    return ctx


def populate(root: Path, user: str) -> None:
    memory = Memory.open(root, MemoryConfig(max_facts=10), user=user, clock=clock)
    for agent in ("coder", "writer"):
        view = memory.scoped(user=user, agent=agent)
        for number in range(12):
            view.create_fact(f"{user} remembers pelican{number:02d}{user[-4:]} ({agent})")
        view.delete_fact(view.list_facts()[0].id)
        view.search("pelican03")
    memory.close()


def state(root: Path, user: str) -> tuple[object, ...]:
    """What a user holds, as a new process reads it."""
    memory = Memory.open(root, MemoryConfig(max_facts=10), user=user, clock=clock)
    try:
        return tuple(
            (
                sorted(f.content for f in view.list_facts()),
                sorted(e.fact.content for e in view.list_archived()),
                len(view.audit()),
            )
            for view in (memory.scoped(user=user, agent=a) for a in ("coder", "writer"))
        )
    finally:
        memory.close()


def erase_child(root: str, kill_at: int, counter: str) -> None:
    """Erase ERIN, dying at the ``kill_at``-th file system call (never, for a count)."""
    calls = 0

    def counting(original: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            nonlocal calls
            calls += 1
            if calls == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
            return original(*args, **kwargs)

        return call

    memory = Memory.open_unscoped(root, MemoryConfig(max_facts=10), clock=clock)
    originals = {name: getattr(os, name) for name in _CALLS}
    for name, original in originals.items():
        setattr(os, name, counting(original))
    try:
        memory.erase_user(ERIN)
    finally:
        for name, original in originals.items():
            setattr(os, name, original)
    Path(counter).write_text(str(calls))


def run_child(ctx: ForkServerContext, root: Path, kill_at: int, counter: Path) -> int | None:
    child = ctx.Process(target=erase_child, args=(str(root), kill_at, str(counter)))
    child.start()
    child.join(60)
    return child.exitcode


def test_an_erase_killed_at_any_step_leaves_the_user_intact_or_erased(tmp_path: Path) -> None:
    ctx = context()
    pristine = tmp_path / "pristine"
    populate(pristine, ERIN)
    populate(pristine, FRANK)
    whole, other = state(pristine, ERIN), state(pristine, FRANK)
    empty: tuple[object, ...] = (([], [], 0), ([], [], 0))
    # How many calls a whole erase makes.
    counted = tmp_path / "counted"
    shutil.copytree(pristine, counted)
    counter = tmp_path / "calls"
    assert run_child(ctx, counted, 0, counter) == 0
    total = int(counter.read_text())
    assert total > 20
    outcomes = {"intact": 0, "erased": 0}
    for kill_at in sorted({*range(1, 25), *range(25, total + 1, 4), total}):
        root = tmp_path / f"run{kill_at}"
        shutil.copytree(pristine, root)
        assert run_child(ctx, root, kill_at, counter) == -signal.SIGKILL
        found = state(root, ERIN)  # opening recovers
        assert found in (whole, empty), f"half an erase after a kill at call {kill_at}"
        assert state(root, FRANK) == other
        assert not list((root / ".erasing").glob("*.json")), "an erase left unfinished"
        if found == empty:
            outcomes["erased"] += 1
            text = files_text(root)
            assert ERIN not in text, f"the user's id stays after a kill at call {kill_at}"
            assert "pelican03" + ERIN[-4:] not in text, f"content stays (kill at {kill_at})"
        else:
            outcomes["intact"] += 1
        shutil.rmtree(root)
    assert outcomes["intact"], outcomes
    assert outcomes["erased"], outcomes
