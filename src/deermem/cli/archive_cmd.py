"""``deermem archive``: list, restore and purge facts that left the library."""

from __future__ import annotations

import typer
from rich import box
from rich.markup import escape
from rich.table import Table

from deermem.cli._context import memory_of
from deermem.cli._output import JSON_OPTION, LIMIT_OPTION, err_console, out_console, print_json

__all__ = ["app"]

app = typer.Typer(
    help="Facts that were evicted or removed: list, restore, purge.", no_args_is_help=True
)


@app.command("list")
def list_archive(
    ctx: typer.Context, limit: int = LIMIT_OPTION, as_json: bool = JSON_OPTION
) -> None:
    """List archived facts, newest first, with why they left.

    Examples: `deermem --user alice archive list --json`,
    `deermem --user alice archive list --limit 10` (the ten newest)
    """
    everything = memory_of(ctx, existing=True).list_archived()
    entries = everything[:limit] if limit else everything
    if as_json:
        print_json([entry.to_dict() for entry in entries])
        return
    if not entries:
        out_console.print("the archive is empty")
        return
    if len(entries) < len(everything):
        out_console.print(f"the newest {len(entries)} of {len(everything)} archived facts")
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for column in ("id", "archived", "reason", "trigger", "score", "content"):
        table.add_column(column, no_wrap=column != "content", overflow="fold")
    for entry in entries:
        score = entry.eviction.score if entry.eviction is not None else None
        table.add_row(
            entry.fact_id,
            entry.archived_at[:19].replace("T", " "),
            entry.reason,
            entry.trigger or "-",
            "-" if score is None else f"{score:.3f}",
            escape(" ".join(entry.fact.content.split())[:70]),
        )
    out_console.print(table)


@app.command("restore")
def restore(
    ctx: typer.Context,
    fact_id: str = typer.Argument(..., metavar="ID", help="An archived fact id."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Send an archived fact back through the capacity gate.

    The gate may keep it (evicting another fact to make room) or evict it
    again; both get a receipt. Exits with status 1 if it was evicted again.

    Example: `deermem archive restore fact_1a2b3c4d`
    """
    result = memory_of(ctx).restore(fact_id)
    if as_json:
        print_json(result.to_dict())
    elif result.restored:
        out_console.print(f"restored [bold]{fact_id}[/]")
        for other in result.evicted:
            out_console.print(f"evicted {other} to make room (see `deermem why {other}`)")
    if not result.restored:
        err_console.print(
            f"[bold red]not restored:[/] the capacity gate evicted {fact_id} again; "
            f"see `deermem why {fact_id}`"
        )
        raise typer.Exit(1)


@app.command("purge")
def purge(
    ctx: typer.Context,
    fact_id: str = typer.Argument(..., metavar="ID", help="An archived fact id."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
) -> None:
    """Delete an archived fact for good. Its receipts (no content) stay.

    Example: `deermem archive purge fact_1a2b3c4d --yes`
    """
    memory = memory_of(ctx)
    memory.get_archived(fact_id)  # an unknown id fails before asking
    if not yes and not typer.confirm(f"Delete the archived fact {fact_id} for good?"):
        raise typer.Abort()
    memory.purge(fact_id)
    out_console.print(f"purged {fact_id}")
