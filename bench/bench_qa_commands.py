"""Benchmark: ``deermem eval grade-qa`` and ``verify`` on 90 rows, as whole commands.

Run with ``uv run python -m bench.bench_qa_commands`` (``--runs N``, ``--json``;
``--baseline CHECKOUT`` alternates each command between this checkout and
another one and prints both medians, for a before/after on a drifting host).

Set-up (not timed): a generated LongMemEval-shaped file of 15 MB — the size of
the real ``longmemeval_oracle.json`` — with the bundled protocol re-pinned to
its hash, and a complete ``run-qa`` directory of 90 answers made over real
HTTP against the scripted server of ``deermem.testing`` (the test oracle,
which answers when the support fact was kept).

Timed, each as a fresh process with interpreter start-up included, exactly as
a user runs them (median and minimum wall time of ``--runs`` runs after three
warm-ups, and median CPU time):

* ``grade-qa`` — contract load, marker check, dataset hash and parse, the 45
  pools, the 90 tasks and fingerprints, every stored answer read and checked,
  grading, McNemar and 3 × 10,000 bootstrap resamples, three files written
  (the result files are removed between runs, outside the timing);
* ``verify`` — on that graded directory, and with no directory: the original
  project's 90 published rows, shipped with the package.

A second table breaks one in-process ``grade-qa`` into its phases.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.bench_evaluation import prepare, time_command
from deermem.eval.published import DEFAULT_PUBLISHED, PUBLISHED

TARGET_S = 1.0


def answer_all(dataset: Path, protocol: list[str], directory: Path) -> None:
    """A complete run-qa directory: 90 answers over HTTP from the scripted oracle."""
    from tests.evaluation.qa_support import Oracle, serving

    from deermem.eval.answerers import HttpAnswerer, resolve_endpoint
    from deermem.eval.dataset import build_cases, load_dataset
    from deermem.eval.protocol import ProtocolFiles, load_protocol
    from deermem.eval.qa import (
        RequestSettings,
        build_answer_tasks,
        run_qa,
    )

    files = ProtocolFiles(Path(protocol[1]), Path(protocol[3]), Path(protocol[5]))
    loaded = load_protocol(files)
    cases = build_cases(loaded, load_dataset(dataset, expected_sha256=loaded.config.dataset.sha256))
    tasks = build_answer_tasks(loaded, cases, RequestSettings.from_protocol(loaded))
    qa = loaded.config.qa
    with serving(Oracle(cases, tasks)) as server:
        environ = {qa.base_url_env: server.url, qa.api_key_env: "bench-key"}
        answerer = HttpAnswerer(qa, resolve_endpoint(qa, environ), environ=environ)
        try:
            summary = run_qa(loaded, dataset, directory, answerer)
        finally:
            answerer.close()
    assert summary.called == 90, summary


def phases(dataset: Path, protocol: list[str], directory: Path) -> dict[str, float]:
    """One grade-qa in this process, phase by phase (milliseconds)."""
    from deermem.eval.dataset import build_cases, load_dataset
    from deermem.eval.protocol import ProtocolFiles, load_protocol
    from deermem.eval.qa import (
        RequestSettings,
        build_answer_tasks,
        check_marker,
        collect_answers,
        grade_answers,
    )
    from deermem.eval.rows import build_qa_report, write_qa_report

    files = ProtocolFiles(Path(protocol[1]), Path(protocol[3]), Path(protocol[5]))
    marks = [("start", time.perf_counter())]
    loaded = load_protocol(files)
    model = check_marker(directory, loaded, model=None, refusal="", required=True)
    marks.append(("contract load + marker", time.perf_counter()))
    data = load_dataset(dataset, expected_sha256=loaded.config.dataset.sha256)
    marks.append(("dataset read + SHA-256 + JSON", time.perf_counter()))
    cases = build_cases(loaded, data)
    tasks = build_answer_tasks(loaded, cases, RequestSettings.from_protocol(loaded, model=model))
    marks.append(("45 pools, 90 tasks + fingerprints", time.perf_counter()))
    stored = collect_answers(directory, tasks)
    marks.append(("90 stored answers read + checked", time.perf_counter()))
    rows = grade_answers(tasks, stored)
    marks.append(("90 answers graded", time.perf_counter()))
    report = build_qa_report(rows, protocol_id=loaded.protocol_id)
    marks.append(("summary, McNemar, bootstrap", time.perf_counter()))
    write_qa_report(directory, report)
    marks.append(("three files written", time.perf_counter()))
    return {name: (end - begin) * 1000 for (_, begin), (name, end) in itertools.pairwise(marks)}


def compare(
    baseline: Path,
    commands: dict[str, tuple[list[str], Callable[[], None] | None]],
    runs: int,
) -> dict[str, dict[str, float]]:
    """Median wall and CPU ms of each command in both checkouts, runs alternating.

    Both trees' bytecode caches are written by warm-up runs first; then the
    order alternates (this, other, other, this, ...), so drift hits both alike.
    """
    sources = {"this": None, "other": str(baseline.resolve() / "src")}
    results: dict[str, dict[str, float]] = {}
    for name, (command, before) in commands.items():
        for source in sources.values():
            time_command(command, 0, before=before, pythonpath=source)
        timings: dict[str, tuple[list[float], list[float]]] = {label: ([], []) for label in sources}
        for index in range(runs):
            order = list(sources) if index % 2 == 0 else list(reversed(sources))
            for label in order:
                wall, cpu = time_command(
                    command, 1, before=before, warmups=0, pythonpath=sources[label]
                )
                timings[label][0].extend(wall)
                timings[label][1].extend(cpu)
        results[name] = {
            f"{label}_{kind}_median_ms": statistics.median(values) * 1000
            for label, pair in timings.items()
            for kind, values in zip(("wall", "cpu"), pair, strict=True)
        }
    return results


def _comparison_text(results: dict[str, dict[str, float]], load: float) -> str:
    lines = [
        f"{platform.python_implementation()} {platform.python_version()}, {platform.machine()}",
        f"load average before: {load:.2f}; runs alternate between the two checkouts",
        f"{'command':<28}{'this ms':>9}{'other ms':>10}{'this cpu':>10}{'other cpu':>11}",
    ]
    for name, r in results.items():
        lines.append(
            f"{name:<28}{r['this_wall_median_ms']:>9.0f}{r['other_wall_median_ms']:>10.0f}"
            f"{r['this_cpu_median_ms']:>10.0f}{r['other_cpu_median_ms']:>11.0f}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--baseline",
        type=Path,
        metavar="CHECKOUT",
        help="alternate grade-qa and verify with another deermem checkout; print both medians",
    )
    args = parser.parse_args()
    load = os.getloadavg()[0]
    deermem = [sys.executable, "-m", "deermem", "eval"]
    with tempfile.TemporaryDirectory() as temporary:
        root = Path(temporary)
        dataset, protocol = prepare(root)
        run = root / "run"
        answer_all(dataset, protocol, run)
        results_files = [
            run / name for name in ("qa.rows.jsonl", "qa.summary.json", "qa.stats.json")
        ]

        def clear() -> None:
            for path in results_files:
                path.unlink(missing_ok=True)

        if args.baseline:
            shipped = str(PUBLISHED[DEFAULT_PUBLISHED].directory)  # a path both trees accept
            grade = [*deermem, "grade-qa", *protocol, "--dataset", str(dataset)]
            compared = compare(
                args.baseline,
                {
                    "grade-qa": ([*grade, "--output-dir", str(run)], clear),
                    "verify (published results)": ([*deermem, "verify", shipped], None),
                },
                args.runs,
            )
            print(json.dumps(compared, indent=2) if args.json else _comparison_text(compared, load))
            return

        commands = {
            "grade-qa": (
                [
                    *deermem,
                    "grade-qa",
                    *protocol,
                    "--dataset",
                    str(dataset),
                    "--output-dir",
                    str(run),
                ],
                clear,
            ),
            "verify (the graded run)": ([*deermem, "verify", str(run)], None),
            "verify (published results)": ([*deermem, "verify"], None),
        }
        results: dict[str, dict[str, float]] = {}
        for name, (command, before) in commands.items():
            wall, cpu = time_command(command, args.runs, before=before)
            results[name] = {
                "median_ms": statistics.median(wall) * 1000,
                "min_ms": min(wall) * 1000,
                "cpu_median_ms": statistics.median(cpu) * 1000,
            }
            if name == "grade-qa":
                graded = {path.name: path.read_bytes() for path in results_files}
        clear()
        breakdown = phases(dataset, protocol, run)
        identical = graded == {path.name: path.read_bytes() for path in results_files}
    if args.json:
        print(
            json.dumps(
                {"commands": results, "phases_ms": breakdown, "byte_identical": identical},
                indent=2,
            )
        )
        return
    print(f"{platform.python_implementation()} {platform.python_version()}, {platform.machine()}")
    print(f"{args.runs} runs per command after 3 warm-ups; load average before: {load:.2f}")
    print(f"{'command':<30}{'median ms':>11}{'min ms':>9}{'cpu ms':>9}{'target ms':>11}")
    for name, result in results.items():
        print(
            f"{name:<30}{result['median_ms']:>11.0f}{result['min_ms']:>9.0f}"
            f"{result['cpu_median_ms']:>9.0f}{TARGET_S * 1000:>11.0f}"
        )
    print(f"\ngrade-qa output byte-identical across runs: {identical}")
    print("grade-qa in-process phases (ms):")
    for name, milliseconds in breakdown.items():
        print(f"  {name:<36}{milliseconds:>7.1f}")


if __name__ == "__main__":
    main()
