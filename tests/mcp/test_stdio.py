"""``deermem mcp`` over stdio, as Claude Desktop and Cursor run it: a real child process."""

from __future__ import annotations

import json
import select
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from ..served_store import ServedStore, on_both_stores
from .conftest import call, deermem_args, stdio_session, text_of

SECRET = "SECRET-c41d prefers tabs over spaces"


@on_both_stores
def test_every_tool_over_stdio_against_the_store(store: ServedStore, tmp_path: Path) -> None:
    log = tmp_path / "stderr.log"

    async def scenario() -> None:
        async with stdio_session(
            store, "--user", "alice", "--agent", "coder", "mcp", log=log, mode="legacy"
        ) as client:
            listed = {tool.name for tool in (await client.list_tools()).tools}
            assert len(listed) == 7
            added = await call(
                client, "memory_add", content=SECRET, category="preference", confidence=0.9
            )
            assert added["outcome"] == "stored"
            fact_id = added["factId"]
            assert SECRET in store.facts("alice", "coder")[fact_id]
            found = await call(client, "memory_search", query="tabs")
            assert [hit["fact"]["id"] for hit in found["results"]] == [fact_id]
            context = await call(client, "memory_context")
            assert SECRET in context["text"]
            assert [item["factId"] for item in context["manifest"]["injected"]] == [fact_id]
            updated = await call(
                client, "memory_update", fact_id=fact_id, content=SECRET + " (strongly)"
            )
            assert updated["revision"] == 2
            assert "(strongly)" in store.facts("alice", "coder")[fact_id]
            assert (await call(client, "memory_why", fact_id=fact_id))["status"] == "active"
            assert (await call(client, "memory_forget", fact_id=fact_id))["archived"] is True
            assert fact_id not in store.facts("alice", "coder")
            assert store.archived("alice", "coder") == {fact_id}
            assert (await call(client, "memory_why", fact_id=fact_id))["status"] == "archived"
            assert (await call(client, "memory_restore", fact_id=fact_id))["restored"] is True
            assert fact_id in store.facts("alice", "coder")
            refused = await client.call_tool("memory_restore", {"fact_id": fact_id})
            assert refused.is_error
            assert "Fact not found" in text_of(refused)

    anyio.run(scenario)
    # Logs go to stderr (stdout is the protocol): one line per call, no fact content.
    logged = log.read_text(encoding="utf-8")
    assert "tool memory_add ok" in logged
    assert "tool memory_restore error" in logged
    assert "SECRET-c41d" not in logged


def test_a_line_the_sdk_cannot_read_is_answered_and_logged_without_its_content(
    tmp_path: Path,
) -> None:
    """svc-03: the SDK's stdio reader drops a line it cannot read as a message; the client
    would wait until its own timeout and the log would say nothing. Each gets the JSON-RPC
    error the streamable-HTTP transport answers with — under the request's id where the
    line gives it — and one log line with the exception's type, never the line's text."""
    store = ServedStore("markdown", tmp_path)
    log = tmp_path / "stderr.log"
    secret = "SECRET-9e1f tea"
    call = '{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"%s","arguments":%s}}'
    with log.open("w") as stderr:
        server = subprocess.Popen(
            [sys.executable, *deermem_args(store, "--user", "alice", "--agent", "coder", "mcp")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=store.environ({}),
            bufsize=0,  # select() sees what a buffer would have read ahead
        )
    assert server.stdin is not None
    assert server.stdout is not None
    stdin, stdout = server.stdin, server.stdout

    def send(line: str) -> None:
        stdin.write(line.encode("utf-8") + b"\n")
        stdin.flush()

    def answer() -> dict[str, Any]:
        ready, _, _ = select.select([stdout], [], [], 60)
        assert ready, "no answer within 60 s"
        return dict(json.loads(stdout.readline()))

    try:
        initialize = {"protocolVersion": "2025-06-18", "capabilities": {}}
        initialize["clientInfo"] = {"name": "test", "version": "1"}
        send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": initialize}))
        assert answer()["id"] == 1
        send('{"jsonrpc":"2.0","method":"notifications/initialized"}')
        unreadable = [  # what jiter, the SDK's JSON parser, refuses: each is valid JSON
            (2, "memory_add", '{"content":"' + secret + ' \\ud800"}'),  # a lone surrogate
            (3, "memory_search", '{"query":"tea","top_k":1' + "0" * 5000 + "}"),
            (
                '"four"',
                "memory_add",
                '{"content":"' + secret + '","topics":' + "[" * 5000 + "]" * 5000 + "}",
            ),
        ]
        for request_id, tool, arguments in unreadable:
            send(call % (request_id, tool, arguments))
        parsed = [answer() for _ in unreadable]
        assert [(a["id"], a["error"]["code"]) for a in parsed] == [
            (2, -32700),
            (3, -32700),
            (None, -32700),
        ]
        assert all(a["error"]["message"].startswith("Parse error: ") for a in parsed)
        # A notification is not answered; JSON of the wrong shape is -32602 under its id.
        send('{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"x":"\\ud800"}}')
        send('{"jsonrpc":"2.0","id":5,"method":"tools/call","params":5}')
        refused = answer()
        assert (refused["id"], refused["error"]["code"]) == (5, -32602)
        send(call % (6, "memory_add", '{"content":"Alice drinks tea"}'))  # still serving
        added = answer()
        assert added["id"] == 6
        assert added["result"]["structuredContent"]["outcome"] == "stored"
        assert secret not in json.dumps([*parsed, refused])
    finally:
        stdin.close()
        server.wait(60)
        stdout.close()
    lines = [line for line in log.read_text("utf-8").splitlines() if "could not read" in line]
    assert len(lines) == 5
    assert all("ValidationError" in line for line in lines)
    assert sum("answered with JSON-RPC error" in line for line in lines) == 4
    assert "SECRET-9e1f" not in log.read_text("utf-8")


def test_without_user_the_stdio_server_serves_the_single_user_layout(
    store: ServedStore, tmp_path: Path
) -> None:
    root = store.root

    async def scenario() -> None:
        async with stdio_session(store, "mcp", log=tmp_path / "stderr.log") as client:
            added = await call(client, "memory_add", content="Single user fact")
            assert added["outcome"] == "stored"

    anyio.run(scenario)
    assert list((root / "agents/__default__/facts").rglob("*.md"))
    assert not (root / "users").exists()


def test_a_bad_scope_stops_the_server_with_one_line_and_no_traceback(tmp_path: Path) -> None:
    store = ServedStore("markdown", tmp_path)
    done = subprocess.run(
        [sys.executable, *deermem_args(store, "--agent", "../../etc", "mcp")],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert done.stdout == ""  # stdout is the protocol's, even for errors
    assert done.stderr.startswith("error:")
    assert "agent name" in done.stderr
    assert "Traceback" not in done.stderr
    assert not list(tmp_path.rglob("*.md"))


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_once_a_session_is_ready_the_server_loads_what_its_first_calls_need(
    tmp_path: Path, mode: str
) -> None:
    # The vocabulary and the embedding models (≈ 1.5 s in a new process) are loaded in
    # the background once the client's session is ready — after the 2025 handshake, or
    # the first request of a version without one — not by the agent's first search.
    store = ServedStore("markdown", tmp_path)
    log = tmp_path / "stderr.log"

    async def scenario() -> None:
        async with stdio_session(store, "--user", "alice", "mcp", log=log, mode=mode) as client:
            assert len((await client.list_tools()).tools) == 7
            with anyio.fail_after(120):
                while "warmed up in" not in log.read_text(encoding="utf-8"):
                    await anyio.sleep(0.1)
            found = await call(client, "memory_search", query="tea")
            assert found["results"] == []

    anyio.run(scenario)
    lines = [line for line in log.read_text(encoding="utf-8").splitlines() if "warmed up" in line]
    assert len(lines) == 1
    assert "what the first requests need is loaded" in lines[0]


def test_a_stdio_server_does_not_load_what_it_does_not_use_until_it_needs_it(
    tmp_path: Path,
) -> None:
    # Issue 23: an agent starts `deermem mcp` per session and waits for it. Up to a
    # running stdio server (the CLI, the memory, the tools) the learning pipeline
    # is not loaded; the first use of the queue loads it, and every view of the
    # memory shares the one learner. (rich's progress module costs nothing
    # measurable beside the rest of rich, so it loads with the CLI.)
    script = f"""
import sys
from deermem.cli.app import app
from deermem.memory import Memory
from deermem.service.mcp.server import create_mcp_server

memory = Memory.open({str(tmp_path)!r}, user="alice", agent="coder")
create_mcp_server(memory)
print(sorted(m for m in sys.modules if m.startswith("deermem.learning")))
view = memory.scoped(user="bob", agent="coder")
view.flush_queue()
print("deermem.learning" in sys.modules, view._updates is memory._updates)
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.splitlines() == ["[]", "True True"]
