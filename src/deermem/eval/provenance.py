"""Which code produced a run: the git commit and cleanliness of deermem's checkout.

Every run record (``run.json``, ``qa_run.json``) names the commit it was
produced by, so a published figure can be traced to its code. The state is
asked of git when the record is written; outside a git checkout (deermem
installed from a wheel) it is ``null``.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Final

__all__ = ["PACKAGE_DIRECTORY", "git_state"]

PACKAGE_DIRECTORY: Final = Path(__file__).resolve().parent.parent
_TIMEOUT_SECONDS: Final = 10.0


def git_state(directory: Path | None = None) -> dict[str, object] | None:
    """The git state of ``directory`` (default: the deermem package).

    Returns:
        ``{"head": <commit>, "dirty": <bool>}``, or ``None`` when git is not
        installed, the directory is not inside a git checkout, the checkout
        tracks no file under it (deermem installed into a virtual environment
        that happens to live inside another repository), or git does not
        answer within ten seconds. ``dirty`` is true when ``git status``
        lists anything, untracked files included.
    """
    where = str(directory or PACKAGE_DIRECTORY)
    if _git(["-C", where, "ls-files", "--error-unmatch", "--", "."]) is None:
        return None
    # --no-optional-locks: a status must not take the index lock of the
    # user's checkout, which a git killed on timeout would leave behind.
    status = _git(["--no-optional-locks", "-C", where, "status", "--porcelain=v2", "--branch"])
    if status is None:
        return None
    head: str | None = None
    dirty = False
    for line in status.splitlines():
        if line.startswith("# branch.oid "):
            head = line.removeprefix("# branch.oid ").strip()
        elif line and not line.startswith("#"):
            dirty = True
    if head is None or head == "(initial)":
        return None
    return {"dirty": dirty, "head": head}


def _git(arguments: list[str]) -> str | None:
    """What ``git ARGUMENTS`` prints, if it runs and exits with status 0; else ``None``."""
    try:
        completed = subprocess.run(
            ["git", *arguments],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            timeout=_TIMEOUT_SECONDS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):  # git is not installed, or hangs
        return None
    if completed.returncode != 0:
        return None
    return completed.stdout.decode("utf-8", "replace")
