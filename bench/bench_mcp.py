"""What an agent waits for from ``deermem mcp``: start-up and tool calls, stdio and HTTP.

Starts real ``deermem mcp`` processes on a store of 100 facts (the cap, so
every add goes through an eviction) and times, per transport:

* start-up: from spawning the server to an initialised session (stdio);
* each tool an agent calls every turn — ``memory_context``,
  ``memory_search`` — and ``memory_add``, one call at a time;

printing p50/p99 in milliseconds. The HTTP server runs with a token, so the
bearer check is in every request's time.

    uv run python -m bench.bench_mcp                 # 200 calls per tool
    uv run python -m bench.bench_mcp --calls 50
"""

from __future__ import annotations

import argparse
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from deermem import Memory, MemoryConfig
from deermem.service.tokens import TokenFile

USER, AGENT = "bench", "coder"
TOPICS = ["python", "rust", "travel", "music", "cooking", "running", "chess", "gardening"]


def seed(root: Path, facts: int) -> None:
    memory = Memory.open(root, MemoryConfig(max_facts=100), user=USER, agent=AGENT)
    for i in range(facts):
        topic = TOPICS[i % len(TOPICS)]
        memory.create_fact(
            f"Fact {i}: the user has an opinion about {topic} number {i}",
            category="correction" if i % 10 == 0 else "preference",
            confidence=0.5 + (i % 5) / 10,
        )


def percentiles(samples: list[float]) -> str:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return f"p50 {statistics.median(ordered):7.2f} ms   p99 {p99:7.2f} ms"


async def timed_calls(client: Client, calls: int) -> dict[str, list[float]]:
    plans: dict[str, Callable[[int], dict[str, Any]]] = {
        "memory_context": lambda i: {},
        "memory_search": lambda i: {"query": TOPICS[i % len(TOPICS)]},
        "memory_add": lambda i: {"content": f"A new thing {i} {time.time_ns()}", "confidence": 0.9},
    }
    samples: dict[str, list[float]] = {name: [] for name in plans}
    for name, arguments in plans.items():
        await client.call_tool(name, arguments(0))  # warm: tokenizer, search index
        for i in range(calls):
            started = time.perf_counter()
            result = await client.call_tool(name, arguments(i))
            samples[name].append((time.perf_counter() - started) * 1000)
            assert not result.is_error, result.content
    return samples


async def over_stdio(root: Path, calls: int, log: Path) -> tuple[float, dict[str, list[float]]]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "deermem", "--root", str(root), "--user", USER, "--agent", AGENT, "mcp"],
    )
    started = time.perf_counter()
    with log.open("w") as stderr:
        async with Client(stdio_client(params, errlog=stderr), mode="legacy") as client:
            startup = (time.perf_counter() - started) * 1000
            return startup, await timed_calls(client, calls)


async def over_http(url: str, token: str, calls: int) -> dict[str, list[float]]:
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as http,
        Client(streamable_http_client(url, http_client=http), mode="legacy") as client,
    ):
        return await timed_calls(client, calls)


def run_http(root: Path, calls: int, log: Path) -> dict[str, list[float]]:
    token = TokenFile(root / ".server" / "tokens.json").add(users=[USER], now=datetime.now(UTC))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    command = [sys.executable, "-m", "deermem", "--root", str(root), "--agent", AGENT, "mcp"]
    command += ["--transport", "http", "--port", str(port), "--log-level", "warning"]
    with log.open("wb") as stderr:
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=stderr)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"the server did not start:\n{log.read_text()}") from None
                time.sleep(0.1)
        url = f"http://127.0.0.1:{port}/mcp"
        return anyio.run(over_http, url, token.token, calls)
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=30)


def report(title: str, samples: dict[str, list[float]]) -> None:
    print(title)
    for name, values in samples.items():
        print(f"  {name:<16} {percentiles(values)}   ({len(values)} calls)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200, help="calls per tool")
    args = parser.parse_args()
    print(f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {platform.machine()}, {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as directory:
        base = Path(directory)
        for transport in ("stdio", "http"):
            root = base / transport
            seed(root, 100)
            log = base / f"{transport}.log"
            if transport == "stdio":
                startup, samples = anyio.run(over_stdio, root, args.calls, log)
                report(f"stdio (start-up to an initialised session: {startup:.0f} ms)", samples)
            else:
                report("streamable HTTP (bearer token, 127.0.0.1)", run_http(root, args.calls, log))


if __name__ == "__main__":
    main()
