"""``deermem facts``, ``archive``, ``audit`` and ``why``: the facts of one user and agent.

Add, list, show, edit and remove facts by hand; list, restore and purge the
ones that left the library; read the receipts of what left, and why.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NoReturn

import typer
from rich import box
from rich.table import Table

from deermem.cli.output import (
    JSON_OPTION,
    LIMIT_OPTION,
    command_hint,
    components_text,
    confirm_or_fail,
    err_console,
    escape,
    eviction_sentence,
    fact_lines,
    fact_table,
    memory_of,
    out_console,
    print_json,
    print_redaction,
    read_stdin_text,
    receipt_table,
)
from deermem.model import redact
from deermem.results import Forgotten, Purged, to_json

__all__ = ["archive_app", "audit", "facts_app", "why"]

facts_app = typer.Typer(
    help="Add, list, show, edit and remove the facts of one user and agent.", no_args_is_help=True
)


@facts_app.command("add")
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
    quiet: bool = typer.Option(
        False, "--quiet", "-q", help="Print only the kept fact's id: `fact=$(deermem ... -q)`."
    ),
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
        print_json(to_json(result))
    elif quiet:
        if result.kept:
            typer.echo(result.fact_id)
        print_redaction(result.redacted, console=err_console)
    else:
        if result.relearned is not None:
            out_console.print(
                f"relearned [bold]{result.relearned}[/]: the archive held the same fact, and it "
                "came back with its history (a regret event records it)"
            )
        elif result.kept:
            out_console.print(f"added [bold]{result.fact_id}[/]")
        _made_room(ctx, (fact_id for fact_id in result.evicted if fact_id != result.fact.id))
        print_redaction(result.redacted)
    if not result.kept:
        _refused(
            ctx,
            "not kept",
            f"the capacity gate evicted the fact {result.fact.id} itself",
            result.fact.id,
        )


@facts_app.command("list")
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
    title = f"{len(facts)} fact{'' if len(facts) == 1 else 's'}, {escape(str(memory.scope))}{of}"
    out_console.print(fact_table(shown, title=title))
    if not facts and (category is None or not memory.list_facts()):
        # Facts added over HTTP under agent "coder" are not the CLI's "__default__" ones.
        # Said only when this agent holds none: a category it lacks is no reason.
        others = [a for a in memory.store.agents(memory.scope.user_id) if a != memory.scope.agent]
        if others:
            named = ", ".join(escape(agent) for agent in others)
            err_console.print(
                f"none under this agent; this user has memories under other agents: {named} "
                "(choose one with --agent; "
                "`deermem scopes` lists them all)"
            )


@facts_app.command("show")
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


@facts_app.command("edit")
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
    memory = memory_of(ctx)
    fact = memory.update_fact(
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
    if memory.config.redact_secrets:  # the commit redacted the new values as this does
        print_redaction(kind for text in (content, category) if text for kind in redact(text).kinds)


@facts_app.command("rm")
def remove(
    ctx: typer.Context,
    fact_id: str = typer.Argument(..., metavar="ID", help="The fact id."),
    revision: int | None = typer.Option(
        None, "--revision", help="Fail unless the fact is still at this revision."
    ),
    as_json: bool = JSON_OPTION,
) -> None:
    """Remove a fact: to the archive (restorable), or for good with `eviction_mode = "delete"`.

    `--json` prints `{factId, archived}`, what the HTTP API and the MCP tool
    answer for a removal.

    Example: `deermem facts rm fact_1a2b3c4d --json`
    """
    memory = memory_of(ctx)
    receipt = memory.delete_fact(fact_id, expected_revision=revision)
    archived = memory.config.eviction_mode == "archive"
    if as_json:
        print_json(to_json(Forgotten(fact_id=fact_id, archived=archived)))
        return
    if archived:
        out_console.print(
            f"removed {fact_id} to the archive, receipt {receipt.receipt_id} "
            f"(undo: `{escape(command_hint(ctx, 'archive', 'restore', fact_id))}`)"
        )
    else:
        out_console.print(f"deleted {fact_id}, receipt {receipt.receipt_id}")


# Other tools' words for `rm`: the same command, not shown in the list.
facts_app.command("delete", hidden=True)(remove)
facts_app.command("remove", hidden=True)(remove)


# --- the archive ---------------------------------------------------------------------

archive_app = typer.Typer(
    help="Facts that were evicted or removed: list, restore, purge.", no_args_is_help=True
)


@archive_app.command("list")
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


@archive_app.command("restore")
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
        print_json(to_json(result))
    elif result.restored:
        out_console.print(f"restored [bold]{fact_id}[/]")
        _made_room(ctx, result.evicted)
    if not as_json:
        print_redaction(result.redacted)
    if not result.restored:
        _refused(ctx, "not restored", f"the capacity gate evicted {fact_id} again", fact_id)


def _made_room(ctx: typer.Context, evicted: Iterable[str]) -> None:
    """Name each fact the capacity gate evicted to let another in."""
    for fact_id in evicted:
        hint = escape(command_hint(ctx, "why", fact_id))
        out_console.print(f"evicted {fact_id} to make room (see `{hint}`)")


def _refused(ctx: typer.Context, outcome: str, detail: str, fact_id: str) -> NoReturn:
    """Say that the capacity gate evicted the fact the command was about, and exit 1."""
    hint = escape(command_hint(ctx, "why", fact_id))
    err_console.print(f"[bold red]{outcome}:[/] {detail}; see `{hint}`")
    raise typer.Exit(1)


@archive_app.command("purge")
def purge(
    ctx: typer.Context,
    fact_id: str = typer.Argument(..., metavar="ID", help="An archived fact id."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Delete an archived fact for good. Its receipts (no content) stay.

    Its words leave the search index too: the index file is scrubbed (or,
    on a full disk, deleted and rebuilt at the next search), so no byte
    under the store keeps them.

    Asks on a terminal (on stderr); elsewhere `--yes` is required. `--json`
    prints `{factId, purged}`, what the HTTP API answers for a purge.

    Example: `deermem archive purge fact_1a2b3c4d --yes`
    """
    memory = memory_of(ctx)
    memory.get_archived(fact_id)  # an unknown id fails before asking
    confirm_or_fail(
        f"Delete the archived fact {fact_id} for good?",
        yes=yes,
        what=f"purging archived fact {fact_id}",
    )
    memory.purge(fact_id)
    if as_json:
        print_json(to_json(Purged(fact_id=fact_id, purged=True)))
        return
    out_console.print(f"purged {fact_id}")


# --- receipts and explanations ---------------------------------------------------------


def audit(
    ctx: typer.Context,
    limit: int = typer.Option(
        20, "--limit", "-n", min=0, metavar="N", help="Show the N newest receipts; 0: all."
    ),
    as_json: bool = JSON_OPTION,
) -> None:
    """Show the eviction receipts: what left the library, when, under which policy.

    Receipts hold ids, categories and scores — never fact content.

    Example: `deermem --user alice audit --limit 5`
    """
    receipts = memory_of(ctx, existing=True).audit()
    # Newest first, as the table and the HTTP API list them.
    shown = list(reversed(receipts[-limit:] if limit else receipts))
    if as_json:
        print_json([receipt.to_dict() for receipt in shown])
        return
    if not shown:
        out_console.print("no receipts: nothing has been evicted or removed")
        return
    out_console.print(receipt_table(shown))


def why(
    ctx: typer.Context,
    fact_id: str = typer.Argument(..., metavar="ID", help="A fact id (active, archived or gone)."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Explain where a fact is: its rank if active, its receipt if it left.

    Example: `deermem why fact_1a2b3c4d`
    """
    explanation = memory_of(ctx, existing=True).why(fact_id)
    if as_json:
        print_json(to_json(explanation))
        return
    out_console.print(f"[bold]{fact_id}[/] is {explanation.status}")
    if explanation.fact is not None:
        out_console.print(f"  {escape(explanation.fact.content)}")
    standing = explanation.standing
    if standing is not None:
        protected = "; its category is protected" if standing.protected else ""
        out_console.print(
            f"  rank {standing.rank} of {standing.occupancy} (cap {standing.max_facts}) under "
            f"{standing.policy}: score {standing.score:.4f} "
            f"({escape(components_text(standing.components))}){protected}"
        )
    receipt, line = explanation.last_eviction
    if explanation.status != "active":
        out_console.print(f"  {eviction_sentence(receipt, line)}")
    if receipt is not None and receipt.shadow is not None and fact_id in receipt.fact_ids:
        verdict = (
            "would also have evicted it"
            if fact_id in receipt.shadow.would_evict
            else ("would have kept it")
        )
        out_console.print(f"  shadow {receipt.shadow.policy} {verdict}")
    if explanation.status == "archived":
        out_console.print(
            f"  restore with `{escape(command_hint(ctx, 'archive', 'restore', fact_id))}`"
        )
