"""Benchmark: prompt injection for a 100-fact scope, search over a 10,000-fact scope.

Run with ``uv run python -m bench.bench_context`` (add ``--json`` for a
machine-readable dump). Every figure is the median of many repetitions after
a warm-up. Two levels are measured: the pure engine (``build_injection``,
``SearchIndex.search``) and what an agent calls (``Memory.context()``,
``Memory.search()`` on a Markdown store in a temporary directory).

* **injection** — :func:`build_injection` over 100 facts with all six
  summaries, default budgets (2,000 / 500 tokens), ``cl100k_base`` counting,
  under both policies. "warm" is the steady state of an agent that renders the
  same memory again (line counts memoised); "fresh counts" gives the counter
  an empty memo every call, as for a library whose every line is new.
* **search** — :meth:`SearchIndex.search` (top 5) over one 10,000-fact scope
  in a file-backed index, warm. Contents draw words from a Zipf-distributed
  vocabulary of 5,000 words (as natural text does; the most frequent word is
  in 77 % of the facts), a tenth of the facts are Chinese. Three sets of 40
  queries, a quarter with a category filter: "content words" (1–4 words of
  frequency rank 50–2,000), "natural mix" (1–6 words drawn by frequency, so
  the very common ones come along), "chinese" (2–4 characters). "worst case"
  is a query whose words occur in every fact, so BM25 is computed 10,000
  times: its time grows with the matching facts.
* **memory** — ``Memory.context()`` of a 100-fact scope (default budgets,
  all six summaries) and ``Memory.search()`` (top 5) of a 10,000-fact scope,
  both warm: the store's read cache and the index are current, so each call
  pays what an agent pays per turn — checking the store's version, reading
  the usage sidecar under ``hybrid-v1``, the engine. Search runs under
  ``confidence`` (hits are not recorded); "recording recalls" is the same
  under ``hybrid-v1``, which writes the usage sidecar on every search.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

from deermem import Memory, MemoryConfig
from deermem.model import Fact, Scope, format_timestamp
from deermem.policy import CapacityPolicy
from deermem.recall.index import SearchIndex
from deermem.recall.injection import InjectionSettings, Summaries, build_injection
from deermem.recall.tokens import token_counter
from deermem.store import HISTORY_SECTIONS, USER_SECTIONS, Section, SummaryDocument
from deermem.store.markdown.files import UserPaths, encode_fact
from deermem.store.records import encode_summaries

NOW = datetime(2026, 11, 30, tzinfo=UTC)
CATEGORIES = ("preference", "correction", "context", "goal", "behavior", "identity", "decision")
SYLLABLES = ("ka", "lo", "mi", "ner", "sta", "qu", "ve", "dor", "pli", "tan", "gre", "zu", "fos")
CJK = "我你他们喜欢机器学习深度工作项目代码部署服务数据模型用户记忆系统测试安装配置"


def vocabulary(size: int, rng: random.Random) -> list[str]:
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 4))))
    return sorted(words)


def zipf_sampler(words: list[str], rng: random.Random) -> Callable[[int], list[str]]:
    weights = [1 / (rank + 1) for rank in range(len(words))]
    return lambda k: rng.choices(words, weights=weights, k=k)


def library(size: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    sample = zipf_sampler(vocabulary(5000, rng), rng)
    facts = []
    for n in range(size):
        if rng.random() < 0.1:
            content = "".join(rng.choice(CJK) for _ in range(rng.randint(6, 30)))
        else:
            content = " ".join(sample(rng.randint(8, 30)))
        fact: dict[str, Any] = {
            "id": f"fact_{n:08x}",
            "content": content,
            "category": rng.choice(CATEGORIES),
            "confidence": round(rng.uniform(0.3, 1.0), 2),
            "createdAt": format_timestamp(NOW - timedelta(days=rng.uniform(0, 400))),
        }
        if fact["category"] == "correction" and rng.random() < 0.5:
            fact["sourceError"] = " ".join(sample(5))
        if rng.random() < 0.3:
            fact["lastConfirmedAt"] = format_timestamp(NOW - timedelta(days=rng.uniform(0, 90)))
        facts.append(fact)
    return facts


def median_ms(run: Callable[[], object], repeat: int, warmup: int = 5) -> float:
    for _ in range(warmup):
        run()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


SUMMARIES = Summaries(
    work="Maintains the deermem memory library and its evaluation harness.",
    personal="Lives in Lisbon; prefers concise answers; cycles to work.",
    top_of_mind="Benchmarks for prompt injection and search.",
    recent="Shipped hybrid-v1 eviction with an audit trail.",
    earlier="Ported the capacity gate from the original project.",
    background="Physicist by training, Python developer for ten years.",
)


def bench_injection(repeat: int) -> list[dict[str, Any]]:
    facts = library(100, seed=1)
    usage = {
        f["id"]: {"accessHeat": 3.0, "accessCount": 4, "lastAccessedAt": format_timestamp(NOW)}
        for f in facts[::3]
    }
    summaries = SUMMARIES
    counter = token_counter("tiktoken")
    rows = []
    for policy in ("confidence", "hybrid-v1"):
        settings = InjectionSettings(ranking=CapacityPolicy(name=policy))

        def warm(settings: InjectionSettings = settings) -> object:
            return build_injection(
                facts, settings=settings, now=NOW, summaries=summaries, usage=usage
            )

        def fresh(settings: InjectionSettings = settings) -> object:
            return build_injection(
                facts,
                settings=settings,
                now=NOW,
                summaries=summaries,
                usage=usage,
                counter=dataclasses.replace(counter, _memo={}),
            )

        injection = build_injection(
            facts, settings=settings, now=NOW, summaries=summaries, usage=usage
        )
        manifest = injection.manifest
        rows.append(
            {
                "policy": policy,
                "facts": len(facts),
                "injected": len(manifest.injected),
                "totalTokens": injection.exact_tokens(),
                "warmMs": median_ms(warm, repeat),
                "freshCountsMs": median_ms(fresh, max(repeat // 10, 20)),
            }
        )
    return rows


def query_sets(rng: random.Random) -> dict[str, list[tuple[str, str | None]]]:
    """Three kinds of query, 40 each; a quarter carry a category filter."""
    words = vocabulary(5000, random.Random(2))  # the library's vocabulary, by frequency rank
    sample = zipf_sampler(words, rng)
    kinds: dict[str, Callable[[], list[str]]] = {
        # content words: ranks 50-2000, the words a user searches for
        "content words": lambda: rng.sample(words[50:2000], rng.randint(1, 4)),
        # words drawn as they occur in text, so frequent ones come along
        "natural mix": lambda: sample(rng.randint(1, 6)),
        "chinese": lambda: ["".join(rng.choice(CJK) for _ in range(rng.randint(2, 4)))],
    }
    return {
        kind: [
            (" ".join(draw()), rng.choice(CATEGORIES) if n % 4 == 3 else None) for n in range(40)
        ]
        for kind, draw in kinds.items()
    }


def query_medians(search: Callable[..., object], queries: list[tuple[str, str | None]]) -> Any:
    """Median and 90th percentile over the queries of each query's median time."""
    medians = sorted(median_ms(partial(search, q, category=c), 25, 3) for q, c in queries)
    return {"medianMs": statistics.median(medians), "p90Ms": medians[int(len(medians) * 0.9)]}


def bench_search(directory: Path) -> dict[str, Any]:
    facts = library(10_000, seed=2)
    results: dict[str, Any] = {"facts": len(facts)}
    with SearchIndex(directory / "bench.sqlite") as index:
        start = time.perf_counter()
        index.sync_scope("user", "agent", facts, version="1")
        results["buildSeconds"] = time.perf_counter() - start
        start = time.perf_counter()
        index.sync_scope("user", "agent", facts, version="2")
        results["resyncUnchangedSeconds"] = time.perf_counter() - start
        search = partial(index.search, "user", "agent", now=NOW)
        sets = query_sets(random.Random(3))
        for kind, queries in sets.items():
            results[kind] = query_medians(search, queries)
        everywhere = [dict(f, content=f["content"] + " memory agent") for f in facts]
        index.sync_scope("user", "worst", everywhere, version="1")
        results["worst case"] = {
            "medianMs": median_ms(
                lambda: index.search("user", "worst", "memory agent", now=NOW), 25, 3
            )
        }
    return results


def write_scope(root: Path, scope: Scope, facts: list[dict[str, Any]]) -> None:
    """Write a scope's fact files and summaries directly (setup, not measured)."""
    user = UserPaths(root, scope.user_id, "memory.json")
    paths = user.agent(scope.agent)
    for data in facts:
        fact = Fact.from_dict(data)
        path = paths.fact(fact.id)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(encode_fact(fact, scope))
    texts = {
        "workContext": SUMMARIES.work,
        "personalContext": SUMMARIES.personal,
        "topOfMind": SUMMARIES.top_of_mind,
        "recentMonths": SUMMARIES.recent,
        "earlierContext": SUMMARIES.earlier,
        "longTermBackground": SUMMARIES.background,
    }
    document = SummaryDocument(
        version="2.0",
        revision=1,
        lastUpdated=format_timestamp(NOW),
        user={name: Section(texts[name]) for name in USER_SECTIONS},
        history={name: Section(texts[name]) for name in HISTORY_SECTIONS},
    )
    user.manifest.write_bytes(encode_summaries(document))


def bench_memory(directory: Path, repeat: int) -> dict[str, Any]:
    results: dict[str, Any] = {}
    small, large = Scope.of("user", "small"), Scope.of("user", "large")
    write_scope(directory, small, library(100, seed=1))
    write_scope(directory, large, library(10_000, seed=2))
    for policy in ("confidence", "hybrid-v1"):
        memory = Memory.open(
            directory,
            MemoryConfig(fact_eviction_policy=policy),
            user="user",
            agent="small",
            clock=lambda: NOW,
        )
        for fact_id in [f.id for f in memory.list_facts()][::3]:
            memory.record_access([fact_id])  # usage for a third (written under hybrid-v1 only)
        results[f"context {policy}"] = {
            "facts": len(memory.list_facts()),
            "warmMs": median_ms(memory.context, repeat),
        }
    memory = Memory.open(directory, MemoryConfig(), user="user", agent="large", clock=lambda: NOW)
    start = time.perf_counter()
    memory.search("first search builds the index")
    results["first search seconds"] = time.perf_counter() - start
    search = memory.search
    sets = query_sets(random.Random(3))
    for kind, queries in sets.items():
        results[f"search {kind}"] = query_medians(search, queries)
    after_commit = []
    for number in range(3):  # a commit of the same user (another agent) changes the token
        memory.scoped(user="user", agent="small").create_fact(f"Another fact, number {number}.")
        start = time.perf_counter()
        memory.search("kalo")
        after_commit.append(time.perf_counter() - start)
    results["search after a commit seconds"] = statistics.median(after_commit)
    hybrid = Memory.open(
        directory,
        MemoryConfig(fact_eviction_policy="hybrid-v1"),
        user="user",
        agent="large",
        clock=lambda: NOW,
    )
    results["search content words, recording recalls"] = query_medians(
        hybrid.search, sets["content words"][:10]
    )
    memory.close()
    hybrid.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--repeat", type=int, default=400, help="repetitions per timing")
    args = parser.parse_args()
    token_counter("tiktoken")("warm up the vocabulary")
    with tempfile.TemporaryDirectory() as directory:
        results: dict[str, Any] = {
            "machine": f"{platform.machine()} {platform.python_implementation()} "
            f"{platform.python_version()}",
            "injection": bench_injection(args.repeat),
            "search": bench_search(Path(directory)),
            "memory": bench_memory(Path(directory) / "store", args.repeat),
        }
    if args.json:
        print(json.dumps(results, indent=2, sort_keys=True))
        return
    print(f"machine: {results['machine']}")
    print("injection, 100 facts (median ms)")
    for row in results["injection"]:
        print(
            f"  {row['policy']:<10} warm {row['warmMs']:.3f}  fresh counts "
            f"{row['freshCountsMs']:.3f}  ({row['injected']} injected, {row['totalTokens']} tokens)"
        )
    search = results["search"]
    print(
        f"search, {search['facts']:,} facts: build {search['buildSeconds']:.2f} s, "
        f"unchanged re-sync {search['resyncUnchangedSeconds']:.2f} s"
    )
    for kind in ("content words", "natural mix", "chinese", "worst case"):
        row = search[kind]
        p90 = f", p90 {row['p90Ms']:.2f}" if "p90Ms" in row else ""
        print(f"  {kind:<26} median {row['medianMs']:.2f} ms{p90}")
    print("memory (median ms)")
    for name, row in results["memory"].items():
        if isinstance(row, float):
            print(f"  {name:<40} {row:.2f} s")
        elif "warmMs" in row:
            print(f"  {name:<40} warm {row['warmMs']:.3f} ({row['facts']} facts)")
        else:
            print(f"  {name:<40} median {row['medianMs']:.2f}, p90 {row['p90Ms']:.2f}")


if __name__ == "__main__":
    main()
