"""What an agent waits for from ``deermem mcp``: start-up and tool calls, stdio and HTTP.

Starts real ``deermem mcp`` processes on a store of 100 facts (the cap, so
every add goes through an eviction) and times, per transport:

* start-up: from spawning the server to an initialised session (stdio);
* each tool an agent calls every turn — ``memory_context``,
  ``memory_search`` — and ``memory_add``, one call at a time;

printing p50/p99 in milliseconds. The HTTP server runs with a token, so the
bearer check is in every request's time.

With ``--startups N`` it times only start-up, N times each, interleaved, from
spawning to an initialised stdio session through the same client: the
``deermem`` command, a bare ``mcp`` SDK server with one tool
(``bench/startup_floor.py mcp``, the floor) started by the same interpreter,
and ``uv run deermem`` (what ``uv run`` adds). The ratio deermem ÷ floor is
the result. With ``--baseline SRC`` the same command also runs another
tree's code (``PYTHONPATH=SRC``, e.g. ``../main/src``) in the same rotation,
and its ratio to the floor is printed beside this tree's.

    uv run python -m bench.bench_mcp                 # 200 calls per tool
    uv run python -m bench.bench_mcp --calls 50
    uv run python -m bench.bench_mcp --startups 21
    uv run python -m bench.bench_mcp --startups 21 --baseline ../main/src

With ``--first-calls N`` it times what an agent's first turn waits for in a
new stdio session, N sessions each, alternated with another tree's code
(``--baseline SRC``): start the server, initialise, list the tools, let
``--idle`` seconds pass (the model's first answer), then the first
``memory_context`` and the first ``memory_search``, on a store of 100 facts
searched by meaning (embedded beforehand, as ``deermem reindex`` does).

    uv run python -m bench.bench_mcp --first-calls 11 --baseline ../main/src
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
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
BASELINE = "deermem mcp, --baseline"
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


async def startup_ms(params: StdioServerParameters, log: Path) -> float:
    """Spawn to an initialised session, through the client the tool calls use."""
    started = time.perf_counter()
    with log.open("w") as stderr:
        async with Client(stdio_client(params, errlog=stderr), mode="legacy"):
            return (time.perf_counter() - started) * 1000


def compare_startups(root: Path, runs: int, log: Path, baseline: Path | None = None) -> None:
    """deermem, the bare SDK server and ``uv run deermem`` (and deermem on ``baseline``'s
    code), interleaved ``runs`` times."""
    options = ["--root", str(root), "--user", USER, "--agent", AGENT, "mcp"]
    deermem = str(Path(sys.executable).parent / "deermem")  # the installed command
    floor = str(Path(__file__).parent / "startup_floor.py")
    servers = {
        "deermem mcp": StdioServerParameters(command=deermem, args=options),
        "bare mcp SDK server (floor)": StdioServerParameters(
            command=sys.executable, args=[floor, "mcp"]
        ),
        "uv run deermem mcp": StdioServerParameters(
            command="uv", args=["run", "deermem", *options]
        ),
    }
    if baseline is not None:
        servers[BASELINE] = StdioServerParameters(
            command=deermem, args=options, env={"PYTHONPATH": str(baseline.resolve())}
        )
    samples: dict[str, list[float]] = {name: [] for name in servers}
    cpu: dict[str, list[float]] = {name: [] for name in servers}
    for params in servers.values():  # warm the page cache and uv's
        anyio.run(startup_ms, params, log)
    for run in range(runs):
        order = list(servers.items())
        for name, params in order if run % 2 == 0 else reversed(order):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            samples[name].append(anyio.run(startup_ms, params, log))
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            used = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
            cpu[name].append(used * 1000)
    medians = {name: statistics.median(values) for name, values in samples.items()}
    print(f"start-up to an initialised stdio session, median of {runs}, interleaved:")
    print("  (CPU: the server process's user + system time, start to exit)")
    for name, value in medians.items():
        print(
            f"  {name:<30} {value:7.0f} ms   (min {min(samples[name]):.0f})   "
            f"CPU {statistics.median(cpu[name]):6.0f} ms"
        )
    deermem_ms, floor_ms = medians["deermem mcp"], medians["bare mcp SDK server (floor)"]
    deermem_cpu = statistics.median(cpu["deermem mcp"])
    floor_cpu = statistics.median(cpu["bare mcp SDK server (floor)"])
    print(f"  deermem / floor: {deermem_ms / floor_ms:.2f}x (CPU {deermem_cpu / floor_cpu:.2f}x)")
    print(f"  uv run adds: {medians['uv run deermem mcp'] - deermem_ms:.0f} ms")
    if baseline is not None:
        baseline_cpu = statistics.median(cpu[BASELINE])
        print(
            f"  baseline / floor: {medians[BASELINE] / floor_ms:.2f}x "
            f"(CPU {baseline_cpu / floor_cpu:.2f}x); this / baseline: "
            f"{deermem_ms / medians[BASELINE]:.2f}x (CPU {deermem_cpu / baseline_cpu:.2f}x)"
        )


async def first_calls_ms(
    params: StdioServerParameters, log: Path, idle: float
) -> tuple[float, float]:
    """The first ``memory_context`` and the first ``memory_search`` of a new session."""
    with log.open("w") as stderr:
        async with Client(stdio_client(params, errlog=stderr), mode="legacy") as client:
            await client.list_tools()
            await anyio.sleep(idle)
            times = []
            for name, arguments in (
                ("memory_context", {}),
                ("memory_search", {"query": "which languages does the user like"}),
            ):
                started = time.perf_counter()
                result = await client.call_tool(name, arguments)
                times.append((time.perf_counter() - started) * 1000)
                assert not result.is_error, result.content
            return times[0], times[1]


def compare_first_calls(root: Path, runs: int, idle: float, log: Path, baseline: Path) -> None:
    """This tree's ``deermem mcp`` and ``baseline``'s, alternated ``runs`` times."""
    options = ["--root", str(root), "--user", USER, "--agent", AGENT, "mcp"]
    deermem = str(Path(sys.executable).parent / "deermem")
    servers = {
        "this tree": StdioServerParameters(command=deermem, args=options),
        "baseline": StdioServerParameters(
            command=deermem, args=options, env={"PYTHONPATH": str(baseline.resolve())}
        ),
    }
    samples: dict[str, dict[str, list[float]]] = {
        name: {"memory_context": [], "memory_search": []} for name in servers
    }
    for run in range(runs):
        order = list(servers.items())
        for name, params in order if run % 2 == 0 else reversed(order):
            context, search = anyio.run(first_calls_ms, params, log, idle)
            samples[name]["memory_context"].append(context)
            samples[name]["memory_search"].append(search)
    print(f"the first calls of a new stdio session, {idle:g} s after it is ready ({runs} runs):")
    for tool in ("memory_context", "memory_search"):
        this = statistics.median(samples["this tree"][tool])
        before = statistics.median(samples["baseline"][tool])
        print(
            f"  {tool:<16} this tree {this:7.1f} ms   baseline {before:7.1f} ms   "
            f"this / baseline {this / before:.2f}x"
        )


def report(title: str, samples: dict[str, list[float]]) -> None:
    print(title)
    for name, values in samples.items():
        print(f"  {name:<16} {percentiles(values)}   ({len(values)} calls)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200, help="calls per tool")
    parser.add_argument("--startups", type=int, default=0, help="time start-up only, N runs")
    parser.add_argument(
        "--baseline", type=Path, help="with --startups: also run this tree's src (PYTHONPATH)"
    )
    parser.add_argument(
        "--first-calls", type=int, default=0, help="time a new session's first calls, N runs"
    )
    parser.add_argument(
        "--idle", type=float, default=3.0, help="with --first-calls: seconds before the calls"
    )
    args = parser.parse_args()
    if args.baseline is not None and not (args.startups or args.first_calls):
        parser.error("--baseline needs --startups or --first-calls")
    if args.first_calls and args.baseline is None:
        parser.error("--first-calls needs --baseline")
    print(
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {platform.machine()}, {os.cpu_count()} cores, "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    with tempfile.TemporaryDirectory() as directory:
        base = Path(directory)
        if args.first_calls:
            seed(base / "stdio", 100)
            Memory.open(base / "stdio", MemoryConfig(max_facts=100)).reindex()  # the vectors
            log = base / "first-calls.log"
            compare_first_calls(base / "stdio", args.first_calls, args.idle, log, args.baseline)
            return
        if args.startups:
            seed(base / "stdio", 100)
            compare_startups(base / "stdio", args.startups, base / "startup.log", args.baseline)
            return
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
