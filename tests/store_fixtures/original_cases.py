"""Fact data (ours) whose files the original DeerMem wrote: tests/store_fixtures/original-f1f4af99/.

``tests/test_store_original.py`` checks that deermem writes the same bytes for
the same data. The expected files were made by running the original's own
storage and updater code (bytedance/deer-flow at commit f1f4af99,
``backend/packages/harness/deerflow/agents/memory/backends/deermem/deermem``)
on these cases, outside this repository, with its clock and id generator
fixed; nothing of the original runs in the tests. To regenerate, in a Python
3.11 environment with ``pyyaml``, ``pydantic`` and ``langchain-core`` (which
the original's updater imports), and **without** this project installed (the
original's package is also named ``deermem``)::

    python tests/store_fixtures/original_cases.py \\
        /path/to/deer-flow/backend/packages/harness/deerflow/agents/memory/backends/deermem \\
        tests/store_fixtures/original-f1f4af99

Three kinds of case:

* ``STORED`` — a fact mapping handed to the storage as it is (the original's
  ``apply_changes``; deermem's ``Fact.from_dict`` and ``encode_fact``);
* ``CREATED`` — a fact added by hand (the original's ``create_memory_fact``;
  deermem's ``Memory.create_fact``);
* ``CHANGED`` — a fact the original created, then changed by each system
  (a confirmation, a new confidence, a new category): the file before is
  ``<name>.before.md``, the original's after ``<name>.md``.

This module imports nothing from deermem, so the generator can run beside
the original's package.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

NOW = "2026-08-13T00:00:00Z"
LATER = "2026-09-01T12:30:00.250000Z"
LONG = (
    "The assistant suggested 'pip install -r requirements.txt': the project uses uv, "
    "and the lock file is the single source of truth for every environment we build."
)

STORED: dict[str, dict[str, object]] = {
    "plain": {
        "user": "alice",
        "agent": "coder",
        "fact": {
            "id": "fact_00000001",
            "content": "Use uv, not pip.",
            "category": "correction",
            "confidence": 0.9,
            "createdAt": NOW,
            "source": "manual",
        },
    },
    "extracted": {
        "user": "alice",
        "agent": "coder",
        "fact": {
            "id": "fact_00000002",
            "content": "Prefers dark roast coffee in the morning.",
            "category": "preference",
            "confidence": 0.85,
            "createdAt": NOW,
            "source": "thread-7",
            "sourceError": "The assistant suggested green tea.",
            "expected_valid_days": 365,
        },
    },
    "other-category": {
        "user": "alice",
        "agent": "coder",
        "fact": {
            "id": "fact_00000003",
            "content": "The billing jobs run nightly at 02:00 UTC.",
            "category": "knowledge",
            "confidence": 1,
            "createdAt": "2026-06-02T10:00:00.000001Z",
            "source": {"type": "conversation", "threadId": "2f1c0a"},
        },
    },
    "unicode": {
        "user": "alice@example.com",
        "agent": "coder",
        "fact": {
            "id": "fact_00000004",
            "content": "Prefers café ☕ and 名前 in examples 😀.\nSecond line, with a tab\there.",
            "category": "preference",
            "confidence": 0.95,
            "createdAt": NOW,
            "source": "thread-8",
            "topics": ["été", "😀", "名前", "emoji 🚀 in a topic"],
            "sourceError": "Suggested 名前 — with an em dash ✓ and an emoji 😀",
        },
    },
    "long-lines": {
        "user": "alice",
        "agent": "coder",
        "fact": {
            "id": "fact_00000005",
            "content": LONG + "\n" + LONG,
            "category": "correction",
            "confidence": 0.7,
            "createdAt": NOW,
            "source": "thread-9",
            "sourceError": LONG + " 😀 " + LONG,
            "topics": [
                "\t" + LONG,  # a double-quoted scalar, broken over lines
                "😀 " * 45,  # emoji past the line width
                "名前" * 50,
            ],
        },
    },
    "yaml-specials": {
        "user": "alice",
        "agent": "coder",
        "fact": {
            "id": "fact_00000006",
            "content": "---\nYAML-looking content: yes, ~, null.",
            "category": "context",
            "confidence": 0.5,
            "createdAt": NOW,
            "source": "yes",
            "topics": [
                "yes",
                "No",
                "~",
                "null",
                "0x10",
                "1e3",
                "012",
                "1:30",
                "#tag",
                "trailing ",
                " leading",
                "- item",
                "key: value",
                "'quoted'",
                '"double"',
                "",
                "---",
                "...",
                "@at",
                "`tick",
                "%pct",
                "!bang",
                "&anchor",
                "*alias",
                "[x]",
                "{y}",
                "a, b",
                "?",
                ":",
                "2026-08-13",
                "true",
            ],
            "sourceError": "line one\n---\nline three\n\n  indented, trailing \n",
            "custom": "yes",
            "nested": {"a": [1, "two", None, True, 2.5], "when": "2026-01-01", "empty": {}},
        },
    },
    "source-extra-keys": {
        "user": "alice",
        "agent": "coder",
        "fact": {
            "id": "fact_00000007",
            "content": "Deploys go through the staging cluster first.",
            "category": "constraint",
            "confidence": 0.8,
            "createdAt": NOW,
            "source": {"type": "conversation", "threadId": "t-9", "channel": "slack", "turn": 4},
        },
    },
    "source-without-thread": {
        "user": "alice",
        "agent": "coder",
        "fact": {
            "id": "fact_00000008",
            "content": "Imported from the old wiki.",
            "category": "context",
            "confidence": 0.6,
            "createdAt": NOW,
            "source": {"type": "import"},
        },
    },
    "extension-on-core": {
        "user": "alice",
        "agent": "coder",
        "fact": {
            "id": "fact_00000009",
            "content": "Drinks oat milk.",
            "category": "preference",
            "categoryExtension": "drinks",
            "confidence": 0.75,
            "createdAt": NOW,
            "source": "manual",
        },
    },
    "confirmed": {
        "user": "alice",
        "agent": "coder",
        "fact": {
            "id": "fact_0000000a",
            "content": "Works in the payments team.",
            "category": "identity",
            "confidence": 0.9,
            "createdAt": NOW,
            "source": "thread-1",
            "updatedAt": LATER,
            "revision": 3,
            "lastConfirmedAt": LATER,
            "confirmationCount": 2,
        },
    },
    "consolidated": {
        "user": "alice",
        "agent": "coder",
        "fact": {
            "id": "fact_0000000b",
            "content": "Ships on Thursdays; freezes on Fridays.",
            "category": "decision",
            "confidence": 0.8,
            "createdAt": NOW,
            "source": "consolidation",
            "consolidatedFrom": ["fact_11111111", "fact_22222222"],
        },
    },
    "explicit-title": {
        "user": "alice",
        "agent": "coder",
        "fact": {
            "id": "fact_0000000c",
            "title": "Package manager",
            "content": "Use uv for every Python project.\n\nThe lock file is committed.",
            "category": "correction",
            "confidence": 0.9,
            "createdAt": NOW,
            "source": "manual",
        },
    },
    "heading-cut-at-a-space": {
        "user": "alice",
        "agent": "coder",
        "fact": {
            "id": "fact_0000000d",
            "content": "a" * 159 + " " + "b" * 40 + "\nSecond line.",
            "category": "context",
            "confidence": 0.5,
            "createdAt": NOW,
            "source": "manual",
        },
    },
    "heading-at-a-line-separator": {
        "user": "alice",
        "agent": "coder",
        "fact": {
            "id": "fact_0000000e",
            "content": "First part\u2028second part\nthird line",
            "category": "context",
            "confidence": 0.5,
            "createdAt": NOW,
            "source": "manual",
        },
    },
    "long-id": {
        "user": "alice",
        "agent": "coder",
        "fact": {
            # The longest id the original can write: its temporary file name
            # (".<id>.md.<32 hex>.tmp") must fit in 255 bytes.
            "id": "fact_" + "0123456789" * 20 + "abcdefghi",
            "content": "An id longer than 200 characters.",
            "category": "context",
            "confidence": 0.5,
            "createdAt": NOW,
            "source": "manual",
        },
    },
    "single-user-layout": {
        "user": None,
        "agent": "__default__",
        "fact": {
            "id": "fact_0000000f",
            "content": "No user id: the root is the user directory.",
            "category": "context",
            "confidence": 0.5,
            "createdAt": NOW,
            "source": "manual",
        },
    },
    "unknown-keys-first": {
        "user": "alice",
        "agent": "coder",
        "fact": {
            "reviewFlag": True,
            "id": "fact_00000010",
            "note": "written before the id",
            "content": "Keeps the order it was given.",
            "confidence": 0.4,
            "category": "goal",
            "createdAt": NOW,
            "expected_valid_days": "90",
        },
    },
}

CREATED: dict[str, dict[str, object]] = {
    "created-correction": {
        "id": "fact_00000011",
        "content": "  Use uv, not pip.  ",
        "category": "correction",
        "confidence": 0.9,
    },
    "created-other": {
        "id": "fact_00000012",
        "content": "Collects vinyl records 🎵.",
        "category": "hobby",
        "confidence": 0.7,
    },
}

# Each changes the fact the original created for "created-correction".
CHANGED: dict[str, dict[str, object]] = {
    "changed-confirmed": {"confirm": True},
    "changed-confidence": {"confidence": 0.95},
    "changed-category": {"category": "hobby"},
}


# A store the original wrote (original-f1f4af99-store/store/), holding data
# the original accepts at its edges; then each fact edited by the original
# (confidence 0.3, at LATER): original-f1f4af99-store/edited/<id>.md.
STORE_USER = "alice@example.com"
STORE_AGENT = "coder"
STORE_FACTS: list[dict[str, object]] = [
    {
        "id": "fact_edge0001",
        "content": "Drinks oat milk.",
        "category": "preference",
        "categoryExtension": "drinks",  # beside a core category
        "confidence": 0.8,
        "createdAt": NOW,
        "source": {"type": "conversation", "threadId": "t-1", "channel": "slack", "turn": 3},
    },
    {
        "id": "fact_edge0002",
        "content": "Created at an unknown time.",
        "category": "context",
        "confidence": 0.6,
        "createdAt": "",
        "lastConfirmedAt": "",
        "source": "manual",
    },
    {
        "id": "fact_" + "e" * 209,  # longer than deermem's former 200
        "content": "A long id.",
        "category": "goal",
        "confidence": 0.7,
        "createdAt": NOW,
        "source": "manual",
        "reviewFlag": True,
        "nested": {"list": [1, 2.5, None, "x"], "empty": {}},
    },
]
STORE_SUMMARIES: dict[str, dict[str, object]] = {
    "user": {
        "workContext": {"summary": 42, "updatedAt": NOW},  # not a string
        "topOfMind": {"summary": "Queue migration.", "updatedAt": NOW, "source": "import"},
    },
    "history": {
        "recentMonths": {"summary": None, "updatedAt": "", "note": {"by": "hand"}},
    },
}


def main() -> None:  # pragma: no cover - run by hand, beside the original's code
    """Write the expected files with the original's code (see the module docstring)."""
    import hashlib
    import importlib
    import tempfile
    import uuid

    package, out = sys.argv[1], Path(sys.argv[2])
    sys.path.insert(0, package)
    # The ORIGINAL's package, which is also named deermem.
    config_module: Any = importlib.import_module("deermem.config")
    storage: Any = importlib.import_module("deermem.core.storage")
    updater: Any = importlib.import_module("deermem.core.updater")
    clock = [NOW]
    storage.utc_now_iso_z = lambda: clock[0]
    updater.utc_now_iso_z = lambda: clock[0]
    out.mkdir(parents=True, exist_ok=True)

    for name, case in STORED.items():
        scope = {"userId": case["user"], "agentName": case["agent"]}
        fact = storage._normalize_fact(case["fact"], scope=scope)
        (out / f"{name}.md").write_bytes(storage._render_fact_markdown(fact))

    def create(root: str, spec: dict[str, object]) -> tuple[Any, Any, Path]:
        config = config_module.DeerMemConfig(storage_path=root)
        store = storage.FileMemoryStorage(config)
        memory = updater.MemoryUpdater(config, store)
        fact_id = str(spec["id"])
        clock[0] = NOW
        # The original's manual id is "fact_" + the first 8 hex digits of a uuid4.
        fixed = uuid.UUID(fact_id[5:] + "0" * 24)
        updater.uuid = type("FixedUuid", (), {"uuid4": staticmethod(lambda: fixed)})
        memory.create_memory_fact(
            spec["content"],
            category=spec["category"],
            confidence=spec["confidence"],
            agent_name="coder",
            user_id="alice",
        )
        shard = hashlib.sha256(fact_id.encode()).hexdigest()[:2]
        path = Path(root, "users", "alice", "agents", "coder", "facts", shard, f"{fact_id}.md")
        return store, memory, path

    for name, spec in CREATED.items():
        with tempfile.TemporaryDirectory() as root:
            _, _, path = create(root, spec)
            (out / f"{name}.md").write_bytes(path.read_bytes())

    for name, change in CHANGED.items():
        with tempfile.TemporaryDirectory() as root:
            spec = CREATED["created-correction"]
            store, memory, path = create(root, spec)
            (out / f"{name}.before.md").write_bytes(path.read_bytes())
            clock[0] = LATER
            if change.get("confirm"):
                # What the original's update applies for a confirmation.
                fact = store.get_fact(spec["id"], agent_name="coder", user_id="alice")
                fact = {**fact, "lastConfirmedAt": LATER, "confirmationCount": 1}
                store.apply_changes(
                    {"upserts": [fact], "upsertRevisions": {spec["id"]: 1}},
                    agent_name="coder",
                    user_id="alice",
                )
            else:
                memory.update_memory_fact(spec["id"], agent_name="coder", user_id="alice", **change)
            (out / f"{name}.md").write_bytes(path.read_bytes())

    import shutil

    store_out = out.with_name(out.name + "-store")
    shutil.rmtree(store_out, ignore_errors=True)
    with tempfile.TemporaryDirectory() as root:
        config = config_module.DeerMemConfig(storage_path=root)
        store = storage.FileMemoryStorage(config)
        memory = updater.MemoryUpdater(config, store)
        clock[0] = NOW
        store.apply_changes(
            {"upserts": STORE_FACTS, "summaries": STORE_SUMMARIES},
            agent_name=STORE_AGENT,
            user_id=STORE_USER,
        )
        (Path(root) / "users" / "alice-example-com-ff8d9819fc0e12bf" / ".memory.lock").unlink()
        shutil.copytree(root, store_out / "store")
        clock[0] = LATER
        for fact in STORE_FACTS:
            fact_id = str(fact["id"])
            memory.update_memory_fact(
                fact_id, confidence=0.3, agent_name=STORE_AGENT, user_id=STORE_USER
            )
            shard = hashlib.sha256(fact_id.encode()).hexdigest()[:2]
            edited = Path(root, "users", "alice-example-com-ff8d9819fc0e12bf", "agents")
            edited = edited / STORE_AGENT / "facts" / shard / f"{fact_id}.md"
            (store_out / "edited").mkdir(parents=True, exist_ok=True)
            (store_out / "edited" / f"{fact_id}.md").write_bytes(edited.read_bytes())


if __name__ == "__main__":
    main()
