"""``deermem context``: the memory block an agent sees, and why it holds what it holds."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer
from rich import box
from rich.markup import escape
from rich.table import Table

from deermem.cli._context import memory_of
from deermem.cli._output import JSON_OPTION, err_console, out_console, print_json

if TYPE_CHECKING:
    from deermem.recall import InjectionManifest

__all__ = ["context", "manifest_summary", "manifest_table"]


def context(
    ctx: typer.Context,
    explain: bool = typer.Option(
        False,
        "--explain",
        help="Instead of the text, list every fact: in or left out, at what token cost, and why.",
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
    `deermem --user alice context --json` (text, block and manifest)
    """
    injection = memory_of(ctx, existing=True).injection()
    manifest = injection.manifest
    if as_json:
        print_json(
            {"text": injection.text, "block": injection.block, "manifest": manifest.to_dict()}
        )
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
    from deermem.recall import OMISSION_REASONS

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
