"""Rendering facts, receipts and explanations for people (tables and sentences).

Everything a user or a model wrote is escaped before rich sees it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from rich import box
from rich.markup import escape
from rich.table import Table

if TYPE_CHECKING:
    from deermem.model import Fact
    from deermem.store import EvictionReceipt, ReceiptEntry

__all__ = [
    "components_text",
    "eviction_sentence",
    "fact_lines",
    "fact_table",
    "margin_text",
    "receipt_table",
]

_PREVIEW = 70


def fact_table(facts: Iterable[Fact], *, title: str | None = None) -> Table:
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for column in ("id", "category", "conf.", "created", "content"):
        table.add_column(column, no_wrap=column != "content", overflow="fold")
    for fact in facts:
        table.add_row(
            fact.id,
            escape(_category(fact)),
            f"{fact.confidence:.2f}",
            fact.createdAt[:10],
            escape(_preview(fact.content)),
        )
    return table


def fact_lines(fact: Fact) -> list[str]:
    """Every field of a fact, one ``name: value`` line each (markup-safe)."""
    lines = []
    for key, value in fact.to_dict().items():
        if key == "content":
            continue
        lines.append(f"[dim]{escape(key)}:[/] {escape(_value(value))}")
    lines.append("")
    lines.append(escape(fact.content))
    return lines


def receipt_table(receipts: Iterable[EvictionReceipt]) -> Table:
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for column in ("when", "why", "policy", "n/cap"):
        table.add_column(column, no_wrap=True)
    table.add_column("facts (score)", min_width=13, overflow="fold")
    table.add_column("shadow", overflow="fold")
    for receipt in receipts:
        facts = "\n".join(_line_summary(line) for line in receipt.evicted)
        shadow = ""
        if receipt.shadow is not None:
            verdict = "disagrees" if receipt.shadow.disagrees else "agrees"
            shadow = f"{receipt.shadow.policy} {verdict}"
        table.add_row(
            receipt.occurred_at[:16].replace("T", " "),
            receipt.reason + (f"\n({receipt.trigger})" if receipt.trigger else ""),
            receipt.policy_version,
            f"{receipt.occupancy}/{receipt.max_facts}"
            if receipt.occupancy
            else f"cap {receipt.max_facts}",
            escape(facts),
            shadow,
        )
    return table


def eviction_sentence(receipt: EvictionReceipt | None, line: ReceiptEntry | None) -> str:
    """One sentence on why a fact left, from its receipt line (markup-safe)."""
    if line is None:
        return "no receipt records why it left"
    parts = []
    if receipt is not None:
        # Receipts written by the original DeerMem record no trigger, rank or
        # occupancy: what a receipt does not hold is left out, never shown as "?".
        when = f"on {receipt.occurred_at[:10]}"
        if receipt.trigger:
            when += f" (trigger {receipt.trigger})"
        if receipt.reason == "capacity":
            parts.append(f"evicted at capacity {when}")
            parts.append(f"by {receipt.policy_version} with a cap of {receipt.max_facts}")
        else:
            parts.append(f"{receipt.reason} {when}")
    if line.score is not None:
        of = f" of {receipt.occupancy}" if receipt is not None and receipt.occupancy else ""
        rank = f"rank {line.rank}{of}, " if line.rank is not None else ""
        parts.append(
            f"{rank}score {line.score:.4f} ({components_text(line.components)})"
            f"{margin_text(line.margin)}"
        )
    return escape("; ".join(parts))


def components_text(components: Mapping[str, float]) -> str:
    return ", ".join(f"{name} {value:.4f}" for name, value in components.items())


def margin_text(margin: float | None) -> str:
    if margin is None:
        return ""
    if margin >= 0:
        return f", {margin:.4f} below the lowest kept"
    return f", {-margin:.4f} above the lowest kept (a reserved correction held its slot)"


def _line_summary(line: ReceiptEntry) -> str:
    if line.score is None:
        return line.fact_id
    return f"{line.fact_id} ({line.score:.3f})"


def _category(fact: Fact) -> str:
    return f"other:{fact.categoryExtension}" if fact.categoryExtension else fact.category


def _preview(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _PREVIEW else flat[: _PREVIEW - 1] + "…"


def _value(value: object) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items())
    if isinstance(value, list):
        return ", ".join(str(item) for item in value) or "[]"
    return str(value)
