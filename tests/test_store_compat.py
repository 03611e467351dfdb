"""A directory written by the original DeerMem opens unchanged.

The directory is made by hand from the layout and formats of reference §2 —
not by deermem — so this test fails if deermem drifts from the original.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from deermem import Memory, MemoryConfig

NOW = datetime(2026, 8, 13, tzinfo=UTC)
USER = "alice@example.com"
USER_DIR = "users/alice-example-com-ff8d9819fc0e12bf"

MANIFEST = {
    "version": "2.0",
    "revision": 7,
    "lastUpdated": "2026-08-10T09:30:00.123456Z",
    "user": {
        "workContext": {
            "summary": "Backend engineer, payments.",
            "updatedAt": "2026-08-01T00:00:00Z",
        },
        "personalContext": {"summary": "", "updatedAt": ""},
        "topOfMind": {"summary": "Queue migration.", "updatedAt": "2026-08-10T09:30:00.123456Z"},
    },
    "history": {
        "recentMonths": {"summary": "Shipped billing v2.", "updatedAt": "2026-07-01T00:00:00Z"},
        "earlierContext": {"summary": "", "updatedAt": ""},
        "longTermBackground": {"summary": "", "updatedAt": ""},
    },
}

FACTS = {
    "fact_9f8e7d6c": (
        "---\n"
        "id: fact_9f8e7d6c\n"
        "category: correction\n"
        "confidence: 0.95\n"
        "status: active\n"
        "schemaVersion: 2\n"
        "source:\n"
        "  type: conversation\n"
        "  threadId: 2f1c0a\n"
        "user_id: alice@example.com\n"
        "agent_name: __default__\n"
        "topics:\n"
        "- tooling\n"
        "- python\n"
        "createdAt: '2026-06-02T10:00:00.000001Z'\n"
        "updatedAt: '2026-08-06T08:00:00Z'\n"
        "revision: 3\n"
        "lastConfirmedAt: '2026-08-06T08:00:00Z'\n"
        "confirmationCount: 2\n"
        "sourceError: The assistant suggested pip install.\n"
        "expected_valid_days: 365\n"
        "---\n"
        "\n"
        "# Use uv instead of pip in this project.\n"
        "\n"
        "Use uv instead of pip in this project.\n"
    ),
    "fact_0a1b2c3d": (
        "---\n"
        "id: fact_0a1b2c3d\n"
        "category: other\n"
        "categoryExtension: knowledge\n"
        "confidence: 0.8\n"
        "status: active\n"
        "schemaVersion: 2\n"
        "source:\n"
        "  type: consolidation\n"
        "  threadId: null\n"
        "user_id: alice@example.com\n"
        "agent_name: __default__\n"
        "topics: []\n"
        "createdAt: '2026-07-15T00:00:00Z'\n"
        "updatedAt: '2026-07-15T00:00:00Z'\n"
        "revision: 1\n"
        "consolidatedFrom:\n"
        "- fact_11111111\n"
        "- fact_22222222\n"
        "consolidatedAt: '2026-07-15T00:00:00Z'\n"
        "---\n"
        "\n"
        "# Billing jobs run nightly\n"
        "\n"
        "Billing jobs run nightly at 02:00 UTC.\n"
        "They are retried twice.\n"
    ),
}
RESEARCHER_FACT = (
    "---\n"
    "id: fact_5e5e5e5e\n"
    "category: goal\n"
    "confidence: 0.7\n"
    "status: active\n"
    "schemaVersion: 2\n"
    "source:\n"
    "  type: manual\n"
    "  threadId: null\n"
    "user_id: alice@example.com\n"
    "agent_name: researcher\n"
    "topics: []\n"
    "createdAt: '2026-08-01T00:00:00Z'\n"
    "updatedAt: '2026-08-01T00:00:00Z'\n"
    "revision: 1\n"
    "---\n"
    "\n"
    "# Read the queue papers.\n"
    "\n"
    "Read the queue papers.\n"
)
ORIGINAL_EVENT = {
    "occurredAt": "2026-08-10T09:30:00.123456Z",
    "reason": "capacity",
    "policyVersion": "confidence",
    "maxFacts": 100,
    "reservedCorrectionSlots": 0,
    "evicted": [
        {
            "factId": "fact_77777777",
            "category": "context",
            "score": 0.3,
            "components": {"confidence": 0.3},
        }
    ],
    "shadow": {"policyVersion": "hybrid-v1", "wouldEvict": ["fact_77777777"], "disagrees": False},
}
USAGE = {
    "fact_9f8e7d6c": {"accessHeat": 2.5, "accessCount": 4, "lastAccessedAt": "2026-08-09T00:00:00Z"}
}


def shard(fact_id: str) -> str:
    return hashlib.sha256(fact_id.encode()).hexdigest()[:2]


@pytest.fixture
def original(tmp_path: Path) -> Path:
    user = tmp_path / USER_DIR
    user.mkdir(parents=True)
    (user / "memory.json").write_text(json.dumps(MANIFEST, indent=2, ensure_ascii=False), "utf-8")
    (user / ".memory.lock").write_bytes(b"\0")
    (user / ".recovery").mkdir()  # the original leaves it behind, empty
    default = user / "agents/__default__"
    for fact_id, text in FACTS.items():
        path = default / "facts" / shard(fact_id) / f"{fact_id}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, "utf-8")
    metadata = default / ".metadata"
    metadata.mkdir()
    (metadata / "fact-usage.json").write_text(json.dumps(USAGE), "utf-8")
    (metadata / "eviction-audit.json").write_text(json.dumps([ORIGINAL_EVENT]), "utf-8")
    researcher = user / "agents/researcher"
    path = researcher / "facts" / shard("fact_5e5e5e5e") / "fact_5e5e5e5e.md"
    path.parent.mkdir(parents=True)
    path.write_text(RESEARCHER_FACT, "utf-8")
    (researcher / "config.yaml").write_text("name: researcher\n", "utf-8")
    (researcher / "SOUL.md").write_text("Curious.\n", "utf-8")
    return tmp_path


def snapshot_files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def open_memory(root: Path, agent: str | None = None) -> Memory:
    return Memory.open(
        root,
        MemoryConfig(fact_eviction_policy="hybrid-v1"),
        user=USER,
        agent=agent,
        clock=lambda: NOW,
    )


def test_an_original_directory_reads_unchanged(original: Path) -> None:
    before = snapshot_files(original)
    memory = open_memory(original)
    facts = {f.id: f for f in memory.list_facts()}
    assert set(facts) == set(FACTS)
    correction = facts["fact_9f8e7d6c"]
    assert correction.category == "correction"
    assert correction.topics == ("tooling", "python")
    assert (correction.revision, correction.confirmationCount) == (3, 2)
    assert correction.lastConfirmedAt == "2026-08-06T08:00:00Z"
    assert correction.expected_valid_days == 365
    assert correction.source.threadId == "2f1c0a"
    assert correction.scope is not None
    assert correction.scope.userId == USER
    merged = facts["fact_0a1b2c3d"]
    assert (merged.category, merged.categoryExtension) == ("other", "knowledge")
    assert merged.consolidatedFrom == ("fact_11111111", "fact_22222222")
    assert merged.title == "Billing jobs run nightly"  # a heading of its own is kept
    assert merged.content == "Billing jobs run nightly at 02:00 UTC.\nThey are retried twice."
    summaries = memory.summaries()
    assert summaries.revision == 7
    assert summaries.user["topOfMind"].summary == "Queue migration."
    [receipt] = memory.audit()
    assert receipt.fact_ids == ("fact_77777777",)
    assert receipt.shadow is not None
    assert receipt.shadow.would_evict == ("fact_77777777",)
    assert memory.store.usage(memory.scope)["fact_9f8e7d6c"].access_count == 4
    assert [f.id for f in open_memory(original, "Researcher").list_facts()] == ["fact_5e5e5e5e"]
    assert memory.why("fact_77777777").status == "gone"
    assert snapshot_files(original) == before  # reading wrote nothing


def test_writing_to_an_original_directory_touches_only_what_changes(original: Path) -> None:
    before = snapshot_files(original)
    memory = open_memory(original)
    fact_id = memory.create_fact("Prefers small pull requests.", category="preference").fact_id
    assert fact_id is not None
    after = snapshot_files(original)
    changed = {name for name in after if before.get(name) != after[name]}
    assert changed == {
        f"{USER_DIR}/memory.json",
        f"{USER_DIR}/agents/__default__/facts/{shard(fact_id)}/{fact_id}.md",
        # deermem's own: the first commit claims the directory for its owner (issue 20)
        f"{USER_DIR}/.memory.owner.json",
    }
    assert json.loads(after[f"{USER_DIR}/.memory.owner.json"]) == {"userId": USER}
    document = json.loads(after[f"{USER_DIR}/memory.json"])
    assert document["revision"] == 8
    assert document["user"] == MANIFEST["user"]
    # updating a fact written by the original keeps its fields and bumps its revision
    updated = memory.update_fact("fact_9f8e7d6c", confidence=0.97, expected_revision=3)
    assert updated.revision == 4
    assert updated.confirmationCount == 2
    text = (
        original
        / USER_DIR
        / "agents/__default__/facts"
        / shard("fact_9f8e7d6c")
        / "fact_9f8e7d6c.md"
    ).read_text("utf-8")
    assert "user_id: alice@example.com\n" in text
    assert "revision: 4\n" in text
    # the custom agent's own files are never touched
    assert (original / USER_DIR / "agents/researcher/config.yaml").read_text(
        "utf-8"
    ) == "name: researcher\n"
    assert (original / USER_DIR / "agents/researcher/SOUL.md").read_text("utf-8") == "Curious.\n"


def test_receipts_are_appended_after_the_originals_events(original: Path) -> None:
    memory = Memory.open(original, MemoryConfig(max_facts=10), user=USER, clock=lambda: NOW)
    for number in range(9):
        memory.create_fact(f"Fact {number}", confidence=0.9)
    audit = original / USER_DIR / "agents/__default__/.metadata/eviction-audit.json"
    events = json.loads(audit.read_text("utf-8"))
    assert events == [ORIGINAL_EVENT, events[1]]
    assert events[1]["trigger"] == "manual"
    assert "receiptId" in events[1]
