"""``deermem scopes`` and ``deermem reindex``: the store as a whole, every user and agent."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer
from rich import box
from rich.markup import escape
from rich.table import Table

from deermem.cli._context import memory_of
from deermem.cli._output import JSON_OPTION, out_console, print_error, print_json, progress_bar

if TYPE_CHECKING:
    from deermem.memory import Memory, ScopeSummary

__all__ = ["reindex", "scopes"]


def scopes(ctx: typer.Context, as_json: bool = JSON_OPTION) -> None:
    """List every user and agent in the store, with their fact and archive counts.

    The user `-` is the store's single-user layout (no `--user`). Use a row's
    user and agent as `--user` and `--agent` for the other commands.

    A directory holding memory that no user and agent can be read from — two
    user ids' facts in one directory, a directory whose owner cannot be told
    — is named on stderr, one line each, and the exit status is 1.

    Example: `deermem --root ./memory scopes --json`
    """
    memory = memory_of(ctx, existing=True)
    found = memory.scopes()
    problems = memory.store_problems()
    _show_scopes(memory, found, as_json=as_json)
    for problem in problems:
        print_error(problem)
    if problems:
        raise typer.Exit(1)


def _show_scopes(memory: Memory, found: tuple[ScopeSummary, ...], *, as_json: bool) -> None:
    if as_json:
        print_json([summary.to_dict() for summary in found])
        return
    if not found:
        out_console.print(f"no users in {escape(str(memory.store))}")
        return
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for column in ("user", "agent", "facts", "archived"):
        table.add_column(column, justify="right" if column in ("facts", "archived") else "left")
    for summary in found:
        user = "-" if summary.scope.user_id is None else summary.scope.user_id
        table.add_row(escape(user), summary.scope.agent, str(summary.facts), str(summary.archived))
    out_console.print(table)


def reindex(ctx: typer.Context, as_json: bool = JSON_OPTION) -> None:
    """Rebuild the search index from the facts of every user and agent, and embed them.

    Search keeps its index in step by itself — also with facts edited by
    hand — so this is for an index that was deleted, damaged or copied
    along, or to compact it; and, under search_mode hybrid, to embed every
    fact with the current model (a store written by keyword only, or with
    another model, on either store). Searches may run meanwhile. Shows progress on a
    terminal.

    Example: `deermem --root ./memory reindex`
    """
    memory = memory_of(ctx, existing=True)
    progress = progress_bar("indexing users and agents", quiet=as_json)
    with progress:
        task = progress.add_task("scopes", total=None)
        report = memory.reindex(
            progress=lambda done, total: progress.update(task, completed=done, total=total)
        )
    if as_json:
        print_json(report.to_dict())
        return
    if report.location is None and not report.scopes:
        out_console.print("this store keeps its search index in memory: nothing to rebuild")
        return
    if report.location is None:
        out_console.print(
            f"embedded {report.facts} facts of {report.scopes} user/agent scope(s) "
            "(the store keeps their vectors; each process keeps its own index)"
        )
        return
    out_console.print(
        f"indexed {report.facts} facts of {report.scopes} user/agent scope(s) "
        f"into {escape(report.location)}"
    )
