"""The deterministic policy run: every case, at every cap, under both policies.

``run-policy`` puts each case's pool through the production capacity gate,
:func:`deermem.policy.select_facts_for_capacity` — never a copy of its scoring
— at every protocol capacity under ``confidence`` and ``hybrid-v1``, and
records whether the support fact survived. No network, no model, no wall
clock in any decision: the same protocol and dataset give the same rows,
byte for byte.

Outputs (reference ``eval-harness-spec.md`` §4.1) carry identifiers, scores
and flags only — no question, answer or fact text:

* ``policy.raw.jsonl`` — one row per (case, capacity, policy), 270 in all;
* ``summary.json`` — retention per (source, scenario, capacity, policy);
* ``run.json`` — provenance: protocol, dataset pin, file hashes, git state.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Final, NamedTuple

from deermem.eval.protocol.bundle import POLICY_ORDER, Protocol
from deermem.eval.protocol.cases import EvaluationCase
from deermem.eval.provenance import git_state
from deermem.eval.result_files import (
    document_text,
    ensure_absent,
    jsonl_line,
    utc_timestamp,
    write_new_files,
)
from deermem.policy import (
    POLICY_HYBRID_V1,
    CapacityDecision,
    CapacityPolicy,
    select_facts_for_capacity,
)

__all__ = [
    "POLICY_ROWS_FILE",
    "RUN_FILE",
    "SCHEMA_VERSION",
    "SUMMARY_FILE",
    "PolicyOutcome",
    "decide",
    "policy_output_paths",
    "policy_row",
    "policy_summary",
    "run_policy",
    "run_record",
    "write_policy_run",
]

SCHEMA_VERSION: Final = 1
POLICY_ROWS_FILE: Final = "policy.raw.jsonl"
SUMMARY_FILE: Final = "summary.json"
RUN_FILE: Final = "run.json"

Decision = CapacityDecision[Mapping[str, object]]


class PolicyOutcome(NamedTuple):
    """One selector decision for one case at one capacity under one policy.

    Attributes:
        kept_fact_ids: the kept facts' ids, in rank order.
        support_retained: how many of the case's support facts were kept.
    """

    case: EvaluationCase
    policy: str
    capacity: int
    decision: Decision
    kept_fact_ids: tuple[str, ...]
    support_retained: int

    @classmethod
    def of(
        cls, case: EvaluationCase, policy: str, capacity: int, decision: Decision
    ) -> PolicyOutcome:
        kept = decision.kept_ids
        retained = sum(1 for fact_id in case.support_fact_ids if fact_id in kept)
        return cls(case, policy, capacity, decision, kept, retained)

    @property
    def support_all_retained(self) -> bool:
        return self.support_retained == len(self.case.support_fact_ids)

    @property
    def support_recall(self) -> float:
        return self.support_retained / len(self.case.support_fact_ids)


def decide(protocol: Protocol, case: EvaluationCase, policy: str, capacity: int) -> Decision:
    """Run the production selector on a case's pool, as the protocol prescribes.

    The facts go in sorted by id, with the case's usage sidecar and the
    protocol's clock; ``hybrid-v1`` also gets the config's parameters, while
    ``confidence`` gets none (the selector's defaults), as in the original.
    """
    clock = protocol.config.evaluation_time
    if policy != POLICY_HYBRID_V1:
        return select_facts_for_capacity(
            case.facts, max_facts=capacity, policy=policy, usage=case.usage, now=clock
        )
    hybrid = protocol.config.hybrid
    parameters = CapacityPolicy(
        name=policy,
        confidence_weight=hybrid.confidence_weight,
        confirmation_weight=hybrid.confirmation_weight,
        access_weight=hybrid.access_weight,
        confirmation_half_life_days=hybrid.confirmation_half_life_days,
        access_half_life_days=hybrid.access_half_life_days,
        correction_reserved_fraction=hybrid.correction_reserved_fraction,
        correction_reserved_max=hybrid.correction_reserved_max,
    )
    return select_facts_for_capacity(
        case.facts, max_facts=capacity, policy=parameters, usage=case.usage, now=clock
    )


def run_policy(protocol: Protocol, cases: Sequence[EvaluationCase]) -> tuple[PolicyOutcome, ...]:
    """Every decision of the run, in row order: case → capacity → policy."""
    return tuple(
        PolicyOutcome.of(case, policy, capacity, decide(protocol, case, policy, capacity))
        for case in cases
        for capacity in protocol.config.pool.capacities
        for policy in POLICY_ORDER
    )


def policy_row(outcome: PolicyOutcome) -> dict[str, object]:
    """The published row of one decision: identifiers, scores and flags only."""
    decision = outcome.decision
    case = outcome.case
    return {
        "schema_version": SCHEMA_VERSION,
        "case_id": case.case_id,
        "source": case.source,
        "scenario": case.scenario,
        "question_type": case.question_type,
        "policy": outcome.policy,
        "capacity": outcome.capacity,
        "support_fact_ids": list(case.support_fact_ids),
        "kept_fact_ids": list(outcome.kept_fact_ids),
        "evicted": [
            {
                "category": item.category,
                "components": dict(item.components),
                "fact_id": item.fact_id,
                "score": item.score,
            }
            for item in decision.evicted
        ],
        "scores": {
            fact_id: {"components": dict(score.components), "value": score.score}
            for fact_id, score in sorted(decision.scores.items())
        },
        "support_all_retained": outcome.support_all_retained,
        "support_recall": outcome.support_recall,
        "reserved_correction_slots": decision.reserved_correction_slots,
    }


def policy_summary(protocol_id: str, outcomes: Iterable[PolicyOutcome]) -> dict[str, object]:
    """Retention per (source, scenario, capacity, policy), groups sorted by that key."""
    groups: dict[tuple[str, str, int, str], list[PolicyOutcome]] = {}
    for outcome in outcomes:
        key = (outcome.case.source, outcome.case.scenario, outcome.capacity, outcome.policy)
        groups.setdefault(key, []).append(outcome)
    rows = []
    for (source, scenario, capacity, policy), members in sorted(groups.items()):
        retained = sum(1 for member in members if member.support_all_retained)
        rows.append(
            {
                "source": source,
                "scenario": scenario,
                "capacity": capacity,
                "policy": policy,
                "cases": len(members),
                "support_all_retained": retained,
                "support_all_retained_rate": retained / len(members),
                "mean_support_recall": math.fsum(m.support_recall for m in members) / len(members),
            }
        )
    return {"schema_version": SCHEMA_VERSION, "protocol_id": protocol_id, "groups": rows}


def run_record(
    protocol: Protocol,
    dataset_sha256: str,
    *,
    created_at: datetime | None = None,
    git: Mapping[str, object] | None = None,
) -> dict[str, object]:
    """The run's provenance record (``run.json``)."""
    pin = protocol.config.dataset
    return {
        "schema_version": SCHEMA_VERSION,
        "protocol_id": protocol.protocol_id,
        "created_at": utc_timestamp(created_at),
        "git": dict(git) if git is not None else None,
        "dataset": pin.provenance(dataset_sha256),
        "artifacts": protocol.artifacts.to_dict(),
        "evaluation_time": protocol.config.evaluation_time.isoformat(),
        "policies": list(POLICY_ORDER),
        "capacities": list(protocol.config.pool.capacities),
    }


def policy_output_paths(directory: Path) -> tuple[Path, Path, Path]:
    """The three files of a policy run, in write order."""
    return (directory / POLICY_ROWS_FILE, directory / SUMMARY_FILE, directory / RUN_FILE)


def write_policy_run(
    directory: Path,
    protocol: Protocol,
    dataset_sha256: str,
    outcomes: Sequence[PolicyOutcome],
    *,
    created_at: datetime | None = None,
) -> tuple[Path, Path, Path]:
    """Write the three result files atomically; refuse if any already exists.

    The git state recorded is that of the checkout deermem runs from
    (``null`` when it is not run from a git checkout).

    Raises:
        ResultsExistError: any of the three files exists.
    """
    paths = policy_output_paths(directory)
    ensure_absent(paths)
    rows = "".join(jsonl_line(policy_row(outcome)) for outcome in outcomes)
    summary = document_text(policy_summary(protocol.protocol_id, outcomes))
    record = document_text(
        run_record(protocol, dataset_sha256, created_at=created_at, git=git_state())
    )
    write_new_files(
        [(path, text.encode()) for path, text in zip(paths, (rows, summary, record), strict=True)]
    )
    return paths
