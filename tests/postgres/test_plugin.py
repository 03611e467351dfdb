"""Without PostgreSQL the suite skips its tests and says so once; CI makes that a failure."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]


def run_suite(tmp_path: Path, **environment: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEERMEM_")}
    env.update(environment, DEERMEM_POSTGRES_BINDIR=str(tmp_path))  # holds no server
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/postgres/test_schema.py",
            "tests/store_contract/test_store.py::test_a_missing_scope_loads_empty",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_without_a_server_the_tests_are_skipped_and_the_session_says_why_once(
    tmp_path: Path,
) -> None:
    done = run_suite(tmp_path)
    assert done.returncode == 0, done.stdout
    said = [line for line in done.stdout.splitlines() if line.startswith("postgres:")]
    assert len(said) == 1
    assert "PostgreSQL test(s) skipped: no initdb in DEERMEM_POSTGRES_BINDIR" in said[0]
    assert "11 passed, 20 skipped" in done.stdout  # what needs no server still runs


def test_when_postgres_is_required_a_missing_server_fails(tmp_path: Path) -> None:
    done = run_suite(tmp_path, DEERMEM_REQUIRE_POSTGRES="1")
    assert done.returncode == 1
    assert "PostgreSQL is required (DEERMEM_REQUIRE_POSTGRES=1)" in done.stdout
