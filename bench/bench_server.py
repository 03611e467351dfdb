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

**Open loop** (``--open-loop``): the same mix arrives at a fixed rate, one
request every 1/rate seconds whatever the server's answers, stepping the rate
up (``--rates``, ``--step-duration`` each) until context or search p99 passes
50 ms or the server falls behind; a request's latency runs from its scheduled
time, so a request the generator could not send on time counts its wait. The
generator is this process (64 keep-alive connections, threads); its CPU per
request is reported beside the server's, as the share of the two cores the
clients took. Before the steps, each kind alone at ``--kind-rate`` gives the
server's CPU per request by kind (its processes' user + system time, the
database's too on PostgreSQL, less the idle rate). ``--floor`` runs the same
steps against a FastAPI route returning ``{"ok": true}`` on the same uvicorn
settings: the bare framework's cost per request and its highest rate.

    uv run python -m bench.bench_server --open-loop [--store postgres] [--search-mode keyword]
    uv run python -m bench.bench_server --open-loop --floor

``--kinds-only`` runs the kinds alone only (``--kinds``, by default context
and search), ``--rounds`` times; with ``--baseline SRC`` a second server,
deermem imported from another tree's ``src``, gets the same requests, the two
in alternation: the ratio of the medians is the result.

    uv run python -m bench.bench_server --kinds-only --search-mode keyword --baseline ../main/src

**In process** (``--in-process``): the application's own CPU per context and
search request, without sockets or uvicorn — the HTTP API's ASGI application
(:func:`deermem.service.http.app.create_app`) called in this process as
uvicorn calls it, on uvloop, its synchronous parts in the thread pool,
for ``--users`` users of 10 facts each in a Markdown store, every user warm.
A sample is the process's CPU time (every thread's) over ``--requests``
requests of one kind, back to back or ``--pace-ms`` apart (a request to an
idle server, as the open loop's kinds alone at 40/s, costs ≈ 2× the CPU of
one among many: the caches are cold). With ``--baseline SRC`` a second
process runs the same requests with deermem imported from another tree's
``src`` (each on its own copy of the store), sample by sample in
alternation; the ratio of the medians is the result.

    uv run python -m bench.bench_server --in-process --search-mode keyword --baseline ../main/src
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.client
import json
import os
import platform
import random
import shutil
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
from typing import Any
from urllib.parse import urlencode, urlsplit

import httpx
import yaml
from starlette.types import Message
from uvloop import new_event_loop

from bench._timing import LineWorker
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
    connection = connect(url)
    try:
        while time.monotonic() < stop:
            counter += 1
            request = Request.draw(rng, ops, users, f"{seed}-{counter}")
            started = time.perf_counter()
            status = request.send(connection, token)
            results.record(request.op, status, time.perf_counter() - started)
            request.remember(status, results)
    finally:
        connection.close()


def connect(url: str) -> http.client.HTTPConnection:
    where = urlsplit(url)
    return http.client.HTTPConnection(where.hostname or "127.0.0.1", where.port, timeout=60)


@dataclass(frozen=True)
class Request:
    """One request of the mix: its kind, user, and what it sends."""

    op: str
    user: str
    word: str
    tag: str  # unique per request: the created fact's content, the thread id
    confidence: float

    @classmethod
    def draw(cls, rng: random.Random, ops: list[str], users: list[str], tag: str) -> Request:
        user, op, word = rng.choice(users), rng.choice(ops), rng.choice(WORDS)
        return cls(op, user, word, tag, round(rng.random(), 3))

    @property
    def content(self) -> str:
        return f"client {self.tag} fact likes {self.word}"

    def send(self, connection: http.client.HTTPConnection, token: str) -> int:
        """Send it on ``connection`` and read the whole answer; return the status."""
        base = f"/v1/users/{self.user}/agents/bench"
        reading = {"Authorization": f"Bearer {token}"}
        writing = {**reading, "Content-Type": "application/json"}
        if self.op == "context":
            connection.request("GET", f"{base}/context", headers=reading)
        elif self.op == "search":
            query = urlencode({"q": self.word})
            connection.request("GET", f"{base}/search?{query}", headers=reading)
        elif self.op == "create":
            body = json.dumps({"content": self.content, "confidence": self.confidence})
            connection.request("POST", f"{base}/facts", body=body, headers=writing)
        elif self.op == "conversation":
            messages = [
                {"role": "user", "content": f"I like {self.word} ({self.tag})."},
                {"role": "assistant", "content": "Noted."},
            ]
            body = json.dumps({"threadId": f"c{self.tag}", "messages": messages})
            connection.request("POST", f"{base}/conversations", body=body, headers=writing)
        else:  # the floor's route
            connection.request("GET", "/hello")
        response = connection.getresponse()
        response.read()
        return response.status

    def remember(self, status: int, results: Results) -> None:
        if self.op == "create" and status == 201:
            with results.lock:
                results.created[self.user].append(self.content)


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
    database_pids: Path | None = None  # the cluster's postmaster.pid, for its CPU time


def start_store(kind: str, stack: contextlib.ExitStack, tmp: Path) -> ServerStore:
    """A Markdown directory, or a migrated database of a temporary cluster (closed by ``stack``)."""
    if kind == "markdown":
        root = tmp / "store"
        # `deermem serve` refuses a root that holds no store: make it as a user would.
        init = [sys.executable, "-m", "deermem", "--root", str(root), "init"]
        subprocess.run(init, check=True, stdout=subprocess.DEVNULL)
        return ServerStore(["--root", str(root)], [], root / ".server", {})
    from deermem.testing.postgres import TemporaryPostgres

    cluster = stack.enter_context(TemporaryPostgres(fsync=True))
    url = cluster.create_database("bench", migrated=True)
    state = tmp / "state"
    return ServerStore(
        [],
        ["--state-dir", str(state)],
        state,
        {"DEERMEM_DATABASE_URL": url},
        cluster.data / "postmaster.pid",
    )


@dataclass(frozen=True)
class Server:
    url: str
    token: str
    process: subprocess.Popen[bytes]
    store: ServerStore | None

    def cpu_seconds(self) -> float:
        """User + system time of the server's processes (and the database's), so far."""
        roots = [self.process.pid]
        if self.store is not None and self.store.database_pids is not None:
            roots.append(int(self.store.database_pids.read_text().split()[0]))
        return tree_cpu_seconds(roots)


def start_server(
    args: argparse.Namespace, stack: contextlib.ExitStack, tmp: Path, source: Path | None = None
) -> Server:
    """``deermem serve`` on the store under test (or the floor's app), answering;
    stopped when ``stack`` closes. ``source``: import deermem from this ``src`` instead."""
    tmp.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log = tmp / "server.log"
    store: ServerStore | None = None
    token = ""
    if args.floor:
        command = [sys.executable, "-m", "bench.bench_server", "--serve-floor", str(port)]
        command += ["--workers", str(args.workers)]
        environ = dict(os.environ)
    else:
        chat = stack.enter_context(ScriptedChatServer())
        chat.enqueue(*[answer(n) for n in range(50_000)])
        store = start_store(args.store, stack, tmp)
        config = tmp / "deermem.yaml"
        model = {"model": "scripted", "base_url": chat.url, "api_key_env": None, "max_retries": 0}
        settings = {"max_facts": MAX_FACTS, "model": model, "search_mode": args.search_mode}
        config.write_text(yaml.safe_dump(settings))
        tokens = TokenFile(store.state_dir / "tokens.json")
        token = tokens.add(admin=True, name="bench", now=datetime.now(UTC)).token
        command = [
            sys.executable, "-m", "deermem", *store.options, "--config", str(config),
            "serve", "--port", str(port), "--workers", str(args.workers),
            "--log-level", "warning", "--max-pending-jobs", "256", *store.serve_options,
        ]  # fmt: skip
        environ = {**os.environ, **store.environ}
        if source is not None:
            environ["PYTHONPATH"] = str(source)
    with log.open("wb") as stderr:
        process = subprocess.Popen(command, stderr=stderr, env=environ)

    def stop() -> None:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=120)

    stack.callback(stop)
    url = f"http://127.0.0.1:{port}"
    ready = f"{url}/hello" if args.floor else f"{url}/v1/health"
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(ready).status_code == 200:
                break
        except httpx.TransportError:
            if process.poll() is not None or time.monotonic() > deadline:
                print(log.read_text(), file=sys.stderr)
                raise
            time.sleep(0.2)
    return Server(url, token, process, store)


def tree_cpu_seconds(roots: list[int]) -> float:
    """User + system time of the processes ``roots`` and all their descendants (Linux /proc)."""
    children: dict[int, list[int]] = defaultdict(list)
    times: dict[int, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # gone meanwhile
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        pid = int(entry.name)
        children[int(fields[1])].append(pid)
        times[pid] = (int(fields[11]) + int(fields[12])) / tick
    total, pending = 0.0, list(roots)
    while pending:
        pid = pending.pop()
        total += times.get(pid, 0.0)
        pending.extend(children.get(pid, ()))
    return total


# --- the open loop ------------------------------------------------------------------------


CONNECTIONS = 64
P99_LIMIT_MS = 50.0


@dataclass
class Step:
    """One rate held for a while: what arrived, what it cost, whether it kept up."""

    rate: float
    seconds: float  # from the first scheduled request to the last answer
    results: Results
    server_cpu: float  # seconds, less the idle rate
    client_cpu: float  # seconds of this process

    @property
    def sent(self) -> int:
        return sum(self.results.statuses.values())

    def p99(self, op: str) -> float:
        values = self.results.latency.get(op)
        return percentile(values, 0.99) if values else 0.0

    def met(self, ops: tuple[str, ...]) -> bool:
        """p99 of ``ops`` within the limit, no 5xx, and the server answered in time."""
        errors = sum(n for status, n in self.results.statuses.items() if status >= 500)
        kept_up = self.sent >= 0.98 * self.rate * self.seconds  # answered as fast as sent
        return kept_up and not errors and all(self.p99(op) <= P99_LIMIT_MS for op in ops)


def open_loop(
    server: Server,
    requests: list[Request],
    rate: float,
    results: Results,
    idle_cpu: float,
    settle: float = 0.0,
) -> Step:
    """Send ``requests`` at ``rate`` per second, request i at i/rate, on CONNECTIONS threads.

    A thread takes the next request in order, waits for its time and sends it;
    ``settle`` seconds after the last answer are counted in the server's CPU;
    when every thread is busy the request goes late, and its latency, counted
    from its scheduled time, holds the wait (no coordinated omission).
    """
    lock = threading.Lock()
    position = 0
    cpu_before, client_before = server.cpu_seconds(), time.process_time()
    start = time.perf_counter() + 0.05

    def worker() -> None:
        nonlocal position
        connection = connect(server.url)
        try:
            while True:
                with lock:
                    index = position
                    position += 1
                if index >= len(requests):
                    return
                due = start + index / rate
                delay = due - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
                request = requests[index]
                try:
                    status = request.send(connection, server.token)
                except (OSError, http.client.HTTPException):
                    connection.close()
                    connection = connect(server.url)
                    status = 599
                results.record(request.op, status, time.perf_counter() - due)
                request.remember(status, results)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(CONNECTIONS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    client_cpu = time.process_time() - client_before
    elapsed = time.perf_counter() - start
    time.sleep(settle)  # work the answers left behind (extraction jobs)
    server_cpu = server.cpu_seconds() - cpu_before - idle_cpu * (elapsed + settle)
    return Step(rate, elapsed, results, server_cpu, client_cpu)


def schedule(ops: list[str], count: int, users: list[str], seed: int) -> list[Request]:
    rng = random.Random(seed)
    return [Request.draw(rng, ops, users, f"{seed}-{n}") for n in range(count)]


def idle_cpu_rate(server: Server, seconds: float = 3.0) -> float:
    """The server's CPU per second with nothing to do (its timers, the database's)."""
    before = server.cpu_seconds()
    time.sleep(seconds)
    return (server.cpu_seconds() - before) / seconds


def run_open_loop(args: argparse.Namespace, server: Server) -> list[str]:
    """Cost by kind, then the rate steps; print them; return the invariants' problems."""
    users = [f"user{n:03d}" for n in range(args.users)]
    every = Results()
    kinds = ("hello",) if args.floor else tuple(op for op, _ in MIX)
    mix = ["hello"] if args.floor else [op for op, weight in MIX for _ in range(weight)]
    idle = warm_up(args, server, users, every)
    print(f"server idle CPU: {idle * 1000:.1f} ms/s")
    print(f"per request, each kind alone at {args.kind_rate:.0f}/s for {args.kind_seconds:.0f} s:")
    for number, kind in enumerate(kinds):
        requests = schedule([kind], int(args.kind_rate * args.kind_seconds), users, 10 + number)
        results = Results()
        # A conversation's extraction runs after its answer: its CPU counts once it settled.
        settle = 3.0 if kind == "conversation" else 0.0
        step = open_loop(server, requests, args.kind_rate, results, idle, settle)
        print(
            f"  {kind:<13} server CPU {1000 * step.server_cpu / step.sent:6.2f} ms  "
            f"client CPU {1000 * step.client_cpu / step.sent:5.2f} ms  "
            f"p50 {statistics.median(results.latency[kind]):6.1f} ms  p99 {step.p99(kind):6.1f} ms"
        )
        _merge(every, results)
    gated = ("hello",) if args.floor else ("context", "search")
    best: Step | None = None
    print(f"steps of {args.step_duration:.0f} s, p99 limit {P99_LIMIT_MS:.0f} ms on {gated}:")
    for number, rate in enumerate(float(r) for r in args.rates.split(",")):
        requests = schedule(mix, int(rate * args.step_duration), users, 100 + number)
        results = Results()
        step = open_loop(server, requests, rate, results, idle)
        _merge(every, results)
        latencies = "  ".join(
            f"{op} {statistics.median(results.latency[op]):.1f}/{step.p99(op):.1f}"
            for op in kinds
            if results.latency[op]
        )
        statuses = dict(sorted(results.statuses.items()))
        cores = step.server_cpu / step.seconds
        verdict = "met" if step.met(gated) else "MISSED"
        print(
            f"  {rate:5.0f}/s  answered {step.sent / step.seconds:5.0f}/s  server CPU "
            f"{1000 * step.server_cpu / step.sent:5.2f} ms/req ({cores:4.2f} cores)  "
            f"client CPU {1000 * step.client_cpu / step.sent:4.2f} ms/req  "
            f"p50/p99 ms: {latencies}  {statuses}  {verdict}",
            flush=True,
        )
        if not step.met(gated):
            break
        best = step
    print(f"highest rate met: {best.rate:.0f}/s" if best else "highest rate met: none")
    if args.floor:
        return []
    return check_invariants(server.url, server.token, every)


def warm_up(args: argparse.Namespace, server: Server, users: list[str], every: Results) -> float:
    """Both workers up, every user with facts; then the server's idle CPU rate."""
    warm = schedule(["hello"] if args.floor else ["create"], 2 * len(users), users, seed=1)
    open_loop(server, warm, args.kind_rate, every, 0.0)
    time.sleep(1.0)
    return idle_cpu_rate(server)


def run_kinds_only(args: argparse.Namespace, servers: dict[str, Server]) -> None:
    """Each of ``--kinds`` alone at ``--kind-rate``, as the open loop measures them, on each
    server in turn (the order alternating), ``--rounds`` times; print the server CPU per
    request by kind, its median per server and, with two servers, the ratio."""
    users = [f"user{n:03d}" for n in range(args.users)]
    kinds = args.kinds.split(",")
    idle = {name: warm_up(args, server, users, Results()) for name, server in servers.items()}
    cpu: dict[tuple[str, str], list[float]] = defaultdict(list)
    loads = [os.getloadavg()[0]]
    for number in range(args.rounds):
        order = list(servers) if number % 2 == 0 else list(reversed(servers))
        for index, kind in enumerate(kinds):
            count = int(args.kind_rate * args.kind_seconds)
            for name in order:
                # The same requests on each server.
                requests = schedule([kind], count, users, 1000 * number + 10 + index)
                settle = 3.0 if kind == "conversation" else 0.0
                step = open_loop(
                    servers[name], requests, args.kind_rate, Results(), idle[name], settle
                )
                cpu[kind, name].append(1000 * step.server_cpu / step.sent)
                print(
                    f"  round {number + 1} {kind:<13} {name:<8} {cpu[kind, name][-1]:6.2f} ms",
                    flush=True,
                )
        loads.append(os.getloadavg()[0])
    print(
        f"server CPU per request, each kind alone at {args.kind_rate:.0f}/s for "
        f"{args.kind_seconds:.0f} s, median of {args.rounds} rounds, "
        f"load average {min(loads):.2f}-{max(loads):.2f}:"
    )
    for kind in kinds:
        print(f"  {kind:<13} {_medians_line({n: cpu[kind, n] for n in servers}, digits=2)}")


def _merge(into: Results, results: Results) -> None:
    for op, values in results.latency.items():
        into.latency[op] += values
    for status, count in results.statuses.items():
        into.statuses[status] += count
    for user, contents in results.created.items():
        into.created[user] += contents


def hello_app() -> Any:
    """The floor: FastAPI's cost per request, one route answering ``{"ok": true}``."""
    from fastapi import FastAPI

    app = FastAPI()

    @app.get("/hello")
    def hello() -> dict[str, bool]:
        return {"ok": True}

    return app


def serve_floor(port: int, workers: int) -> None:
    """The floor's app on the uvicorn settings ``deermem serve`` uses."""
    import uvicorn

    from deermem.service.http.run import ServerHTTPProtocol

    uvicorn.run(
        "bench.bench_server:hello_app",
        factory=True,
        host="127.0.0.1",
        port=port,
        workers=workers,
        http=ServerHTTPProtocol,
        log_level="warning",
        access_log=False,
        server_header=False,
        proxy_headers=False,
    )


# --- in process: the application's own CPU per request ------------------------------------


IN_PROCESS_KINDS = ("context", "search")
FACTS_PER_USER = 10


def seed_store(root: Path, config_file: Path, users: list[str]) -> str:
    """A Markdown store of ``users`` with FACTS_PER_USER facts each, and an admin token."""
    from deermem.config import load_config
    from deermem.memory import Memory

    memory = Memory.open_unscoped(root, load_config(config_file))
    try:
        for user in users:
            facts = [
                {"content": f"seed fact {n} about {WORDS[n % len(WORDS)]}", "confidence": 0.8}
                for n in range(FACTS_PER_USER)
            ]
            memory.scoped(user=user, agent="bench").import_document({"facts": facts})
    finally:
        memory.close()
    tokens = TokenFile(root / ".server" / "tokens.json")
    return tokens.add(admin=True, name="bench", now=datetime.now(UTC)).token


class InProcessApp:
    """The HTTP API's ASGI application over a store, called as uvicorn calls it."""

    def __init__(self, root: Path, config_file: Path, users: list[str], token: str) -> None:
        from deermem.service.http.app import create_app
        from deermem.service.settings import ServerSettings

        settings = ServerSettings(root=str(root), config_file=str(config_file))
        self.app = create_app(settings)
        self.users = users
        self.headers = [
            (b"host", b"127.0.0.1:8765"),
            (b"authorization", f"Bearer {token}".encode()),
            (b"accept", b"*/*"),
        ]

    async def get(self, path: str, query: str = "") -> int:
        """One GET answered in full; its status."""
        scope = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.4"},
            "http_version": "1.1",
            "method": "GET",
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": query.encode(),
            "root_path": "",
            "headers": self.headers,
            "client": ("127.0.0.1", 40000),
            "server": ("127.0.0.1", 8765),
        }
        status = 0

        async def receive() -> Message:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])

        await self.app(scope, receive, send)
        return status

    async def run(self, kind: str, count: int, pace: float) -> float:
        """CPU milliseconds per request over ``count`` requests of ``kind``, ``pace`` s apart."""
        started = time.process_time()
        for n in range(count):
            if pace:
                await asyncio.sleep(pace)
            base = f"/v1/users/{self.users[n % len(self.users)]}/agents/bench"
            if kind == "context":
                status = await self.get(f"{base}/context")
            else:
                status = await self.get(f"{base}/search", urlencode({"q": WORDS[n % len(WORDS)]}))
            if status != 200:
                raise RuntimeError(f"{kind}: answered {status}")
        return 1000 * (time.process_time() - started) / count


def in_process_worker(root: Path, users: int) -> None:
    """Serve the store at ``root`` (``deermem.yaml`` and the token beside it): answer
    ``kind count pace`` lines on stdin with the CPU ms per request, as JSON."""
    import deermem

    names = [f"user{n:03d}" for n in range(users)]
    token = (root.parent / "token").read_text()
    served = InProcessApp(root, root.parent / "deermem.yaml", names, token)

    async def serve() -> None:
        for kind in IN_PROCESS_KINDS:  # every user warm in every kind
            await served.run(kind, len(names), 0.0)
        print(json.dumps(deermem.__file__), flush=True)
        loop = asyncio.get_running_loop()
        while line := await loop.run_in_executor(None, sys.stdin.readline):
            kind, count, pace = line.split()
            cpu = await served.run(kind, int(count), float(pace))
            print(json.dumps(cpu), flush=True)

    # uvloop, as uvicorn's `--loop auto` picks it (the server extra installs it).
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        runner.run(serve())


class InProcessWorker(LineWorker):
    """A process serving requests in-process with deermem imported from one source tree."""

    def __init__(self, source: Path, root: Path, users: int) -> None:
        command = [sys.executable, "-m", "bench.bench_server", "--in-process-worker", str(root)]
        super().__init__([*command, "--users", str(users)], source=source)
        self.imported = json.loads(self.first)

    def time(self, kind: str, count: int, pace: float) -> float:
        return float(self.ask(f"{kind} {count} {pace}"))


def run_in_process(args: argparse.Namespace, tmp: Path) -> None:
    """CPU per context and search request in-process, this tree (and ``--baseline``'s),
    alternated sample by sample; print the medians and their ratio."""
    users = [f"user{n:03d}" for n in range(args.users)]
    seed = tmp / "seed"
    seed.mkdir()
    config = {"max_facts": MAX_FACTS, "search_mode": args.search_mode}
    (seed / "deermem.yaml").write_text(yaml.safe_dump(config))
    (seed / "token").write_text(seed_store(seed / "store", seed / "deermem.yaml", users))
    sources = {"this": Path(__file__).resolve().parents[1] / "src"}
    if args.baseline is not None:
        sources = {"baseline": args.baseline.resolve(), **sources}
    workers: dict[str, InProcessWorker] = {}
    try:
        for name, source in sources.items():
            shutil.copytree(seed, tmp / name)
            workers[name] = InProcessWorker(source, tmp / name / "store", args.users)
            print(f"{name}: deermem from {workers[name].imported}")
        pace = args.pace_ms / 1000
        samples: dict[tuple[str, str], list[float]] = defaultdict(list)
        loads = [os.getloadavg()[0]]
        for number in range(args.rounds):
            order = list(workers) if number % 2 == 0 else list(reversed(workers))
            for kind in IN_PROCESS_KINDS:
                for name in order:
                    samples[kind, name].append(workers[name].time(kind, args.requests, pace))
            loads.append(os.getloadavg()[0])
    finally:
        for worker in workers.values():
            worker.close()
    print(
        f"{args.rounds} rounds of {args.requests} requests per kind, "
        f"{'back to back' if not pace else f'{args.pace_ms:g} ms apart'}, "
        f"load average {min(loads):.2f}-{max(loads):.2f}:"
    )
    for kind in IN_PROCESS_KINDS:
        line = _medians_line({name: samples[kind, name] for name in workers}, digits=3)
        print(f"  {kind:<8} CPU per request: {line}")


def _medians_line(samples: dict[str, list[float]], *, digits: int) -> str:
    """Each side's median (ms) and, beside a ``baseline``, the ratio and in how many
    rounds ``this`` was cheaper (the samples are paired round by round)."""
    medians = {name: statistics.median(values) for name, values in samples.items()}
    line = "  ".join(f"{name} {value:.{digits}f} ms" for name, value in medians.items())
    if "baseline" in samples:
        this, other = samples["this"], samples["baseline"]
        fewer = sum(a < b for a, b in zip(this, other, strict=True))
        line += (
            f"  ratio this/baseline {medians['this'] / medians['baseline']:.2f} "
            f"(this cheaper in {fewer}/{len(this)} rounds)"
        )
    return line


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", choices=("markdown", "postgres"), default="markdown")
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--users", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--open-loop", action="store_true", help="fixed arrival rates, stepped")
    parser.add_argument("--rates", default="50,100,150,200,250,300,350,400,450,500")
    parser.add_argument("--step-duration", type=float, default=20.0)
    parser.add_argument("--kind-rate", type=float, default=40.0)
    parser.add_argument("--kind-seconds", type=float, default=10.0)
    parser.add_argument(
        "--search-mode",
        choices=("hybrid", "keyword"),
        default="hybrid",
        help="the store's search (hybrid, the default, embeds each query when the models "
        "are installed: ~25 ms of CPU per search; keyword is FTS5 alone)",
    )
    parser.add_argument("--floor", action="store_true", help="the bare FastAPI route instead")
    parser.add_argument(
        "--in-process", action="store_true", help="the application's CPU per request, no sockets"
    )
    parser.add_argument(
        "--kinds-only",
        action="store_true",
        help="the open loop's kinds alone, --rounds times (against --baseline's server too)",
    )
    parser.add_argument("--kinds", default="context,search", help="with --kinds-only")
    parser.add_argument(
        "--baseline",
        type=Path,
        help="with --in-process or --kinds-only: alternate with deermem imported from this src",
    )
    parser.add_argument("--rounds", type=int, default=10, help="with --in-process/--kinds-only")
    parser.add_argument("--requests", type=int, default=400, help="with --in-process, per sample")
    parser.add_argument("--pace-ms", type=float, default=0.0, help="with --in-process")
    parser.add_argument("--serve-floor", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--in-process-worker", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_floor:
        serve_floor(args.serve_floor, args.workers)
        return 0
    if args.in_process_worker:
        in_process_worker(args.in_process_worker, args.users)
        return 0
    if args.in_process:
        with tempfile.TemporaryDirectory() as scratch:
            print(
                f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {platform.machine()}, "
                f"{os.cpu_count()} cores; in process, {args.users} users of "
                f"{FACTS_PER_USER} facts, search {args.search_mode}",
                flush=True,
            )
            run_in_process(args, Path(scratch))
        return 0
    if args.floor:
        args.open_loop = True

    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        if args.kinds_only:
            servers = {}
            if args.baseline is not None:
                servers["baseline"] = start_server(
                    args, stack, tmp / "baseline", args.baseline.resolve()
                )
            servers["this"] = start_server(args, stack, tmp / "this")
            print(
                f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {platform.machine()}, "
                f"{os.cpu_count()} cores; {args.store} store, {args.workers} workers, "
                f"{args.users} users, search {args.search_mode}; servers: {', '.join(servers)}",
                flush=True,
            )
            run_kinds_only(args, servers)
            return 0
        server = start_server(args, stack, tmp)
        print(
            f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {platform.machine()}, "
            f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at the start; "
            f"{'the floor (FastAPI hello)' if args.floor else args.store + ' store'}, "
            f"{args.workers} workers, {args.users} users"
            f"{'' if args.floor else ', search ' + args.search_mode}",
            flush=True,
        )
        if args.open_loop:
            problems = run_open_loop(args, server)
            load = os.getloadavg()
            print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the end")
            return report_problems(problems, None) if not args.floor else 0
        users = [f"user{n:03d}" for n in range(args.users)]
        results = Results()
        started = time.monotonic()
        stop = started + args.duration
        threads = [
            threading.Thread(
                target=client_loop, args=(server.url, server.token, users, seed, stop, results)
            )
            for seed in range(args.clients)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.monotonic() - started
        load = os.getloadavg()
        problems = check_invariants(server.url, server.token, results)

    total = sum(results.statuses.values())
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the end of the run")
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
    return report_problems(problems, results)


def report_problems(problems: list[str], results: Results | None) -> int:
    if results is not None:
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
