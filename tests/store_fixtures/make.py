"""Fixtures for tests/test_store_fixtures.py: stores written by an earlier deermem.

``written-by-deermem-e1f89b5/`` was written by deermem at commit e1f89b5 (the
last one with the hand-written YAML and JSON codecs), through
``MarkdownStore.commit``; ``handwritten-deermem/`` is a directory in the
original DeerMem's layout whose files were written by hand, in YAML styles
that ``yaml.safe_dump`` does not produce but any YAML reader accepts. Each
directory's ``expected.json`` is what that deermem read from it
(:func:`describe`). To regenerate, from a checkout of that commit::

    PYTHONPATH=src:/path/to/this/checkout python -m tests.store_fixtures.make OUT

:func:`write_store` writes ``OUT/written-by-deermem-e1f89b5/store`` and both
``expected.json`` files (the hand-written store is copied in by hand).
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

from deermem.model import Fact, Scope
from deermem.store import (
    ArchiveEntry,
    ChangeSet,
    EvictionReceipt,
    FactWrite,
    MarkdownStore,
    ReceiptEntry,
    Section,
)

NOW = datetime(2026, 8, 13, tzinfo=UTC)
SCOPES = (
    Scope.of("alice@example.com", "coder"),
    Scope.of("alice@example.com", None),
    Scope.of(None, "writer"),
)
LONG = (
    "The assistant suggested 'pip install -r requirements.txt': the project uses uv, "
    "and the lock file is the single source of truth for every environment we build."
)


def _facts(scope: Scope) -> list[Fact]:
    base = {"createdAt": "2026-06-02T10:00:00.000001Z", "source": "thread-7"}
    rows: list[dict[str, object]] = [
        {"id": "fact_plain", "content": "Use uv, not pip.", "category": "correction"},
        {
            "id": "fact_unicode",
            "content": "Prefers café ☕ and 名前 in examples 😀.\nSecond line.",
            "category": "preference",
            "confidence": 0.95,
            "topics": ["été", "😀", "yes", "1:30", "- item", "'quoted'", "a #b", ""],
            "sourceError": "Suggested 名前 — with an em dash ✓",
        },
        {
            "id": "fact_long",
            "content": LONG,
            "category": "correction",
            "confidence": 1e-05,
            "sourceError": LONG,
            "lastConfirmedAt": "2026-08-06T08:00:00Z",
            "confirmationCount": 2,
            "expected_valid_days": 365,
        },
        {
            "id": "fact_titled",
            "title": "Billing jobs",
            "content": "Billing jobs run nightly at 02:00 UTC.\n\nThey are retried twice.",
            "category": "other",
            "categoryExtension": "knowledge",
            "confidence": 1,
            "source": {"type": "consolidation", "threadId": None},
            "consolidatedFrom": ["fact_11111111", "fact_22222222"],
            "consolidatedAt": "2026-07-15T00:00:00Z",
        },
        {
            "id": "fact_extra",
            "content": "Keeps unknown keys.",
            "confidence": 0.0,
            "source": {"type": "manual"},
            "reviewFlag": True,
            "note": "on",
            "nested": {"list": [1, 2.5, None, "x"], "empty": {}},
            "sourceError": "next\x85line and\u2028separator",
        },
    ]
    return [
        Fact.from_dict({**base, **row, "createdAt": f"2026-06-0{n + 1}T10:00:00Z"})
        for n, row in enumerate(rows)
    ]


def write_store(root: Path) -> None:
    """Write every scope's facts, summaries, a receipt, an archive entry and usage."""
    store = MarkdownStore(root)
    for scope in SCOPES:
        facts = _facts(scope)
        gone = Fact.from_dict(
            {"id": "fact_gone", "content": "Archived: tabs, not spaces ✓.", "createdAt": NOW}
        )
        line = ReceiptEntry(
            fact_id="fact_gone",
            category="context",
            score=0.4875,
            components={"confidence": 0.5, "confirmationFreshness": 0.25, "accessHeat": 0.0},
            rank=6,
            margin=-0.125,
        )
        receipt = EvictionReceipt(
            receipt_id="rcpt_0123456789abcdef",
            occurred_at="2026-08-13T00:00:00Z",
            reason="capacity",
            trigger="manual",
            policy_version="confidence",
            max_facts=5,
            occupancy=6,
            reserved_correction_slots=0,
            evicted=(line,),
        )
        entry = ArchiveEntry(
            fact=gone,
            archived_at="2026-08-13T00:00:00Z",
            reason="capacity",
            trigger="manual",
            receipt_id=receipt.receipt_id,
            eviction=line,
            policy_version="confidence",
        )
        summaries: dict[tuple[str, str], str | Section] = {
            ("user", "workContext"): "Backend engineer — payments.\nLikes 🍵.",
            ("history", "recentMonths"): Section("Shipped billing v2.", "2026-07-01T00:00:00Z"),
        }
        store.commit(
            scope,
            ChangeSet(
                now=NOW,
                writes=tuple(FactWrite(fact, create=True) for fact in facts),
                summaries=summaries,
                archive_puts=(entry,),
                receipts=(receipt,),
            ),
        )
        store.record_access(scope, ["fact_plain", "fact_unicode"], NOW)
        store.record_access(scope, ["fact_plain"], NOW + timedelta(days=3))


def describe(root: Path) -> dict[str, object]:
    """Everything a store reads from ``root``, as JSON values, per scope."""
    store = MarkdownStore(root)
    out: dict[str, object] = {}
    for scope in (*SCOPES, Scope.of("alice@example.com", "researcher")):
        snapshot = store.load(scope)
        out[f"{scope.user_id}/{scope.agent}"] = {
            "facts": [fact.to_dict() for fact in snapshot.facts],
            "summaries": snapshot.summaries.to_dict(),
            "audit": [receipt.to_dict() for receipt in store.audit(scope)],
            "usage": {key: value.to_dict() for key, value in store.usage(scope).items()},
            "archive": [entry.to_dict() for entry in store.archive(scope, NOW)],
        }
    described: dict[str, object] = json.loads(json.dumps(out, default=str))
    return described


def write_expected(directory: Path) -> None:
    with tempfile.TemporaryDirectory() as scratch:  # reading takes locks: never in place
        copy = Path(scratch) / "store"
        shutil.copytree(directory / "store", copy)
        described = describe(copy)
    text = json.dumps(described, indent=2, ensure_ascii=False) + "\n"
    (directory / "expected.json").write_text(text, "utf-8")


def main() -> None:
    out = Path(sys.argv[1])
    written = out / "written-by-deermem-e1f89b5"
    write_store(written / "store")
    write_expected(written)
    if (out / "handwritten-deermem" / "store").is_dir():
        write_expected(out / "handwritten-deermem")


if __name__ == "__main__":
    main()
