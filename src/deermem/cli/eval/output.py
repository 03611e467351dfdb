"""How ``deermem eval`` prints: JSON for scripts, the retention table for people."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, TextIO

import typer
from rich import box
from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    from deermem.eval.policy_run.retention import RetentionTable

__all__ = ["print_json", "print_retention"]


def print_json(data: object) -> None:
    """Print JSON with sorted keys, so scripts and diffs see a stable order."""
    typer.echo(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False))


def print_retention(table: RetentionTable, stream: TextIO) -> None:
    """Print a retention table: rich on a terminal, aligned plain text otherwise.

    Piped output (a log, CI, ``| grep``) gets the plain table, which holds the
    same lines without box drawing or control codes.
    """
    from deermem.eval.policy_run.retention import format_plain, short_policy

    if not stream.isatty():
        stream.write(format_plain(table))
        return
    rich_table = Table(
        title="Support fact retained (cases kept / cases)",
        caption=f"{table.legend}; protocol {table.protocol_id}",
        box=box.SIMPLE_HEAD,
        title_justify="left",
    )
    rich_table.add_column("scenario")
    rich_table.add_column("n", justify="right")
    for capacity, policy in table.columns:
        rich_table.add_column(f"cap {capacity}\n{short_policy(policy)}", justify="right")
    for row, following in zip(table.rows, (*table.rows[1:], None), strict=True):
        rich_table.add_row(
            row.label,
            str(row.cases),
            *table.values(row),
            style="bold" if row.is_total else None,
            end_section=row.is_total or (following is not None and following.suite != row.suite),
        )
    Console(file=stream, highlight=False).print(rich_table)
