"""Six processes, one user: does every process that waits for the user's lock get its turn?

``--processes`` writer processes (each opening the store itself), of
``--threads`` writer threads each, create facts for the same user as fast as
they can for ``--seconds``; while they do, ``--reads`` fresh processes are
started one after another, each opening the store and reading the user's
facts once (a fresh process has no cache, so on the Markdown store it must
take the lock). With ``--fsync-delay-ms`` every flush of every one of these
processes waits that long first: a slow disk, which lengthens each hold of
the Markdown store's lock (the store flushes while it holds it). On
PostgreSQL (``--store postgres``, a server this starts, with fsync on) the
writers wait in ``pg_advisory_xact_lock`` instead, and the flushes are the
server's.

It reports, per run: commits and commits/s, the commit latency (lock wait
included) p50 / p99 and the longest wait, how many writers (threads) met
``StoreLockTimeout`` and how often, each writer's commits, and the fresh
reads' longest time and timeouts; and it checks that every acknowledged
write is in the library, or in the archive with a receipt that names it.

    uv run python -m bench.bench_lock_fairness                       # 6 writers, 30 s
    uv run python -m bench.bench_lock_fairness --fsync-delay-ms 20   # on a slowed disk
    uv run python -m bench.bench_lock_fairness --store postgres
    uv run python -m bench.bench_lock_fairness --processes 1 --threads 6 --fsync-delay-ms 20

The workload is also the test of issue 20's fair lock
(tests/security/test_lock_fairness.py), which runs it shorter and asserts on
what :func:`run` returns.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import random
import tempfile
import threading
import time
from contextlib import ExitStack
from datetime import UTC, datetime
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

from bench._fsyncs import slow_fsyncs
from bench.bench_replicas import MAX_FACTS, check, percentile
from deermem import Memory, MemoryConfig, StoreLockTimeout

# The scope bench_replicas.check reads as its user 0.
USER = "user-00"
AGENT = "coder"


def open_memory(location: str, lock_timeout: float) -> Memory:
    """The user's memory in the store at ``location``: a directory or a PostgreSQL URL."""
    # Archive and audit large enough to keep every eviction for the check.
    config = MemoryConfig(
        max_facts=MAX_FACTS,
        archive_max_entries=100_000,
        archive_max_age_days=0,
        eviction_audit_max_entries=10_000,
        file_lock_timeout_seconds=lock_timeout,
        store=location if location.startswith("postgresql://") else "",
    )
    root = None if config.store else location
    return Memory.open(root, config, user=USER, agent=AGENT)


def writer(location: str, number: int, settings: dict[str, Any], ready: Barrier, out: str) -> None:
    """One process of ``threads`` writer threads creating facts until the time is up;
    each thread's latencies, timeouts and errors to ``out``."""
    if settings["fsync_delay"]:
        slow_fsyncs(settings["fsync_delay"])
    memory = open_memory(location, settings["lock_timeout"])
    results: list[dict[str, list[Any]]] = [
        {"latencies": [], "acked": [], "timeouts": [], "errors": []}
        for _ in range(settings["threads"])
    ]

    def write(thread: int) -> None:
        figures = results[thread]
        rng = random.Random(f"{number}-{thread}")
        sequence = 0
        while time.monotonic() < end:
            sequence += 1
            start = time.perf_counter()
            try:
                result = memory.create_fact(
                    f"Writer {number}-{thread} fact {sequence}", confidence=round(rng.random(), 3)
                )
            except StoreLockTimeout:
                figures["timeouts"].append(time.perf_counter() - start)
                continue
            except Exception as error:  # counted: the check requires none
                figures["errors"].append(f"write: {type(error).__name__}")
                continue
            figures["latencies"].append(time.perf_counter() - start)
            figures["acked"].append(result.fact.id)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(settings["threads"])]
    ready.wait()
    end = time.monotonic() + settings["seconds"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    memory.close()
    Path(out).write_text(json.dumps(results), "utf-8")


def fresh_reader(location: str, settings: dict[str, Any], out: str) -> None:
    """Open the store and read the user's facts once (no cache: under the lock)."""
    if settings["fsync_delay"]:
        slow_fsyncs(settings["fsync_delay"])
    memory = open_memory(location, settings["lock_timeout"])
    start = time.perf_counter()
    error = None
    try:
        memory.list_facts()
    except StoreLockTimeout:
        error = "StoreLockTimeout"
    elapsed = time.perf_counter() - start
    memory.close()
    Path(out).write_text(json.dumps({"seconds": elapsed, "error": error}), "utf-8")


def run(
    location: str,
    scratch: Path,
    *,
    processes: int = 6,
    threads: int = 1,
    seconds: float = 30.0,
    reads: int = 6,
    fsync_delay: float = 0.0,
    lock_timeout: float = 10.0,
) -> dict[str, Any]:
    """The writers and the fresh reads at once, then the check; the figures as a dict."""
    settings = {
        "seconds": seconds,
        "threads": threads,
        "fsync_delay": fsync_delay,
        "lock_timeout": lock_timeout,
    }
    context = multiprocessing.get_context("spawn")
    ready = context.Barrier(processes + 1)
    outs = [scratch / f"writer-{n}.json" for n in range(processes)]
    writers = [
        context.Process(target=writer, args=(location, n, settings, ready, str(outs[n])))
        for n in range(processes)
    ]
    for process in writers:
        process.start()
    ready.wait(timeout=120)  # every writer has opened the store; the clock starts
    started = time.monotonic()
    read_outs = [scratch / f"read-{n}.json" for n in range(reads)]
    readers = []
    for n in range(reads):
        # Spread over the run, so every read meets the writers at full speed.
        time.sleep(max(0.0, started + seconds * (n + 1) / (reads + 1) - time.monotonic()))
        reader = context.Process(target=fresh_reader, args=(location, settings, str(read_outs[n])))
        reader.start()
        readers.append(reader)
    for process in [*writers, *readers]:
        process.join()
    wall = time.monotonic() - started
    if any(process.exitcode != 0 for process in [*writers, *readers]):
        codes = [process.exitcode for process in [*writers, *readers]]
        raise RuntimeError(f"a writer or reader process failed: exit codes {codes}")
    parts = [part for out in outs for part in json.loads(out.read_text("utf-8"))]
    read_parts = [json.loads(out.read_text("utf-8")) for out in read_outs]
    latencies = [t for part in parts for t in part["latencies"]]
    acked = [(0, fact_id, True) for part in parts for fact_id in part["acked"]]
    commits_per_writer = [len(part["latencies"]) for part in parts]
    read_seconds = [part["seconds"] for part in read_parts if part["error"] is None]
    waits = [*latencies, *(t for part in parts for t in part["timeouts"])]
    return {
        "commits": len(latencies),
        "commits_per_s": round(len(latencies) / wall, 1),
        "commit_p50_ms": percentile(latencies, 50),
        "commit_p99_ms": percentile(latencies, 99),
        "wait_max_ms": round(max(waits, default=0.0) * 1000, 1),
        "commits_per_writer": commits_per_writer,
        "lock_timeouts": sum(len(part["timeouts"]) for part in parts),
        "writers_timed_out": sum(1 for part in parts if part["timeouts"]),
        "reads": len(read_parts),
        "reads_timed_out": sum(1 for part in read_parts if part["error"] is not None),
        "read_max_ms": round(max(read_seconds, default=0.0) * 1000, 1),
        "errors": sorted({e for part in parts for e in part["errors"]}),
        "lost": check(location, acked, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", choices=("markdown", "postgres"), default="markdown")
    parser.add_argument("--processes", type=int, default=6)
    parser.add_argument("--threads", type=int, default=1, help="writer threads per process")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--reads", type=int, default=6, help="fresh reading processes")
    parser.add_argument("--fsync-delay-ms", type=float, default=0.0, help="a slowed disk")
    parser.add_argument("--lock-timeout", type=float, default=10.0)
    options = parser.parse_args()
    before = [round(x, 2) for x in os.getloadavg()]
    with tempfile.TemporaryDirectory(prefix="deermem-lock-") as scratch, ExitStack() as stack:
        location = str(Path(scratch) / "store")
        if options.store == "postgres":
            from deermem.testing.postgres import TemporaryPostgres

            server = stack.enter_context(TemporaryPostgres(fsync=True))
            location = server.create_database("fairness", migrated=True)
        figures = run(
            location,
            Path(scratch),
            processes=options.processes,
            threads=options.threads,
            seconds=options.seconds,
            reads=options.reads,
            fsync_delay=options.fsync_delay_ms / 1000,
            lock_timeout=options.lock_timeout,
        )
    report = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "load_average_before": before,
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "settings": vars(options),
        **figures,
    }
    print(json.dumps(report, indent=2))
    if figures["lock_timeouts"] or figures["reads_timed_out"] or figures["lost"]:
        raise SystemExit("a process timed out waiting for the lock, or a write was lost")


if __name__ == "__main__":
    main()
