"""What an agent reads: ``deermem context`` (the prompt block, and why it holds what it
holds) and ``deermem search`` (facts by what they say)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer
from rich import box
from rich.table import Table

from deermem.cli.output import JSON_OPTION, err_console, escape, memory_of, out_console, print_json
from deermem.recall import OMISSION_REASONS, InjectionManifest
from deermem.results import (
    MAX_QUERY_CHARS,
    MAX_TOP_K,
    PromptContext,
    check_query,
    to_json,
)

if TYPE_CHECKING:
    from deermem.results import SearchResult

__all__ = ["context", "search"]

_PREVIEW = 70


def _query(value: str | None) -> str | None:
    """A query as the HTTP API and the MCP tools take it: 1 to ``MAX_QUERY_CHARS`` characters,
    not only spaces.

    The same rules on every interface, from one place: a query one of them
    refuses is not quietly answered "no matches" by another.
    """
    if value is None:
        return None
    if not 1 <= len(value) <= MAX_QUERY_CHARS:
        length = "empty" if not value else f"{len(value)} characters long"
        raise typer.BadParameter(f"expected 1 to {MAX_QUERY_CHARS} characters, got {length}")
    try:
        return check_query(value)
    except ValueError as refused:
        raise typer.BadParameter(str(refused)) from None


def _category(value: str | None) -> str | None:
    """A category to filter by, refused when blank as HTTP and MCP refuse it (a usage error)."""
    if value is not None and not value.strip():
        raise typer.BadParameter("expected a category to filter by, not blank")
    return value


def context(
    ctx: typer.Context,
    explain: bool = typer.Option(
        False,
        "--explain",
        help="Instead of the text, list every fact: in or left out, at what token cost, and why.",
    ),
    query: str | None = typer.Option(
        None,
        "--query",
        callback=_query,
        help="The user's question: facts relevant to it are preferred when not every fact fits.",
    ),
    as_json: bool = JSON_OPTION,
) -> None:
    """Print the `<memory>` block deermem puts into the agent's prompt.

    Summaries first, then facts: the protected categories (`correction` by
    default) come first within `guaranteed_token_budget`, the rest in the
    capacity policy's order within `max_injection_tokens`. Showing it counts
    as neither a recall nor a confirmation.

    Examples: `deermem --user alice --agent coder context`,
    `deermem --user alice context --explain`,
    `deermem --user alice context --query "Which editor do I use?"`,
    `deermem --user alice context --json` (text, block and manifest)
    """
    injection = memory_of(ctx, existing=True).injection(query=query)
    manifest = injection.manifest
    if as_json:
        print_json(to_json(PromptContext.of(injection)))
        return
    if explain:
        out_console.print(manifest_summary(manifest))
        if manifest.injected or manifest.omitted or manifest.summary_tokens:
            out_console.print(manifest_table(manifest))
        return
    if not injection.block:
        why = "injection is off (injection_enabled)" if not manifest.enabled else "memory is empty"
        err_console.print(f"nothing to inject: {why}")
        return
    typer.echo(injection.block)


def manifest_summary(manifest: InjectionManifest) -> str:
    """One line on the budget: what the text costs and where the tokens went."""
    if not manifest.enabled:
        return "injection is off (injection_enabled = false): nothing goes into the prompt"
    guaranteed = ", ".join(manifest.guaranteed_categories) or "none"
    cut = "; summaries cut to fit" if manifest.summaries_truncated else ""
    return escape(
        f"{manifest.budget_tokens} of {manifest.max_tokens} tokens "
        f"(summaries {manifest.summary_tokens}, guaranteed {manifest.guaranteed_tokens} "
        f"of {manifest.guaranteed_token_budget} for {guaranteed}, "
        f"ranked {manifest.ranked_tokens}){cut}; "
        f"{len(manifest.injected)} facts in, {len(manifest.omitted)} left out; "
        f"ranked by {manifest.policy}, counted with {manifest.token_counter}"
    )


def manifest_table(manifest: InjectionManifest) -> Table:
    """Every fact of an injection, in or left out, with its cost and why (no content).

    A first row stands for the summary sections; then the fact lines in the
    order of the text (``Facts, guaranteed`` or ``Facts, ranked``), then the
    facts left out with the reason, which the caption explains.
    """
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, caption_justify="left")
    for column in ("fact id", "category", "rank", "score", "tokens", "section / left out"):
        numeric = column in ("rank", "score", "tokens")
        table.add_column(
            column, no_wrap=column == "fact id", justify="right" if numeric else "left"
        )
    summaries = [name for name in manifest.sections if name != "Facts"]
    if summaries:
        where = ", ".join(summaries) + (" (cut to fit)" if manifest.summaries_truncated else "")
        table.add_row("(summaries)", "-", "-", "-", str(manifest.summary_tokens), where)
    for item in manifest.injected:
        table.add_row(
            escape(item.fact_id),
            escape(item.category),
            str(item.rank),
            f"{item.score:.4f}",
            str(item.tokens),
            f"Facts, {item.pool}",
        )
    for left in manifest.omitted:
        table.add_row(
            escape(left.fact_id) or "(no id)",
            escape(left.category or "-"),
            "-" if left.rank is None else str(left.rank),
            "-" if left.score is None else f"{left.score:.4f}",
            "-" if left.tokens is None else str(left.tokens),
            f"[yellow]left out: {left.reason}[/]",
        )
    notes = ["guaranteed: a protected category, inside its own budget"]
    reasons = sorted({left.reason for left in manifest.omitted})
    notes += [f"{reason}: {OMISSION_REASONS[reason]}" for reason in reasons]
    table.caption = escape("; ".join(notes))
    return table


def search(
    ctx: typer.Context,
    query: str = typer.Argument(
        ...,
        callback=_query,
        help=f"What to look for, in plain words (at most {MAX_QUERY_CHARS} characters).",
    ),
    top_k: int = typer.Option(
        5, "--top-k", "-k", min=1, max=MAX_TOP_K, help="At most this many results."
    ),
    category: str | None = typer.Option(
        None,
        "--category",
        "-c",
        callback=_category,
        help="Only this category (e.g. correction).",
    ),
    no_record: bool = typer.Option(
        False,
        "--no-record",
        help="Look without counting the hits as recalls (they matter under hybrid-v1).",
    ),
    as_json: bool = JSON_OPTION,
) -> None:
    """Search the facts of one user and agent, best match first.

    By keyword and by meaning together (`search_mode: hybrid`, the default;
    match `hybrid`): "Am I a southpaw?" finds "I am left-handed.". By keyword
    alone (SQLite FTS5: BM25, decayed after 30 days, plus a confidence term;
    match `fts5`) under `search_mode: keyword`, or where the `embed` extra's
    models cannot run (said once). A substring match (`substring`) when
    neither finds anything. Hyphens, quotes and operators are safe to type;
    `"a phrase"` stays a phrase and `word*` a prefix; Chinese, Japanese and
    Korean text is searchable. Under `hybrid-v1` or shadow mode the hits
    count as recalls unless `--no-record`. Details: docs/search.md.

    Examples: `deermem --user alice search "package manager"`,
    `deermem --user alice search uv --category correction --top-k 3 --json`
    """
    results = memory_of(ctx, existing=True).search(
        query, top_k=top_k, category=category, record=not no_record
    )
    if as_json:
        print_json(to_json(results))
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
