"""Replicas in separate processes writing to the same users: the cap holds, nothing is lost.

A small version of ``bench/bench_replicas.py``: three processes (standing in
for machines), each with its own connection pool and four writer threads,
create facts for the same three users at a cap of 10, while the test reads.
"""

from __future__ import annotations

import json
import multiprocessing
import threading
from datetime import UTC, datetime
from pathlib import Path

from deermem import Memory, MemoryConfig
from deermem.model import Scope
from deermem.store.postgres import PostgresStore

NOW = datetime(2026, 8, 13, tzinfo=UTC)
USERS = 3
CONFIG = MemoryConfig(max_facts=10, archive_max_entries=10_000, archive_max_age_days=0)


def replica(url: str, number: int, out: str) -> None:
    """Four writer threads; every acknowledged create goes to ``out``."""
    acked: list[tuple[int, str]] = []
    lock = threading.Lock()
    with PostgresStore.from_config(CONFIG, url) as store:

        def write(thread: int) -> None:
            for sequence in range(8):
                user = (thread + sequence) % USERS
                memory = Memory(store, CONFIG, Scope.of(f"user-{user}", "coder"))
                content = f"Fact {number}-{thread}-{sequence}"
                result = memory.create_fact(content, confidence=(sequence % 10) / 10)
                with lock:
                    acked.append((user, result.fact.id))

        threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    Path(out).write_text(json.dumps(acked), "utf-8")


def test_replicas_never_exceed_the_cap_and_lose_nothing(postgres_url: str, tmp_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    outs = [tmp_path / f"replica-{n}.json" for n in range(3)]
    processes = [
        context.Process(target=replica, args=(postgres_url, n, str(outs[n]))) for n in range(3)
    ]
    for process in processes:
        process.start()
    with PostgresStore.from_config(CONFIG, postgres_url) as store:
        seen = []
        while any(process.is_alive() for process in processes):
            for user in range(USERS):
                seen.append(len(store.load(Scope.of(f"user-{user}", "coder")).facts))
        for process in processes:
            process.join()
        assert [process.exitcode for process in processes] == [0, 0, 0]
        assert max(seen, default=0) <= 10
        acked = [tuple(item) for out in outs for item in json.loads(out.read_text("utf-8"))]
        assert len(acked) == 3 * 4 * 8
        for user in range(USERS):
            scope = Scope.of(f"user-{user}", "coder")
            library = {fact.id for fact in store.load(scope).facts}
            archived = {entry.fact_id for entry in store.archive(scope, NOW)}
            receipted = {i for receipt in store.audit(scope) for i in receipt.fact_ids}
            mine = {fact_id for owner, fact_id in acked if owner == user}
            assert len(library) == 10
            assert not library & archived  # no fact lives twice
            assert mine - library <= archived & receipted  # every other one left with a receipt
            assert library | archived == mine  # and nothing else is there
