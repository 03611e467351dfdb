"""Benchmark: durable single-fact commits and cold loads of the Markdown store.

Run with ``uv run python -m bench.bench_store`` (``--json`` for a
machine-readable dump, ``--dir`` to choose the file system). Cases:

* **commit** — ``MarkdownStore.commit`` of one new fact into a scope of 100
  and of 10,000 facts, journaled and fsynced exactly as in production; with
  a warm cache (the store has the scope loaded, as a running service does)
  and a cold one (a fresh store: the commit reads only the fact it touches);
* **create** — ``Memory.create_fact`` at a full cap of 100: duplicate
  check, capacity gate, eviction to the archive, receipt;
* **cold load** — a fresh ``MarkdownStore`` loading a 100-fact scope (files this
  process decoded before are not parsed again); **first load**: the same with
  that memory emptied, as in a new process;
* **fsync floor** — one write + fsync + rename + directory fsync on the same
  file system (``atomic_write``): two fsyncs, where a journaled single-fact
  commit makes seven or eight (journal and its directory entry, the fact,
  ``memory.json`` and their directories, the journal's removal).

With ``--fsyncs`` it also counts, in one extra untimed run on the chosen
directory, the fsyncs of a warm commit into 100 facts and of a create at the
cap (see :mod:`bench._fsyncs`).

``cpu_reference_ms`` (``sum(range(10**6))``, best of 5) is recorded with the
results, so runs on a loaded machine can be told from runs on a quiet one.

Every case runs on the chosen directory (default: the current file system)
and on ``/dev/shm`` (tmpfs, where fsync costs nothing), so the software cost
and the disk's flush cost can be told apart. Figures are medians.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench._fsyncs import count_fsyncs
from deermem import Fact, Memory, MemoryConfig
from deermem.model import Scope
from deermem.store import ChangeSet, FactWrite, MarkdownStore
from deermem.store.markdown.files import (
    UserPaths,
    atomic_write,
    encode_fact,
    forget_decoded_facts,
)
from deermem.store.records import SummaryDocument, encode_summaries

NOW = datetime(2026, 8, 13, tzinfo=UTC)
SCOPE = Scope.of("bench-user", "bench-agent")
CATEGORIES = ("preference", "correction", "context", "goal", "behavior", "identity")


def make_fact(number: int, prefix: str = "fact") -> Fact:
    return Fact.from_dict(
        {
            "id": f"{prefix}_{number:08x}",
            "content": f"The user prefers option {number} when choosing between similar tools.",
            "category": CATEGORIES[number % len(CATEGORIES)],
            "confidence": round(0.5 + (number % 50) / 100, 2),
            "source": "thread-1",
            "topics": ["tools"],
            "createdAt": NOW - timedelta(minutes=number),
        }
    )


def build_scope(root: Path, size: int) -> None:
    """Write a scope of ``size`` facts directly (setup, not measured; no fsync)."""
    user = UserPaths(root, SCOPE.user_id, "memory.json")
    paths = user.agent(SCOPE.agent)
    for number in range(size):
        fact = make_fact(number)
        path = paths.fact(fact.id)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(encode_fact(fact, SCOPE))
    document = SummaryDocument(version="2.0", revision=1, lastUpdated="2026-08-13T00:00:00Z")
    user.manifest.write_bytes(encode_summaries(document))
    os.sync()  # the setup's writes must not compete with the measured fsyncs


def median_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 3)


def time_commits(root: Path, *, warm: bool, repeat: int) -> float:
    store = MarkdownStore(root)
    if warm:
        store.load(SCOPE)
        os.sync()  # the warm-up's access-time updates are not the commit's cost
    samples = []
    for number in range(repeat):
        if not warm:
            store = MarkdownStore(root)
        changes = ChangeSet(now=NOW, writes=(FactWrite(make_fact(number, "new"), create=True),))
        started = time.perf_counter()
        store.commit(SCOPE, changes)
        samples.append(time.perf_counter() - started)
    return median_ms(samples)


def time_cold_loads(root: Path, repeat: int, *, first_in_process: bool = False) -> float:
    """A new store loading the scope; ``first_in_process``: with the process's decoded
    facts forgotten before each load, as a new process's first load finds them."""
    samples = []
    for _ in range(repeat):
        if first_in_process:
            forget_decoded_facts()
        started = time.perf_counter()
        MarkdownStore(root).load(SCOPE)
        samples.append(time.perf_counter() - started)
    return median_ms(samples)


def time_creates(root: Path, repeat: int) -> float:
    memory = Memory.open(
        root, MemoryConfig(max_facts=100), user=SCOPE.user_id, agent=SCOPE.agent, clock=lambda: NOW
    )
    memory.list_facts()
    samples = []
    for number in range(repeat):
        started = time.perf_counter()
        memory.create_fact(f"A new fact number {number}.", confidence=0.8)
        samples.append(time.perf_counter() - started)
    return median_ms(samples)


def time_fsync_floor(base: Path, repeat: int) -> float:
    samples = []
    with tempfile.TemporaryDirectory(dir=base) as directory:
        for number in range(repeat):
            started = time.perf_counter()
            atomic_write(Path(directory) / f"f{number}.json", b"{}")
            samples.append(time.perf_counter() - started)
    return median_ms(samples)


def fsync_counts(base: Path) -> dict[str, int]:
    """fsyncs of one warm commit and one create at the cap (untimed)."""
    with tempfile.TemporaryDirectory(dir=base) as directory:
        root = Path(directory)
        build_scope(root, 100)
        store = MarkdownStore(root)
        store.load(SCOPE)
        changes = ChangeSet(now=NOW, writes=(FactWrite(make_fact(0, "new"), create=True),))
        commit = count_fsyncs(lambda: store.commit(SCOPE, changes))
        config = MemoryConfig(max_facts=100)
        memory = Memory.open(root, config, user=SCOPE.user_id, agent=SCOPE.agent, clock=lambda: NOW)
        memory.create_fact("A first fact at the cap.", confidence=0.8)  # creates the archive
        create = count_fsyncs(lambda: memory.create_fact("A new fact at the cap.", confidence=0.8))
    return {"commit_100_warm": commit, "create_at_cap_100": create}


def cpu_reference_ms() -> float:
    """``sum(range(10**6))``: how fast this machine runs Python right now (best of 5)."""
    samples = []
    for _ in range(5):
        started = time.perf_counter()
        sum(range(10**6))
        samples.append(time.perf_counter() - started)
    return round(min(samples) * 1000, 1)


def run_on(base: Path, repeat: int) -> dict[str, float]:
    def fresh(size: int, action: Callable[[Path], float]) -> float:
        with tempfile.TemporaryDirectory(dir=base) as directory:
            root = Path(directory)
            build_scope(root, size)
            return action(root)

    return {
        "commit_100_warm": fresh(100, lambda r: time_commits(r, warm=True, repeat=repeat)),
        "commit_100_cold": fresh(100, lambda r: time_commits(r, warm=False, repeat=repeat)),
        "commit_10000_warm": fresh(10_000, lambda r: time_commits(r, warm=True, repeat=repeat)),
        "commit_10000_cold": fresh(10_000, lambda r: time_commits(r, warm=False, repeat=repeat)),
        "create_at_cap_100": fresh(100, lambda r: time_creates(r, repeat)),
        "cold_load_100": fresh(100, lambda r: time_cold_loads(r, repeat * 2)),
        "first_load_100": fresh(
            100, lambda r: time_cold_loads(r, repeat * 2, first_in_process=True)
        ),
        "fsync_floor": time_fsync_floor(base, repeat),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=Path.cwd(), help="file system to measure on")
    parser.add_argument("--repeat", type=int, default=40)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--fsyncs", action="store_true", help="count the fsyncs of two cases")
    args = parser.parse_args()
    bases = {"disk": args.dir}
    if Path("/dev/shm").is_dir():
        bases["tmpfs"] = Path("/dev/shm")
    results = {name: run_on(base, args.repeat) for name, base in bases.items()}
    info = {
        "cpu_reference_ms": cpu_reference_ms(),
        "date": time.strftime("%Y-%m-%d"),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "load": os.getloadavg()[0],
    }
    counts = fsync_counts(args.dir) if args.fsyncs else {}
    if args.json:
        dump = {"info": info, "results": results, "fsyncs": counts}
        print(json.dumps(dump, indent=2, sort_keys=True))
        return
    print(f"{info}")
    print(f"{'case':<22}" + "".join(f"{name:>12}" for name in results))
    for case in next(iter(results.values())):
        row = "".join(f"{results[name][case]:>12.3f}" for name in results)
        print(f"{case:<22}{row}")
    for case, count in counts.items():
        print(f"{case:<22}{count} fsyncs")


if __name__ == "__main__":
    main()
