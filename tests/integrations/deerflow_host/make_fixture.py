"""Write a memory store with DeerFlow's bundled DeerMem, for deermem's compatibility tests.

Runs inside a DeerFlow checkout's environment (Python 3.12, DeerFlow and
deermem installed; ``scripts/check-deerflow.sh`` makes one), never in
deermem's own: the store must be what the bundled backend writes, not what
deermem thinks it writes::

    cd DEERFLOW/backend
    PYTHONPATH=. .venv/bin/python DEERMEM/tests/integrations/deerflow_host/make_fixture.py OUT

``OUT/store`` is the store; ``OUT/expected.json`` is what the bundled backend
itself read back from it (``get_memory`` per scope, the raw audit and usage
sidecars). Everything goes through DeerFlow's own factory
(``manager_class: deermem``) — extraction over real HTTP against deermem's
ScriptedChatServer (the model's answers are scripted; DeerMem's filtering,
gates, reinforcement and capacity policy are its own), manual facts past the
cap under ``hybrid-v1`` (an eviction with its audit receipt), a search (recall
heat in the usage sidecar), an import for a second user and a deleted fact.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from deerflow.agents.memory import get_memory_manager, reset_memory_manager
from deerflow.config.memory_config import MemoryConfig, set_memory_config
from langchain_core.messages import AIMessage, HumanMessage

from deermem.testing import ScriptedChatServer

ALICE = "alice@example.com"  # an id with characters that need a digest in its directory name
BOB = "bob"
LABELS = {"scope": "user", "durability": "durable", "authority": "descriptive"}
SCOPES = [(ALICE, None), (ALICE, "coder"), (BOB, None)]


def update(**keys: Any) -> str:
    data: dict[str, Any] = {"user": {}, "history": {}, "newFacts": []}
    data.update(keys)
    return json.dumps(data)


def section(summary: str) -> dict[str, Any]:
    return {"summary": summary, "shouldUpdate": True, "scope": "user", "authority": "descriptive"}


def make(out: Path) -> None:
    store = out / "store"
    with ScriptedChatServer() as server:
        set_memory_config(
            MemoryConfig(
                manager_class="deermem",
                backend_config={
                    "storage_path": str(store),
                    "max_facts": 10,
                    "fact_eviction_policy": "hybrid-v1",
                    "debounce_seconds": 1,
                    "model": {
                        "provider": "openai",
                        "model": "scripted",
                        "base_url": server.url,
                        "api_key": "not-a-key",
                        "temperature": 0,
                    },
                },
            )
        )
        reset_memory_manager()
        manager = get_memory_manager()

        # 1. Extraction: two facts (one a correction with its sourceError) and a summary.
        server.enqueue(
            update(
                user={"workContext": section("Backend engineer working on billing.")},
                history={"recentMonths": section("Moved the billing service to Python 3.12.")},
                newFacts=[
                    {
                        "content": "Uses uv, never pip, for Python projects.",
                        "category": "correction",
                        "confidence": 0.95,
                        "sourceError": "The assistant suggested pip install.",
                        **LABELS,
                    },
                    {
                        "content": "Prefers answers that start with the command.",
                        "category": "preference",
                        "confidence": 0.85,
                        **LABELS,
                    },
                ],
            )
        )
        chat = [
            HumanMessage(content="Don't use pip, I always use uv for Python projects.", id="m1"),
            AIMessage(content="Understood: uv from now on.", id="m2"),
        ]
        manager.add("thread-1", chat, user_id=ALICE)
        assert manager.shutdown_flush(30), "the first extraction did not finish"
        facts = {f["content"]: f["id"] for f in manager.get_memory(user_id=ALICE)["facts"]}
        uv_fact = facts["Uses uv, never pip, for Python projects."]

        # 2. A confirmation in the user's own words: lastConfirmedAt and confirmationCount.
        server.enqueue(
            update(factsToReinforce=[{"id": uv_fact, "scope": "user", "reason": "confirmed"}])
        )
        confirm = [
            *chat,
            HumanMessage(content="Yes, exactly right: uv for everything.", id="m3"),
            AIMessage(content="Great, uv it is.", id="m4"),
        ]
        manager.add("thread-1", confirm, user_id=ALICE)
        assert manager.shutdown_flush(30), "the confirmation did not finish"

        # 3. Manual facts past the cap of 10 under hybrid-v1: an eviction and its receipt.
        for number in range(9):
            manager.create_fact(
                f"Background detail number {number}.",
                category="context",
                confidence=0.5 + number * 0.05,
                user_id=ALICE,
            )

        # 4. A search under hybrid-v1 records recall heat in the usage sidecar.
        assert manager.search("uv", user_id=ALICE), "the search found nothing"

        # 5. Another agent of the same user, and a fact deleted there.
        manager.create_fact("Reviews code in Go.", "skill", 0.8, agent_name="coder", user_id=ALICE)
        _, doomed = manager.create_fact("Temporary note.", user_id=ALICE, agent_name="coder")
        assert doomed is not None
        manager.delete_fact(doomed, agent_name="coder", user_id=ALICE)

        # 6. A second user, by import: summaries and facts with an unusual label and topics.
        manager.import_memory(
            {
                "user": {"personalContext": {"summary": "Lives in Lyon.", "updatedAt": ""}},
                "history": {},
                "facts": [
                    {
                        "id": "fact_bob00001",
                        "content": "Plays the cello.",
                        "category": "hobby",
                        "confidence": 0.9,
                        "topics": ["music", "cello"],
                        "createdAt": "2026-05-01T09:30:00Z",
                        "source": "import",
                    },
                    {
                        "content": "Speaks French and English.",
                        "category": "knowledge",
                        "confidence": 0.7,
                        "createdAt": "2026-06-01T09:30:00Z",
                    },
                ],
            },
            user_id=BOB,
        )
        manager.close()
        reset_memory_manager()

    expected = {
        "madeWith": {
            "deerflowCommit": _deerflow_commit(),
            "backend": "bundled DeerMem through get_memory_manager()",
        },
        "scopes": [_read_back(store, user, agent) for user, agent in SCOPES],
    }
    (out / "expected.json").write_text(
        json.dumps(expected, indent=2, ensure_ascii=False, sort_keys=True) + "\n", "utf-8"
    )


def _read_back(store: Path, user: str, agent: str | None) -> dict[str, Any]:
    """What the bundled backend reads from a scope, with its raw sidecars."""
    config = MemoryConfig(manager_class="deermem", backend_config={"storage_path": str(store)})
    set_memory_config(config)
    reset_memory_manager()
    manager = get_memory_manager()
    document = manager.get_memory(user_id=user, agent_name=agent)
    manager.close()
    reset_memory_manager()
    safe = user.replace("@", "-").replace(".", "-")  # the digest follows for ids that changed
    directory = next(p for p in (store / "users").iterdir() if p.name.startswith(safe))
    metadata = directory / "agents" / (agent or "__default__") / ".metadata"
    sidecars = {
        name: json.loads((metadata / f"{name}.json").read_text("utf-8"))
        for name in ("fact-usage", "eviction-audit")
        if (metadata / f"{name}.json").is_file()
    }
    return {"user": user, "agent": agent, "document": document, "sidecars": sidecars}


def _deerflow_commit() -> str:
    import deerflow

    checkout = Path(deerflow.__file__).resolve().parent
    result = subprocess.run(
        ["git", "-C", str(checkout), "rev-parse", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    )
    return result.stdout.strip() or "unknown"


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: make_fixture.py OUT")
    make(Path(sys.argv[1]))
