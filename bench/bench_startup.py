"""Benchmark: the main path's start-up, as whole commands.

Run with ``uv run python -m bench.bench_startup`` (``--runs N``, ``--json``,
``--baseline CHECKOUT``).

Two targets of issue 11, each a fresh process timed as a user runs it,
interpreter start-up included and bytecode caches on:

* ``deermem facts list`` on a Markdown store of 100 facts (generated here);
* ``python -c "import deermem; deermem.Memory"``, what a program embedding the
  library pays before its first call.

``deermem --help`` is timed too (issue 21): the first thing a new user runs.

``import deermem; deermem.Memory.open(root)`` is timed too: the name is a
proxy for opening a memory, and this row keeps the proxy honest. ``python -c
pass`` is timed alongside as the floor no command can beat, and
``bench/startup_floor.py`` as the floor of each target's dependencies: typer,
pydantic, PyYAML and rich doing the command's work with no deermem code (rows
``floor: ...``). Each figure is the median of ``--runs`` runs after three warm-up runs (which write
the bytecode caches), wall-clock and CPU (user + system); CPU time is the
figure least disturbed when other work shares the machine.

``--baseline CHECKOUT`` times the same commands with another checkout's
``src`` first on ``PYTHONPATH`` — say ``git clone . /tmp/base`` at the commit
to compare with — alternating the two run by run (this, other, other, this,
...), and prints both medians and their ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from bench.bench_evaluation import time_command

FACTS = 100
# Whole command, start-up included (issue 11): what a user waits for.
TARGET_SECONDS = {"facts list": 0.25, "import deermem; deermem.Memory": 0.2}
CATEGORIES = ("preference", "context", "correction", "knowledge")
FLOOR = Path(__file__).with_name("startup_floor.py")


def prepare(root: Path) -> None:
    """A Markdown store of :data:`FACTS` facts under ``root``, written through the library."""
    from deermem import Memory

    memory = Memory.open(root, clock=lambda: datetime(2026, 1, 1, tzinfo=UTC))
    for index in range(FACTS):
        memory.create_fact(
            f"Fact {index}: prefers option {index} for task {index * 7}",
            category=CATEGORIES[index % len(CATEGORIES)],
            confidence=0.3 + 0.005 * index,
        )
    if len(memory.list_facts()) != FACTS:
        raise SystemExit(f"the generated store does not hold {FACTS} facts")


def commands(root: Path) -> dict[str, list[str]]:
    return {
        "python -c pass": [sys.executable, "-c", "pass"],
        "import deermem; deermem.Memory": [
            sys.executable,
            "-c",
            "import deermem; deermem.Memory",
        ],
        "import deermem; Memory.open(root)": [
            sys.executable,
            "-c",
            f"import deermem; deermem.Memory.open({str(root)!r})",
        ],
        "floor: Memory (dependencies only)": [sys.executable, str(FLOOR), "memory"],
        "facts list": [sys.executable, "-m", "deermem", "--root", str(root), "facts", "list"],
        "deermem --help": [sys.executable, "-m", "deermem", "--help"],
        "floor: facts list (dependencies only)": [
            *(sys.executable, str(FLOOR), "facts-list"),
            *("--root", str(root), "facts", "list"),
        ],
    }


def measure(root: Path, runs: int, baseline: Path | None) -> dict[str, dict[str, dict[str, float]]]:
    """Median wall and CPU ms per command and checkout, the checkouts alternating run by run."""
    sources: dict[str, str | None] = {"this": None}
    if baseline is not None:
        sources["other"] = str(baseline.resolve() / "src")
    results: dict[str, dict[str, dict[str, float]]] = {}
    for name, command in commands(root).items():
        for source in sources.values():
            time_command(command, 0, pythonpath=source)  # warm-ups write bytecode
        walls: dict[str, list[float]] = {label: [] for label in sources}
        cpus: dict[str, list[float]] = {label: [] for label in sources}
        for index in range(runs):
            order = list(sources) if index % 2 == 0 else list(reversed(sources))
            for label in order:
                wall, cpu = time_command(command, 1, warmups=0, pythonpath=sources[label])
                walls[label].extend(wall)
                cpus[label].extend(cpu)
        results[name] = {
            label: {
                "median_ms": statistics.median(walls[label]) * 1000,
                "min_ms": min(walls[label]) * 1000,
                "cpu_median_ms": statistics.median(cpus[label]) * 1000,
            }
            for label in sources
        }
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--baseline",
        type=Path,
        metavar="CHECKOUT",
        help="alternate every command with another deermem checkout; print both",
    )
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as temporary:
        root = Path(temporary) / "store"
        prepare(root)
        results = measure(root, args.runs, args.baseline)
    load_after = os.getloadavg()[0]
    if args.json:
        print(json.dumps({"load": [load_before, load_after], "commands": results}, indent=2))
        return
    print(f"{platform.python_implementation()} {platform.python_version()}, {platform.machine()}")
    print(f"{args.runs} runs per command and checkout after 3 warm-ups")
    print(f"load average (1 min) before / after: {load_before:.2f} / {load_after:.2f}")
    header = f"{'command':<40}{'checkout':<10}{'median ms':>11}{'min ms':>9}{'cpu ms':>9}"
    print(header + f"{'target ms':>11}")
    for name, by_checkout in results.items():
        target = TARGET_SECONDS.get(name)
        shown = f"{target * 1000:.0f}" if target else "-"
        for label, result in by_checkout.items():
            print(
                f"{name:<40}{label:<10}{result['median_ms']:>11.0f}{result['min_ms']:>9.0f}"
                f"{result['cpu_median_ms']:>9.0f}{shown:>11}"
            )


if __name__ == "__main__":
    main()
