"""The memory tools in one process: an MCP client session against the SDK server object.

These sessions speak the real protocol to the real server over the SDK's
in-process transport, on a real store — a Markdown directory, and for the
tests of what each tool does to the memory a PostgreSQL database too; the
tests check what the tools answer and what the store holds (its files, or
its rows). The same tools over stdio and HTTP, in their own processes, are
in ``test_stdio.py`` and ``test_http.py``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.types import CallToolResult

from deermem import Memory
from deermem.service.mcp import TOOL_NAMES, create_mcp_server
from deermem.service.mcp.server import memory_tools, request_memory
from deermem.service.settings import ToolLimits

from ..served_store import ServedStore, files_under, on_both_stores
from .conftest import call, text_of

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
FACTS = Path("users/alice/agents/coder/facts")


class Ticking:
    """A clock that advances one second per reading: distinct, reproducible times."""

    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


def open_memory(store: ServedStore, **config: Any) -> Memory:
    config.setdefault("max_facts", 10)
    return store.memory(store.config(**config), user="alice", agent="coder", clock=Ticking())


def session(memory: Memory, scenario: Callable[[Client], Awaitable[None]], **server: Any) -> None:
    async def main() -> None:
        async with Client(create_mcp_server(memory, **server)) as client:
            await scenario(client)

    anyio.run(main)


def fact_files(store: ServedStore) -> dict[str, str]:
    """Alice's facts as stored: id -> the fact file's text, or the row's document."""
    return store.facts("alice", "coder")


def archive_ids(store: ServedStore) -> set[str]:
    return store.archived("alice", "coder")


async def failed(client: Client, tool: str, **arguments: Any) -> str:
    result: CallToolResult = await client.call_tool(tool, arguments)
    assert result.is_error, result.structured_content
    assert result.structured_content is None
    return text_of(result)


# --- what list_tools() shows -------------------------------------------------------------


def tools_listed(memory: Memory, **server: Any) -> dict[str, Any]:
    listed: dict[str, Any] = {}

    async def scenario(client: Client) -> None:
        listed.update({tool.name: tool for tool in (await client.list_tools()).tools})

    session(memory, scenario, **server)
    return listed


def hints(tool: Any) -> tuple[bool | None, bool | None, bool | None, bool | None]:
    a = tool.annotations
    return a.read_only_hint, a.destructive_hint, a.idempotent_hint, a.open_world_hint


def test_the_seven_tools_with_true_annotations(store: ServedStore) -> None:
    # the original's policy, named: a store deermem creates runs hybrid-v1 (issue 24)
    config = {"fact_eviction_policy": "confidence", "fact_eviction_shadow_enabled": False}
    tools = tools_listed(open_memory(store, **config))
    assert sorted(tools) == sorted(TOOL_NAMES)
    # (read-only, destructive, idempotent, open world)
    assert hints(tools["memory_context"]) == (True, False, True, False)
    assert hints(tools["memory_why"]) == (True, False, True, False)
    # The confidence policy reads no recalls, so a search records nothing.
    assert hints(tools["memory_search"]) == (True, False, True, False)
    # A new or restored fact can push another out at the cap.
    assert hints(tools["memory_add"]) == (False, True, False, False)
    assert hints(tools["memory_restore"]) == (False, True, False, False)
    # The same change twice leaves the same memory.
    assert hints(tools["memory_update"]) == (False, True, True, False)
    assert hints(tools["memory_forget"]) == (False, True, True, False)
    for tool in tools.values():
        assert tool.description
        assert tool.title
        assert tool.output_schema["type"] == "object", tool.name


def test_under_hybrid_v1_a_search_records_recalls_so_it_is_not_read_only(
    store: ServedStore,
) -> None:
    tools = tools_listed(open_memory(store, fact_eviction_policy="hybrid-v1"))
    assert hints(tools["memory_search"]) == (False, False, False, False)
    assert "recall" in tools["memory_search"].description


def test_no_tool_takes_a_user_or_an_agent(store: ServedStore) -> None:
    for tool in tools_listed(open_memory(store)).values():
        names = {name.lower() for name in tool.input_schema.get("properties", {})}
        assert not names & {"user", "user_id", "userid", "agent", "agent_name", "scope"}


def test_every_input_schema_refuses_arguments_it_does_not_name(store: ServedStore) -> None:
    for tool in tools_listed(open_memory(store)).values():
        assert tool.input_schema["additionalProperties"] is False, tool.name


def test_an_input_schema_is_what_pydantic_writes_for_the_arguments_it_validates(
    store: ServedStore,
) -> None:
    """A tool's schema is the SDK's, closed; pydantic's own schema of the closed argument
    model is the same, key for key and in the same order."""
    for tool in memory_tools(
        lambda ctx: open_memory(store), memory=open_memory(store), limits=ToolLimits()
    ):
        own = tool.fn_metadata.arg_model.model_json_schema(by_alias=True)
        assert json.dumps(tool.parameters) == json.dumps(own), tool.name


@on_both_stores
def test_an_unknown_argument_is_named_by_its_length_not_its_text(store: ServedStore) -> None:
    """prv-02: a secret pasted as an argument name never comes back to the model."""
    token = "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"

    async def scenario(client: Client) -> None:
        message = await failed(client, "memory_add", content="ok", **{token: 1})
        assert token not in message
        assert message.endswith(
            "invalid arguments: (a name of 40 characters): Extra inputs are not permitted"
        )
        wrong = await failed(client, "memory_add", content="ok", topics=["a", 3])
        assert "topics.1: Input should be a valid string" in wrong  # declared names stay
        assert fact_files(store) == {}

    session(open_memory(store), scenario)


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("memory_add", {"content": "Planted for bob"}),
        ("memory_search", {"query": "anything"}),
        ("memory_context", {}),
        ("memory_forget", {"fact_id": "FACT"}),
        ("memory_update", {"fact_id": "FACT", "content": "Hijacked"}),
        ("memory_why", {"fact_id": "FACT"}),
    ],
)
@pytest.mark.parametrize(
    "scope",
    [{"user": "bob"}, {"agent": "other"}, {"user_id": "bob"}, {"user": "bob", "agent": "x"}],
)
def test_a_scope_argument_is_a_tool_error_that_names_it_and_changes_nothing(
    store: ServedStore, tool: str, arguments: dict[str, Any], scope: dict[str, str]
) -> None:
    """A model learns at once that it cannot choose whose memory a call reaches."""

    async def scenario(client: Client) -> None:
        fact_id = (await call(client, "memory_add", content="Alice's own fact"))["factId"]
        before = files_under(store.base)
        given = {k: fact_id if v == "FACT" else v for k, v in arguments.items()}
        message = await failed(client, tool, **given, **scope)
        for name in scope:
            assert name in message
        assert "Extra inputs are not permitted" in message
        after = files_under(store.base)
        assert after == before
        assert not (store.root / "users/bob").exists()
        # Without the stray argument the same call works.
        if tool != "memory_add":
            await call(client, tool, **given)

    session(open_memory(store), scenario)


def test_input_schemas_state_the_bounds(store: ServedStore) -> None:
    limits = ToolLimits(max_content_chars=300, max_query_chars=200, max_top_k=7)
    tools = tools_listed(open_memory(store), limits=limits)
    add = tools["memory_add"].input_schema
    assert add["required"] == ["content"]
    assert add["properties"]["content"]["maxLength"] == 300
    assert add["properties"]["confidence"]["maximum"] == 1.0
    assert add["properties"]["topics"]["maxItems"] == 32
    search = tools["memory_search"].input_schema["properties"]
    assert search["query"]["maxLength"] == 200
    assert search["top_k"]["maximum"] == 7
    context = tools["memory_context"].input_schema["properties"]["max_tokens"]
    assert {"maximum": 8000, "minimum": 1, "type": "integer"} in context["anyOf"]
    for name in ("memory_update", "memory_forget", "memory_restore", "memory_why"):
        assert tools[name].input_schema["properties"]["fact_id"]["maxLength"] == 128


def test_output_schemas_describe_the_results(store: ServedStore) -> None:
    tools = tools_listed(open_memory(store))
    add = tools["memory_add"].output_schema
    assert add["properties"]["outcome"]["enum"] == ["stored", "duplicate", "evicted"]
    assert set(add["required"]) == {"outcome", "factId", "evicted", "receipts", "message"}
    assert set(tools["memory_context"].output_schema["required"]) == {"text", "block", "manifest"}
    assert tools["memory_why"].output_schema["properties"]["status"]["enum"] == [
        "active",
        "archived",
        "gone",
    ]


def test_with_eviction_mode_delete_the_descriptions_say_for_good(store: ServedStore) -> None:
    tools = tools_listed(open_memory(store, eviction_mode="delete"))
    assert "for good" in tools["memory_forget"].description
    assert "for good" in tools["memory_add"].description
    archiving = tools_listed(open_memory(store))
    assert "archive" in archiving["memory_forget"].description
    assert "for good" not in archiving["memory_forget"].description


# --- every tool, checked against what the store holds ---------------------------------------


@on_both_stores
def test_add_stores_a_fact_and_a_repeat_is_a_duplicate(store: ServedStore) -> None:
    async def scenario(client: Client) -> None:
        added = await call(
            client,
            "memory_add",
            content="Use uv, not pip",
            category="correction",
            confidence=0.9,
            topics=["python"],
        )
        assert added["outcome"] == "stored"
        assert added["evicted"] == []
        assert added["receipts"] == []
        files = fact_files(store)
        assert list(files) == [added["factId"]]
        assert "Use uv, not pip" in files[added["factId"]]
        again = await call(client, "memory_add", content="  use UV, not PIP ")
        assert again == {
            "outcome": "duplicate",
            "factId": added["factId"],
            "evicted": [],
            "receipts": [],
            "redacted": [],
            "message": f"an equal fact is already stored as {added['factId']}; nothing changed",
        }
        assert fact_files(store) == files

    session(open_memory(store), scenario)


@on_both_stores
def test_add_says_which_kinds_of_secret_it_redacted(store: ServedStore) -> None:
    # prv-06: the model must hear that the text it stored is not the text it sent,
    # as POST .../facts and memory_restore tell it (the kind, never the value)
    token = "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"

    async def scenario(client: Client) -> None:
        added = await call(client, "memory_add", content=f"The deploy token is {token}")
        assert added["outcome"] == "stored"
        assert added["redacted"] == ["github-token"]
        assert token not in json.dumps(added)
        stored = fact_files(store)[added["factId"]]
        assert "[redacted: github-token]" in stored
        assert token not in stored
        plain = await call(client, "memory_add", content="Prefers tea")
        assert plain["redacted"] == []

    session(open_memory(store), scenario)


@on_both_stores
def test_at_the_cap_add_reports_what_the_gate_evicted_with_the_receipt(store: ServedStore) -> None:
    async def scenario(client: Client) -> None:
        kept = [
            (await call(client, "memory_add", content=f"Fact number {i}", confidence=0.8))["factId"]
            for i in range(10)
        ]
        # Lower than every stored fact: the new one itself goes to the archive.
        low = await call(client, "memory_add", content="A passing remark", confidence=0.1)
        assert low["outcome"] == "evicted"
        # in plain words too, not only in a field (issue 24, point 1)
        assert low["message"].startswith("NOT KEPT: memory is full")
        assert low["factId"] in low["message"]
        assert "A passing remark" not in low["message"]
        assert low["evicted"] == [low["factId"]]
        (receipt,) = low["receipts"]
        assert receipt["reason"] == "capacity"
        assert receipt["trigger"] == "manual"
        assert receipt["maxFacts"] == 10
        assert [entry["factId"] for entry in receipt["evicted"]] == [low["factId"]]
        assert "A passing remark" not in str(receipt)  # receipts carry no content
        assert low["factId"] not in fact_files(store)
        assert low["factId"] in archive_ids(store)
        # Higher than the lowest: stored, and the lowest stored fact leaves instead.
        high = await call(client, "memory_add", content="Works at Acme", confidence=0.95)
        assert high["outcome"] == "stored"
        (pushed_out,) = high["evicted"]
        assert pushed_out in kept
        assert high["factId"] in fact_files(store)
        assert pushed_out not in fact_files(store)
        assert pushed_out in archive_ids(store)
        assert len(fact_files(store)) == 10

    session(open_memory(store), scenario)


@on_both_stores
def test_update_changes_the_stored_fact_and_guards_the_revision(store: ServedStore) -> None:
    async def scenario(client: Client) -> None:
        fact_id = (await call(client, "memory_add", content="Lives in Berlin"))["factId"]
        updated = await call(
            client, "memory_update", fact_id=fact_id, content="Lives in Hamburg", confidence=0.9
        )
        assert updated["id"] == fact_id
        assert updated["revision"] == 2
        assert updated["content"] == "Lives in Hamburg"
        assert updated["confidence"] == 0.9
        # The fact's stored form, as the CLI's --json and the HTTP API give it: no null added.
        assert updated == memory.get_fact(fact_id).to_dict()
        assert "Hamburg" in fact_files(store)[fact_id]
        assert "Berlin" not in fact_files(store)[fact_id]
        # The same change again changes nothing (the tool is idempotent).
        same = await call(client, "memory_update", fact_id=fact_id, content="Lives in Hamburg")
        assert same["revision"] == 2
        stale = await failed(
            client, "memory_update", fact_id=fact_id, content="Lives in Paris", expected_revision=1
        )
        assert "Revision conflict" in stale
        assert "expected=1" in stale
        assert "actual=2" in stale
        assert "Hamburg" in fact_files(store)[fact_id]
        nothing = await failed(client, "memory_update", fact_id=fact_id)
        assert "at least one of content, category, confidence" in nothing
        missing = await failed(client, "memory_update", fact_id="fact_00000000", confidence=0.5)
        assert "no fact 'fact_00000000' in memory" in missing

    memory = open_memory(store)
    session(memory, scenario)


@on_both_stores
def test_forget_archives_why_explains_restore_brings_back(store: ServedStore) -> None:
    async def scenario(client: Client) -> None:
        fact_id = (await call(client, "memory_add", content="Has a cat", confidence=0.7))["factId"]
        active = await call(client, "memory_why", fact_id=fact_id)
        assert active["status"] == "active"
        assert active["fact"]["content"] == "Has a cat"
        assert active["standing"]["rank"] == 1
        assert active["standing"]["maxFacts"] == 10
        assert active["archive"] is None
        assert active["receipts"] == []

        forgotten = await call(client, "memory_forget", fact_id=fact_id)
        assert forgotten == {"factId": fact_id, "archived": True}
        assert fact_id not in fact_files(store)
        assert fact_id in archive_ids(store)
        again = await failed(client, "memory_forget", fact_id=fact_id)
        assert "Fact not found" in again

        archived = await call(client, "memory_why", fact_id=fact_id)
        assert archived["status"] == "archived"
        assert archived["archive"]["reason"] == "deleted"
        assert archived["standing"] is None
        assert [r["reason"] for r in archived["receipts"]] == ["deleted"]

        restored = await call(client, "memory_restore", fact_id=fact_id)
        assert restored == {
            "factId": fact_id,
            "restored": True,
            "evicted": [],
            "receipts": [],
            "redacted": [],  # issue 26: the kinds of secret replaced (none here)
        }
        assert fact_id in fact_files(store)
        assert fact_id not in archive_ids(store)
        not_archived = await failed(client, "memory_restore", fact_id=fact_id)
        assert "no fact" in not_archived
        assert "in the archive" in not_archived

    session(open_memory(store), scenario)


@on_both_stores
def test_with_eviction_mode_delete_forget_is_for_good(store: ServedStore) -> None:
    async def scenario(client: Client) -> None:
        fact_id = (await call(client, "memory_add", content="Temporary note"))["factId"]
        assert await call(client, "memory_forget", fact_id=fact_id) == {
            "factId": fact_id,
            "archived": False,
        }
        assert not fact_files(store)
        assert not archive_ids(store)
        assert "Fact not found" in await failed(client, "memory_restore", fact_id=fact_id)
        # Gone for good, but not unexplained: the deletion left a content-free receipt.
        why = await call(client, "memory_why", fact_id=fact_id)
        assert (why["status"], why["fact"], why["archive"]) == ("gone", None, None)
        [receipt] = why["receipts"]
        assert (receipt["reason"], receipt["trigger"]) == ("deleted", "manual")
        assert [line["factId"] for line in receipt["evicted"]] == [fact_id]
        assert "Temporary note" not in json.dumps(why)
        assert "Temporary note" not in store.everything()

    session(open_memory(store, eviction_mode="delete"), scenario)


@on_both_stores
def test_search_finds_best_first_within_top_k_and_category(store: ServedStore) -> None:
    async def scenario(client: Client) -> None:
        for content, category in [
            ("Prefers uv for Python projects", "preference"),
            ("Never use pip in Python projects", "correction"),
            ("Likes hiking", "preference"),
        ]:
            await call(client, "memory_add", content=content, category=category)
        found = await call(client, "memory_search", query="python projects")
        assert {hit["fact"]["content"] for hit in found["results"]} == {
            "Prefers uv for Python projects",
            "Never use pip in Python projects",
        }
        scores = [hit["score"] for hit in found["results"]]
        assert scores == sorted(scores, reverse=True)
        one = await call(client, "memory_search", query="python", top_k=1)
        assert len(one["results"]) == 1
        corrections = await call(client, "memory_search", query="python", category="correction")
        assert [h["fact"]["category"] for h in corrections["results"]] == ["correction"]
        # No fact holds the word; meaning may still offer a neighbour ("Likes hiking").
        sailing = (await call(client, "memory_search", query="sailing"))["results"]
        assert [hit for hit in sailing if hit["bm25"] is not None] == []

    session(open_memory(store), scenario)


@on_both_stores
def test_context_gives_the_block_and_why_each_fact_is_in_it(store: ServedStore) -> None:
    async def scenario(client: Client) -> None:
        correction = await call(
            client, "memory_add", content="Answer in German", category="correction"
        )
        other = await call(client, "memory_add", content="Works on compilers", confidence=0.9)
        context = await call(client, "memory_context")
        # The record of `deermem context --json` and GET …/context: text is the body,
        # block the body in its <memory> block.
        assert context["block"] == f"<memory>\n{context['text']}\n</memory>"
        assert "Answer in German" in context["text"]
        assert "Works on compilers" in context["text"]
        manifest = context["manifest"]
        pools = {item["factId"]: item["pool"] for item in manifest["injected"]}
        assert pools == {correction["factId"]: "guaranteed", other["factId"]: "ranked"}
        assert manifest["omitted"] == []
        assert "Answer in German" not in str(manifest)  # ids and numbers only
        # A budget too small for the ranked fact: it is omitted, and the manifest says why.
        # The budget is the block's: its <memory> lines take 6 of these 26 tokens.
        tight = await call(client, "memory_context", max_tokens=26)
        assert [item["factId"] for item in tight["manifest"]["injected"]] == [correction["factId"]]
        (left_out,) = tight["manifest"]["omitted"]
        assert left_out["factId"] == other["factId"]
        assert left_out["reason"] == "over-budget"

    session(open_memory(store), scenario)


def test_context_for_a_question_prefers_its_fact_within_the_budget(store: ServedStore) -> None:
    async def scenario(client: Client) -> None:
        await call(client, "memory_add", content="Answer in German", category="correction")
        await call(client, "memory_add", content="Works on compilers", confidence=0.6)
        await call(client, "memory_add", content="Walks the dog at dawn daily", confidence=0.9)
        plain = await call(client, "memory_context", max_tokens=40)
        assert "Walks the dog" in plain["text"]
        assert "Works on compilers" not in plain["text"]
        asked = await call(client, "memory_context", max_tokens=40, query="compilers?")
        assert "Works on compilers" in asked["text"]
        assert "Walks the dog" not in asked["text"]
        assert "Answer in German" in asked["text"]  # the guaranteed pool is not displaced
        hostile = await call(client, "memory_context", query="' OR 1=1 -- * NEAR(")
        assert "Answer in German" in hostile["text"]  # query syntax is just a question
        surrogate = await failed(client, "memory_context", query="\ud800")
        assert "query" in surrogate  # one line naming the argument
        assert "\n" not in surrogate

    session(open_memory(store), scenario)


def test_an_empty_memory_has_an_empty_block(store: ServedStore) -> None:
    async def scenario(client: Client) -> None:
        context = await call(client, "memory_context")
        assert context["text"] == ""
        assert context["manifest"]["injected"] == []

    session(open_memory(store), scenario)


# --- bounds and errors ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "arguments", "field"),
    [
        ("memory_add", {"content": "x" * 2001}, "content"),  # one over max_content_chars
        ("memory_add", {"content": ""}, "content"),
        ("memory_add", {"content": "ok", "confidence": 1.5}, "confidence"),
        ("memory_add", {"content": "ok", "topics": ["t"] * 33}, "topics"),
        ("memory_search", {"query": "q", "top_k": 51}, "top_k"),  # one over max_top_k
        ("memory_search", {"query": "q" * 1001}, "query"),
        ("memory_search", {"query": "q", "top_k": 0}, "top_k"),
        ("memory_context", {"max_tokens": 8001}, "max_tokens"),
        ("memory_context", {"query": "q" * 1001}, "query"),
        ("memory_search", {"query": " \t "}, "query"),  # nothing to look for
        ("memory_context", {"query": "\u3000"}, "query"),
        ("memory_update", {"fact_id": "f" * 129, "confidence": 0.5}, "fact_id"),
        ("memory_why", {}, "fact_id"),  # required
        # The schema says "integer": no text, no boolean (as for confidence and revisions).
        ("memory_search", {"query": "q", "top_k": "3"}, "top_k"),
        ("memory_search", {"query": "q", "top_k": True}, "top_k"),
        ("memory_context", {"max_tokens": "100"}, "max_tokens"),
        ("memory_context", {"max_tokens": True}, "max_tokens"),
        ("memory_add", {"content": "ok", "confidence": "0.5"}, "confidence"),
    ],
)
def test_out_of_bounds_arguments_are_tool_errors_that_name_the_field(
    store: ServedStore, tool: str, arguments: dict[str, Any], field: str
) -> None:
    async def scenario(client: Client) -> None:
        message = await failed(client, tool, **arguments)
        assert field in message
        assert "Traceback" not in message
        # one line, naming the argument and the rule, never echoing it (issue 24, point 12)
        assert "\n" not in message.strip(), message
        assert "input_value" not in message
        for value in arguments.values():
            if isinstance(value, str) and len(value) > 100:
                assert value[:50] not in message

    session(open_memory(store), scenario)
    assert not fact_files(store)


def test_blank_content_is_refused_by_the_memory_with_the_field_named(store: ServedStore) -> None:
    async def scenario(client: Client) -> None:
        message = await failed(client, "memory_add", content="   ")
        assert "Invalid fact" in message
        assert "'content'" in message

    session(open_memory(store), scenario)
    assert not fact_files(store)


def test_a_corrupt_fact_file_is_an_error_never_an_empty_memory(store: ServedStore) -> None:
    fact_id = open_memory(store).create_fact("Keeps bees").fact_id
    assert fact_id is not None
    (path,) = (store.root / FACTS).rglob(f"{fact_id}.md")
    path.write_text("---\nid: [unclosed\n---\n", encoding="utf-8")
    before = path.read_bytes()
    memory = open_memory(store)  # the server starts on the damaged store

    async def scenario(client: Client) -> None:
        for tool, arguments in [
            ("memory_context", {}),
            ("memory_search", {"query": "bees"}),
            ("memory_add", {"content": "Keeps wasps"}),
        ]:
            message = await failed(client, tool, **arguments)
            assert "Stored memory is corrupt" in message, tool

    session(memory, scenario)
    assert path.read_bytes() == before


def test_no_fact_content_reaches_the_log_even_when_a_call_fails(
    store: ServedStore, caplog: pytest.LogCaptureFixture
) -> None:
    secret = "SECRET-7f3a the user's bank PIN"

    async def scenario(client: Client) -> None:
        fact_id = (await call(client, "memory_add", content=secret))["factId"]
        await call(client, "memory_search", query=secret)
        await call(client, "memory_context")
        await call(client, "memory_update", fact_id=fact_id, content=secret + " updated")
        await failed(client, "memory_add", content=secret + "x" * 2000)  # too long
        await failed(client, "memory_update", fact_id=fact_id, content=secret, expected_revision=9)
        await call(client, "memory_forget", fact_id=fact_id)
        await call(client, "memory_why", fact_id=fact_id)

    with caplog.at_level(logging.DEBUG):
        session(open_memory(store), scenario)
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "tool memory_add ok" in logged
    assert "tool memory_update error" in logged
    assert "SECRET-7f3a" not in logged


def test_an_unexpected_failure_is_an_internal_error_logged_without_its_message(
    store: ServedStore, caplog: pytest.LogCaptureFixture
) -> None:
    memory = open_memory(store)

    def broken(ctx: object) -> Memory:
        raise RuntimeError("SECRET-" + "91c2 quoted from a fact")  # built at run time

    async def scenario(client: Client) -> None:
        message = await failed(client, "memory_context")
        assert "internal error" in message
        assert "SECRET" not in message
        assert "Traceback" not in message

    with caplog.at_level(logging.INFO):
        session(memory, scenario, memory_of=broken)
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "unhandled RuntimeError" in logged
    assert "SECRET-91c2" not in logged
    assert not any(record.exc_info for record in caplog.records)


def test_an_http_tool_call_without_an_authenticated_caller_reaches_no_memory(
    store: ServedStore,
) -> None:
    memory = open_memory(store)
    memory.create_fact("Alice's own fact")

    async def scenario(client: Client) -> None:
        # In process there is no HTTP request, so no caller: the server fails closed.
        for tool, arguments in [
            ("memory_context", {}),
            ("memory_search", {"query": "fact"}),
            ("memory_add", {"content": "planted"}),
        ]:
            assert "internal error" in await failed(client, tool, **arguments)

    session(memory, scenario, memory_of=request_memory(memory, "coder"))
    assert [fact.content for fact in memory.list_facts()] == ["Alice's own fact"]
