"""Benchmark: reading a conversation — parse, filter, drop trivial turns, detect signals.

Run with ``uv run python -m bench.bench_signals`` (add ``--json`` for a
machine-readable dump). A conversation of N turns (a human message and an
assistant reply each, in the OpenAI chat format, with a tool call, an upload
block and acknowledgements mixed in) goes through ``parse_messages``,
``prepare_conversation`` (filter, trivial filter, detection) and, separately,
``detect_signals`` alone. Also timed: loading the bundled pattern files from
disk (what a process pays once) and a user directory that extends one file.
Each figure is the median of many repetitions after a warm-up.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from deermem.learning import signals as patterns_module
from deermem.learning.messages import parse_messages
from deermem.learning.signals import detect_signals, load_patterns, prepare_conversation

HUMAN_TEXTS = (
    "Can you summarise how uv resolves dependencies compared with pip-tools?",
    "I prefer short answers with code first.",
    "ok",
    "<uploaded_files>/mnt/user-data/uploads/report.pdf</uploaded_files>\nWhat is in it?",
    "That's wrong, try again with uv.",
    "对，就是这样，以后都保持这样。",
    "我是一名后端工程师，我打算年底前迁移到 uv。",
    "let's go with option B",
)
SIZES = (3, 10, 50)


def conversation(turns: int) -> list[dict[str, object]]:
    raw: list[dict[str, object]] = [{"role": "system", "content": "You are helpful."}]
    for index in range(turns):
        raw.append({"role": "user", "content": HUMAN_TEXTS[index % len(HUMAN_TEXTS)]})
        if index % 4 == 1:
            raw.append({"role": "assistant", "content": None, "tool_calls": [{"id": "t"}]})
            raw.append({"role": "tool", "content": "tool output"})
        raw.append({"role": "assistant", "content": f"Here is answer number {index}."})
    return raw


def median_us(run: Callable[[], object], budget_s: float = 1.0) -> float:
    for _ in range(20):
        run()
    samples: list[float] = []
    deadline = time.perf_counter() + budget_s
    while time.perf_counter() < deadline or len(samples) < 30:
        start = time.perf_counter()
        run()
        samples.append((time.perf_counter() - start) * 1e6)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print results as JSON")
    args = parser.parse_args()
    patterns = load_patterns()
    results: list[dict[str, object]] = []
    for turns in SIZES:
        raw = conversation(turns)
        messages = parse_messages(raw)
        prepared = prepare_conversation(messages, patterns)
        kept = list(prepared.messages) if prepared else []
        results.append(
            {
                "turns": turns,
                "messages": len(raw),
                "parse_us": round(median_us(partial(parse_messages, raw)), 1),
                "prepare_us": round(
                    median_us(partial(prepare_conversation, messages, patterns)), 1
                ),
                "detect_us": round(median_us(partial(detect_signals, kept, patterns)), 1),
            }
        )
    with tempfile.TemporaryDirectory() as directory:
        Path(directory, "reinforcement.yaml").write_text(
            "mode: extend\npatterns:\n  - pattern: '\\blgtm\\b'\n    flags: [ignorecase]\n", "utf-8"
        )
        user_dir_us = median_us(lambda: load_patterns(directory), budget_s=1.0)

    def bundled_from_disk() -> object:
        patterns_module._bundled_patterns.cache_clear()
        return load_patterns()

    loading = {
        "bundled_from_disk_ms": round(median_us(bundled_from_disk, budget_s=1.0) / 1000, 2),
        "user_dir_extend_ms": round(user_dir_us / 1000, 2),
    }
    if args.json:
        summary = {"machine": platform.platform(), "results": results, "loading": loading}
        print(json.dumps(summary, indent=2))
        return
    print(f"{'turns':>5} {'messages':>8} {'parse µs':>9} {'prepare µs':>11} {'detect µs':>10}")
    for row in results:
        print(
            f"{row['turns']:>5} {row['messages']:>8} {row['parse_us']:>9} "
            f"{row['prepare_us']:>11} {row['detect_us']:>10}"
        )
    print(
        f"loading: bundled files from disk {loading['bundled_from_disk_ms']} ms, "
        "a user directory extending one file (bundled set cached) "
        f"{loading['user_dir_extend_ms']} ms"
    )


if __name__ == "__main__":
    main()
