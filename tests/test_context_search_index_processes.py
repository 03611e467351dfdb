"""Processes that open a store without a search index at once share one index on disk.

Each process creates the index when it finds none; several finding none at
the same moment must end with one index that all of them use — not one
process's schema and the others searching with an index in memory after a
"table already exists" error.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from deermem import Memory, MemoryConfig

NOW = datetime(2026, 8, 13, tzinfo=UTC)
ROOT = Path(__file__).parents[1]
PROCESSES = 6
ROUNDS = 3
QUERY = "tea"

# A child: open the store, wait for the start signal, search, and say which
# index it searched with, what it found, and every warning it logged.
CHILD = """
import json, logging, os, sys, time
from datetime import datetime, UTC
from pathlib import Path
from deermem import Memory, MemoryConfig

root, go, query = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
warnings = []
class Collect(logging.Handler):
    def emit(self, record):
        warnings.append(record.getMessage())
logging.getLogger("deermem").addHandler(Collect(logging.WARNING))
now = datetime(2026, 8, 13, tzinfo=UTC)
memory = Memory.open(root, MemoryConfig(), user="alice", clock=lambda: now)
print("ready", flush=True)
while not go.exists():
    time.sleep(0.0005)
results = [r.fact_id for r in memory.search(query, top_k=5)]
index = memory._search_index.get(memory.store)
path = index.path
print(json.dumps({"index": None if path is None else str(path), "results": results,
                  "warnings": warnings}), flush=True)
memory.close()
"""


def fresh_store(root: Path) -> list[str]:
    """A store with facts and no search index yet; the search's expected results."""
    memory = Memory.open(root, MemoryConfig(), user="alice", clock=lambda: NOW)
    for n, text in enumerate(["Drinks green tea", "Likes oolong tea", "Hates coffee"]):
        memory.create_fact(f"{text} ({n})", confidence=0.6 + n / 10)
    expected = [r.fact_id for r in memory.search(QUERY, top_k=5, record=False)]
    memory.close()
    for path in (root / ".retrieval").glob("*"):
        path.unlink()
    return expected


def test_processes_creating_the_index_at_once_all_use_it_on_disk(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEERMEM_")}
    for round_ in range(ROUNDS):
        root, go = tmp_path / f"store{round_}", tmp_path / f"go{round_}"
        expected = fresh_store(root)
        assert expected
        assert not any((root / ".retrieval").iterdir())
        children = [
            subprocess.Popen(
                [sys.executable, "-c", CHILD, str(root), str(go), QUERY],
                cwd=ROOT,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(PROCESSES)
        ]
        try:
            for child in children:  # every one has opened the store: start them together
                assert child.stdout is not None
                assert child.stdout.readline().strip() == "ready"
            time.sleep(0.05)
            go.touch()
            outputs = [child.communicate(timeout=120) for child in children]
        finally:
            for child in children:
                child.kill()
                child.wait()
        for child, (out, err) in zip(children, outputs, strict=True):
            assert child.returncode == 0, err
            said = json.loads(out)
            assert said["index"] == str(root / ".retrieval/memory-fts5.sqlite3"), said
            assert said["warnings"] == [], said
            assert said["results"] == expected
