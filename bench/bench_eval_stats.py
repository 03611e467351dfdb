"""Benchmark: the QA statistics step and ``verify`` on the 90 published rows.

Run with ``uv run python -m bench.bench_eval_stats`` (``--json`` for a dump,
``--results DIR`` for another results folder; the default is the original
project's published results, shipped in ``deermem.eval.published``).

Timed, as the median of several runs after a warm-up:

* ``derive`` — what ``grade-qa`` does after grading: parse the 90 rows, check the
  pairs, build the summary and the three suites' statistics (McNemar and 3 ×
  10,000 bootstrap resamples) and render the three files' text;
* ``bootstrap`` — the three suites' bootstraps alone (the dominant cost);
* ``verify`` — ``verify_results`` on the folder, in process;
* ``verify, fresh process`` — a new interpreter importing the module and
  verifying: the floor of what ``deermem eval verify`` can take.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from deermem.eval.grading import paired_bootstrap
from deermem.eval.published import DEFAULT_PUBLISHED
from deermem.eval.published import PUBLISHED as SHIPPED
from deermem.eval.rows import QaRow, build_qa_report
from deermem.eval.verify import verify_results

PUBLISHED = SHIPPED[DEFAULT_PUBLISHED].directory
PROTOCOL_ID = "deermem-hybrid-v1-pr4789-reproduction-v1"
TARGET_S = 1.0


def median_s(run: Callable[[], object], repeats: int) -> float:
    run()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def derive(text: str) -> dict[str, str]:
    rows = [QaRow.from_dict(json.loads(line)) for line in text.splitlines()]
    return build_qa_report(rows, protocol_id=PROTOCOL_ID).files()


def suite_pairs(text: str) -> list[list[tuple[bool, bool]]]:
    grades: dict[str, dict[str, bool]] = {}
    sources: dict[str, str] = {}
    for line in text.splitlines():
        row = json.loads(line)
        grades.setdefault(row["case_id"], {})[row["policy"]] = row["grade_correct"]
        sources[row["case_id"]] = row["source"]
    ordered = sorted(grades)
    pairs = {case: (grades[case]["confidence"], grades[case]["hybrid-v1"]) for case in ordered}
    official = [pairs[c] for c in ordered if sources[c] == "longmemeval"]
    synthetic = [pairs[c] for c in ordered if sources[c] == "synthetic"]
    return [official, synthetic, [pairs[c] for c in ordered]]


def fresh_process_verify(folder: Path) -> float:
    code = (
        "import sys\n"
        "from deermem.eval.verify import verify_results\n"
        "sys.exit(0 if verify_results(sys.argv[1]).ok else 1)\n"
    )
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code, str(folder)], check=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print results as JSON")
    parser.add_argument("--results", type=Path, default=PUBLISHED, help="results folder")
    parser.add_argument("--repeats", type=int, default=7, help="timed runs per figure")
    args = parser.parse_args()
    folder: Path = args.results
    text = (folder / "qa.rows.jsonl").read_text(encoding="utf-8")
    suites = suite_pairs(text)
    report = verify_results(folder)
    fresh = [fresh_process_verify(folder) for _ in range(max(3, args.repeats // 2))]
    results = {
        "derive_s": median_s(lambda: derive(text), args.repeats),
        "bootstrap_s": median_s(lambda: [paired_bootstrap(p) for p in suites], args.repeats),
        "verify_s": median_s(lambda: verify_results(folder), args.repeats),
        "verify_fresh_process_s": statistics.median(fresh),
    }
    if args.json:
        print(
            json.dumps(
                {
                    "machine": platform.platform(),
                    "python": platform.python_version(),
                    "rows": report.rows,
                    "verified": report.ok,
                    "results": {key: round(value, 4) for key, value in results.items()},
                },
                indent=2,
            )
        )
        return
    print(f"{report.rows} rows, verified: {report.ok}")
    for name, seconds in results.items():
        verdict = "ok" if seconds <= TARGET_S else "SLOW"
        print(f"{name:<24} {seconds * 1000:8.1f} ms  {verdict}")


if __name__ == "__main__":
    main()
