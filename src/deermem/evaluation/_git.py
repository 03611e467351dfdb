"""Which code produced a run: the git commit and cleanliness of deermem's checkout.

Asking git takes two short child processes — about as long as writing all
the result files. :class:`GitProbe` therefore starts them when a command
starts and collects their answers when the results are written, so they run
while the dataset is parsed, on the other core.

The children are started with :func:`os.posix_spawnp` and read through a
pipe, rather than through :mod:`subprocess`: importing that module (with
:mod:`threading` and :mod:`selectors` beneath it) would cost more start-up
than both git commands take. deermem is POSIX-only (the store locks with
:mod:`fcntl`), so nothing is lost.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import time
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
        self._tracked = _Child.start(["git", "-C", where, "ls-files", "--error-unmatch", "--", "."])
        # --no-optional-locks: status must not take the index lock, because the
        # probe may be stopped half-way (a command that ends early), and a
        # killed git would leave index.lock behind in the user's checkout.
        self._status = _Child.start(
            ["git", "--no-optional-locks", "-C", where, "status", "--porcelain=v2", "--branch"]
        )

    def __enter__(self) -> GitProbe:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop whatever is still running and release the pipes."""
        for child in (self._tracked, self._status):
            if child is not None:
                child.stop()

    def result(self) -> dict[str, object] | None:
        tracked = self._tracked.output() if self._tracked is not None else None
        status = self._status.output() if self._status is not None else None
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
    with GitProbe(directory) as probe:
        return probe.result()


class _Child:
    """A command running with its standard output on a pipe and its errors discarded."""

    def __init__(self, pid: int, stdout: int) -> None:
        self._pid = pid
        self._stdout = stdout
        self._exit_code: int | None = None

    @classmethod
    def start(cls, argv: list[str]) -> _Child | None:
        """Start ``argv`` (looked up on ``PATH``); ``None`` if it cannot be run."""
        read, write = os.pipe()  # both ends close on exec; dup2 makes a child's stdout
        try:
            pid = os.posix_spawnp(
                argv[0],
                argv,
                os.environ,
                file_actions=[
                    (os.POSIX_SPAWN_DUP2, write, 1),
                    (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
                ],
            )
        except OSError:  # git is not installed
            os.close(read)
            return None
        finally:
            os.close(write)
        return cls(pid, read)

    def output(self, timeout: float = _TIMEOUT) -> str | None:
        """Everything the command printed, once it has exited with status 0; else ``None``.

        A command still running after ``timeout`` seconds is killed.
        """
        if self._exit_code is not None:  # read (or stopped) already
            return None
        deadline = time.monotonic() + timeout
        chunks: list[bytes] = []
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([self._stdout], [], [], remaining)[0]:
                self.stop()
                return None
            chunk = os.read(self._stdout, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks).decode("utf-8", "replace") if self._reap() == 0 else None

    def stop(self) -> None:
        """Kill the command if it is still running, reap it, close the pipe."""
        if self._exit_code is None:
            with contextlib.suppress(ProcessLookupError):  # reaped by the system already
                os.kill(self._pid, signal.SIGKILL)
            self._reap()

    def _reap(self) -> int:
        """Wait for the command to end, close the pipe; its exit status (-1: unknown)."""
        try:
            _, status = os.waitpid(self._pid, 0)
            self._exit_code = os.waitstatus_to_exitcode(status)
        except ChildProcessError:  # SIGCHLD ignored: reaped for us, status unknown
            self._exit_code = -1
        os.close(self._stdout)
        return self._exit_code
