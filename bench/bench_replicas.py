"""Many replicas, nothing lost: processes × threads writing to the same users, readers throughout.

Each of ``--processes`` processes (standing in for machines) opens its own
store — its own PostgreSQL connection pool, or its own ``MarkdownStore`` on
the shared directory — and runs ``--threads`` writer threads creating facts
for ``--users`` users chosen at random, and ``--readers`` reader threads
running ``context`` and ``search`` for random users, all at once. The cap is
10, so most writes evict. Afterwards it checks what must hold:

* every acknowledged write is in its user's library, or in the archive with
  a receipt in the audit that names it;
* no reader ever saw more facts than the cap;
* no reader (and no writer) met an error;

and prints commits/s, commit p50/p99 and read p50/p99 per store, with the
machine, the load average and the date. Both stores run with ``fsync`` on
(the PostgreSQL server this starts, and the Markdown store's own).

    uv run python -m bench.bench_replicas                  # both stores, the full run
    uv run python -m bench.bench_replicas --store postgres --writes 10
    uv run python -m bench.bench_replicas --search         # search after another replica's commit

``--search`` measures instead what a search costs on one replica right after
another replica committed to the same scope (the index of the scope is
brought up to date first), and a warm search, on a library of 100 facts,
alternating the two stores.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import random
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from deermem import Memory, MemoryConfig
from deermem.model import Scope
from deermem.store import MarkdownStore, Store

MAX_FACTS = 10
QUERIES = ("coffee", "python", "fact", "berlin", "uv", "tea")


def config() -> MemoryConfig:
    # Archive and audit large enough to keep every eviction for the check.
    return MemoryConfig(
        max_facts=MAX_FACTS,
        archive_max_entries=100_000,
        archive_max_age_days=0,
        eviction_audit_max_entries=10_000,
        file_lock_timeout_seconds=60,
    )


def open_store(location: str) -> Store:
    if location.startswith("postgresql://"):
        from deermem.store.postgres import PostgresStore

        return PostgresStore.from_config(config(), location)
    return MarkdownStore.from_config(config(), Path(location))


def worker(location: str, number: int, args: dict[str, Any], out: str) -> None:
    """One replica: writer and reader threads over one store instance; results to ``out``."""
    store = open_store(location)
    settings = config()
    memories = {
        user: Memory(store, settings, Scope.of(f"user-{user:02d}", "coder"))
        for user in range(args["users"])
    }
    acked: list[tuple[int, str, bool]] = []
    commits: list[float] = []
    reads: list[float] = []
    errors: list[str] = []
    over_cap: list[int] = []
    lock = threading.Lock()
    writing = threading.Event()
    writing.set()

    def write(thread: int) -> None:
        rng = random.Random(f"{number}-{thread}")
        for sequence in range(args["writes"]):
            user = rng.randrange(args["users"])
            words = " ".join(rng.sample(QUERIES, 2))
            content = f"Fact {number}-{thread}-{sequence} about {words}"
            start = time.perf_counter()
            try:
                result = memories[user].create_fact(content, confidence=rng.random())
            except Exception as error:  # counted: the check requires none
                with lock:
                    errors.append(f"write: {type(error).__name__}: {error}")
                continue
            elapsed = time.perf_counter() - start
            with lock:
                commits.append(elapsed)
                acked.append((user, result.fact.id, result.fact_id is not None))

    def read(thread: int) -> None:
        rng = random.Random(f"reader-{number}-{thread}")
        while writing.is_set():
            memory = memories[rng.randrange(args["users"])]
            start = time.perf_counter()
            try:
                if rng.random() < 0.5:
                    memory.context()
                else:
                    memory.search(rng.choice(QUERIES))
                count = len(memory.list_facts())
            except Exception as error:  # counted: the check requires none
                with lock:
                    errors.append(f"read: {type(error).__name__}: {error}")
                continue
            elapsed = time.perf_counter() - start
            with lock:
                reads.append(elapsed)
                if count > MAX_FACTS:
                    over_cap.append(count)

    writers = [threading.Thread(target=write, args=(n,)) for n in range(args["threads"])]
    readers = [threading.Thread(target=read, args=(n,)) for n in range(args["readers"])]
    started = time.time()  # the wall clock: comparable across the replicas' processes
    for thread in [*writers, *readers]:
        thread.start()
    for thread in writers:
        thread.join()
    finished = time.time()
    writing.clear()
    for thread in readers:
        thread.join()
    result = {
        "started": started,
        "finished": finished,
        "acked": acked,
        "commits": commits,
        "reads": reads,
        "errors": errors,
        "over_cap": over_cap,
    }
    Path(out).write_text(json.dumps(result), "utf-8")
    close = getattr(store, "close", None)
    if close is not None:
        close()


def run(location: str, args: dict[str, Any], scratch: Path) -> dict[str, Any]:
    """All replicas at once, then the checks."""
    context = multiprocessing.get_context("spawn")
    outs = [scratch / f"replica-{n}.json" for n in range(args["processes"])]
    processes = [
        context.Process(target=worker, args=(location, n, args, str(outs[n])))
        for n in range(args["processes"])
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join()
    if any(process.exitcode != 0 for process in processes):
        raise SystemExit(f"a replica failed: exit codes {[p.exitcode for p in processes]}")
    parts = [json.loads(out.read_text("utf-8")) for out in outs]
    # From the first replica's first write to the last one's last: start-up is not load.
    wall = max(part["finished"] for part in parts) - min(part["started"] for part in parts)
    commits = [t for part in parts for t in part["commits"]]
    reads = [t for part in parts for t in part["reads"]]
    errors = [e for part in parts for e in part["errors"]]
    over_cap = [c for part in parts for c in part["over_cap"]]
    lost = check(location, [tuple(a) for part in parts for a in part["acked"]], args["users"])
    return {
        "commits": len(commits),
        "wall_s": round(wall, 2),
        "commits_per_s": round(len(commits) / wall, 1),
        "commit_p50_ms": percentile(commits, 50),
        "commit_p99_ms": percentile(commits, 99),
        "reads": len(reads),
        "read_p50_ms": percentile(reads, 50),
        "read_p99_ms": percentile(reads, 99),
        "errors": errors[:5],
        "error_count": len(errors),
        "over_cap": len(over_cap),
        "lost": lost,
    }


def check(location: str, acked: list[tuple[Any, ...]], users: int) -> list[str]:
    """Every acknowledged write in the library, or archived with a receipt naming it."""
    store = open_store(location)
    lost = []
    now = datetime.now(UTC)
    try:
        for user in range(users):
            scope = Scope.of(f"user-{user:02d}", "coder")
            library = {fact.id for fact in store.load(scope).facts}
            if len(library) > MAX_FACTS:
                lost.append(f"user {user}: {len(library)} facts over the cap")
            archived = {entry.fact_id for entry in store.archive(scope, now)}
            receipted = {fact_id for receipt in store.audit(scope) for fact_id in receipt.fact_ids}
            for owner, fact_id, _kept in acked:
                if owner != user:
                    continue
                if fact_id in library:
                    continue
                if fact_id not in archived or fact_id not in receipted:
                    lost.append(
                        f"user {user}: {fact_id} is neither kept nor archived with a receipt"
                    )
    finally:
        close = getattr(store, "close", None)
        if close is not None:
            close()
    return lost


def percentile(samples: list[float], q: int) -> float:
    if not samples:
        return 0.0
    if len(samples) == 1:
        return round(samples[0] * 1000, 2)
    return round(statistics.quantiles(samples, n=100)[q - 1] * 1000, 2)


def search_figures(rounds: int) -> dict[str, Any]:
    """Median ms of the first search after another instance's commit, and of a warm search."""
    from deermem.testing.postgres import TemporaryPostgres

    settings = MemoryConfig(max_facts=100)
    scope = Scope.of("alice", "coder")
    document = {
        "facts": [
            {"id": f"fact_{n:04d}", "content": f"Fact {n} about {QUERIES[n % len(QUERIES)]}"}
            for n in range(100)
        ]
    }
    figures: dict[str, dict[str, list[float]]] = {}
    with TemporaryPostgres(fsync=True) as server, tempfile.TemporaryDirectory() as root:
        url = server.create_database("search", migrated=True)
        pairs = {
            "postgres": (open_store(url), open_store(url)),
            "markdown": (open_store(root), open_store(root)),
        }
        memories = {
            kind: (Memory(a, settings, scope), Memory(b, settings, scope))
            for kind, (a, b) in pairs.items()
        }
        for writer, _ in memories.values():
            writer.import_document(document)
        for number in range(rounds):
            for kind, (writer, reader) in memories.items():  # alternating: the host drifts
                writer.update_fact(f"fact_{number % 100:04d}", content=f"Fact {number} about tea")
                start = time.perf_counter()
                reader.search("tea")
                first = time.perf_counter() - start
                start = time.perf_counter()
                reader.search("tea")
                warm = time.perf_counter() - start
                figures.setdefault(kind, {"after_commit": [], "warm": []})
                figures[kind]["after_commit"].append(first)
                figures[kind]["warm"].append(warm)
        for a, b in pairs.values():
            for store in (a, b):
                close = getattr(store, "close", None)
                if close is not None:
                    close()
    return {
        kind: {
            f"{name}_ms": round(statistics.median(samples) * 1000, 3)
            for name, samples in values.items()
        }
        for kind, values in figures.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", choices=("postgres", "markdown", "both"), default="both")
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--readers", type=int, default=2, help="reader threads per process")
    parser.add_argument("--users", type=int, default=20)
    parser.add_argument("--writes", type=int, default=60, help="facts each writer thread creates")
    parser.add_argument(
        "--rounds", type=int, default=1, help="runs per store, alternating; medians reported"
    )
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument(
        "--search", action="store_true", help="time search after another replica's commit"
    )
    options = parser.parse_args()
    if options.search:
        print(
            json.dumps(
                {
                    "machine": f"{platform.machine()}, {os.cpu_count()} cores",
                    "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
                    "load_average": [round(x, 2) for x in os.getloadavg()],
                    **search_figures(200),
                },
                indent=2,
            )
        )
        return
    args = {k: getattr(options, k) for k in ("processes", "threads", "readers", "users", "writes")}
    results: dict[str, Any] = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "load_average_before": [round(x, 2) for x in os.getloadavg()],
        "settings": args,
    }
    kinds = ("postgres", "markdown") if options.store == "both" else (options.store,)
    rounds: dict[str, list[dict[str, Any]]] = {kind: [] for kind in kinds}
    with tempfile.TemporaryDirectory(prefix="deermem-replicas-") as scratch:
        for _ in range(options.rounds):  # A B A B …: the shared host drifts
            for kind in kinds:
                rounds[kind].append(
                    with_store(kind, lambda location: run(location, args, Path(scratch)))
                )
    for kind, runs in rounds.items():
        results[kind] = medians(runs)
    results["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    if options.json:
        print(json.dumps(results, indent=2))
    else:
        show(results)
    failed = [k for k in ("postgres", "markdown") if k in results and not ok(results[k])]
    if failed:
        raise SystemExit(f"the invariants did not hold for: {', '.join(failed)}")


def medians(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Each figure's median over the rounds; problems of every round kept."""
    figures = ("commits_per_s", "commit_p50_ms", "commit_p99_ms", "read_p50_ms", "read_p99_ms")
    merged = dict(runs[-1])
    for key in figures:
        merged[key] = round(statistics.median(run[key] for run in runs), 2)
    merged["rounds"] = len(runs)
    merged["lost"] = [item for run in runs for item in run["lost"]]
    merged["errors"] = [item for run in runs for item in run["errors"]][:5]
    merged["error_count"] = sum(run["error_count"] for run in runs)
    merged["over_cap"] = sum(run["over_cap"] for run in runs)
    return merged


def with_store(kind: str, body: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
    if kind == "markdown":
        with tempfile.TemporaryDirectory(prefix="deermem-replicas-md-") as root:
            return body(root)
    from deermem.testing.postgres import TemporaryPostgres

    with TemporaryPostgres(fsync=True) as server:
        return body(server.create_database("replicas", migrated=True))


def ok(result: dict[str, Any]) -> bool:
    return not result["lost"] and not result["error_count"] and not result["over_cap"]


def show(results: dict[str, Any]) -> None:
    print(f"{results['machine']}, {results['date']}, settings {results['settings']}")
    before, after = results["load_average_before"], results["load_average_after"]
    print(f"load average before {before}, after {after}")
    header = (
        "store",
        "commits",
        "commits/s",
        "commit p50",
        "p99",
        "reads",
        "read p50",
        "p99",
        "ok",
    )
    print("  ".join(f"{h:>10}" for h in header))
    for kind in ("postgres", "markdown"):
        if kind not in results:
            continue
        r = results[kind]
        row = (
            kind,
            r["commits"],
            r["commits_per_s"],
            f"{r['commit_p50_ms']} ms",
            f"{r['commit_p99_ms']} ms",
            r["reads"],
            f"{r['read_p50_ms']} ms",
            f"{r['read_p99_ms']} ms",
            "yes" if ok(r) else "NO",
        )
        print("  ".join(f"{v!s:>10}" for v in row))
        for problem in [*r["lost"][:5], *r["errors"]]:
            print(f"  {kind}: {problem}")


if __name__ == "__main__":
    main()
