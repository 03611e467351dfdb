"""The progress display of long whole-store and evaluation work (``migrate``, ``reindex``,
``eval``), in a module of its own: rich's progress machinery is loaded only by the
commands that can show it, not at every command's start-up."""

from __future__ import annotations

import sys

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from deermem.cli.output import err_console

__all__ = ["progress_bar"]


def progress_bar(label: str, *, quiet: bool) -> Progress:
    """A transient bar on standard error for long whole-store work.

    Hidden when ``quiet`` (``--json`` output) or when standard error is not
    a terminal, so scripts and logs get no control characters.
    """
    return Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
        disable=quiet or not sys.stderr.isatty(),
    )
