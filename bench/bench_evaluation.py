"""Benchmark: ``deermem eval validate`` and ``run-policy`` as whole commands.

Run with ``uv run python -m bench.bench_evaluation`` (``--runs N``, ``--json``).

The commands run on a generated LongMemEval-shaped file of 15 MB — the size of
the real ``longmemeval_oracle.json`` — with the bundled protocol re-pinned to
its hash (``tests/evaluation/longmemeval_data.py``). Each command is timed as
a fresh process, interpreter start-up included, exactly as a user runs it:
the median and the minimum of ``--runs`` runs after three warm-up runs, and
the median CPU time (user + system, child processes included) — the figure
least disturbed when other work shares the machine. ``python -c pass`` is
timed alongside as the floor no command can beat.

Bytecode caches are on for the timed processes (the warm-up runs write them),
as in any normal installation; a sandbox that sets
``PYTHONDONTWRITEBYTECODE=1`` would otherwise recompile every module on
every run.

A second table breaks one in-process ``run-policy`` into its phases.

``--baseline CHECKOUT`` times ``validate`` and ``run-policy`` of another
checkout of deermem — say ``git clone . /tmp/base && git -C /tmp/base
checkout main`` — against this one, with the same interpreter and packages
(the other's ``src`` first on ``PYTHONPATH``), alternating the two run by run
on the same file, and prints both medians and their ratio. On a shared or
frequency-scaling machine that ratio is far steadier than two series timed
one after the other. The baseline should be a git checkout (its ``run.json``
then asks git, as this one's does) that may receive bytecode caches.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from tests.evaluation.longmemeval_data import build_rows, copy_protocol, write_dataset

TARGET_BYTES = 15_000_000
# Whole command, start-up included (issue 11): what a user waits for.
TARGET_SECONDS = {"validate": 0.5, "run-policy": 0.5}


def prepare(directory: Path) -> tuple[Path, list[str]]:
    dataset = directory / "longmemeval_oracle.json"
    sha256 = write_dataset(dataset, build_rows(padding_bytes=TARGET_BYTES))
    files = copy_protocol(directory / "bundle", sha256)
    protocol = [
        "--config",
        str(files.config),
        "--official-manifest",
        str(files.official_manifest),
        "--synthetic-manifest",
        str(files.synthetic_manifest),
    ]
    return dataset, protocol


def time_command(
    command: list[str],
    runs: int,
    *,
    before: Callable[[], None] | None = None,
    warmups: int = 3,
    pythonpath: str | None = None,
) -> tuple[list[float], list[float]]:
    """Wall-clock and CPU (user + system, children included) seconds per run."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    wall: list[float] = []
    cpu: list[float] = []
    for index in range(runs + warmups):
        if before is not None:
            before()
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL)
        elapsed = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if index >= warmups:  # the first runs warm the page cache and write bytecode
            wall.append(elapsed)
            cpu.append(after.ru_utime - usage.ru_utime + after.ru_stime - usage.ru_stime)
    return wall, cpu


def commands(dataset: Path, protocol: list[str], output: Path) -> dict[str, list[str]]:
    deermem = [sys.executable, "-m", "deermem"]
    return {
        "python -c pass": [sys.executable, "-c", "pass"],
        "validate-contracts": [*deermem, "eval", "validate-contracts", *protocol],
        "validate": [*deermem, "eval", "validate", *protocol, "--dataset", str(dataset)],
        "run-policy": [
            *deermem,
            "eval",
            "run-policy",
            *protocol,
            "--dataset",
            str(dataset),
            "--output-dir",
            str(output),
        ],
    }


def compare(
    baseline: Path, dataset: Path, protocol: list[str], output: Path, runs: int
) -> dict[str, dict[str, float]]:
    """Median wall and CPU ms of ``validate`` and ``run-policy``, this vs ``baseline``, interleaved.

    Both checkouts' bytecode caches are written by three warm-up runs each;
    the timed runs alternate (this, other, other, this, ...).
    """
    sources = {"this": None, "other": str(baseline.resolve() / "src")}
    timings: dict[tuple[str, str], tuple[list[float], list[float]]] = {}
    for name in ("validate", "run-policy"):
        command = commands(dataset, protocol, output)[name]
        for source in sources.values():
            time_command(command, 0, before=lambda: _clear(output), pythonpath=source)
        for index in range(runs):
            order = list(sources) if index % 2 == 0 else list(reversed(sources))
            for label in order:
                wall, cpu = time_command(
                    command, 1, before=lambda: _clear(output), warmups=0, pythonpath=sources[label]
                )
                walls, cpus = timings.setdefault((name, label), ([], []))
                walls.extend(wall)
                cpus.extend(cpu)
    results: dict[str, dict[str, float]] = {}
    for name in ("validate", "run-policy"):
        this_wall, this_cpu = timings[name, "this"]
        other_wall, other_cpu = timings[name, "other"]
        results[name] = {
            "this_median_ms": statistics.median(this_wall) * 1000,
            "other_median_ms": statistics.median(other_wall) * 1000,
            "this_cpu_median_ms": statistics.median(this_cpu) * 1000,
            "other_cpu_median_ms": statistics.median(other_cpu) * 1000,
            "ratio": statistics.median(this_wall) / statistics.median(other_wall),
        }
    return results


def phases(dataset: Path, protocol: list[str], output: Path) -> dict[str, float]:
    """One run-policy in this process, phase by phase (milliseconds)."""
    from deermem.eval.dataset import build_cases, load_dataset
    from deermem.eval.policy_run import run_policy, write_policy_run
    from deermem.eval.protocol import ProtocolFiles, load_protocol

    files = ProtocolFiles(Path(protocol[1]), Path(protocol[3]), Path(protocol[5]))
    marks = [("start", time.perf_counter())]
    loaded = load_protocol(files)
    marks.append(("contract load", time.perf_counter()))
    data = load_dataset(dataset, expected_sha256=loaded.config.dataset.sha256)
    marks.append(("dataset read + SHA-256 + JSON", time.perf_counter()))
    cases = build_cases(loaded, data)
    marks.append(("selection, bank, 45 pools", time.perf_counter()))
    outcomes = run_policy(loaded, cases)
    marks.append(("270 selector calls", time.perf_counter()))
    write_policy_run(output, loaded, data.sha256, outcomes)
    marks.append(("rows, summary, run.json written", time.perf_counter()))
    return {name: (end - begin) * 1000 for (_, begin), (name, end) in itertools.pairwise(marks)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--baseline",
        type=Path,
        metavar="CHECKOUT",
        help="interleave validate and run-policy with another deermem checkout; print the ratio",
    )
    args = parser.parse_args()
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as temporary:
        directory = Path(temporary)
        dataset, protocol = prepare(directory)
        output = directory / "out"
        if args.baseline:
            compared = compare(args.baseline, dataset, protocol, output, args.runs)
            print(json.dumps(compared, indent=2) if args.json else _comparison_text(compared, load))
            return
        results: dict[str, dict[str, float]] = {}
        for name, command in commands(dataset, protocol, output).items():

            def clear() -> None:
                for path in output.glob("*"):
                    path.unlink()

            wall, cpu = time_command(command, args.runs, before=clear)
            results[name] = {
                "median_ms": statistics.median(wall) * 1000,
                "min_ms": min(wall) * 1000,
                "cpu_median_ms": statistics.median(cpu) * 1000,
            }
        clear()
        breakdown = phases(dataset, protocol, output)
        size = dataset.stat().st_size
    if args.json:
        print(
            json.dumps(
                {"dataset_bytes": size, "commands": results, "phases_ms": breakdown}, indent=2
            )
        )
        return
    print(f"{platform.python_implementation()} {platform.python_version()}, {platform.machine()}")
    print(f"dataset: {size / 1e6:.1f} MB generated; {args.runs} runs per command after 3 warm-ups")
    print(f"load average before: {load:.2f}")
    print(f"{'command':<30}{'median ms':>11}{'min ms':>9}{'cpu ms':>9}{'target ms':>11}")
    for name, result in results.items():
        target = TARGET_SECONDS.get(name)
        shown = f"{target * 1000:.0f}" if target else "-"
        print(
            f"{name:<30}{result['median_ms']:>11.0f}{result['min_ms']:>9.0f}"
            f"{result['cpu_median_ms']:>9.0f}{shown:>11}"
        )
    print("\nrun-policy in-process phases (ms):")
    for name, milliseconds in breakdown.items():
        print(f"  {name:<34}{milliseconds:>7.1f}")


def _clear(output: Path) -> None:
    for path in output.glob("*"):
        path.unlink()


def _comparison_text(results: dict[str, dict[str, float]], load: float) -> str:
    lines = [
        f"load average before: {load:.2f}; runs alternate between the two checkouts",
        f"{'command':<14}{'this ms':>9}{'other ms':>10}{'ratio':>7}"
        f"{'this cpu':>10}{'other cpu':>11}",
    ]
    for name, result in results.items():
        lines.append(
            f"{name:<14}{result['this_median_ms']:>9.0f}{result['other_median_ms']:>10.0f}"
            f"{result['ratio']:>7.3f}{result['this_cpu_median_ms']:>10.0f}"
            f"{result['other_cpu_median_ms']:>11.0f}"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
