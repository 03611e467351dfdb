"""Benchmark: the pure part of one update (no model call, no store).

Run with ``uv run python -m bench.bench_update`` (``--json`` for a dump).

The workload is issue 4's: a 100-fact scope and a model answer with 5 new
facts, 2 confirmations and 1 contradiction removal (plus two summary
sections), under ``hybrid-v1`` with a ``reinforcement`` signal so the
confirmations apply. Timed stages, each the median of many repetitions
after a warm-up:

* ``parse`` — find the update object in the answer text;
* ``normalise`` — type and bound it;
* ``plan`` — gate, confirmations, summaries, staleness, new facts;
* ``pure total`` — the three together: what this package adds to an update;
* ``+ capacity`` — the total plus the capacity decision over ``plan.facts``
  and the contradiction resolution (policy only);
* ``apply + commit`` — the wired apply path without the model call, as
  ``Memory.learn`` runs it after the answer arrived: parse, normalise,
  then :func:`deermem.learning.learner.apply_response` inside a store
  transaction — plan, the store's capacity gate (5 evictions at the cap of
  100, receipts, archive entries), the conditional contradiction removal and
  one journaled, fsynced commit into a real ``MarkdownStore`` whose scope is
  cached, as in a running service. Measured on the current directory's file
  system (``--dir``) and on ``/dev/shm`` (tmpfs, where fsync costs nothing),
  each on a fresh copy of the scope per repetition. One more, untimed run
  counts its fsyncs (see :mod:`bench._fsyncs`).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path

from bench._fsyncs import count_fsyncs
from bench._timing import median_ms
from deermem.config import MemoryConfig
from deermem.learning.answer import (
    NormalizedResponse,
    UpdatePayload,
    normalize_response,
    parse_update_response,
)
from deermem.learning.learner import AppliedUpdate, apply_response
from deermem.learning.plan import (
    MemoryState,
    UpdateSettings,
    plan_update,
    resolve_contradiction_removals,
)
from deermem.library import CapacityGate
from deermem.model import Fact, Scope, format_timestamp
from deermem.policy import POLICY_HYBRID_V1, select_facts_for_capacity
from deermem.store import MarkdownStore
from deermem.store.markdown.files import UserPaths, encode_fact
from deermem.store.records import SummaryDocument, encode_summaries

NOW = datetime(2026, 8, 13, tzinfo=UTC)
CATEGORIES = ("preference", "correction", "context", "goal", "behavior", "identity")
LABELS = {"scope": "user", "durability": "durable", "authority": "descriptive"}
SETTINGS = UpdateSettings()
SIGNALS = frozenset({"reinforcement"})


def library(size: int = 100, seed: int = 4) -> MemoryState:
    """A full scope: mixed categories and ages, a third of it confirmed."""
    rng = random.Random(seed)
    facts = []
    for index in range(size):
        data: dict[str, object] = {
            "id": f"fact_{index:08x}",
            "content": f"The user prefers option {index} for task family {index % 7}.",
            "category": rng.choice(CATEGORIES),
            "confidence": round(0.7 + rng.random() * 0.3, 2),
            "createdAt": format_timestamp(NOW - timedelta(days=rng.uniform(1, 60))),
            "source": f"thread-{index % 5}",
        }
        if rng.random() < 0.3:
            data["lastConfirmedAt"] = format_timestamp(NOW - timedelta(days=rng.uniform(0, 30)))
            data["confirmationCount"] = rng.randrange(1, 5)
        facts.append(Fact.from_dict(data))
    return MemoryState(facts=tuple(facts))


def answer() -> str:
    """The model's answer: a short preamble, then the update object."""
    section = {"shouldUpdate": True, "scope": "user", "authority": "descriptive"}
    update = {
        "user": {
            "workContext": {"summary": "Backend engineer moving services to Rust.", **section},
            "topOfMind": {"summary": "Shipping the v2 billing API this month.", **section},
        },
        "history": {},
        "newFacts": [
            {
                "content": f"The user wants new fact number {index} remembered.",
                "category": "preference",
                "confidence": 0.9,
                **LABELS,
            }
            for index in range(5)
        ],
        "factsToReinforce": [
            {"id": "fact_00000003", "scope": "user", "reason": "said exactly right"},
            {"id": "fact_00000010", "scope": "user", "reason": "asked to keep doing it"},
        ],
        "factsToRemove": [
            {
                "id": "fact_00000020",
                "scope": "user",
                "reason": "now uses the new API",
                "replacementFactIndex": 0,
            }
        ],
        "staleFactsToRemove": [],
        "staleFactsToExtend": [],
    }
    return "Here is the memory update.\n```json\n" + json.dumps(update, indent=2) + "\n```"


def counter_ids() -> Callable[[], str]:
    numbers = iter(range(1 << 30))
    return lambda: f"fact_n{next(numbers):07x}"


def parse(text: str) -> UpdatePayload:
    parsed = parse_update_response(text)
    assert isinstance(parsed, UpdatePayload)
    return parsed


def normalise(payload: UpdatePayload) -> NormalizedResponse:
    response = normalize_response(payload.data)
    assert isinstance(response, NormalizedResponse)
    return response


def plan(memory: MemoryState, response: NormalizedResponse) -> object:
    return plan_update(
        memory,
        response,
        signals=SIGNALS,
        settings=SETTINGS,
        now=NOW,
        thread_id="thread-9",
        new_id=counter_ids(),
    )


def total(memory: MemoryState, text: str) -> object:
    return plan(memory, normalise(parse(text)))


def with_capacity(memory: MemoryState, text: str) -> object:
    result = plan_update(
        memory,
        normalise(parse(text)),
        signals=SIGNALS,
        settings=SETTINGS,
        now=NOW,
        thread_id="thread-9",
        new_id=counter_ids(),
    )
    decision = select_facts_for_capacity(
        result.facts, max_facts=100, policy=POLICY_HYBRID_V1, now=NOW
    )
    _ = decision.evicted  # a receipt writer reads every evicted record
    return resolve_contradiction_removals(result, decision)


SCOPE = Scope.of("bench-user", "bench-agent")
GATE = CapacityGate.from_config(MemoryConfig(fact_eviction_policy=POLICY_HYBRID_V1))


def build_store(root: Path, memory: MemoryState) -> None:
    """Write the scope's facts directly (setup, not measured; no fsync)."""
    user = UserPaths(root, SCOPE.user_id, "memory.json")
    paths = user.agent(SCOPE.agent)
    for fact in memory.facts:
        path = paths.fact(fact.id)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(encode_fact(fact, SCOPE))
    document = SummaryDocument(version="2.0", revision=1, lastUpdated="2026-08-13T00:00:00Z")
    user.manifest.write_bytes(encode_summaries(document))


def apply_once(store: MarkdownStore, text: str) -> AppliedUpdate:
    response = normalise(parse(text))
    with store.transaction(SCOPE) as transaction:
        return apply_response(
            transaction,
            response,
            gate=GATE,
            settings=SETTINGS,
            signals=SIGNALS,
            now=NOW,
            thread_id="thread-9",
            new_id=counter_ids(),
        )


def time_apply_through_store(base: Path, memory: MemoryState, text: str, repeat: int) -> float:
    """Median ms of :func:`apply_once` on a fresh, cached copy of the scope each time."""
    samples = []
    with tempfile.TemporaryDirectory(dir=base) as directory:
        template = Path(directory) / "template"
        build_store(template, memory)
        for number in range(repeat):
            work = Path(directory) / f"run-{number}"
            shutil.copytree(template, work)
            store = MarkdownStore(work)
            store.load(SCOPE)  # cached, as in a running service
            os.sync()  # the copy's writes must not compete with the measured fsyncs
            started = time.perf_counter()
            applied = apply_once(store, text)
            samples.append(time.perf_counter() - started)
            shape = (len(applied.added), len(applied.confirmed), len(applied.removed))
            assert shape == (5, 2, 1), shape
            assert len(applied.evicted) == 5
            assert applied.commit.changed
            shutil.rmtree(work)
    return statistics.median(samples) * 1000


def count_apply_fsyncs(base: Path, memory: MemoryState, text: str) -> int:
    """fsyncs of one apply + commit (untimed)."""
    with tempfile.TemporaryDirectory(dir=base) as directory:
        root = Path(directory)
        build_store(root, memory)
        store = MarkdownStore(root)
        store.load(SCOPE)
        return count_fsyncs(lambda: apply_once(store, text))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print results as JSON")
    parser.add_argument("--dir", type=Path, default=Path.cwd(), help="file system for the store")
    parser.add_argument("--repeat", type=int, default=40, help="store commits per file system")
    args = parser.parse_args()
    memory, text = library(), answer()
    payload = parse(text)
    response = normalise(payload)
    check = plan_update(
        memory,
        response,
        signals=SIGNALS,
        settings=SETTINGS,
        now=NOW,
        thread_id="thread-9",
        new_id=counter_ids(),
    )
    assert (len(check.new_facts), len(check.confirmed), len(check.pending_removals)) == (5, 2, 1)
    stages: dict[str, Callable[[], object]] = {
        "parse": partial(parse, text),
        "normalise": partial(normalise, payload),
        "plan": partial(plan, memory, response),
        "pure total": partial(total, memory, text),
        "+ capacity": partial(with_capacity, memory, text),
    }
    results = {name: round(median_ms(run, max_repeats=5000), 4) for name, run in stages.items()}
    bases = {"disk": args.dir}
    if Path("/dev/shm").is_dir():
        bases["tmpfs"] = Path("/dev/shm")
    for name, base in bases.items():
        results[f"apply + commit ({name})"] = round(
            time_apply_through_store(base, memory, text, args.repeat), 4
        )
    fsyncs = count_apply_fsyncs(args.dir, memory, text)
    if args.json:
        info = {"machine": platform.platform(), "load": os.getloadavg()[0]}
        dump = {**info, "median_ms": results, "apply_fsyncs": fsyncs}
        print(json.dumps(dump, indent=2))
        return
    print(f"load average {os.getloadavg()[0]:.2f}")
    print(f"{'stage':<24} {'median ms':>10}")
    for name, value in results.items():
        print(f"{name:<24} {value:>10.4f}")
    print(f"apply + commit: {fsyncs} fsyncs")


if __name__ == "__main__":
    main()
