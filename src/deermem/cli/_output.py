"""Shared output helpers: one console for results, one for errors, JSON dumps, failing."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

if TYPE_CHECKING:
    from rich.progress import Progress

__all__ = [
    "JSON_OPTION",
    "LIMIT_OPTION",
    "err_console",
    "fail",
    "out_console",
    "print_error",
    "print_json",
    "read_stdin_text",
]

out_console = Console(highlight=False, soft_wrap=True)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)

JSON_OPTION = typer.Option(False, "--json", help="Print machine-readable JSON instead of tables.")
LIMIT_OPTION = typer.Option(
    0, "--limit", "-n", min=0, metavar="N", help="Show at most N entries (the first N); 0: all."
)


def print_json(data: object) -> None:
    """Print JSON with sorted keys, so scripts and diffs see a stable order."""
    typer.echo(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False))


def print_error(message: str) -> None:
    """One ``error: ...`` line on stderr (the message is shown as text, never as markup)."""
    err_console.print(f"[bold red]error:[/] {escape(message)}")


def fail(message: str) -> NoReturn:
    """Stop the command with an error line and exit status 1 (not a usage error)."""
    print_error(message)
    raise typer.Exit(1)


def read_stdin_text(what: str) -> str:
    """Everything on standard input, as UTF-8 text (``-`` given for a value).

    Undecodable bytes stop the command with an error naming ``what``: guessing
    an encoding would store text the user never wrote.
    """
    data = sys.stdin.buffer.read()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        fail(f"standard input: {what} is not UTF-8 text (byte {error.start})")


def progress_bar(label: str, *, quiet: bool) -> Progress:
    """A transient bar on standard error for long whole-store work.

    Hidden when ``quiet`` (``--json`` output) or when standard error is not
    a terminal, so scripts and logs get no control characters.
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
        disable=quiet or not sys.stderr.isatty(),
    )
