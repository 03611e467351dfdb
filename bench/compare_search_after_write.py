"""Benchmark: the first search after a write, deermem beside the original DeerMem (issue 23.1).

The agent's loop in tool mode: it writes a fact, and its next turn searches.
Each system gets its own copy of the same store (deermem writes the
original's file format), held open by a worker process of its own, and the
two are driven in alternation, round by round: a write (untimed), then the
first search after it (timed): a few content words of the library and the
written fact's own word, so it should come first; how often it was missed is
reported, and the same search once more (warm) for scale.

* 500 facts: the write is a create (at the cap of 500 a fact is evicted; the
  created fact is deleted again after the search, untimed);
* 10,000 facts: the write is an update of one fact's text (no capacity gate).

deermem runs with its defaults and ``search_mode: keyword`` (the original has
no search by meaning; ``--hybrid`` adds deermem's hybrid search as another
column). The original's column is its FTS5 engine alone (``search_facts``,
the yardstick of issue 23's table). ``--public`` adds the original's public
search, ``DeerMem.search`` of a DeerMem built from the checkout — what
DeerFlow's memory_search tool calls: the engine, its compatibility layer,
and, when the engine finds nothing, a scan of every fact's text; the rounds
are also split by whether the engine found anything.

Both run the ``confidence`` policy, the default of a store in the original's
format. ``--policy hybrid-v1`` runs both under ``hybrid-v1``, the default a
store deermem creates records: then a search's results count as recalls,
written durably before the search returns (the original's engine column
records them after ``search_facts`` as ``DeerMem.search`` does).

``--floor`` adds the floor of any keyword search of deermem's: a worker that
writes through deermem the same way, then times only the index's ranking
(``SearchIndex.search``: the scope's row range and FTS5's ranking statement —
BM25, decay and confidence over every match, the top 5) on the memory's own
connection, the one its write brought up to date.

The original is imported from a DeerFlow checkout given by path (as
``scripts/check-deerflow.sh`` takes one), in an interpreter that has its
dependencies (PyYAML, pydantic, langchain-core: ``--original-python``); none
of its code is part of this repository.

Run: ``uv run python -m bench.compare_search_after_write --deerflow PATH
[--original-python PYTHON] [--rounds 40] [--floor] [--policy hybrid-v1] [--public]``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
from collections.abc import Sequence
from datetime import date
from pathlib import Path
from typing import Any

from bench._timing import LineWorker

BACKEND = Path("backend/packages/harness/deerflow/agents/memory/backends/deermem")
USER, AGENT = "bench", "writer"
SIZES = (500, 10_000)

# The original's side. ``engine``: its storage and updater, as its DeerMem drives
# them for a search (``search_facts``, the FTS5 engine, without the adapter's
# compatibility layer and substring fallback) and a create (retrieval rebuilt
# for the scope once, at start). ``public``: a DeerMem built from the DeerFlow
# checkout (its ``deerflow`` package must import in ``--original-python``), searched
# through ``DeerMem.search`` — what DeerFlow's memory_search tool calls. Each line
# answered: the first search's ms, whether it found the fact just written, the
# same search again (ms), and whether the engine found nothing (then the public
# search scanned every fact's text).
_ORIGINAL = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
from deermem.config import DeerMemConfig
from deermem.core.storage import create_storage
from deermem.core.updater import MemoryUpdater

root, size, policy, mode = sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
settings = {"storage_path": root, "max_facts": 500, "fact_eviction_policy": policy}
where = {"agent_name": "AGENT", "user_id": "USER"}
scope = [{"userId": "USER", "agentName": "AGENT"}]
if mode == "public":
    from deerflow.agents.memory.backends.deermem.deer_mem import DeerMem
    memory = DeerMem(backend_config=settings)
    storage, updater = memory._storage, memory._updater
    def search(query):
        return memory.search(query, top_k=5, **where)
else:
    config = DeerMemConfig(**settings)
    storage = create_storage(config)
    updater = MemoryUpdater(config, storage)
    def search(query):
        found = storage.search_facts(query, scopes=scope, top_k=5, mode="hybrid")
        if policy == "hybrid-v1" and found:  # as DeerMem.search records access heat
            accessed = [str(r.get("fact", r).get("id")) for r in found]
            storage.record_fact_accesses(accessed, **where)
        return found
storage.rebuild_index(scope)
ids = sorted(f["id"] for f in updater.get_memory_data(**where)["facts"])
print("ready", flush=True)
for line in sys.stdin:
    number, query = line.rstrip("\n").split("\t")
    n = int(number)
    word = f"stakalo{n}"
    if size <= 500:
        _, fact_id = updater.create_memory_fact(
            f"Bench fact {n} about {word}", confidence=0.99, **where
        )
    else:
        fact_id = ids[n % len(ids)]
        updater.update_memory_fact(fact_id, content=f"Bench fact {n} about {word}", **where)
    start = time.perf_counter()
    found = search(query)
    elapsed = (time.perf_counter() - start) * 1000
    start = time.perf_counter()
    search(query)
    warm = (time.perf_counter() - start) * 1000
    hit = any((r.get("fact", r).get("id") == fact_id) for r in found)
    empty = not storage.search_facts(query, scopes=scope, top_k=5, mode="hybrid")
    if size <= 500 and fact_id:
        updater.delete_memory_fact(fact_id, **where)
    print(json.dumps([elapsed, hit, warm, empty]), flush=True)
""".replace("USER", USER).replace("AGENT", AGENT)


def deermem_worker(root: Path, size: int, mode: str, policy: str) -> None:
    """deermem's side, in this process: the same loop through ``Memory``.

    In ``floor`` mode the search is the index's ranking alone
    (:meth:`SearchIndex.search`) on the memory's own index connection, which
    the memory's write has just brought up to date: no freshness checks, no
    archive, no recording.
    """
    import time

    from bench.bench_context import NOW
    from deermem import Memory, MemoryConfig

    floor = mode == "floor"
    config = MemoryConfig(
        max_facts=500, search_mode="keyword" if floor else mode, fact_eviction_policy=policy
    )
    memory = Memory.open(root, config, user=USER, agent=AGENT, clock=lambda: NOW)
    memory.search("warm", record=False)
    ids = sorted(fact.id for fact in memory.list_facts())
    index = memory._search_index.get(memory.store)  # the connection the memory's writes update

    def search(query: str) -> list[str]:
        if floor:
            return [hit.fact_id for hit in index.search(USER, AGENT, query, now=NOW, top_k=5)]
        return [result.fact_id for result in memory.search(query, top_k=5)]

    print("ready", flush=True)
    for line in sys.stdin:
        number, query = line.rstrip("\n").split("\t")
        n = int(number)
        word = f"stakalo{n}"
        if size <= 500:
            fact_id = memory.create_fact(f"Bench fact {n} about {word}", confidence=0.99).fact_id
        else:
            fact_id = ids[n % len(ids)]
            memory.update_fact(fact_id, content=f"Bench fact {n} about {word}")
        start = time.perf_counter()
        found = search(query)
        elapsed = (time.perf_counter() - start) * 1000
        start = time.perf_counter()
        search(query)
        warm = (time.perf_counter() - start) * 1000
        hit = fact_id in found
        if size <= 500 and fact_id:
            memory.delete_fact(fact_id)
        print(json.dumps([elapsed, hit, warm, False]), flush=True)


class Worker(LineWorker):
    """One system's side, answering a round per line (see the module docstring)."""

    def __init__(self, command: Sequence[str]) -> None:
        super().__init__(command)
        assert self.first == "ready", "worker did not start"

    def round(self, n: int, query: str) -> tuple[float, bool, float, bool]:
        """The first search's ms, whether it found the fact written, the same search
        again (ms), and whether the original's engine found nothing."""
        elapsed, hit, warm, empty = self.ask(f"{n}\t{query}")
        return float(elapsed), bool(hit), float(warm), bool(empty)


def compare(
    deerflow: Path,
    original_python: str,
    size: int,
    rounds: int,
    hybrid: bool,
    floor: bool,
    policy: str,
    public: bool = False,
) -> dict[str, Any]:
    from bench.bench_context import library, query_sets, write_scope
    from deermem.model import Scope

    queries = query_sets(random.Random(11))["content words"]

    package = deerflow / BACKEND
    if not (package / "deermem" / "core" / "retrieval.py").is_file():
        raise SystemExit(f"{deerflow} holds no original DeerMem at {BACKEND}")
    with tempfile.TemporaryDirectory() as directory:
        base = Path(directory) / "base"
        write_scope(base, Scope.of(USER, AGENT), library(size, seed=7))
        workers: dict[str, Worker] = {}
        roots = {"original": "engine", "deermem": "keyword"}
        if public:
            roots["original DeerMem.search"] = "public"
        if hybrid:
            roots["deermem hybrid"] = "hybrid"
        if floor:
            roots["FTS5 ranking alone"] = "floor"
        for name in roots:
            shutil.copytree(base, Path(directory) / name)
        for name, mode in roots.items():
            if mode in ("engine", "public"):
                workers[name] = Worker(
                    [
                        original_python,
                        "-c",
                        _ORIGINAL,
                        str(package),
                        str(Path(directory) / name),
                        str(size),
                        policy,
                        mode,
                    ]
                )
            else:
                workers[name] = Worker(
                    [
                        sys.executable,
                        "-m",
                        "bench.compare_search_after_write",
                        "--worker",
                        str(Path(directory) / name),
                        "--size",
                        str(size),
                        "--mode",
                        mode,
                        "--policy",
                        policy,
                    ]
                )
        samples: dict[str, list[float]] = {name: [] for name in workers}
        missed: dict[str, int] = dict.fromkeys(workers, 0)
        warm: dict[str, list[float]] = {name: [] for name in workers}
        # The rounds in which the original's engine found nothing, per worker.
        empty: dict[str, list[bool]] = {name: [] for name in workers}
        try:
            for n, (words, _) in zip(range(rounds), itertools.cycle(queries), strict=False):
                query = f"stakalo{n} {words}"  # the fact just written, among content words
                for name, worker in workers.items():  # alternated, round by round
                    elapsed, hit, again, nothing = worker.round(n, query)
                    samples[name].append(elapsed)
                    warm[name].append(again)
                    missed[name] += not hit
                    empty[name].append(nothing)
        finally:
            for worker in workers.values():
                worker.close()
    medians = {name: statistics.median(values) for name, values in samples.items()}
    return {
        "facts": size,
        "write": "create" if size <= 500 else "update",
        "policy": policy,
        "median_ms": medians,
        "same_search_again_median_ms": {
            name: statistics.median(values) for name, values in warm.items()
        },
        "ratio_original_over_deermem": medians["original"] / medians["deermem"],
        "missed": missed,
        **(_public_split(samples, empty, medians) if public else {}),
    }


def _public_split(
    samples: dict[str, list[float]], empty: dict[str, list[bool]], medians: dict[str, float]
) -> dict[str, Any]:
    """The original's public search beside deermem, split by whether its engine found
    anything: when it finds nothing, ``DeerMem.search`` scans every fact's text."""
    public = "original DeerMem.search"
    split: dict[str, Any] = {
        "ratio_original_public_over_deermem": medians[public] / medians["deermem"],
        "original_engine_found_nothing": sum(empty[public]),
    }
    for label, wanted in (("engine_found_something", False), ("engine_found_nothing", True)):
        rounds = [n for n, nothing in enumerate(empty[public]) if nothing is wanted]
        if rounds:
            split[f"median_ms_when_{label}"] = {
                name: statistics.median(samples[name][n] for n in rounds)
                for name in (public, "original", "deermem")
            }
    return split


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--deerflow", type=Path, help="a DeerFlow checkout")
    parser.add_argument("--original-python", default=sys.executable)
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--hybrid", action="store_true", help="also deermem's hybrid search")
    parser.add_argument("--floor", action="store_true", help="also FTS5's ranking statement alone")
    parser.add_argument(
        "--policy",
        choices=("confidence", "hybrid-v1"),
        default="confidence",
        help="both systems' eviction policy (hybrid-v1: each search records its recalls)",
    )
    parser.add_argument(
        "--public",
        action="store_true",
        help="also the original's DeerMem.search (its deerflow package must import)",
    )
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--mode", default="keyword", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker is not None:
        deermem_worker(args.worker, args.size, args.mode, args.policy)
        return
    if args.deerflow is None:
        parser.error("--deerflow is required")
    print(
        f"{date.today()} · {platform.processor() or platform.machine()} · {os.cpu_count()} CPUs"
        f" · load {os.getloadavg()[0]:.1f} · {args.rounds} alternated rounds · {args.policy}"
    )
    for size in map(int, args.sizes.split(",")):
        print(
            json.dumps(
                compare(
                    args.deerflow,
                    args.original_python,
                    size,
                    args.rounds,
                    args.hybrid,
                    args.floor,
                    args.policy,
                    args.public,
                )
            )
        )


if __name__ == "__main__":
    main()
