"""One token must not hold the MCP server's sessions: a bound per token, and a clear refusal.

The attack: a token opens MCP sessions over streamable HTTP and never ends
them. Each lives in the server process for 30 idle minutes; unbounded, one
token holds as many as it likes (the SDK's only bound is 10,000 for everyone).
``deermem mcp`` bounds a token's open sessions (``--max-sessions-per-token``,
32): beyond it an opening request gets 429 ``too-many-sessions``, while the
token's open sessions, its session-less requests and every other token work on.

A real ``deermem mcp --transport http`` process on 127.0.0.1, opened with raw
``initialize`` requests of the 2025 protocol (the one with sessions). The
store is Markdown only: sessions never touch it.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import httpx

from deermem.service.tokens import TokenFile

from ..mcp.conftest import call, http_server, http_session
from ..served_store import ServedStore

DEFAULT_LIMIT = 32  # `deermem mcp`'s default --max-sessions-per-token
PROTOCOL = "2025-06-18"
ACCEPT = "application/json, text/event-stream"


def message(method: str, number: int | None = None, **params: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
    if number is not None:
        body["id"] = number
    return body


INITIALIZE = message(
    "initialize",
    1,
    protocolVersion=PROTOCOL,
    capabilities={},
    clientInfo={"name": "session-hoarder", "version": "0"},
)


def open_session(url: str, token: str) -> httpx.Response:
    return httpx.post(
        url,
        json=INITIALIZE,
        headers={"Authorization": f"Bearer {token}", "Accept": ACCEPT},
        timeout=30,
    )


def in_session(
    url: str, token: str, session: str, body: dict[str, Any], method: str = "POST"
) -> httpx.Response:
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": ACCEPT,
        "Mcp-Session-Id": session,
        "MCP-Protocol-Version": PROTOCOL,
    }
    if method == "DELETE":
        return httpx.delete(url, headers=headers, timeout=30)
    return httpx.post(url, json=body, headers=headers, timeout=30)


def test_a_token_holds_only_so_many_open_sessions(tmp_path: Path) -> None:
    store = ServedStore("markdown", tmp_path)
    tokens = TokenFile(store.tokens_file)
    now = datetime(2026, 6, 1, tzinfo=UTC)
    alice = tokens.add(now=now, users=["alice"]).token
    bob = tokens.add(now=now, users=["bob"]).token
    with http_server(store, "--agent", "coder", log=tmp_path / "stderr.log") as server:
        # More opening requests than the bound, all at once: exactly the bound get in.
        with ThreadPoolExecutor(max_workers=8) as senders:
            opened = list(senders.map(lambda _: open_session(server.url, alice), range(40)))
        statuses = sorted(response.status_code for response in opened)
        assert statuses == [200] * DEFAULT_LIMIT + [429] * (40 - DEFAULT_LIMIT), statuses
        refused = next(response for response in opened if response.status_code == 429)
        assert refused.headers["content-type"] == "application/problem+json"
        problem = refused.json()
        assert problem["type"] == "urn:deermem:problem:too-many-sessions"
        assert (problem["limit"], problem["limitName"]) == (32, "max_sessions_per_token")
        assert problem["requestId"] == refused.headers["x-request-id"]
        assert "mcp-session-id" not in refused.headers

        # Her open sessions work on; so do other tokens, and her session-less requests.
        sessions = [r.headers["mcp-session-id"] for r in opened if r.status_code == 200]
        first = sessions[0]
        ready = in_session(server.url, alice, first, message("notifications/initialized"))
        assert ready.status_code == 202
        listed = in_session(server.url, alice, first, message("tools/list", 2))
        assert listed.status_code == 200
        assert "memory_context" in listed.text
        assert open_session(server.url, bob).status_code == 200

        async def sessionless() -> None:
            async with http_session(server.url, alice, mode="auto") as client:
                await call(client, "memory_context")

        anyio.run(sessionless)

        # Ending one of her sessions makes room for one more, and only one.
        assert in_session(server.url, alice, first, {}, method="DELETE").status_code == 200
        assert open_session(server.url, alice).status_code == 200
        assert open_session(server.url, alice).status_code == 429
    log = server.log_text()
    assert "refused a new MCP session" in log
    assert alice not in log  # the token's public id only
