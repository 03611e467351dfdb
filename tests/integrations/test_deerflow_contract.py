"""DeerFlowBackend against DeerFlow's MemoryManager contract, without DeerFlow.

Parameter names and kinds, return shapes and the error mapping are the
contract's (reference: deerflow-memory-manager-contract.md §3, §8, §9); every
call goes through real files, the real search index and the real gate.
"""

from __future__ import annotations

import ast
import inspect
import logging
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from deermem import UnsafeIdentifierError
from deermem.integrations.deerflow import (
    DeerFlowBackend,
    ErrorTypes,
    MemoryConflict,
    MemoryCorruption,
)
from deermem.recall.embedding import loaded_embedder
from tests.integrations.deerflow_support import (
    assert_deerflow_document,
    assert_deerflow_fact,
    backend,
)

P = inspect.Parameter.POSITIONAL_OR_KEYWORD
K = inspect.Parameter.KEYWORD_ONLY
E = inspect.Parameter.empty
SCOPE_KW = [("user_id", K, None), ("agent_name", K, None)]
AGENT_USER_KW = [("agent_name", K, None), ("user_id", K, None)]

# Contract §3: (name, kind, default) of every parameter after self, in order.
CONTRACT: dict[str, list[tuple[str, Any, Any]]] = {
    "add": [("thread_id", P, E), ("messages", P, E), *AGENT_USER_KW, ("trace_id", K, None)],
    "aadd": [("thread_id", P, E), ("messages", P, E), *AGENT_USER_KW, ("trace_id", K, None)],
    "add_nowait": [("thread_id", P, E), ("messages", P, E), *AGENT_USER_KW],
    "get_context": [("user_id", P, E), ("agent_name", K, None), ("thread_id", K, None)],
    "aget_context": [("user_id", P, E), ("agent_name", K, None), ("thread_id", K, None)],
    "search": [("query", P, E), ("top_k", P, 5), *SCOPE_KW, ("category", K, None)],
    "asearch": [("query", P, E), ("top_k", P, 5), *SCOPE_KW, ("category", K, None)],
    "get_memory": SCOPE_KW,
    "clear_memory": SCOPE_KW,
    "delete_memory": SCOPE_KW,
    "export_memory": SCOPE_KW,
    "reload_memory": SCOPE_KW,
    "import_memory": [("memory_data", P, E), *SCOPE_KW],
    "shutdown_flush": [("timeout", P, E)],
    "warm": [],
    "close": [],
    "create_fact": [
        ("content", P, E),
        ("category", P, "context"),
        ("confidence", P, 0.5),
        *AGENT_USER_KW,
    ],
    "delete_fact": [("fact_id", P, E), *AGENT_USER_KW],
    "update_fact": [
        ("fact_id", P, E),
        ("content", P, None),
        ("category", P, None),
        ("confidence", P, None),
        *AGENT_USER_KW,
    ],
}


@pytest.mark.parametrize("name", sorted(CONTRACT))
def test_every_method_has_the_contracts_parameters(name: str) -> None:
    method = getattr(DeerFlowBackend, name)
    parameters = list(inspect.signature(method).parameters.values())[1:]  # without self
    assert [(p.name, p.kind, p.default) for p in parameters] == CONTRACT[name]
    async_twin = name in {"aadd", "aget_context", "asearch"}
    assert inspect.iscoroutinefunction(method) == async_twin


def test_from_config_takes_the_contracts_arguments_and_any_host_hook(tmp_path: Path) -> None:
    parameters = inspect.signature(DeerFlowBackend.from_config).parameters
    assert parameters["backend_config"].kind == P
    assert (parameters["mode"].kind, parameters["mode"].default) == (K, "middleware")
    assert parameters["host_hooks"].kind == inspect.Parameter.VAR_KEYWORD
    hooks: dict[str, Any] = {
        "callbacks": object(),
        "should_keep_hidden_message": lambda kwargs: False,
        "trace_context_manager": object(),
        "host_llm_factory": lambda: None,
        "extraction_callback": lambda payload: None,
        "a_hook_of_a_later_host": 42,
    }
    built = DeerFlowBackend.from_config({"storage_path": str(tmp_path)}, mode="tool", **hooks)
    try:
        assert built.mode == "tool"
        assert built.supports_search is True
        assert built.settings.config.storage_path == str(tmp_path)
    finally:
        built.close()


# --- documents ---------------------------------------------------------------------


def test_every_document_has_the_shape_deerflow_reads(tmp_path: Path) -> None:
    manager = backend(tmp_path)
    empty = manager.get_memory(user_id="alice")
    assert_deerflow_document(empty)
    assert (empty["version"], empty["revision"], empty["facts"]) == ("1.0", 0, [])
    document, fact_id = manager.create_fact("Uses uv, not pip.", "correction", 0.9, user_id="alice")
    assert fact_id is not None
    returned = [
        document,
        manager.update_fact(fact_id, confidence=0.95, user_id="alice"),
        manager.get_memory(user_id="alice"),
        manager.reload_memory(user_id="alice"),
        manager.import_memory(manager.get_memory(user_id="alice"), user_id="alice"),
        manager.delete_fact(fact_id, user_id="alice"),
        manager.clear_memory(user_id="alice"),
    ]
    for each in returned:
        assert_deerflow_document(each)
    assert returned[0]["version"] == "2.0"
    (fact,) = returned[1]["facts"]
    assert (fact["id"], fact["confidence"], fact["source"]) == (fact_id, 0.95, "manual")
    assert fact["scope"] == {"userId": "alice", "agentName": "__default__"}


def test_a_learned_facts_source_is_its_thread_and_export_keeps_every_field(tmp_path: Path) -> None:
    manager = backend(tmp_path)
    document = {
        "facts": [
            {
                "id": "fact_00000001",
                "content": "Deploys on Fridays.",
                "category": "hobby",
                "confidence": 0.8,
                "createdAt": "2026-08-01T00:00:00Z",
                "source": {"type": "conversation", "threadId": "thread-9"},
                "lastConfirmedAt": "2026-08-10T00:00:00Z",
            }
        ]
    }
    (fact,) = manager.import_memory(document, user_id="alice")["facts"]
    assert fact["source"] == "thread-9"
    assert (fact["category"], fact["categoryExtension"]) == ("other", "hobby")
    exported = manager.export_memory(user_id="alice")
    (full,) = exported["facts"]
    assert full["source"] == {"type": "conversation", "threadId": "thread-9"}
    assert full["lastConfirmedAt"] == "2026-08-10T00:00:00Z"
    manager.clear_memory(user_id="alice", agent_name=None)  # to the archive
    assert manager.get_memory(user_id="alice")["facts"] == []
    manager.import_memory(exported, user_id="alice")  # export, clear, import: all back
    assert manager.export_memory(user_id="alice")["facts"] == exported["facts"]
    memory = manager.memory(user_id="alice", agent_name=None)
    assert memory.list_archived() == ()  # restored, never in both places
    why = memory.why("fact_00000001")
    assert why.status == "active"
    assert [r.reason for r in why.receipts] == ["deleted"]  # the clear's receipt stays


def test_an_invalid_import_changes_nothing_even_with_archived_facts(tmp_path: Path) -> None:
    manager = backend(tmp_path)
    _, fact_id = manager.create_fact("Uses uv.", user_id="alice")
    exported = manager.get_memory(user_id="alice")
    manager.clear_memory(user_id="alice")
    broken = {**exported, "facts": [*exported["facts"], {"id": "fact_x", "content": ""}]}
    with pytest.raises(ValueError, match="content"):
        manager.import_memory(broken, user_id="alice")
    archived = manager.memory(user_id="alice", agent_name=None).list_archived()
    assert [entry.fact.id for entry in archived] == [fact_id]


# --- facts by hand: the gate, and the error mapping --------------------------------------


def test_create_fact_reports_a_new_fact_the_gate_evicted_as_none(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    manager = backend(tmp_path, max_facts=10)
    for number in range(10):
        manager.create_fact(f"Confident fact {number}.", "context", 0.9, user_id="alice")
    with caplog.at_level(logging.WARNING, logger="deermem.integrations.deerflow"):
        document, fact_id = manager.create_fact("A weak guess.", "context", 0.1, user_id="alice")
    assert fact_id is None
    # DeerFlow's contract has only the None: the log says it in plain words (issue 24)
    assert "NOT KEPT: memory is full" in caplog.text
    assert "A weak guess." not in caplog.text
    assert len(document["facts"]) == 10
    assert "A weak guess." not in {f["content"] for f in document["facts"]}
    why = manager.memory(user_id="alice", agent_name=None).list_archived()
    assert [entry.fact.content for entry in why] == ["A weak guess."]


@pytest.mark.parametrize(
    ("content", "confidence", "code"),
    [("ok", 1.5, "confidence"), ("ok", float("nan"), "confidence"), ("   ", 0.5, "content")],
)
def test_invalid_values_raise_the_codes_the_gateway_maps(
    tmp_path: Path, content: str, confidence: float, code: str
) -> None:
    manager = backend(tmp_path)
    with pytest.raises(ValueError, match=code) as caught:
        manager.create_fact(content, confidence=confidence, user_id="alice")
    assert caught.value.args == (code,)
    _, fact_id = manager.create_fact("Valid.", user_id="alice")
    assert fact_id is not None
    change: dict[str, Any] = {"content": content} if code == "content" else {}
    change.setdefault("confidence", confidence if code == "confidence" else None)
    with pytest.raises(ValueError, match=code) as caught:
        manager.update_fact(fact_id, user_id="alice", **change)
    assert caught.value.args == (code,)
    assert manager.get_memory(user_id="alice")["facts"][0]["content"] == "Valid."


def test_a_duplicate_is_refused_with_the_gateways_code(tmp_path: Path) -> None:
    manager = backend(tmp_path)
    manager.create_fact("Uses uv.", user_id="alice")
    with pytest.raises(ValueError, match="Duplicate fact") as caught:
        manager.create_fact("  USES UV. ", user_id="alice")
    assert caught.value.args == ("Duplicate fact",)


def test_update_and_import_repeat_a_fact_as_the_original_does(tmp_path: Path) -> None:
    # The original's update and import have no duplicate check (only its create
    # answers "Duplicate fact"); deermem's own update and import refuse.
    manager = backend(tmp_path)
    _, uv = manager.create_fact("Uses uv.", user_id="alice")
    _, pip = manager.create_fact("Uses pip.", user_id="alice")
    assert uv is not None
    assert pip is not None
    document = manager.update_fact(pip, content="USES UV.", user_id="alice")
    assert sorted(f["content"] for f in document["facts"]) == ["USES UV.", "Uses uv."]
    twice = {"facts": [{"content": "Use uv."}, {"content": "use uv."}]}
    imported = manager.import_memory(twice, user_id="alice")
    assert sorted(f["content"] for f in imported["facts"]) == ["Use uv.", "use uv."]


def test_unknown_fact_ids_are_key_errors(tmp_path: Path) -> None:
    manager = backend(tmp_path)
    with pytest.raises(KeyError):
        manager.update_fact("fact_missing", content="x", user_id="alice")
    with pytest.raises(KeyError):
        manager.delete_fact("fact_missing", user_id="alice")


def test_update_keeps_omitted_fields_and_delete_archives(tmp_path: Path) -> None:
    manager = backend(tmp_path)
    _, fact_id = manager.create_fact("Uses uv.", "preference", 0.7, agent_name="c", user_id="a")
    assert fact_id is not None
    updated = manager.update_fact(fact_id=fact_id, content="Uses uv!", user_id="a", agent_name="C")
    (fact,) = updated["facts"]
    assert (fact["content"], fact["category"]) == ("Uses uv!", "preference")
    assert fact["confidence"] == 0.7
    assert manager.get_memory(user_id="a")["facts"] == []  # another bucket
    assert manager.delete_fact(fact_id, agent_name="c", user_id="a")["facts"] == []
    archived = manager.memory(user_id="a", agent_name="c").list_archived()
    assert [entry.fact.id for entry in archived] == [fact_id]


def test_a_stale_revision_is_the_hosts_conflict_error(tmp_path: Path) -> None:
    class HostConflict(RuntimeError):
        pass

    class HostCorruption(RuntimeError):
        pass

    manager = backend(tmp_path, error_types=ErrorTypes(HostConflict, HostCorruption))
    _, fact_id = manager.create_fact("Uses uv.", user_id="alice")
    stale = {"facts": [{"id": fact_id, "content": "Uses pip.", "revision": 7}]}
    with pytest.raises(HostConflict, match="changed concurrently"):
        manager.import_memory(stale, user_id="alice")
    with pytest.raises(MemoryConflict):
        backend(tmp_path).import_memory(stale, user_id="alice")
    assert manager.get_memory(user_id="alice")["facts"][0]["content"] == "Uses uv."


def test_unreadable_data_is_the_hosts_corruption_error_never_an_empty_memory(
    tmp_path: Path,
) -> None:
    manager = backend(tmp_path)
    _, fact_id = manager.create_fact("Uses uv.", user_id="alice")
    (path,) = (tmp_path / "users" / "alice").rglob(f"{fact_id}.md")
    path.write_text("---\nid: [not, closed\n---\n", "utf-8")
    manager.reload_memory(user_id="bob")  # other users are unaffected
    for read in (
        lambda: manager.reload_memory(user_id="alice"),  # a hand edit is seen on reload
        lambda: manager.get_memory(user_id="alice"),
        lambda: manager.get_context("alice"),
        lambda: manager.search("uv", user_id="alice"),
        lambda: manager.create_fact("Another.", user_id="alice"),
    ):
        with pytest.raises(MemoryCorruption, match=fact_id):
            read()
    assert path.read_text("utf-8") == "---\nid: [not, closed\n---\n"


# --- reading: the prompt block and search ------------------------------------------------


def test_get_context_is_the_block_body_and_tool_mode_leaves_facts_to_search(
    tmp_path: Path,
) -> None:
    manager = backend(tmp_path)
    manager.import_memory(
        {
            "user": {"workContext": {"summary": "Backend engineer.", "updatedAt": ""}},
            "facts": [{"content": "Never use pip; use uv.", "category": "correction"}],
        },
        user_id="alice",
    )
    block = manager.get_context(user_id="alice")
    assert "Backend engineer." in block
    assert "Never use pip; use uv." in block
    assert "<memory>" not in block  # DeerFlow adds the tags
    assert manager.get_context("alice", agent_name="writer", thread_id="t") == (
        manager.get_context("alice", agent_name="writer")
    )
    tool_mode = backend(tmp_path, mode="tool")
    tool_block = tool_mode.get_context("alice")
    assert "Backend engineer." in tool_block
    assert "Never use pip" not in tool_block
    assert tool_mode.search("pip", user_id="alice")[0]["content"] == "Never use pip; use uv."


def test_search_filters_by_category_before_the_cut_and_returns_fact_documents(
    tmp_path: Path,
) -> None:
    manager = backend(tmp_path, fact_eviction_policy="hybrid-v1")
    for number in range(6):
        manager.create_fact(f"Python tip {number}: python python.", "preference", 0.95, user_id="u")
    _, correction = manager.create_fact("Python: never pip.", "correction", 0.5, user_id="u")
    assert correction is not None
    results = manager.search("python", top_k=1, user_id="u", category="correction")
    assert [r["id"] for r in results] == [correction]
    assert_deerflow_fact(results[0])
    assert len(manager.search("python", top_k=3, user_id="u")) == 3
    assert manager.search("   ", user_id="u") == []
    assert manager.search("python", top_k=0, user_id="u") == []
    scope = manager.memory(user_id="u", agent_name=None)
    assert scope.store.usage(scope.scope)[correction].access_count == 1  # hits count as recalls


# --- clearing ---------------------------------------------------------------------------


def test_clear_without_an_agent_clears_everything_the_user_owns(tmp_path: Path) -> None:
    manager = backend(tmp_path)
    summaries = {"user": {"topOfMind": {"summary": "Billing.", "updatedAt": ""}}, "facts": []}
    for user in ("alice", "bob"):
        manager.import_memory(summaries, user_id=user)
        manager.create_fact("Default-bucket fact.", user_id=user)
        manager.create_fact("Writer fact.", agent_name="writer", user_id=user)

    cleared = manager.clear_memory(user_id="alice")

    assert_deerflow_document(cleared)
    assert cleared["facts"] == []
    assert cleared["user"]["topOfMind"]["summary"] == ""
    assert manager.get_memory(user_id="alice", agent_name="writer")["facts"] == []
    assert len(manager.get_memory(user_id="bob")["facts"]) == 1
    assert manager.get_memory(user_id="bob")["user"]["topOfMind"]["summary"] == "Billing."


def test_clear_with_an_agent_keeps_the_shared_summaries_and_other_agents(tmp_path: Path) -> None:
    manager = backend(tmp_path)
    manager.import_memory(
        {"user": {"topOfMind": {"summary": "Billing.", "updatedAt": ""}}, "facts": []},
        user_id="alice",
    )
    manager.create_fact("Default-bucket fact.", user_id="alice")
    manager.create_fact("Writer fact.", agent_name="writer", user_id="alice")
    cleared = manager.clear_memory(user_id="alice", agent_name="writer")
    assert cleared["facts"] == []
    assert cleared["user"]["topOfMind"]["summary"] == "Billing."
    assert len(manager.get_memory(user_id="alice")["facts"]) == 1
    manager.delete_memory(user_id="alice", agent_name=None)
    assert manager.get_memory(user_id="alice")["facts"] == []


def test_reload_sees_a_hand_edit(tmp_path: Path) -> None:
    manager = backend(tmp_path)
    _, fact_id = manager.create_fact("Uses uv.", user_id="alice")
    (path,) = (tmp_path / "users" / "alice").rglob(f"{fact_id}.md")
    path.write_text(path.read_text("utf-8").replace("Uses uv.", "Uses uv and ruff."), "utf-8")
    assert manager.reload_memory(user_id="alice")["facts"][0]["content"] == "Uses uv and ruff."


# --- one instance, many threads ----------------------------------------------------------


def test_concurrent_calls_from_many_threads_lose_nothing(tmp_path: Path) -> None:
    manager = backend(tmp_path, max_facts=200)
    errors: list[BaseException] = []
    duplicates: list[str] = []

    def work(worker: int) -> None:
        try:
            for number in range(10):
                manager.create_fact(f"Worker {worker} fact {number}.", user_id="alice")
                manager.search("fact", user_id="alice")
                manager.get_memory(user_id="alice")
                manager.get_context("alice")
                try:
                    manager.create_fact("The one shared fact.", user_id="alice")
                except ValueError as error:
                    duplicates.append(str(error))
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=work, args=(worker,)) for worker in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    contents = [f["content"] for f in manager.get_memory(user_id="alice")["facts"]]
    assert len(contents) == 81
    assert contents.count("The one shared fact.") == 1
    assert set(duplicates) == {"Duplicate fact"}
    assert len(duplicates) == 79


# --- the time budget of get_context -------------------------------------------------------

# A fresh process: nothing loaded yet (the token vocabulary, the store's cache).
COLD_START = """
import sys, time
from deermem.integrations.deerflow import DeerFlowBackend
backend = DeerFlowBackend.from_config({"storage_path": sys.argv[1]})
started = time.perf_counter()
block = backend.get_context("alice")
print(time.perf_counter() - started, len(block))
"""


def test_get_context_answers_a_cold_start_well_within_the_hosts_five_seconds(
    tmp_path: Path,
) -> None:
    manager = backend(tmp_path, max_facts=100)
    for number in range(100):
        manager.create_fact(f"Fact number {number} about the user's work.", user_id="alice")
    manager.close()
    result = subprocess.run(
        [sys.executable, "-c", COLD_START, str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    seconds, length = result.stdout.split()
    assert int(length) > 1000
    assert float(seconds) < 5.0, f"a cold get_context took {seconds} s"  # the host's budget


def test_shutdown_flush_with_nothing_queued_is_immediately_true(tmp_path: Path) -> None:
    manager = backend(tmp_path)
    started = time.monotonic()
    assert manager.shutdown_flush(5.0) is True
    assert time.monotonic() - started < 1.0
    assert manager.warm() is True


def test_warm_retrieval_loads_the_models_deerflows_first_memory_search_would_wait_for(
    tmp_path: Path,
) -> None:
    # DeerFlow's gateway calls it, when present, in a thread at start-up (contract §3,
    # the duck-typed `warm_retrieval`) and does not wait for it; True means ready.
    manager = backend(tmp_path)
    manager.create_fact("Drinks oolong in the afternoon.", category="preference", user_id="ann")
    assert manager.warm_retrieval() is True
    assert loaded_embedder() is not None
    [hit] = manager.search("oolong", user_id="ann")
    assert hit["content"] == "Drinks oolong in the afternoon."
    manager.close()


def test_under_strict_user_scope_a_call_without_a_user_is_refused_and_nothing_else_touched(
    tmp_path: Path,
) -> None:
    """The backend's own memory has no user: only the users calls name are ever touched."""
    manager = backend(tmp_path, strict_user_scope=True)
    assert manager.warm() is True
    _, fact_id = manager.create_fact("Uses uv.", category="correction", user_id="alice")
    assert fact_id is not None
    with pytest.raises(UnsafeIdentifierError, match="user id"):
        manager.create_fact("Planted without a user.", user_id=None)
    with pytest.raises(UnsafeIdentifierError, match="user id"):
        manager.get_memory(user_id=None)
    assert manager.shutdown_flush(1.0) is True
    assert sorted(path.name for path in (tmp_path / "users").iterdir()) == ["alice"]
    assert not (tmp_path / "agents").exists()  # the single-user layout was never touched
    assert not (tmp_path / "memory.json").exists()


def test_the_hosts_call_shapes_work_as_they_are_written(tmp_path: Path) -> None:
    """The calls DeerFlow makes, argument for argument (contract §3 and §8)."""
    manager = backend(tmp_path)
    _, fact_id = manager.create_fact(
        content="Uses uv.", category="correction", confidence=0.9, user_id="default"
    )  # POST /api/memory/facts
    assert fact_id is not None
    _, tool_fact = manager.create_fact(
        "Prefers tabs.", category="preference", confidence=0.7, agent_name=None, user_id="u"
    )  # the memory_add tool
    assert tool_fact is not None
    manager.update_fact(
        fact_id=fact_id, content=None, category=None, confidence=0.95, user_id="default"
    )  # PATCH /api/memory/facts/{id}
    manager.update_fact(tool_fact, content="Prefers spaces.", agent_name=None, user_id="u")
    assert manager.get_context(user_id="default", agent_name=None)  # the prompt helper
    results = manager.search("uv", top_k=10, user_id="default", agent_name=None, category=None)
    assert [r["id"] for r in results] == [fact_id]  # the memory_search tool
    assert manager.get_memory(user_id="default")["facts"][0]["confidence"] == 0.95
    assert manager.reload_memory(user_id="default")["facts"]
    exported = manager.get_memory(user_id="default")
    manager.import_memory(exported, user_id="default")  # POST /api/memory/import
    manager.delete_fact(fact_id, user_id="default")  # DELETE /api/memory/facts/{id}
    manager.delete_fact(tool_fact, agent_name=None, user_id="u")  # the memory_delete tool
    assert manager.clear_memory(user_id="default")["facts"] == []  # DELETE /api/memory


def test_outside_deerflow_the_binding_says_what_it_needs() -> None:
    import deermem.integrations.deerflow as integration

    with pytest.raises(ImportError, match="needs DeerFlow installed"):
        integration.DeerMemManager  # noqa: B018 (the attribute access is the import)
    with pytest.raises(AttributeError):
        integration.NoSuchName  # noqa: B018


def test_the_binding_is_the_backend_not_a_second_copy() -> None:
    """``DeerMemManager`` (which needs DeerFlow to import) subclasses DeerFlowBackend and
    declares none of the contract's methods: DeerFlow calls the backend's own."""
    import deermem.integrations.deerflow as integration

    source = Path(integration.__file__).with_name("manager.py").read_text(encoding="utf-8")
    (binding,) = [
        node
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ClassDef) and node.name == "DeerMemManager"
    ]
    assert [ast.unparse(base) for base in binding.bases] == ["DeerFlowBackend", "MemoryManager"]
    declared = {
        node.name
        for node in binding.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }
    assert declared.isdisjoint(CONTRACT)
    assert declared <= {"model_post_init", "from_config"}


def test_the_memory_behind_a_bucket_takes_the_contracts_defaults(tmp_path: Path) -> None:
    """``memory()`` is deermem's own (no contract method has it); like the contract's
    methods it defaults the agent to DeerFlow's global bucket, as the binding always did."""
    built = backend(tmp_path)
    fact_id = built.create_fact("Uses uv.", user_id="alice")[1]
    assert fact_id is not None
    assert built.memory(user_id="alice").get_fact(fact_id).content == "Uses uv."
