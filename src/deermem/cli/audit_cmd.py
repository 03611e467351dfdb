"""``deermem audit`` and ``deermem why``: what left the library, and why."""

from __future__ import annotations

import typer
from rich.markup import escape

from deermem.cli._context import memory_of
from deermem.cli._output import JSON_OPTION, out_console, print_json
from deermem.cli._render import components_text, eviction_sentence, receipt_table

__all__ = ["audit", "why"]


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
    shown = receipts[-limit:] if limit else receipts
    if as_json:
        print_json([receipt.to_dict() for receipt in shown])
        return
    if not shown:
        out_console.print("no receipts: nothing has been evicted or removed")
        return
    out_console.print(receipt_table(reversed(shown)))


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
        print_json(explanation.to_dict())
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
        out_console.print(f"  restore with `deermem archive restore {fact_id}`")
