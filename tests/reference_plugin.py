"""The original project's own protocol files, which deermem neither ships nor copies.

A few tests prove that deermem accepts the original project's protocol bundle
unchanged. Its answer prompt's one system line is the original's wording, so it
is not in this repository: those tests read it from the reference description
in the directory named by ``DEERMEM_REFERENCE_DIR``. Without the variable they
are skipped with a reason naming it, and the session says so once in its header
and once at the end (``.ci/run`` sets it, and fails if the directory is
missing). Set to a directory without the file, it is a failure, never a skip: a
skipped comparison would look like a passed one.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

import pytest

__all__ = ["REFERENCE_ENV", "reference_file"]

REFERENCE_ENV: Final = "DEERMEM_REFERENCE_DIR"
# Read once, before the tests' own fixture strips DEERMEM_* from the environment.
_DIRECTORY: Final = os.environ.get(REFERENCE_ENV, "")
_skipped: list[str] = []


def reference_file(name: str) -> Path:
    """``name`` in the reference directory; skips the test when the variable is unset."""
    if not _DIRECTORY:
        _skipped.append(name)
        pytest.skip(f"{REFERENCE_ENV} is not set: needs the original project's {name}")
    path = Path(_DIRECTORY) / name
    if not path.is_file():
        pytest.fail(f"{REFERENCE_ENV}={_DIRECTORY}: there is no {name} in that directory")
    return path


def pytest_report_header() -> str:
    if _DIRECTORY:
        return f"reference files: {REFERENCE_ENV}={_DIRECTORY}"
    return (
        f"reference files: {REFERENCE_ENV} is not set; the tests that need the original "
        "project's protocol files will be skipped"
    )


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _skipped:
        terminalreporter.write_line(
            f"reference: {len(_skipped)} test(s) skipped: {REFERENCE_ENV} is not set (it "
            f"names the folder holding the original project's {', '.join(sorted(set(_skipped)))})",
            yellow=True,
        )
