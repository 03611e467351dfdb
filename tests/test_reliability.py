"""Crash safety and concurrency with real processes.

* Crash safety: a child process commits facts (creates, deletes, restores)
  in a loop and is killed with SIGKILL at a random moment, 55 times — more,
  up to 220, until at least 10 kills have landed inside a commit. After
  every kill a copy of the store is opened: it recovers, every fact parses,
  no journal is left, the cap holds, every create that returned in the
  child is present — kept, or in the archive — every receipt a call
  returned is in the audit, every archive entry has its receipt, every fact
  a receipt names is active or archived, and the archive's index lists the
  archive. The next child works on the original (unrecovered) directory, so
  kills during recovery happen too.
* Concurrency: 4 processes × 25 ``create_fact`` on one scope; nothing is
  lost, the cap holds, every eviction has its receipt.

Children are forked from a fork server that has deermem loaded, so each
costs milliseconds, not an interpreter start.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import shutil
import signal
import time
from collections.abc import Set
from datetime import UTC, datetime
from multiprocessing.context import ForkServerContext
from multiprocessing.synchronize import Event
from pathlib import Path

import pytest

from deermem import DuplicateFactError, Memory, MemoryConfig

pytestmark = pytest.mark.slow

CAP = 10
KILLS = 55
INTERRUPTED = 10  # kills that must land inside a commit (a journal left behind)
USER = "crash-test"


def config() -> MemoryConfig:
    return MemoryConfig(
        max_facts=CAP,
        eviction_audit_max_entries=10_000,
        archive_max_entries=100_000,
        archive_max_age_days=0,
    )


def clock() -> datetime:
    return datetime(2026, 8, 13, tzinfo=UTC)


def context() -> ForkServerContext:
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["deermem.memory", "tests.test_reliability"])
    return ctx


def append_line(path: Path, line: str) -> None:
    """Append one line in a single write, so a kill never leaves half of it."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def crash_child(root: str, log: str, seed: int, working: Event) -> None:
    """Commit until killed; log every create that returned, and every receipt returned."""
    receipts = Path(log).with_suffix(".receipts")
    rng = random.Random(seed)
    memory = Memory.open(root, config(), user=USER, clock=clock)
    memory.list_facts()  # recovers what the previous child left
    working.set()
    number = 0
    while True:
        number += 1
        action = rng.random()
        if action < 0.75 or not memory.list_facts():
            try:
                result = memory.create_fact(
                    f"child {seed} fact {number}", confidence=round(rng.random(), 3)
                )
            except DuplicateFactError:
                continue
            append_line(Path(log), result.fact.id)
            for receipt in result.receipts:
                append_line(receipts, str(receipt.receipt_id))
        elif action < 0.9:
            memory.delete_fact(rng.choice(memory.list_facts()).id)
        else:
            archived = memory.list_archived()
            if archived:
                restored = memory.restore(rng.choice(archived).fact_id)
                for receipt in restored.receipts:
                    append_line(receipts, str(receipt.receipt_id))


def returned_ids(log: Path) -> set[str]:
    if not log.exists():
        return set()
    return {line for line in log.read_text().splitlines() if line}


def check_store(
    root: Path, expected: set[str], receipts: Set[str] = frozenset()
) -> tuple[int, int]:
    """Open a store as a new process would, and check every invariant."""
    memory = Memory.open(root, config(), user=USER, clock=clock)
    facts = memory.list_facts()  # recovers, and parses every fact file
    user_dir = next((root / "users").iterdir())
    assert not (user_dir / ".memory.journal.json").exists()
    assert len(facts) <= CAP
    archived = {entry.fact_id: entry for entry in memory.list_archived()}  # parses every entry
    present = {fact.id for fact in facts}
    assert not present & set(archived), "a fact is both active and archived"
    missing = expected - present - set(archived)
    assert not missing, f"returned creates lost: {sorted(missing)}"
    audit = {receipt.receipt_id: receipt for receipt in memory.audit()}
    assert not receipts - set(audit), "a receipt returned to a caller is not in the audit"
    for entry in archived.values():
        assert entry.receipt_id in audit, "an archive entry without its receipt"
        assert entry.fact_id in audit[entry.receipt_id].fact_ids
        if entry.reason == "capacity":
            assert entry.eviction is not None
            assert entry.eviction.score is not None
    for receipt in audit.values():
        for fact_id in receipt.fact_ids:
            assert fact_id in present or fact_id in archived, "a receipt names a lost fact"
    index = user_dir / "agents/__default__/.metadata/archive-index.json"
    if archived:
        assert {item[0] for item in json.loads(index.read_text())} == set(archived)
    return len(present), len(archived)


def test_the_store_survives_sigkill_at_random_points(tmp_path: Path) -> None:
    ctx = context()
    root = tmp_path / "store"
    log = tmp_path / "returned.log"
    rng = random.Random(20261130)
    kills = 0
    interrupted_commits = 0
    states: set[tuple[int, int]] = set()
    # Where a kill lands depends on timing: kill on (at most 4 × KILLS in all) until
    # enough of them have landed inside a commit, rather than hope that KILLS did.
    while kills < KILLS or (interrupted_commits < INTERRUPTED and kills < 4 * KILLS):
        working = ctx.Event()
        child = ctx.Process(target=crash_child, args=(str(root), str(log), kills, working))
        child.start()
        if rng.random() < 0.8:  # mostly while committing; sometimes while starting or recovering
            assert working.wait(30)
        time.sleep(rng.uniform(0.0, 0.15))
        os.kill(child.pid, signal.SIGKILL)  # type: ignore[arg-type]
        child.join(10)
        assert child.exitcode == -signal.SIGKILL, "the child ended before it was killed"
        kills += 1
        if not (root / "users").exists():
            continue  # killed before the first commit
        copy = tmp_path / f"copy{kills}"
        shutil.copytree(root, copy)
        interrupted_commits += any(copy.glob("users/*/.memory.journal.json"))
        states.add(check_store(copy, returned_ids(log), returned_ids(log.with_suffix(".receipts"))))
        shutil.rmtree(copy)
    assert kills >= 50
    assert interrupted_commits >= INTERRUPTED  # many kills landed inside a commit
    assert len(returned_ids(log)) > CAP  # the children did real work, with evictions
    assert len(states) > 5  # kills landed in many different states
    check_store(root, returned_ids(log), returned_ids(log.with_suffix(".receipts")))


def concurrent_child(root: str, log: str, worker: int) -> None:
    memory = Memory.open(root, config_for_concurrency(), user=USER, clock=clock)
    for number in range(25):
        result = memory.create_fact(
            f"worker {worker} fact {number}", confidence=round(0.3 + (number * 7 % 10) / 20, 2)
        )
        append_line(Path(log), f"{result.fact.id} {int(result.kept)}")


def config_for_concurrency() -> MemoryConfig:
    return MemoryConfig(
        max_facts=30, eviction_audit_max_entries=10_000, archive_max_entries=100_000
    )


def test_four_processes_creating_at_once_lose_nothing(tmp_path: Path) -> None:
    ctx = context()
    root = tmp_path / "store"
    log = tmp_path / "returned.log"
    workers = [
        ctx.Process(target=concurrent_child, args=(str(root), str(log), n)) for n in range(4)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
        assert worker.exitcode == 0
    lines = [line.split() for line in log.read_text().splitlines()]
    assert len(lines) == 100
    created = {fact_id for fact_id, _ in lines}
    assert len(created) == 100
    memory = Memory.open(root, config_for_concurrency(), user=USER, clock=clock)
    facts = {fact.id for fact in memory.list_facts()}
    archived = {entry.fact_id: entry for entry in memory.list_archived()}
    assert len(facts) == 30
    assert facts | set(archived) == created
    assert not facts & set(archived)
    receipts = {receipt.receipt_id: receipt for receipt in memory.audit()}
    evicted = [fact_id for receipt in receipts.values() for fact_id in receipt.fact_ids]
    assert sorted(evicted) == sorted(archived)  # one receipt line per eviction, no more
    for fact_id, entry in archived.items():
        assert entry.receipt_id is not None
        assert fact_id in receipts[entry.receipt_id].fact_ids
    assert memory.snapshot().revision == 100  # every create was its own commit
