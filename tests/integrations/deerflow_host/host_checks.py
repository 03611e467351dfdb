"""deermem inside a real DeerFlow checkout, selected by dotted path.

Run by ``scripts/check-deerflow.sh`` with the checkout's own Python (≥ 3.12)
and ``backend/`` plus this directory on ``PYTHONPATH``. Everything goes
through DeerFlow's own code: its factory (``get_memory_manager`` reading
``memory.manager_class``), its settings API router (FastAPI ``TestClient``,
the manager *not* patched), its tool-mode tools, its memory middleware and
prompt helper, and its bundled DeerMem for the round trip. Models are
deermem's ScriptedChatServer over real HTTP on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from unittest.mock import patch

import pytest
from app.gateway.routers import memory as memory_router
from deerflow.agents.memory import MemoryManager, get_memory_manager, reset_memory_manager
from deerflow.agents.memory.backends.deermem.deer_mem import DeerMem
from deerflow.agents.memory.manager import (
    _collect_host_hooks,
    _resolve_manager_class,
    backend_requires_passive_writes_in_tool_mode,
)
from deerflow.agents.memory.tools import (
    memory_add_tool,
    memory_delete_tool,
    memory_search_tool,
    memory_update_tool,
)
from deerflow.config.memory_config import MemoryConfig, get_memory_config, set_memory_config
from fastapi import FastAPI
from fastapi.testclient import TestClient
from langchain_core.messages import AIMessage, HumanMessage
from make_fixture import ALICE, SCOPES, make

from deermem.integrations.deerflow import DeerMemManager
from deermem.testing import ScriptedChatServer

DOTTED = "deermem.integrations.deerflow.DeerMemManager"
COLON = "deermem.integrations.deerflow:DeerMemManager"
LABELS = {"scope": "user", "durability": "durable", "authority": "descriptive"}
# Derived by the bundled reader (a title from the first line, an empty consolidatedFrom).
DERIVED = {"title", "consolidatedFrom"}


@pytest.fixture(autouse=True)
def isolated() -> Iterator[None]:
    original = get_memory_config()
    reset_memory_manager()
    yield
    set_memory_config(original)
    reset_memory_manager()


@pytest.fixture
def server() -> Iterator[ScriptedChatServer]:
    with ScriptedChatServer() as running:
        yield running


def select(manager_class: str, storage: Path, mode: str = "middleware", **config: Any) -> Any:
    """Configure DeerFlow's memory as a user's config.yaml would, and build it with its factory."""
    backend_config = {"storage_path": str(storage), **config}
    set_memory_config(
        MemoryConfig(manager_class=manager_class, mode=mode, backend_config=backend_config)
    )
    reset_memory_manager()
    return get_memory_manager()


def deermem_model(server: ScriptedChatServer) -> dict[str, Any]:
    return {"model": "scripted", "base_url": server.url, "api_key_env": None, "max_retries": 0}


def update(**keys: Any) -> str:
    data: dict[str, Any] = {"user": {}, "history": {}, "newFacts": []}
    data.update(keys)
    return json.dumps(data)


def by_id(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {fact["id"]: fact for fact in document["facts"]}


def same_document(ours: dict[str, Any], theirs: dict[str, Any]) -> None:
    for key in ("revision", "user", "history"):
        assert ours[key] == theirs[key], key
    mine, other = by_id(ours), by_id(theirs)
    assert sorted(mine) == sorted(other)
    for fact_id, fact in other.items():
        for key in (fact.keys() | mine[fact_id].keys()) - DERIVED:
            assert mine[fact_id].get(key) == fact.get(key), (fact_id, key)


# --- discovery -------------------------------------------------------------------------


@pytest.mark.parametrize("manager_class", [DOTTED, COLON])
def test_the_dotted_path_resolves_through_deerflows_factory(
    manager_class: str, tmp_path: Path
) -> None:
    assert _resolve_manager_class(manager_class) is DeerMemManager
    assert issubclass(DeerMemManager, MemoryManager)
    assert backend_requires_passive_writes_in_tool_mode(manager_class) is False
    manager = select(manager_class, tmp_path)
    assert isinstance(manager, DeerMemManager)
    assert get_memory_manager() is manager  # the process singleton
    assert select("deermem", tmp_path).__class__ is DeerMem  # the short name stays the bundled one


def test_tool_mode_passes_deerflows_invariants(tmp_path: Path) -> None:
    manager = select(DOTTED, tmp_path, mode="tool")
    assert manager.mode == "tool"
    assert DeerMemManager.supports_search is True


def test_every_override_has_deerflows_signature() -> None:
    overridden = []
    for name, base in inspect.getmembers(MemoryManager, inspect.isfunction):
        if name.startswith("_") or not hasattr(base, "__qualname__"):
            continue
        if not base.__qualname__.startswith("MemoryManager."):
            continue  # pydantic's own methods
        ours = getattr(DeerMemManager, name)
        if ours is base:
            continue
        overridden.append(name)
        expected = [
            (p.name, p.kind, p.default) for p in inspect.signature(base).parameters.values()
        ]
        actual = [(p.name, p.kind, p.default) for p in inspect.signature(ours).parameters.values()]
        assert actual == expected, name
        assert inspect.iscoroutinefunction(ours) == inspect.iscoroutinefunction(base), name
    assert set(overridden) >= {
        "add", "aadd", "add_nowait", "get_context", "aget_context", "search", "asearch",
        "get_memory", "clear_memory", "delete_memory", "import_memory", "export_memory",
        "reload_memory", "create_fact", "update_fact", "delete_fact",
        "warm", "shutdown_flush", "close",
    }  # fmt: skip


def test_from_config_takes_the_hosts_own_hooks_and_keeps_backend_config_pure(
    tmp_path: Path,
) -> None:
    hooks = _collect_host_hooks()
    config = {"storage_path": str(tmp_path), "max_facts": 20}
    manager = DeerMemManager.from_config(config, mode="middleware", **hooks)
    assert manager.backend_config == config
    assert manager.callbacks is hooks["callbacks"]
    assert manager.model_dump()["backend_config"] == config


# --- the round trip: bundled writes, deermem reads and writes, bundled reads back --------


def test_a_store_round_trips_between_the_bundled_deermem_and_deermem(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    make(tmp_path / "bundled")  # the bundled DeerMem writes, through DeerFlow's factory
    store = tmp_path / "bundled" / "store"
    expected = json.loads((tmp_path / "bundled" / "expected.json").read_text("utf-8"))
    settings = {"max_facts": 10, "fact_eviction_policy": "hybrid-v1"}

    manager = select(DOTTED, store, model=deermem_model(server), **settings)
    for scope in expected["scopes"]:  # deermem reads what the bundled backend read
        ours = manager.get_memory(user_id=scope["user"], agent_name=scope["agent"])
        same_document(ours, scope["document"])
    (event,) = expected["scopes"][0]["sidecars"]["eviction-audit"]
    evicted = event["evicted"][0]["factId"]
    assert manager.memory(user_id=ALICE).why(evicted).status == "gone"

    facts = by_id(manager.get_memory(user_id=ALICE))
    uv = next(i for i, f in facts.items() if f["content"].startswith("Uses uv"))
    server.enqueue(  # deermem learns: a confirmation and a new fact
        update(
            factsToReinforce=[{"id": uv, "scope": "user", "reason": "confirmed"}],
            newFacts=[
                {
                    "content": "Deploys on Fridays.",
                    "category": "context",
                    "confidence": 0.9,
                    **LABELS,
                }
            ],
        )
    )
    turn = [
        HumanMessage(content="Yes, exactly right: uv. And we deploy on Fridays.", id="n1"),
        AIMessage(content="Noted.", id="n2"),
    ]
    manager.add("thread-2", turn, user_id=ALICE)
    assert manager.shutdown_flush(30.0)
    facts = by_id(manager.get_memory(user_id=ALICE))  # the new fact evicted one at the cap
    assert "Deploys on Fridays." in {f["content"] for f in facts.values()}
    others = [i for i, f in facts.items() if f["content"].startswith("Background")]
    manager.update_fact(others[0], content="Background detail, edited.", user_id=ALICE)
    _, weak = manager.create_fact("A weak guess.", "context", 0.05, user_id=ALICE)
    assert weak is None  # at the cap: evicted at once, with a receipt, into the archive
    manager.delete_fact(others[1], user_id=ALICE)
    manager.create_fact("Writes Go at work.", "skill", 0.8, agent_name="coder", user_id=ALICE)
    manager.import_memory(
        {"user": {"topOfMind": {"summary": "Moving to Berlin.", "updatedAt": ""}}, "facts": []},
        user_id="bob",
    )
    assert manager.memory(user_id=ALICE).list_archived()
    deermem_view = {(u, a): manager.get_memory(user_id=u, agent_name=a) for u, a in SCOPES}
    confirmed = by_id(deermem_view[(ALICE, None)])[uv]
    assert confirmed["confirmationCount"] == 2
    manager.close()

    bundled = select("deermem", store, **settings)  # the user switches back
    assert isinstance(bundled, DeerMem)
    for (user, agent), ours in deermem_view.items():
        same_document(ours, bundled.get_memory(user_id=user, agent_name=agent))
    assert bundled.search("Fridays", user_id=ALICE)[0]["content"] == "Deploys on Fridays."
    _, again = bundled.create_fact("Written by the bundled backend again.", user_id=ALICE)
    assert again is not None
    bundled.close()

    manager = select(DOTTED, store, **settings)  # and forth once more
    assert again in by_id(manager.get_memory(user_id=ALICE))
    manager.close()


# --- DeerFlow's memory settings API over deermem ---------------------------------------------


def test_the_settings_api_over_deermem(tmp_path: Path) -> None:
    select(DOTTED, tmp_path, max_facts=10)
    app = FastAPI()
    app.include_router(memory_router.router)
    with (
        patch("app.gateway.routers.memory.get_effective_user_id", return_value="alice"),
        TestClient(app) as client,
    ):
        listed = client.get("/api/memory")
        assert listed.status_code == 200
        assert listed.json()["facts"] == []

        created = client.post(
            "/api/memory/facts",
            json={"content": "Uses uv.", "category": "correction", "confidence": 0.9},
        )
        assert created.status_code == 200
        (fact,) = created.json()["facts"]
        assert (fact["content"], fact["source"], fact["category"]) == (
            "Uses uv.",
            "manual",
            "correction",
        )
        fact_id = fact["id"]
        assert client.post("/api/memory/facts", json={"content": "uses UV."}).status_code == 409

        edited = client.patch(
            f"/api/memory/facts/{fact_id}", json={"content": "Uses uv, never pip."}
        )
        assert edited.status_code == 200
        assert edited.json()["facts"][0]["content"] == "Uses uv, never pip."
        assert edited.json()["facts"][0]["category"] == "correction"  # omitted: kept

        assert (
            client.patch("/api/memory/facts/fact_unknown", json={"content": "x"}).status_code == 404
        )
        assert client.delete("/api/memory/facts/fact_unknown").status_code == 404

        exported = client.get("/api/memory/export")
        assert exported.status_code == 200
        assert [f["id"] for f in exported.json()["facts"]] == [fact_id]
        assert client.post("/api/memory/reload").json()["facts"] == exported.json()["facts"]

        for number in range(9):
            client.post(
                "/api/memory/facts",
                json={"content": f"Confident fact {number}.", "confidence": 0.95},
            )
        evicted = client.post(
            "/api/memory/facts", json={"content": "A weak guess.", "confidence": 0.01}
        )
        assert evicted.status_code == 409
        assert "evicted" in evicted.json()["detail"]

        imported = client.post("/api/memory/import", json=exported.json())
        assert imported.status_code == 200
        assert [f["id"] for f in imported.json()["facts"]] == [fact_id]

        status = client.get("/api/memory/status").json()
        assert status["config"]["manager_class"] == DOTTED
        assert [f["id"] for f in status["data"]["facts"]] == [fact_id]

        deleted = client.delete(f"/api/memory/facts/{fact_id}")
        assert deleted.status_code == 200
        assert deleted.json()["facts"] == []
        assert client.delete(f"/api/memory/facts/{fact_id}").status_code == 404

        client.post("/api/memory/facts", json={"content": "Lives in Lyon."})
        backup = client.get("/api/memory/export").json()
        cleared = client.delete("/api/memory")
        assert cleared.status_code == 200
        assert cleared.json()["facts"] == []
        restored = client.post("/api/memory/import", json=backup)  # export, clear, import
        assert restored.status_code == 200
        assert [f["content"] for f in restored.json()["facts"]] == ["Lives in Lyon."]
        assert client.delete("/api/memory").status_code == 200
    archived = get_memory_manager().memory(user_id="alice").list_archived()
    assert "Lives in Lyon." in {entry.fact.content for entry in archived}  # reversible


def test_corrupt_data_is_the_gateways_500_never_an_empty_memory(tmp_path: Path) -> None:
    manager = select(DOTTED, tmp_path)
    _, fact_id = manager.create_fact("Uses uv.", user_id="alice")
    (path,) = tmp_path.rglob(f"{fact_id}.md")
    path.write_text("---\nid: [broken\n---\n", "utf-8")
    app = FastAPI()
    app.include_router(memory_router.router)
    with (
        patch("app.gateway.routers.memory.get_effective_user_id", return_value="alice"),
        TestClient(app) as client,
    ):
        reloaded = client.post("/api/memory/reload")
        assert reloaded.status_code == 500
        assert reloaded.json()["detail"] == "Stored memory data is corrupted."


# --- tool mode: DeerFlow's memory tools over deermem --------------------------------------


def test_deerflows_memory_tools_over_deermem(tmp_path: Path) -> None:
    select(DOTTED, tmp_path, mode="tool")
    runtime = SimpleNamespace(context={"user_id": "alice", "agent_name": "coder"})

    def call(tool: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return json.loads(tool.func(runtime, *args, **kwargs))

    added = call(memory_add_tool, "Never use pip; use uv.", category="correction", confidence=0.9)
    assert added["status"] == "added"
    for number in range(3):
        call(memory_add_tool, f"Likes uv feature {number}.", category="preference", confidence=0.95)
    assert call(memory_add_tool, "never use PIP; use uv.") == {"error": "Duplicate fact"}

    found = call(memory_search_tool, "uv", category="correction", limit=1)
    assert found["count"] == 1
    assert found["results"][0]["id"] == added["fact_id"]
    assert {r["category"] for r in call(memory_search_tool, "uv", limit=10)["results"]} == {
        "correction",
        "preference",
    }

    assert call(memory_update_tool, added["fact_id"], confidence=0.99)["status"] == "updated"
    assert call(memory_delete_tool, added["fact_id"]) == {
        "fact_id": added["fact_id"],
        "status": "deleted",
    }
    assert call(memory_delete_tool, added["fact_id"]) == {
        "error": f"Fact not found: {added['fact_id']}"
    }
    assert call(memory_search_tool, "pip", category="correction")["count"] == 0
    memory = get_memory_manager().memory(user_id="alice", agent_name="coder")
    assert [entry.fact.id for entry in memory.list_archived()] == [added["fact_id"]]


# --- the call sites: middleware, prompt, lifespan hooks ----------------------------------------


def test_deerflows_middleware_and_prompt_helper_over_deermem(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    from deerflow.agents.lead_agent.prompt import _get_memory_context
    from deerflow.agents.middlewares.memory_middleware import MemoryMiddleware

    manager = select(DOTTED, tmp_path, model=deermem_model(server))
    server.enqueue(
        update(
            newFacts=[
                {"content": "Uses uv.", "category": "preference", "confidence": 0.9, **LABELS}
            ]
        ),
        update(
            newFacts=[
                {"content": "Lives in Lyon.", "category": "context", "confidence": 0.9, **LABELS}
            ]
        ),
    )
    runtime = SimpleNamespace(context={"thread_id": "t-1", "user_id": "alice"})
    state = {
        "messages": [
            HumanMessage(content="I use uv.", id="u1"),
            AIMessage(content="Noted.", id="a1"),
        ]
    }
    middleware = MemoryMiddleware()
    middleware.after_agent(state, runtime)
    assert manager.shutdown_flush(10.0)
    state["messages"] += [
        HumanMessage(content="I live in Lyon.", id="u2"),
        AIMessage(content="Nice.", id="a2"),
    ]
    asyncio.run(middleware.aafter_agent(state, runtime))
    assert manager.shutdown_flush(10.0)
    block = _get_memory_context(user_id="alice")
    assert block.startswith("<memory>\n")
    assert "Uses uv." in block
    assert "Lives in Lyon." in block
    assert manager.warm() is True
    assert manager.warm_retrieval() is True  # what the gateway runs in the background
    manager.close()


def test_the_async_methods_never_block_deerflows_event_loop(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    from blockbuster import BlockBuster, BlockingError
    from deerflow.agents.middlewares.memory_middleware import MemoryMiddleware

    # DeerFlow's strict gate (tests/support/detectors) scans app.* and deerflow.*
    # callers; deermem's own modules are scanned too, so its code is judged directly.
    gate = BlockBuster(scanned_modules=["app", "deerflow", "deermem"])
    manager = select(DOTTED, tmp_path, model=deermem_model(server))
    manager.create_fact("Uses uv.", user_id="alice")
    server.enqueue(update(), update())
    turn = [HumanMessage(content="I use uv.", id="u1"), AIMessage(content="Noted.", id="a1")]
    runtime = SimpleNamespace(context={"thread_id": "t-2", "user_id": "alice"})

    async def on_the_loop() -> tuple[str, list[dict[str, Any]]]:
        gate.activate()
        try:
            with pytest.raises(BlockingError):  # the gate is live: sync file I/O on the loop
                manager.reload_memory(user_id="alice")
            await manager.aadd("t", turn, user_id="alice")
            await MemoryMiddleware().aafter_agent({"messages": turn}, runtime)
            block = await manager.aget_context("alice")
            hits = await manager.asearch("uv", user_id="alice")
        finally:
            gate.deactivate()
        return block, hits

    block, hits = asyncio.run(on_the_loop())
    assert "Uses uv." in block
    assert [hit["content"] for hit in hits] == ["Uses uv."]
    assert manager.shutdown_flush(10.0)
    # Both conversations were queued: add swallows (and logs) errors, a blocked one included.
    assert len(server.requests) == 2
    manager.close()
