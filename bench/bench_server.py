"""Load on ``deermem serve``: concurrent clients over many users, then the invariants.

32 clients (threads, one keep-alive connection each) for 60 s over 200
users against one server with 2 uvicorn workers, on the Markdown store (a
temporary directory) or on PostgreSQL (``--store postgres``: a temporary
cluster on 127.0.0.1, started with ``fsync`` on, as the Markdown store
syncs its own writes), mixing context reads (40 %), searches (30 %), fact
creation (20 %) and conversation posts (10 %, extracted against a scripted
chat server on 127.0.0.1). Afterwards it checks what must hold under load:

* no 5xx;
* no lost write: every fact the API answered 201 for is in its user's
  library or archive;
* the cap is never exceeded (``max_facts`` 20, so evictions happen);

and prints p50/p99 latency per operation, requests/s and the load average.

    uv run python -m bench.bench_server                    # the full run, Markdown
    uv run python -m bench.bench_server --store postgres   # the full run, PostgreSQL
    uv run python -m bench.bench_server --duration 10 --clients 8 --users 20
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import platform
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlencode, urlsplit

import httpx
import yaml

from deermem.service.tokens import TokenFile
from deermem.testing import ScriptedChatServer

MAX_FACTS = 20
MIX = (("context", 40), ("search", 30), ("create", 20), ("conversation", 10))
WORDS = [
    "uv",
    "pip",
    "python",
    "rust",
    "coffee",
    "tea",
    "berlin",
    "paris",
    "dogs",
    "cats",
    "chess",
    "music",
]


def answer(n: int) -> str:
    fact = {
        "content": f"learned fact {n} about {WORDS[n % len(WORDS)]}",
        "category": "preference",
        "confidence": 0.9,
        "scope": "user",
        "durability": "durable",
        "authority": "descriptive",
    }
    return json.dumps({"user": {}, "history": {}, "newFacts": [fact]})


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Results:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.latency: dict[str, list[float]] = defaultdict(list)
        self.statuses: dict[int, int] = defaultdict(int)
        self.created: dict[str, list[str]] = defaultdict(list)  # user -> contents answered 201

    def record(self, op: str, status: int, seconds: float) -> None:
        with self.lock:
            self.latency[op].append(seconds * 1000)
            self.statuses[status] += 1


def client_loop(
    url: str, token: str, users: list[str], seed: int, stop: float, results: Results
) -> None:
    """One client: one keep-alive connection, requests back to back until ``stop``.

    On :mod:`http.client` rather than httpx: the clients share the 2 cores with
    the server they measure, and httpx spends several times the CPU per
    request, which the server's latency then pays for.
    """
    rng = random.Random(seed)
    ops = [op for op, weight in MIX for _ in range(weight)]
    counter = 0
    where = urlsplit(url)
    connection = http.client.HTTPConnection(where.hostname or "127.0.0.1", where.port, timeout=60)
    reading = {"Authorization": f"Bearer {token}"}
    writing = {**reading, "Content-Type": "application/json"}
    try:
        while time.monotonic() < stop:
            user = rng.choice(users)
            base = f"/v1/users/{user}/agents/bench"
            op = rng.choice(ops)
            counter += 1
            content = ""
            started = time.perf_counter()
            if op == "context":
                connection.request("GET", f"{base}/context", headers=reading)
            elif op == "search":
                query = urlencode({"q": rng.choice(WORDS)})
                connection.request("GET", f"{base}/search?{query}", headers=reading)
            elif op == "create":
                content = f"client {seed} fact {counter} likes {rng.choice(WORDS)}"
                body = json.dumps({"content": content, "confidence": round(rng.random(), 3)})
                connection.request("POST", f"{base}/facts", body=body, headers=writing)
            else:
                messages = [
                    {"role": "user", "content": f"I like {rng.choice(WORDS)} ({counter})."},
                    {"role": "assistant", "content": "Noted."},
                ]
                body = json.dumps({"threadId": f"c{seed}-{counter}", "messages": messages})
                connection.request("POST", f"{base}/conversations", body=body, headers=writing)
            response = connection.getresponse()
            response.read()
            results.record(op, response.status, time.perf_counter() - started)
            if op == "create" and response.status == 201:
                with results.lock:
                    results.created[user].append(content)
    finally:
        connection.close()


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def check_invariants(url: str, token: str, results: Results) -> list[str]:
    problems = []
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=url, headers=headers, timeout=60) as client:
        for user, contents in results.created.items():
            base = f"/v1/users/{user}/agents/bench"
            library = client.get(f"{base}/facts", params={"limit": 200}).json()["facts"]
            archive = client.get(f"{base}/archive", params={"limit": 200}).json()
            archived = list(archive["entries"])
            cursor = archive["nextCursor"]
            while cursor:
                page = client.get(f"{base}/archive", params={"limit": 200, "cursor": cursor})
                archived += page.json()["entries"]
                cursor = page.json()["nextCursor"]
            if len(library) > MAX_FACTS:
                problems.append(f"{user}: {len(library)} facts over the cap {MAX_FACTS}")
            present = {f["content"] for f in library} | {e["fact"]["content"] for e in archived}
            lost = [c for c in contents if c not in present]
            if lost:
                problems.append(f"{user}: {len(lost)} acknowledged writes lost")
    return problems


@dataclass(frozen=True)
class ServerStore:
    """How ``deermem serve`` reaches the store under test, and where its state directory is."""

    options: list[str]  # deermem's global options (--root)
    serve_options: list[str]  # serve's own (--state-dir: a database has no root)
    state_dir: Path
    environ: dict[str, str]


def start_store(kind: str, stack: contextlib.ExitStack, tmp: Path) -> ServerStore:
    """A Markdown directory, or a migrated database of a temporary cluster (closed by ``stack``)."""
    if kind == "markdown":
        return ServerStore(["--root", str(tmp / "store")], [], tmp / "store" / ".server", {})
    from deermem.testing.postgres import TemporaryPostgres

    cluster = stack.enter_context(TemporaryPostgres(fsync=True))
    url = cluster.create_database("bench", migrated=True)
    state = tmp / "state"
    return ServerStore([], ["--state-dir", str(state)], state, {"DEERMEM_DATABASE_URL": url})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", choices=("markdown", "postgres"), default="markdown")
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--users", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()

    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        chat = stack.enter_context(ScriptedChatServer())
        chat.enqueue(*[answer(n) for n in range(50_000)])
        store = start_store(args.store, stack, tmp)
        config = tmp / "deermem.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "max_facts": MAX_FACTS,
                    "model": {
                        "model": "scripted",
                        "base_url": chat.url,
                        "api_key_env": None,
                        "max_retries": 0,
                    },
                }
            )
        )
        token = (
            TokenFile(store.state_dir / "tokens.json")
            .add(admin=True, name="bench", now=datetime.now(UTC))
            .token
        )
        port = free_port()
        log = tmp / "server.log"
        with log.open("wb") as stderr:
            server = subprocess.Popen(
                [
                    sys.executable, "-m", "deermem", *store.options, "--config", str(config),
                    "serve", "--port", str(port), "--workers", str(args.workers),
                    "--log-level", "warning", "--max-pending-jobs", "256", *store.serve_options,
                ],
                stderr=stderr,
                env={**os.environ, **store.environ},
            )  # fmt: skip
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if httpx.get(f"{url}/v1/health").status_code == 200:
                        break
                except httpx.TransportError:
                    if server.poll() is not None or time.monotonic() > deadline:
                        print(log.read_text(), file=sys.stderr)
                        raise
                    time.sleep(0.2)
            users = [f"user{n:03d}" for n in range(args.users)]
            results = Results()
            started = time.monotonic()
            stop = started + args.duration
            threads = [
                threading.Thread(target=client_loop, args=(url, token, users, seed, stop, results))
                for seed in range(args.clients)
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            elapsed = time.monotonic() - started
            load = os.getloadavg()
            problems = check_invariants(url, token, results)
        finally:
            server.send_signal(signal.SIGINT)
            server.wait(timeout=120)

    total = sum(results.statuses.values())
    print(
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {platform.machine()}, {os.cpu_count()} cores, "
        f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the end of the run"
    )
    print(
        f"{args.store} store, {args.clients} clients, {args.users} users, {args.workers} "
        f"workers, {args.duration:.0f} s: {total} requests, {total / elapsed:.0f} requests/s"
    )
    print(f"statuses: {dict(sorted(results.statuses.items()))}")
    for op, _ in MIX:
        values = results.latency[op]
        if values:
            print(
                f"  {op:<13} n={len(values):>6}  p50 {statistics.median(values):7.1f} ms  "
                f"p99 {percentile(values, 0.99):7.1f} ms"
            )
    server_errors = sum(n for status, n in results.statuses.items() if status >= 500)
    if server_errors:
        problems.append(f"{server_errors} responses were 5xx")
    for problem in problems:
        print(f"FAIL: {problem}")
    if not problems:
        print("invariants: no 5xx, no lost write, the cap never exceeded")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
