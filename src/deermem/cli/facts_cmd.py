"""``deermem facts``: add, list, show, edit and remove facts by hand."""

from __future__ import annotations

import typer
from rich.markup import escape

from deermem.cli._context import memory_of
from deermem.cli._output import (
    JSON_OPTION,
    LIMIT_OPTION,
    err_console,
    out_console,
    print_json,
    read_stdin_text,
)
from deermem.cli._render import fact_lines, fact_table

__all__ = ["app"]

app = typer.Typer(
    help="Add, list, show, edit and remove the facts of one user and agent.", no_args_is_help=True
)


@app.command("add")
def add(
    ctx: typer.Context,
    content: str = typer.Argument(
        ..., help="The fact, in plain words; `-` reads it from standard input."
    ),
    category: str = typer.Option(
        "context", "--category", "-c", help="e.g. preference, correction."
    ),
    confidence: float = typer.Option(0.5, "--confidence", help="How sure you are, 0 to 1."),
    topic: list[str] = typer.Option([], "--topic", "-t", help="A topic tag (repeatable)."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Add a fact through the capacity gate.

    When the library is full the configured policy decides what goes — maybe
    the new fact itself. Evicted facts go to the archive with a receipt
    (`deermem why ID` explains, `deermem archive restore ID` brings one back).
    Exits with status 1 if the new fact was not kept.

    Examples: `deermem --user alice facts add "Prefers uv over pip" -c correction --confidence 0.9`,
    `pbpaste | deermem --user alice facts add -`
    """
    if content == "-":
        content = read_stdin_text("the fact's content")
    memory = memory_of(ctx)
    result = memory.create_fact(content, category=category, confidence=confidence, topics=topic)
    if as_json:
        print_json(result.to_dict())
    else:
        if result.relearned is not None:
            out_console.print(
                f"relearned [bold]{result.relearned}[/]: the archive held the same fact, and it "
                "came back with its history (a regret event records it)"
            )
        elif result.kept:
            out_console.print(f"added [bold]{result.fact_id}[/]")
        for fact_id in result.evicted:
            if fact_id != result.fact.id:
                out_console.print(f"evicted {fact_id} to make room (see `deermem why {fact_id}`)")
    if not result.kept:
        err_console.print(
            f"[bold red]not kept:[/] the capacity gate evicted the fact {result.fact.id} "
            f"itself; see `deermem why {result.fact.id}`"
        )
        raise typer.Exit(1)


@app.command("list")
def list_facts(
    ctx: typer.Context,
    category: str | None = typer.Option(None, "--category", "-c", help="Only this category."),
    limit: int = LIMIT_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """List the active facts, oldest first.

    Examples: `deermem --user alice facts list --category correction`,
    `deermem --user alice facts list --limit 5`
    """
    memory = memory_of(ctx, existing=True)
    facts = memory.list_facts(category=category)
    shown = facts[:limit] if limit else facts
    if as_json:
        print_json([fact.to_dict() for fact in shown])
        return
    of = f" (the first {len(shown)} of {len(facts)})" if len(shown) < len(facts) else ""
    title = f"{len(facts)} facts, {escape(str(memory.scope))}{of}"
    out_console.print(fact_table(shown, title=title))


@app.command("show")
def show(
    ctx: typer.Context,
    fact_id: str = typer.Argument(..., metavar="ID", help="The fact id."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Show every field of one fact.

    Example: `deermem facts show fact_1a2b3c4d --json`
    """
    fact = memory_of(ctx, existing=True).get_fact(fact_id)
    if as_json:
        print_json(fact.to_dict())
        return
    for line in fact_lines(fact):
        out_console.print(line)


@app.command("edit")
def edit(
    ctx: typer.Context,
    fact_id: str = typer.Argument(..., metavar="ID", help="The fact id."),
    content: str | None = typer.Option(None, "--content", help="New content."),
    category: str | None = typer.Option(None, "--category", "-c", help="New category."),
    confidence: float | None = typer.Option(None, "--confidence", help="New confidence, 0 to 1."),
    revision: int | None = typer.Option(
        None, "--revision", help="Fail unless the fact is still at this revision."
    ),
    as_json: bool = JSON_OPTION,
) -> None:
    """Change a fact; fields you leave out are kept. Editing never evicts.

    Example: `deermem facts edit fact_1a2b3c4d --confidence 0.95 --revision 1`
    """
    if content is None and category is None and confidence is None:
        raise typer.BadParameter("give at least one of --content, --category, --confidence")
    fact = memory_of(ctx).update_fact(
        fact_id,
        content=content,
        category=category,
        confidence=confidence,
        expected_revision=revision,
    )
    if as_json:
        print_json(fact.to_dict())
        return
    out_console.print(f"updated [bold]{fact.id}[/] (revision {fact.revision})")


@app.command("rm")
def remove(
    ctx: typer.Context,
    fact_id: str = typer.Argument(..., metavar="ID", help="The fact id."),
    revision: int | None = typer.Option(
        None, "--revision", help="Fail unless the fact is still at this revision."
    ),
) -> None:
    """Remove a fact: to the archive (restorable), or for good with `eviction_mode = "delete"`.

    Example: `deermem facts rm fact_1a2b3c4d`
    """
    memory = memory_of(ctx)
    memory.delete_fact(fact_id, expected_revision=revision)
    if memory.config.eviction_mode == "archive":
        out_console.print(
            f"removed {fact_id} to the archive (undo: `deermem archive restore {fact_id}`)"
        )
    else:
        out_console.print(f"deleted {fact_id}")
