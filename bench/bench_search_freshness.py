"""Benchmark: what keeping the search index in step with the facts' content costs a search.

``Memory.search`` brings a scope's index rows up to a version token before it
searches. The token is a digest of what the index holds of each fact
(``content_version``), so a fact edited by hand is noticed; computing it
reads every fact. Three ways are timed in alternation (A B C A B C …) on the
same warm scope, each ``Memory`` with its own index:

* **memoised** — deermem's: the token is computed once per snapshot (a store
  hands out the same snapshot object until the scope changes);
* **per search** — the token computed again for every search;
* **store token** — the store's own version token (``memory.json``'s
  signature), as before: blind to hand edits, shown for comparison.

Run: ``uv run python -m bench.bench_search_freshness``.
"""

from __future__ import annotations

import argparse
import platform
import random
import shutil
import tempfile
from collections.abc import Callable
from datetime import date
from pathlib import Path

from bench._timing import interleaved_ms
from bench.bench_context import NOW, library, query_sets, write_scope
from deermem import Memory, MemoryConfig
from deermem.model import Scope
from deermem.recall.index import SearchIndexHandle, content_version
from deermem.store import ScopeSnapshot

SIZES = (100, 500, 10_000)


class _PerSearch(SearchIndexHandle):
    def version_of(self, snapshot: ScopeSnapshot) -> str:
        return content_version(snapshot.facts)


class _StoreToken(SearchIndexHandle):
    def version_of(self, snapshot: ScopeSnapshot) -> str:
        return snapshot.version


def bench_size(directory: Path, size: int, budget_s: float) -> dict[str, float]:
    roots = {name: directory / name for name in ("memoised", "per search", "store token")}
    first = roots["memoised"]
    write_scope(first, Scope.of("user", "s"), library(size, seed=2))
    for root in list(roots.values())[1:]:
        shutil.copytree(first, root)
    memories = {
        name: Memory.open(root, MemoryConfig(), user="user", agent="s", clock=lambda: NOW)
        for name, root in roots.items()
    }
    memories["per search"]._search_index = _PerSearch()
    memories["store token"]._search_index = _StoreToken()
    queries = [query for query, _ in query_sets(random.Random(3))["content words"][:10]]

    def searching(memory: Memory) -> Callable[[], object]:
        position = [0]

        def run() -> object:
            position[0] = (position[0] + 1) % len(queries)
            return memory.search(queries[position[0]], record=False)

        return run

    try:
        return interleaved_ms(
            {name: searching(memory) for name, memory in memories.items()}, budget_s
        )
    finally:
        for memory in memories.values():
            memory.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=6.0, help="seconds per size")
    args = parser.parse_args()
    print(f"{platform.machine()} Python {platform.python_version()}, {date.today()}")
    print("Memory.search, warm, top 5 (median ms)")
    for size in SIZES:
        with tempfile.TemporaryDirectory() as directory:
            medians = bench_size(Path(directory), size, args.budget)
        cells = "  ".join(f"{name} {value:.3f}" for name, value in medians.items())
        print(f"  {size:>6,} facts: {cells}")


if __name__ == "__main__":
    main()
