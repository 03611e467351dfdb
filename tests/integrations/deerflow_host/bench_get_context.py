"""The first prompt block of a fresh DeerFlow process: deermem against the bundled DeerMem.

DeerFlow gives ``get_context`` 5 s. Each measurement is a new process (nothing
loaded yet) that builds the backend as DeerFlow's factory does and times one
``get_context`` over the same 100-fact store — cold, and after ``warm()``,
which DeerFlow's gateway calls at start-up. The backends alternate, run by
run. Run in a DeerFlow checkout's environment with deermem installed::

    cd DEERFLOW/backend
    PYTHONPATH=. .venv/bin/python DEERMEM/tests/integrations/deerflow_host/bench_get_context.py
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile

RUNS = 7
SETUP = """
import sys
from deerflow.agents.memory.backends.deermem.deer_mem import DeerMem
m = DeerMem(backend_config={"storage_path": sys.argv[1], "max_facts": 100})
for i in range(100):
    m.create_fact(f"Fact number {i} about the user's work and tools.",
                  confidence=0.5 + (i % 50) / 100, agent_name="__default__", user_id="alice")
m.close()
"""
TIMED = """
import sys, time
if sys.argv[2] == "deermem":
    from deermem.integrations.deerflow import DeerMemManager as Backend
else:
    from deerflow.agents.memory.backends.deermem.deer_mem import DeerMem as Backend
backend = Backend.from_config({"storage_path": sys.argv[1], "max_facts": 100})
if sys.argv[3] == "warm":
    backend.warm()
started = time.perf_counter()
backend.get_context("alice")
print(time.perf_counter() - started)
"""


def main() -> None:
    store = tempfile.mkdtemp(prefix="deermem-bench-")
    subprocess.run([sys.executable, "-c", SETUP, store], check=True)
    cases = [(name, mode) for mode in ("cold", "warm") for name in ("deermem", "bundled")]
    times: dict[tuple[str, str], list[float]] = {case: [] for case in cases}
    for _ in range(RUNS):
        for name, mode in cases:
            result = subprocess.run(
                [sys.executable, "-c", TIMED, store, name, mode],
                capture_output=True,
                text=True,
                check=True,
            )
            times[(name, mode)].append(float(result.stdout.split()[-1]))
    for (name, mode), values in times.items():
        print(f"{name:8} {mode}: median {statistics.median(values) * 1000:.0f} ms over {RUNS} runs")


if __name__ == "__main__":
    main()
