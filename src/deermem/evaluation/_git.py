"""Which code produced a run: the git commit and cleanliness of deermem's checkout.

Asking git takes two short subprocesses — about as long as writing all the
result files. :class:`GitProbe` therefore starts them when a command starts
and collects their answers when the results are written, so they run while
the dataset is parsed, on the other core.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Final

__all__ = ["PACKAGE_DIRECTORY", "GitProbe", "git_state"]

PACKAGE_DIRECTORY: Final = Path(__file__).resolve().parent.parent
_TIMEOUT: Final = 10.0


class GitProbe:
    """Ask git about a directory in the background; read the answer later.

    The answer (:meth:`result`) is ``{"head": <commit>, "dirty": <bool>}``, or
    ``None`` when git is not installed, the directory is not inside a git
    checkout, or the checkout tracks no file under it (deermem installed into
    a virtual environment that happens to live inside another repository).
    ``dirty`` is true when ``git status`` lists anything, untracked files
    included.

    Use it as a context manager, so that a command failing before it reads
    the answer still reaps the two processes.
    """

    def __init__(self, directory: Path | None = None) -> None:
        where = str(directory or PACKAGE_DIRECTORY)
        self._tracked = _start(["git", "-C", where, "ls-files", "--error-unmatch", "--", "."])
        # --no-optional-locks: status must not take the index lock, because the
        # probe may be stopped half-way (a command that ends early), and a
        # killed git would leave index.lock behind in the user's checkout.
        self._status = _start(
            ["git", "--no-optional-locks", "-C", where, "status", "--porcelain=v2", "--branch"]
        )

    def __enter__(self) -> GitProbe:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop whatever is still running and release the pipes."""
        for process in (self._tracked, self._status):
            if process is not None and process.returncode is None:
                process.kill()
                process.communicate()

    def result(self) -> dict[str, object] | None:
        tracked = _finish(self._tracked)
        status = _finish(self._status)
        if tracked is None or status is None:
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


def git_state(directory: Path | None = None) -> dict[str, object] | None:
    """The git state of ``directory`` (default: the deermem package), asked now."""
    return GitProbe(directory).result()


def _start(command: list[str]) -> subprocess.Popen[str] | None:
    try:
        return subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )
    except OSError:  # git is not installed
        return None


def _finish(process: subprocess.Popen[str] | None) -> str | None:
    if process is None:
        return None
    try:
        output, _ = process.communicate(timeout=_TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        return None
    return output if process.returncode == 0 else None
