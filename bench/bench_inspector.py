"""Benchmark: the inspector's pages (/ui/) for a 500-fact scope with 1,000 archived facts.

Run with ``uv run python -m bench.bench_inspector`` (``--store markdown``,
``postgres`` or ``both``, the default; ``--runs`` requests per page).

One scope at a cap of 500 under ``hybrid-v1`` (the default of a store
``deermem init`` makes) is filled by one import of 1,500 facts, so the
capacity gate keeps 500 and archives 1,000 (``archive_max_entries`` is 1,000);
then 20 archived facts are restored and 20 searches run, so the regret chart
has events to draw. The application is the one ``deermem serve`` runs
(:func:`~deermem.service.http.app.create_app`), called in-process through
Starlette's test client (no socket: the time is the server's), signed in
once; each page is requested ``--runs`` times after one warm-up and the
median is reported with the page's weight (the HTML alone: the style sheet,
served once and cached, is reported on its own row).

Targets (issue 27): each page ≤ 100 ms server time, ≤ 100 KB.
"""

from __future__ import annotations

import argparse
import contextlib
import platform
import re
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from starlette.testclient import TestClient

from deermem import Memory, MemoryConfig
from deermem.library.gate import other_policy
from deermem.policy import select_facts_for_capacity
from deermem.service.http.app import create_app
from deermem.service.settings import ServerSettings

START = datetime(2026, 11, 1, tzinfo=UTC)
USER, AGENT = "bench-user", "bench-agent"
CATEGORIES = ("preference", "correction", "context", "goal", "behavior", "identity")


class Clock:
    """A clock the bench moves by hand, so the events spread over days."""

    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now


def document(size: int) -> dict[str, object]:
    facts = [
        {
            "id": f"fact_{n:08x}",
            "content": f"Fact {n}: the user works on project {n % 97} with tool {n % 13}",
            "category": CATEGORIES[n % len(CATEGORIES)],
            "confidence": round(0.3 + (n * 7919 % 700) / 1000, 3),
            "createdAt": (START - timedelta(days=n % 120)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        for n in range(size)
    ]
    return {"facts": facts}


def fill(memory: Memory, clock: Clock) -> None:
    scoped = memory.scoped(user=USER, agent=AGENT)
    scoped.import_document(document(1_500))
    archived = [entry.fact_id for entry in scoped.list_archived()]
    for day, fact_id in enumerate(archived[:20]):
        clock.now = START + timedelta(days=day + 1)
        scoped.restore(fact_id)
        scoped.search(f"project {day}")


def measure(memory: Memory, state: Path, runs: int) -> list[tuple[str, float, int]]:
    settings = ServerSettings(state_dir=str(state))
    app = create_app(settings, memory=memory)
    rows = []
    with TestClient(app, base_url="http://127.0.0.1") as client:
        form = client.get("/ui/sign-in").text
        token = re.search(r'name="csrf" value="([^"]+)"', form)
        assert token is not None
        signed = client.post(
            "/ui/sign-in", data={"token": "", "csrf": token.group(1)}, follow_redirects=False
        )
        assert signed.status_code == 303, signed.text
        scope = memory.scoped(user=USER, agent=AGENT)
        archived = scope.list_archived()[0].fact_id
        active = scope.list_facts()[0].id
        base = f"/ui/users/{USER}/agents/{AGENT}"
        pages = {
            "scopes": "/ui/",
            "user (regret)": f"/ui/users/{USER}",
            "library (ranking, regret)": base,
            "library page 5": f"{base}?page=5",
            "search": f"{base}?q=project+12+tool",
            "archive": f"{base}/archive",
            "why (archived)": f"{base}/facts/{archived}",
            "why (active)": f"{base}/facts/{active}",
            "purge confirmation": f"{base}/archive/{archived}/purge",
            "what-if": f"{base}/what-if",
            "style sheet": "/ui/static/inspector.css",
        }
        for name, path in pages.items():
            answer = client.get(path)
            assert answer.status_code == 200, (path, answer.status_code)
            samples = []
            for _ in range(runs):
                started = time.perf_counter()
                answer = client.get(path)
                samples.append(time.perf_counter() - started)
            rows.append((name, statistics.median(samples) * 1000, len(answer.content)))
        # What the what-if page spends its time on: reading the archive (as
        # Memory.list_archived and the API's archive list do) and the two decisions.
        pool = [*scope.list_facts(), *(entry.fact for entry in scope.list_archived())]
        policies = (scope.gate.policy, other_policy(scope.gate.policy))

        def decide() -> None:
            for policy in policies:
                select_facts_for_capacity(
                    pool, max_facts=scope.gate.max_facts, policy=policy, now=scope.now()
                )

        for name, work in (
            ("  what-if: read the archive", scope.list_archived),
            ("  what-if: both decisions", decide),
        ):
            work()
            samples = []
            for _ in range(runs):
                started = time.perf_counter()
                work()
                samples.append(time.perf_counter() - started)
            rows.append((name, statistics.median(samples) * 1000, 0))
    return rows


def run(kind: str, runs: int) -> None:
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        config = {"max_facts": 500, "fact_eviction_policy": "hybrid-v1"}
        clock = Clock()
        if kind == "markdown":
            memory = Memory.open_unscoped(tmp / "store", MemoryConfig(**config), clock=clock)
        else:
            from deermem.testing.postgres import TemporaryPostgres

            cluster = stack.enter_context(TemporaryPostgres(fsync=True))
            url = cluster.create_database("bench", migrated=True)
            memory = Memory.open_unscoped(None, MemoryConfig(store=url, **config), clock=clock)
        close = getattr(memory.store, "close", None)  # a database's connection pool
        if callable(close):
            stack.callback(close)
        stack.callback(memory.close)
        fill(memory, clock)
        print(
            f"\n{kind}: 500 facts, {len(memory.scoped(user=USER, agent=AGENT).list_archived())}"
            " archived"
        )
        print(f"{'page':<28} {'median ms':>10} {'KB':>8}  targets ≤ 100 ms, ≤ 100 KB")
        for name, ms, size in measure(memory, tmp / "state", runs):
            page = not name.startswith(" ")  # the what-if's parts are not pages
            flag = "  MISSED" if page and (ms > 100 or size > 100_000) else ""
            print(f"{name:<28} {ms:>10.1f} {size / 1000:>8.1f}{flag}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", choices=("markdown", "postgres", "both"), default="both")
    parser.add_argument("--runs", type=int, default=15)
    arguments = parser.parse_args()
    print(f"{platform.python_implementation()} {platform.python_version()}, {platform.machine()}")
    kinds = ("markdown", "postgres") if arguments.store == "both" else (arguments.store,)
    for kind in kinds:
        run(kind, arguments.runs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
