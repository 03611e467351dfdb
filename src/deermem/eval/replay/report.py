"""The replay's results: one JSON document, a Markdown table, a chart.

:func:`summarize` turns the cells of :mod:`deermem.eval.replay.run` into the
results document (``deermem.replay/1``): per cap and policy the needed-fact
retention at the time of need, the evictions and regret events by kind (and,
beside ``confidence``, what shadow mode said of ``hybrid-v1``); per cap the
paired difference ``hybrid-v1 − confidence`` with its bootstrap interval over
seeds; and how those intervals narrow as seeds — traffic — accumulate. Keys
are sorted and floats written as Python writes them, and nothing about the
run itself (time, paths, machine) goes in, so the same parameters give the
same bytes everywhere.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from deermem.eval.replay import LoadedParams, paired_interval
from deermem.eval.replay.run import POLICIES, CellRun, Counts, cells_of
from deermem.eval.report.png import POLICY_COLOURS, figure_png
from deermem.policy import POLICY_CONFIDENCE, POLICY_HYBRID_V1
from deermem.store.records import REGRET_KINDS

__all__ = ["RESULTS_SCHEMA", "encode_results", "render_chart", "render_markdown", "summarize"]

RESULTS_SCHEMA: Final = "deermem.replay/1"
_TRAFFIC_STEPS: Final = (2, 5, 10, 20, 50, 100)

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def summarize(runs: Sequence[CellRun], loaded: LoadedParams) -> dict[str, Any]:
    """The results document (see the module docstring)."""
    params = loaded.params
    cells = []
    differences = []
    traffic = []
    for cap in params.caps:
        for policy in POLICIES:
            cells.append(_cell(cap, policy, cells_of(runs, policy, cap)))
        first = cells_of(runs, POLICY_CONFIDENCE, cap)
        second = cells_of(runs, POLICY_HYBRID_V1, cap)
        differences.append({"cap": cap, "seeds": len(first), **_differences(first, second, loaded)})
        steps = [n for n in _TRAFFIC_STEPS if n < len(first)] + [len(first)]
        for count in steps:
            head, tail = first[:count], second[:count]
            traffic.append(
                {
                    "cap": cap,
                    "seeds": count,
                    "needs": sum(run.needs for run in head),
                    "evictions": {
                        POLICY_CONFIDENCE: sum(run.active.evictions for run in head),
                        POLICY_HYBRID_V1: sum(run.active.evictions for run in tail),
                    },
                    "regretEvents": {
                        POLICY_CONFIDENCE: sum(sum(run.active.events.values()) for run in head),
                        POLICY_HYBRID_V1: sum(sum(run.active.events.values()) for run in tail),
                    },
                    **_differences(head, tail, loaded),
                }
            )
    return {
        "schema": RESULTS_SCHEMA,
        "params": params.to_dict(),
        "paramsSha256": loaded.sha256,
        "cells": cells,
        "differences": differences,
        "traffic": traffic,
        "perSeed": [_per_seed(run) for run in sorted(runs, key=_order)],
    }


def encode_results(results: dict[str, Any]) -> bytes:
    """The results document as bytes: sorted keys, two-space indent, a final newline."""
    return (json.dumps(results, indent=2, sort_keys=True, allow_nan=False) + "\n").encode()


def render_markdown(results: dict[str, Any]) -> str:
    """The tables docs/regret.md shows."""
    lines = [
        "| cap | policy | retained at need | evicted | regret rate | relearned | restored | "
        "missed recall | confirmed | recalled | corrected |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for cell in results["cells"]:
        lines.append(_row(cell["cap"], cell["policy"], cell, cell["retained"], cell["needs"]))
        shadow = cell["shadow"]
        if shadow is not None:
            label = f"{POLICY_HYBRID_V1} (shadow)"
            lines.append(_row(cell["cap"], label, shadow, None, None))
    lines += [
        "",
        "| cap | retention, hybrid-v1 − confidence | regret rate, hybrid-v1 − confidence |",
        "|---:|---|---|",
    ]
    for row in results["differences"]:
        lines.append(
            f"| {row['cap']} | {_interval(row['retention'])} | {_interval(row['regretRate'])} |"
        )
    lines += [
        "",
        "| cap | seeds | needs | regret events (confidence / hybrid-v1) | "
        "retention difference | regret-rate difference |",
        "|---:|---:|---:|---|---|---|",
    ]
    for row in results["traffic"]:
        events = row["regretEvents"]
        lines.append(
            f"| {row['cap']} | {row['seeds']} | {row['needs']} | "
            f"{events[POLICY_CONFIDENCE]} / {events[POLICY_HYBRID_V1]} | "
            f"{_interval(row['retention'])} | {_interval(row['regretRate'])} |"
        )
    return "\n".join(lines) + "\n"


def render_chart(results: dict[str, Any]) -> bytes:
    """Two panels by cap, one line per policy: retention at need, and regret rate.

    Raises:
        ModuleNotFoundError: matplotlib (the ``eval`` extra) is not installed.
    """
    caps = [int(cap) for cap in results["params"]["caps"]]

    def draw(figure: Figure) -> None:
        retention, regret = figure.subplots(1, 2)
        for policy in POLICIES:
            cells = [c for c in results["cells"] if c["policy"] == policy]
            colour = POLICY_COLOURS[policy]
            retention.plot(caps, [c["retention"] for c in cells], "o-", color=colour, label=policy)
            regret.plot(caps, [c["regretRate"] for c in cells], "o-", color=colour, label=policy)
            shadows = [c["shadow"]["regretRate"] for c in cells if c["shadow"] is not None]
            if len(shadows) == len(caps):
                label = f"{POLICY_HYBRID_V1} (shadow)"
                regret.plot(
                    caps, shadows, "o--", color=POLICY_COLOURS[POLICY_HYBRID_V1], label=label
                )
        retention.set_title("needed facts in the library when needed", fontsize="medium")
        retention.set_ylim(0.0, 1.0)
        regret.set_title("regretted evictions / evictions", fontsize="medium")
        regret.set_ylim(bottom=0.0)
        for axis in (retention, regret):
            axis.set_xlabel("cap (facts)")
            axis.set_xticks(caps)
            axis.legend(loc="best", fontsize="small")
        seeds = results["params"]["seeds"]
        figure.suptitle(
            f"Replay: {seeds} seeded workloads (params {results['paramsSha256'][:12]})",
            fontsize="medium",
        )

    return figure_png(8.0, 3.6, draw)


def _cell(cap: int, policy: str, runs: Sequence[CellRun]) -> dict[str, Any]:
    needs = sum(run.needs for run in runs)
    retained = sum(run.retained for run in runs)
    active = _total(run.active for run in runs)
    shadows = [run.shadow for run in runs if run.shadow is not None]
    return {
        "cap": cap,
        "policy": policy,
        "seeds": len(runs),
        "needs": needs,
        "retained": retained,
        "retention": retained / needs if needs else None,
        **active.to_dict(),
        "shadow": None
        if not shadows
        else {"policy": POLICY_HYBRID_V1, **_total(shadows).to_dict()},
    }


def _total(counts: Any) -> Counts:
    total = Counts()
    for item in counts:
        total = Counts(
            total.evictions + item.evictions,
            total.regretted + item.regretted,
            {kind: total.events[kind] + item.events[kind] for kind in REGRET_KINDS},
        )
    return total


def _differences(
    first: Sequence[CellRun], second: Sequence[CellRun], loaded: LoadedParams
) -> dict[str, Any]:
    boot = loaded.params.bootstrap

    def interval(values: Sequence[float], others: Sequence[float]) -> dict[str, float]:
        return paired_interval(
            values, others, iterations=boot.iterations, confidence=boot.confidence, seed=boot.seed
        ).to_dict()

    return {
        "retention": interval([_retention(r) for r in first], [_retention(r) for r in second]),
        "regretRate": interval([_rate(r) for r in first], [_rate(r) for r in second]),
    }


def _retention(run: CellRun) -> float:
    return run.retention if run.retention is not None else 0.0


def _rate(run: CellRun) -> float:
    """The seed's regret rate; 0 when nothing was evicted (nothing to regret)."""
    return run.active.rate if run.active.rate is not None else 0.0


def _per_seed(run: CellRun) -> dict[str, Any]:
    return {
        "seed": run.seed,
        "cap": run.cap,
        "policy": run.policy,
        "needs": run.needs,
        "retained": run.retained,
        **run.active.to_dict(),
        "shadow": None if run.shadow is None else run.shadow.to_dict(),
    }


def _order(run: CellRun) -> tuple[int, int, int]:
    return run.cap, POLICIES.index(run.policy), run.seed


def _row(cap: int, label: str, counts: dict[str, Any], retained: Any, needs: Any) -> str:
    events = counts["events"]
    rate = counts["regretRate"]
    kept = "" if needs is None else f"{retained}/{needs} ({retained / needs:.1%})"
    return (
        f"| {cap} | {label} | {kept} | {counts['evictions']} | "
        f"{'-' if rate is None else f'{rate:.1%}'} | "
        + " | ".join(str(events[kind]) for kind in REGRET_KINDS)
        + " |"
    )


def _interval(value: dict[str, float]) -> str:
    return f"{value['mean']:+.3f} [{value['low']:+.3f}, {value['high']:+.3f}]"
