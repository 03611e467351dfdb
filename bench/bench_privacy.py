"""Privacy costs (issue 26): erasing a large user, and what redaction adds to a create.

* **Erase** — a user with 5 agents × 100 facts and 1,000 archived facts (200
  per agent), its search index rows built by a search per agent, is erased
  with ``Memory.erase_user``; the user is built again before each run (not
  timed). Target ≤ 1 s on either store. Markdown on the disk the temporary
  directory is on; PostgreSQL a throwaway server (``fsync`` on).
* **Redaction on create** — ``create_fact`` of a 200-character fact with
  ``redact_secrets`` on and off, interleaved (the host drifts), on tmpfs to
  keep the fsyncs' noise out; and the redaction itself (``redact_fact`` of
  the created fact) timed alone. Target ≤ 1 ms p50 added.

Run: ``uv run python -m bench.bench_privacy [--runs 5] [--store markdown|postgres|both]``
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from deermem import Memory, MemoryConfig
from deermem.model import Fact, Scope, format_timestamp, redact_fact
from deermem.store import ArchiveEntry, ChangeSet, FactWrite, Store, open_store

USER = "bench-erase-user"
AGENTS = 5
FACTS = 100
ARCHIVED = 200  # per agent: 1,000 in all
NOW = datetime(2026, 12, 6, tzinfo=UTC)
WARM_UP = 50  # creates per setting before timing
TEXT = (
    "The deploy pipeline for the billing service runs on Fridays after the review; "
    "staging uses the eu-west cluster, and the on-call rota is in the team wiki page "
    "that Maria updates every sprint."
)  # 200 characters


def build_user(store: Store) -> None:
    """5 agents × (100 facts + 200 archive entries), and the summaries."""
    stamp = format_timestamp(NOW - timedelta(days=3))
    for agent in range(AGENTS):
        scope = Scope.of(USER, f"agent-{agent}")
        facts = [
            Fact.from_dict(
                {
                    "id": f"fact_{agent}_{n:04d}",
                    "content": f"{TEXT} ({agent}/{n})",
                    "createdAt": stamp,
                }
            )
            for n in range(FACTS)
        ]
        archive = tuple(
            ArchiveEntry(
                Fact.from_dict(
                    {
                        "id": f"fact_{agent}_a{n:04d}",
                        "content": f"old {n}: {TEXT}",
                        "createdAt": stamp,
                    }
                ),
                stamp,
                "capacity",
                "manual",
                None,
            )
            for n in range(ARCHIVED)
        )
        store.commit(
            scope,
            ChangeSet(
                now=NOW,
                writes=tuple(FactWrite(fact, create=True) for fact in facts),
                archive_puts=archive,
                summaries={("user", "workContext"): f"works on billing ({agent})"},
            ),
        )


def erase_runs(store: Store, runs: int) -> list[float]:
    config = MemoryConfig(max_facts=500)
    memory = Memory(store, config, None, clock=lambda: NOW)
    seconds = []
    for _ in range(runs):
        build_user(store)
        for agent in range(AGENTS):  # the index holds the user's rows
            memory.scoped(user=USER, agent=f"agent-{agent}").search("billing pipeline")
        start = time.perf_counter()
        result = memory.erase_user(USER)
        seconds.append(time.perf_counter() - start)
        assert result.counts["facts"] == AGENTS * FACTS
        assert result.counts["archived"] == AGENTS * ARCHIVED
    memory.close()
    return seconds


def erase_figures(kind: str, runs: int) -> list[float]:
    if kind == "markdown":
        with tempfile.TemporaryDirectory() as root:
            return erase_runs(open_store(MemoryConfig(), root), runs)
    from deermem.testing.postgres import TemporaryPostgres

    with TemporaryPostgres(fsync=True) as server:
        url = server.create_database("erase", migrated=True)
        store = open_store(MemoryConfig(store=url))
        try:
            return erase_runs(store, runs)
        finally:
            close = getattr(store, "close", None)
            if callable(close):
                close()


def create_figures(pairs: int) -> dict[str, float]:
    """Median ms of a create with redaction on and off (interleaved), and of the redaction."""
    shm = Path("/dev/shm")
    base = shm if shm.is_dir() else None
    timings: dict[str, list[float]] = {"on": [], "off": [], "redact_fact": []}
    with tempfile.TemporaryDirectory(dir=base) as root:
        memories = {
            setting: Memory.open(
                Path(root) / setting,
                MemoryConfig(max_facts=500, redact_secrets=setting == "on"),
                user="bench",
            )
            for setting in ("on", "off")
        }
        for number in range(-WARM_UP, pairs):
            # Alternating which goes first: the second of a pair runs on warmer caches.
            for setting in ("on", "off") if number % 2 else ("off", "on"):
                start = time.perf_counter()
                created = memories[setting].create_fact(
                    f"{TEXT} #{number}", topics=["billing", "deploy"]
                )
                if number >= 0:
                    timings[setting].append(time.perf_counter() - start)
            start = time.perf_counter()
            redact_fact(created.fact)
            timings["redact_fact"].append(time.perf_counter() - start)
        for memory in memories.values():
            memory.close()
    return {name: statistics.median(values) * 1000 for name, values in timings.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="erases per store")
    parser.add_argument("--pairs", type=int, default=300, help="create pairs (on/off)")
    parser.add_argument("--store", choices=("markdown", "postgres", "both"), default="both")
    options = parser.parse_args()
    kinds = ("markdown", "postgres") if options.store == "both" else (options.store,)
    for kind in kinds:
        seconds = erase_figures(kind, options.runs)
        print(
            f"erase {AGENTS}x{FACTS} facts + {AGENTS * ARCHIVED} archived, {kind}: "
            f"median {statistics.median(seconds) * 1000:.0f} ms, max {max(seconds) * 1000:.0f} ms "
            f"({options.runs} runs)"
        )
    figures = create_figures(options.pairs)
    added = figures["on"] - figures["off"]
    print(
        f"create_fact, tmpfs, {options.pairs} interleaved pairs: redaction on "
        f"{figures['on']:.3f} ms, off {figures['off']:.3f} ms (added {added:+.3f} ms); "
        f"redact_fact alone {figures['redact_fact']:.3f} ms"
    )


if __name__ == "__main__":
    main()
