"""Benchmark: the capacity gate at n = 101 (cap 99), 1,000 and 10,000 (cap n/2).

Run with ``uv run python -m bench.bench_policy`` (add ``--json`` for a
machine-readable dump). For both policies, on random facts with usage entries,
it times one decision with every evicted record read (as a receipt writer
reads them) against a deliberately plain implementation of the contract (a
dict per fact, parsing and scoring in the obvious way, a sort on tuples),
checks that the two decide the same, and reports the speed-up. The two are
timed in alternation (see ``bench._timing.interleaved_ms``), because the
shared host's speed drifts.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import random
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

from bench._timing import interleaved_ms
from deermem import POLICY_CONFIDENCE, POLICY_HYBRID_V1, select_facts_for_capacity
from deermem.model import format_timestamp

NOW = datetime(2026, 8, 13, tzinfo=UTC)
CASES = ((101, 99), (1_000, 500), (10_000, 5_000))
CATEGORIES = ("preference", "correction", "context", "goal", "behavior", "identity")


def random_library(size: int, seed: int) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    rng = random.Random(seed)
    facts: list[dict[str, Any]] = []
    usage: dict[str, dict[str, Any]] = {}
    for index in range(size):
        fact_id = f"fact_{index:08x}"
        fact: dict[str, Any] = {
            "id": fact_id,
            "content": f"fact number {index}",
            "category": rng.choice(CATEGORIES),
            "confidence": round(rng.random(), 2),
            "createdAt": format_timestamp(NOW - timedelta(seconds=rng.randrange(400 * 86400))),
        }
        if rng.random() < 0.3:
            fact["lastConfirmedAt"] = format_timestamp(
                NOW - timedelta(seconds=rng.randrange(120 * 86400))
            )
        facts.append(fact)
        if rng.random() < 0.5:
            usage[fact_id] = {
                "accessHeat": round(rng.random() * 12, 3),
                "accessCount": rng.randrange(1, 50),
                "lastAccessedAt": format_timestamp(
                    NOW - timedelta(seconds=rng.randrange(90 * 86400))
                ),
            }
    return facts, usage


def plain_select(
    facts: Sequence[Mapping[str, Any]],
    max_facts: int,
    policy: str,
    usage: Mapping[str, Mapping[str, Any]],
    now: datetime,
) -> tuple[list[str], list[str]]:
    """The contract written the obvious way: the yardstick for identity and speed."""

    def parse(value: Any) -> datetime | None:
        if not isinstance(value, str):
            return None
        try:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
        return moment if moment.tzinfo else moment.replace(tzinfo=UTC)

    def confidence(value: Any) -> float:
        try:
            number = float(value)
        except (TypeError, ValueError):
            return 0.5
        return max(0.0, min(1.0, number)) if math.isfinite(number) else 0.5

    scored: list[dict[str, Any]] = []
    for index, fact in enumerate(facts):
        c = confidence(fact.get("confidence"))
        components = {"confidence": c}
        score = c
        if policy == POLICY_HYBRID_V1:
            confirmed, created = parse(fact.get("lastConfirmedAt")), parse(fact.get("createdAt"))
            if confirmed:
                f = 2 ** (-max(0, (now - confirmed).total_seconds() / 86400) / 90)
            elif created:
                f = 0.5 * 2 ** (-max(0, (now - created).total_seconds() / 86400) / 90)
            else:
                f = 0.0
            a = 0.0
            entry = usage.get(fact["id"])
            accessed = parse(entry.get("lastAccessedAt")) if entry else None
            if entry and accessed and entry.get("accessHeat", 0) > 0:
                decay = 2 ** (-max(0, (now - accessed).total_seconds() / 86400) / 30)
                a = min(1.0, math.log1p(entry["accessHeat"] * decay) / math.log(9))
            score = 0.65 * c + 0.25 * f + 0.10 * a
            components = {"confidence": c, "confirmationFreshness": f, "accessHeat": a}
        scored.append({"index": index, "fact": fact, "score": score, "components": components})
    ranked = sorted(scored, key=lambda item: (-item["score"], item["index"]))
    chosen: set[int] = set()
    if policy == POLICY_HYBRID_V1:
        slots = min(10, math.ceil(max_facts * 0.1))
        for item in ranked:
            if len(chosen) >= slots:
                break
            if str(item["fact"].get("category", "")).strip().lower() == "correction":
                chosen.add(item["index"])
    for item in ranked:
        if len(chosen) >= max_facts:
            break
        chosen.add(item["index"])
    kept = [item["fact"]["id"] for item in ranked if item["index"] in chosen]
    evicted = [item["fact"]["id"] for item in reversed(ranked) if item["index"] not in chosen]
    return kept, evicted


def decide_and_read(
    facts: list[dict[str, Any]], cap: int, policy: str, usage: dict[str, dict[str, Any]]
) -> object:
    """One decision, with every evicted record built (as a receipt writer would)."""
    decision = select_facts_for_capacity(facts, max_facts=cap, policy=policy, usage=usage, now=NOW)
    return decision.kept, decision.evicted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print results as JSON")
    parser.add_argument(
        "--budget", type=float, default=3.0, help="seconds of timing per case (default 3)"
    )
    args = parser.parse_args()
    results = []
    for size, cap in CASES:
        facts, usage = random_library(size, seed=size)
        for policy in (POLICY_CONFIDENCE, POLICY_HYBRID_V1):
            decision = select_facts_for_capacity(
                facts, max_facts=cap, policy=policy, usage=usage, now=NOW
            )
            kept, evicted = plain_select(facts, cap, policy, usage, NOW)
            identical = list(decision.kept_ids) == kept and list(decision.evicted_ids) == evicted
            medians = interleaved_ms(
                {
                    "deermem": partial(decide_and_read, facts, cap, policy, usage),
                    "plain": partial(plain_select, facts, cap, policy, usage, NOW),
                },
                args.budget,
            )
            results.append(
                {
                    "n": size,
                    "cap": cap,
                    "policy": policy,
                    "deermem_ms": round(medians["deermem"], 4),
                    "plain_ms": round(medians["plain"], 4),
                    "speedup": round(medians["plain"] / medians["deermem"], 2),
                    "identical_decisions": identical,
                }
            )
    if args.json:
        print(json.dumps({"machine": platform.platform(), "results": results}, indent=2))
        return
    print(
        f"{'n':>6} {'cap':>5} {'policy':<11} {'deermem ms':>11} {'plain ms':>9} "
        f"{'speed-up':>8}  identical"
    )
    for row in results:
        print(
            f"{row['n']:>6} {row['cap']:>5} {row['policy']:<11} {row['deermem_ms']:>11.4f} "
            f"{row['plain_ms']:>9.4f} {row['speedup']:>7.2f}x  {row['identical_decisions']}"
        )


if __name__ == "__main__":
    main()
