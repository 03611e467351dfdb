"""``deermem search``: find facts by what they say."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer
from rich import box
from rich.markup import escape
from rich.table import Table

from deermem.cli._context import memory_of
from deermem.cli._output import JSON_OPTION, out_console, print_json

if TYPE_CHECKING:
    from deermem.memory import SearchResult

__all__ = ["search", "search_table"]

_PREVIEW = 70


def search(
    ctx: typer.Context,
    query: str = typer.Argument(..., help="What to look for, in plain words."),
    top_k: int = typer.Option(5, "--top-k", "-k", min=1, help="At most this many results."),
    category: str | None = typer.Option(
        None, "--category", "-c", help="Only this category (e.g. correction)."
    ),
    no_record: bool = typer.Option(
        False,
        "--no-record",
        help="Look without counting the hits as recalls (they matter under hybrid-v1).",
    ),
    as_json: bool = JSON_OPTION,
) -> None:
    """Search the facts of one user and agent, best match first.

    Full-text search (SQLite FTS5: BM25, decayed after 30 days, plus a
    confidence term), with a substring match when it finds nothing. Hyphens,
    quotes and operators are safe to type; `"a phrase"` stays a phrase and
    `word*` a prefix; Chinese, Japanese and Korean text is searchable. Under
    `hybrid-v1` or shadow mode the hits count as recalls unless `--no-record`.

    Examples: `deermem --user alice search "package manager"`,
    `deermem --user alice search uv --category correction --top-k 3 --json`
    """
    results = memory_of(ctx, existing=True).search(
        query, top_k=top_k, category=category, record=not no_record
    )
    if as_json:
        print_json([result.to_dict() for result in results])
        return
    if not results:
        out_console.print("no matches")
        return
    out_console.print(search_table(results))


def search_table(results: tuple[SearchResult, ...]) -> Table:
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for column in ("#", "id", "category", "conf.", "score", "match"):
        table.add_column(column, no_wrap=True)
    table.add_column("content", overflow="fold")
    for number, result in enumerate(results, start=1):
        flat = " ".join(result.content.split())
        preview = flat if len(flat) <= _PREVIEW else flat[: _PREVIEW - 1] + "…"
        table.add_row(
            str(number),
            result.fact_id,
            escape(result.category),
            f"{result.confidence:.2f}",
            f"{result.score:.3f}",
            result.match_type,
            escape(preview),
        )
    return table
