"""Benchmark: what missed-recall detection costs a search.

Run with ``uv run python -m bench.bench_regret`` (``--json`` for a dump,
``--dir`` for the file system of the stores: the default is the current
directory, a disk; ``/dev/shm`` shows the CPU part alone).

For each library size (100 and 1,000 facts, ``--sizes``) one store holds the
library and an archive of as many facts, all drawn from one Zipf vocabulary
(as :mod:`bench.bench_context` draws them), so a query matches library and
archive alike. The store is copied twice: one :class:`~deermem.Memory` searches
it with detection (``regret_missed_recall``, the default), the other without,
each with its own search index. Both are warmed up (index built, archive
indexed), then the same 40 content-word queries (1–3 words of frequency rank
50–2,000; a quarter with a category filter) run against both in alternation,
query by query, ``--rounds`` times. Reported per size and variant: the median
and the 99th percentile over every timed search, and how many missed-recall
events the searches recorded — a search that finds one writes it durably,
which is the part of the cost a disk makes visible. The archive is as large
as the library and drawn from the same words, so most queries find one: a
worst case.

``first search after a commit`` times the search that follows a commit which
added one fact to the library and one to the archive: the index catches up
with one new library row and, with detection, one new archive row (the
archive is listed from its index and only the new entry is read).
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

from bench.bench_context import vocabulary, zipf_sampler
from deermem import Memory, MemoryConfig
from deermem.model import Fact, Scope
from deermem.store import ArchiveEntry, ChangeSet, FactWrite, MarkdownStore

NOW = datetime(2026, 11, 30, tzinfo=UTC)
SCOPE = Scope.of("bench-user", "bench-agent")
CATEGORIES = ("preference", "correction", "context", "goal", "behavior", "identity")


def make_facts(
    size: int, prefix: str, rng: random.Random, words: Callable[[int], list[str]]
) -> list[Fact]:
    return [
        Fact.from_dict(
            {
                "id": f"{prefix}_{number:08x}",
                "content": " ".join(words(rng.randint(4, 12))),
                "category": rng.choice(CATEGORIES),
                "confidence": rng.choice((0.5, 0.6, 0.7, 0.8, 0.9)),
                "createdAt": NOW - timedelta(days=rng.uniform(0, 200)),
            }
        )
        for number in range(size)
    ]


def build(root: Path, size: int) -> list[str]:
    """A store with ``size`` facts and ``size`` archived facts; returns the vocabulary."""
    rng = random.Random(size)
    vocab = vocabulary(5000, rng)
    words = zipf_sampler(vocab, rng)
    store = MarkdownStore(root, archive_max_entries=10 * size)
    library = make_facts(size, "fact", rng, words)
    archived = make_facts(size, "gone", rng, words)
    stamp = (NOW - timedelta(days=1)).isoformat().replace("+00:00", "Z")
    puts = tuple(
        ArchiveEntry(fact, stamp, "capacity", "manual", "rcpt_bench", policy_version="confidence")
        for fact in archived
    )
    store.commit(
        SCOPE,
        ChangeSet(
            now=NOW, writes=tuple(FactWrite(f, create=True) for f in library), archive_puts=puts
        ),
    )
    return vocab


def queries(vocab: list[str], rng: random.Random) -> list[tuple[str, str | None]]:
    out = []
    for number in range(40):
        text = " ".join(rng.choice(vocab[50:2000]) for _ in range(rng.randint(1, 3)))
        out.append((text, rng.choice(CATEGORIES) if number % 4 == 0 else None))
    return out


def open_memory(root: Path, detect: bool) -> Memory:
    config = MemoryConfig(max_facts=500, archive_max_entries=20_000, regret_missed_recall=detect)
    return Memory.open(root, config, user=SCOPE.user_id, agent=SCOPE.agent, clock=lambda: NOW)


def timed(run: Callable[[], object]) -> float:
    start = time.perf_counter()
    run()
    return (time.perf_counter() - start) * 1000


def percentile(samples: list[float], share: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def bench_size(base: Path, size: int, rounds: int) -> list[dict[str, Any]]:
    template = base / f"template-{size}"
    vocab = build(template, size)
    memories = {}
    for detect in (True, False):
        root = base / f"{'with' if detect else 'without'}-{size}"
        shutil.copytree(template, root)
        memories[detect] = open_memory(root, detect)
    asked = queries(vocab, random.Random(size + 1))
    samples: dict[bool, list[float]] = {True: [], False: []}
    for memory in memories.values():
        for text, category in asked:  # warm-up: the index, the archive rows
            memory.search(text, category=category)
    before = len(memories[True].store.regret_events(memories[True].scope))
    for number in range(rounds):
        for text, category in asked:
            order = (True, False) if number % 2 == 0 else (False, True)
            for detect in order:
                samples[detect].append(
                    timed(partial(memories[detect].search, text, category=category))
                )
    missed = len(memories[True].store.regret_events(memories[True].scope)) - before
    first: dict[bool, list[float]] = {True: [], False: []}
    extra = make_facts(20, "late", random.Random(size + 2), zipf_sampler(vocab, random.Random(9)))
    for number in range(10):
        for detect in (True, False):
            memory = memories[detect]
            entry = ArchiveEntry(
                extra[2 * number + 1], "2026-11-30T00:00:00Z", "capacity", None, None
            )
            memory.store.commit(
                memory.scope,
                ChangeSet(
                    now=NOW,
                    writes=(FactWrite(extra[2 * number], create=True),),
                    archive_puts=(entry,),
                ),
            )  # one more fact in the library, one more in the archive
            text, category = asked[number]
            first[detect].append(timed(partial(memory.search, text, category=category)))
    rows = []
    for detect in (True, False):
        rows.append(
            {
                "facts": size,
                "archived": size,
                "detection": detect,
                "searches": len(samples[detect]),
                "median_ms": round(statistics.median(samples[detect]), 3),
                "p99_ms": round(percentile(samples[detect], 0.99), 3),
                "first_after_commit_median_ms": round(statistics.median(first[detect]), 3),
                "missed_recall_events": missed if detect else 0,
            }
        )
    for memory in memories.values():
        memory.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--dir", type=Path, default=Path.cwd())
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(dir=args.dir, prefix="bench-regret-"))
    try:
        rows = [
            row
            for size in args.sizes.split(",")
            for row in bench_size(base, int(size), args.rounds)
        ]
    finally:
        shutil.rmtree(base, ignore_errors=True)
    machine = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "dir": str(args.dir),
    }
    if args.json:
        print(json.dumps({"machine": machine, "search": rows}, indent=2))
        return
    print(machine)
    for row in rows:
        print(row)


if __name__ == "__main__":
    main()
