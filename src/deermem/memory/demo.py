"""The seed's two situations, run through a real :class:`Memory` on a real store.

For each situation (:mod:`deermem.scenarios`) and each mode — ``confidence``,
``hybrid-v1`` and shadow mode (``confidence`` deciding, ``hybrid-v1``
recorded beside it) — the library is imported into its own agent through the
capacity gate, which evicts one fact with a receipt into the archive. Then,
in the ``confidence`` agent, the policy is switched to ``hybrid-v1`` and the
fact the user cared about is restored from the archive: it comes back, and
the gate picks another fact to make room.

The clock and every id are fixed, so a run gives the same result every time.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Final

from deermem.config import MemoryConfig
from deermem.memory.facade import Memory
from deermem.memory.results import Explanation, RestoreResult
from deermem.model import Fact
from deermem.policy import POLICY_CONFIDENCE, POLICY_HYBRID_V1
from deermem.scenarios import Scenario, seed_scenarios
from deermem.store import EvictionReceipt

__all__ = ["DEMO_USER", "MODES", "ModeRun", "ScenarioRun", "run_demo"]

DEMO_USER: Final = "demo"
MODE_SHADOW: Final = "shadow"
MODES: Final = (POLICY_CONFIDENCE, POLICY_HYBRID_V1, MODE_SHADOW)


@dataclass(frozen=True, slots=True)
class ModeRun:
    """One situation under one mode.

    Attributes:
        mode: ``confidence``, ``hybrid-v1`` or ``shadow``.
        agent: the agent bucket it ran in (``<situation>-<mode>``).
        kept: the library after the import, oldest first.
        evicted: ids the gate evicted.
        receipts: the receipts written.
    """

    mode: str
    agent: str
    kept: tuple[Fact, ...]
    evicted: tuple[str, ...]
    receipts: tuple[EvictionReceipt, ...]


@dataclass(frozen=True, slots=True)
class ScenarioRun:
    """One situation under every mode, ``why`` for its lost fact, and the restore.

    Attributes:
        hybrid_scores: each fact's ``hybrid-v1`` score in the ``hybrid-v1``
            agent (kept facts from ``why``, the evicted one from its receipt).
        why: ``why`` for the precious fact in the ``confidence`` agent.
        restore: restoring it there after switching the agent to ``hybrid-v1``.
    """

    scenario: Scenario
    modes: dict[str, ModeRun]
    hybrid_scores: dict[str, float]
    why: Explanation
    restore: RestoreResult

    def precious_kept(self, mode: str) -> bool:
        return self.scenario.precious_id in {fact.id for fact in self.modes[mode].kept}


def run_demo(root: Path, now: datetime) -> list[ScenarioRun]:
    """Run both situations in ``root`` (which should be empty) at the clock ``now``."""
    return [_run_scenario(root, scenario, now) for scenario in seed_scenarios(now)]


def _config(scenario: Scenario, mode: str) -> MemoryConfig:
    return MemoryConfig(
        max_facts=scenario.max_facts,
        fact_eviction_policy=POLICY_CONFIDENCE if mode == MODE_SHADOW else mode,
        fact_eviction_shadow_enabled=mode == MODE_SHADOW,
    )


def _memory(root: Path, scenario: Scenario, mode: str, now: datetime) -> Memory:
    return Memory.open(
        root,
        _config(scenario, mode),
        user=DEMO_USER,
        agent=f"{scenario.name}-{mode}",
        clock=lambda: now,
        id_factory=_no_new_ids,
    )


def _run_scenario(root: Path, scenario: Scenario, now: datetime) -> ScenarioRun:
    modes: dict[str, ModeRun] = {}
    for mode in MODES:
        memory = _memory(root, scenario, mode, now)
        result = memory.import_document({"facts": [dict(fact) for fact in scenario.facts]})
        modes[mode] = ModeRun(
            mode=mode,
            agent=memory.scope.agent,
            kept=memory.list_facts(),
            evicted=result.evicted,
            receipts=result.receipts,
        )
    scores = _hybrid_scores(_memory(root, scenario, POLICY_HYBRID_V1, now))
    confidence = _memory(root, scenario, POLICY_CONFIDENCE, now)
    why = confidence.why(scenario.precious_id)
    # The user reads the receipt, switches the agent to hybrid-v1 and restores the fact.
    switched = _memory(root, scenario, POLICY_HYBRID_V1, now).scoped(
        user=DEMO_USER, agent=confidence.scope.agent
    )
    restore = switched.restore(scenario.precious_id)
    return ScenarioRun(scenario, modes, scores, why, restore)


def _hybrid_scores(memory: Memory) -> dict[str, float]:
    scores: dict[str, float] = {}
    for fact in memory.list_facts():
        standing = memory.why(fact.id).standing
        if standing is not None:
            scores[fact.id] = standing.score
    for receipt in memory.audit():
        for line in receipt.evicted:
            if line.score is not None:
                scores[line.fact_id] = line.score
    return scores


def _no_new_ids() -> str:
    raise AssertionError("the demo's facts all carry ids")
