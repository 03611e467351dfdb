"""The 45 evaluation cases: a ten-fact pool per question, with scenario metadata.

Each case puts one *support* fact (the evidence that answers its question)
among nine *distractors* drawn from the bank, and gives every fact the
confidence, timestamps and usage its scenario prescribes (reference
``eval-harness-spec.md`` §3.4). Which facts survive a cap depends on this
metadata only, never on the text, so the retention figures are fixed by the
protocol; the text matters for the QA run.

Two details carry the published results and are kept exactly:

* the metadata numbers are Python float expressions evaluated in the
  original's operation order (``0.94 - 0.02 * i`` is 0.9199999999999999 at
  i = 1), so near-ties break identically;
* facts are sorted by id before selection, and the selector breaks ties by
  input position, so ``d_<case>_<i>_…`` distractors outrank a tied
  ``gold_<case>`` support fact.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Final, NamedTuple

from deermem.eval.errors import ProtocolError
from deermem.eval.protocol.bundle import Protocol
from deermem.eval.protocol.dataset import Dataset, EvidenceRecord
from deermem.eval.protocol.manifests import (
    SCENARIO_ACCESS_HELP,
    SCENARIO_CONFIDENCE_CONTROL,
    SCENARIO_CONFIRMATION_HELP,
    SCENARIO_CORRECTION_RESERVE,
    SCENARIO_NOISY_SIGNAL_CONTROL,
)
from deermem.eval.protocol.selection import (
    BankEntry,
    build_distractor_bank,
    check_official_selection,
)
from deermem.model import format_timestamp

__all__ = [
    "SOURCE_LONGMEMEVAL",
    "SOURCE_SYNTHETIC",
    "SYNTHETIC_QUESTION_TYPE",
    "EvaluationCase",
    "FactMetadata",
    "build_cases",
    "case_offset",
    "distractor_metadata",
    "support_metadata",
]

SOURCE_LONGMEMEVAL: Final = "longmemeval"
SOURCE_SYNTHETIC: Final = "synthetic"
SYNTHETIC_QUESTION_TYPE: Final = "synthetic-correction"
FACT_SOURCE_PREFIX: Final = "deermem-eviction-eval:"
PREFERENCE_SOURCE_TYPE: Final = "single-session-preference"
HEAT: Final = 8  # access heat of a "hot" fact: saturates the heat signal (log1p(8) = log 9)


class FactMetadata(NamedTuple):
    """What a scenario prescribes for one fact of a pool.

    Attributes:
        created_days: days before the evaluation clock the fact was created.
        confirmed_days: days since the user last confirmed it, or ``None``.
        access_heat: usage-sidecar heat, accessed at the clock; 0 = no entry.
        category: a fixed category, or ``None`` to take it from the source's
            question type (``preference`` or ``context``).
    """

    confidence: float
    created_days: int
    confirmed_days: int | None = None
    access_heat: int = 0
    category: str | None = None


class EvaluationCase(NamedTuple):
    """One case: its question and its pool of ten facts, ready for the selector.

    Attributes:
        source: ``longmemeval`` or ``synthetic``.
        offset: where the case's nine distractors start in the bank.
        facts: fact dicts with canonical keys, sorted by id. Treat as read-only.
        usage: the usage sidecar (fact id → entry) for the facts with heat.
        support_fact_ids: the facts that answer the question (``gold_<case>``).
    """

    case_id: str
    source: str
    scenario: str
    question_type: str
    question: str
    answer: str
    question_date: str | None
    loss_rank: int
    offset: int
    facts: tuple[dict[str, object], ...]
    usage: Mapping[str, Mapping[str, object]]
    support_fact_ids: tuple[str, ...]

    @property
    def outranking_count(self) -> int:
        """How many distractors are built to outrank the support fact."""
        return self.loss_rank - 1


def case_offset(namespace: str, case_id: str, bank_size: int) -> int:
    """Where a case's distractors start: the first 4 bytes of SHA-256, big-endian, mod bank size."""
    digest = hashlib.sha256(f"{namespace}:{case_id}".encode()).digest()
    return int.from_bytes(digest[:4], "big") % bank_size


def support_metadata(scenario: str) -> FactMetadata:
    """The support fact's metadata in ``scenario``.

    Raises:
        ValueError: an unregistered scenario.
    """
    if scenario == SCENARIO_CONFIRMATION_HELP:
        return FactMetadata(0.70, created_days=180, confirmed_days=7, category="context")
    if scenario == SCENARIO_ACCESS_HELP:
        return FactMetadata(0.70, created_days=180, access_heat=HEAT, category="context")
    if scenario == SCENARIO_CONFIDENCE_CONTROL:
        return FactMetadata(0.95, created_days=30, category="context")
    if scenario == SCENARIO_NOISY_SIGNAL_CONTROL:
        return FactMetadata(0.90, created_days=180, category="context")
    if scenario == SCENARIO_CORRECTION_RESERVE:
        return FactMetadata(0.65, created_days=180, category="correction")
    raise ValueError(f"unknown evaluation scenario {scenario!r}")


def distractor_metadata(scenario: str, index: int, outranking: int) -> FactMetadata:
    """Distractor ``index``'s metadata; the first ``outranking`` ones are built to win.

    Raises:
        ValueError: an unregistered scenario.
    """
    if scenario in (SCENARIO_CONFIRMATION_HELP, SCENARIO_ACCESS_HELP):
        if index < outranking:
            return FactMetadata(0.94 - 0.02 * index, created_days=180)
        return FactMetadata(0.68 - 0.02 * (index - outranking), created_days=180)
    if scenario == SCENARIO_CONFIDENCE_CONTROL:
        if index < 5:
            return FactMetadata(0.94 - 0.02 * index, created_days=180)
        if index % 2:
            return FactMetadata(0.70, created_days=180, confirmed_days=7)
        return FactMetadata(0.70, created_days=180, access_heat=HEAT)
    if scenario == SCENARIO_NOISY_SIGNAL_CONTROL:
        if index >= outranking:
            return FactMetadata(0.70, created_days=180)
        if index % 2:
            return FactMetadata(0.70, created_days=180, confirmed_days=7)
        return FactMetadata(0.70, created_days=180, access_heat=HEAT)
    if scenario == SCENARIO_CORRECTION_RESERVE:
        if index < outranking:
            return FactMetadata(0.90 - 0.03 * index, created_days=180)
        return FactMetadata(0.60 - 0.02 * (index - outranking), created_days=180)
    raise ValueError(f"unknown evaluation scenario {scenario!r}")


def build_cases(protocol: Protocol, dataset: Dataset) -> tuple[EvaluationCase, ...]:
    """Check the official selection, build the bank and the 45 cases, in build order.

    Official cases come first, scenario by scenario in ``scenario_order``,
    each scenario's ids sorted by (question type, id) and given the loss
    ranks in that order; the synthetic cases follow in manifest order.

    Raises:
        ProtocolError: the manifest disagrees with the recomputed selection, or
            a pool would hold the same source record twice.
        DatasetIntegrityError: the dataset cannot supply the cases or the bank.
    """
    official = protocol.official
    check_official_selection(dataset, official, file=str(protocol.files.official_manifest))
    bank = build_distractor_bank(dataset, protocol.config.pool)
    builder = _PoolBuilder(protocol, bank)
    cases: list[EvaluationCase] = []
    for scenario in official.scenario_order:
        records = sorted(
            (dataset.evidence(qid) for qid in official.scenarios[scenario]),
            key=lambda record: (record.question_type, record.question_id),
        )
        for record, loss_rank in zip(records, official.loss_ranks, strict=True):
            cases.append(
                builder.build(
                    case_id=record.question_id,
                    source=SOURCE_LONGMEMEVAL,
                    scenario=scenario,
                    record=record,
                    loss_rank=loss_rank,
                )
            )
    for synthetic in protocol.synthetic.cases:
        record = EvidenceRecord(
            question_id=synthetic.case_id,
            question_type=SYNTHETIC_QUESTION_TYPE,
            question=synthetic.question,
            answer=synthetic.answer,
            question_date=None,
            content=synthetic.support_fact,
        )
        cases.append(
            builder.build(
                case_id=synthetic.case_id,
                source=SOURCE_SYNTHETIC,
                scenario=protocol.synthetic.scenario,
                record=record,
                loss_rank=synthetic.loss_rank,
            )
        )
    return tuple(cases)


class _PoolBuilder:
    """Builds pools for one protocol and bank: ids, metadata, timestamps, usage."""

    def __init__(self, protocol: Protocol, bank: tuple[BankEntry, ...]) -> None:
        self._protocol = protocol
        self._bank = bank
        self._clock: datetime = protocol.config.evaluation_time
        self._stamps: dict[int, str] = {}

    def build(
        self, *, case_id: str, source: str, scenario: str, record: EvidenceRecord, loss_rank: int
    ) -> EvaluationCase:
        pool = self._protocol.config.pool
        offset = case_offset(pool.offset_namespace, case_id, len(self._bank))
        outranking = loss_rank - 1
        support_id = f"gold_{case_id}"
        members = [(support_id, record, support_metadata(scenario))]
        sources = {record.question_id}
        for index in range(pool.distractors):
            entry = self._bank[(offset + index) % len(self._bank)].record
            if entry.question_id in sources:
                raise ProtocolError(
                    str(self._protocol.files.config),
                    "pool.distractor_types",
                    f"the pool of case {case_id!r} would hold question {entry.question_id!r} twice",
                )
            sources.add(entry.question_id)
            members.append(
                (
                    f"d_{case_id}_{index}_{entry.question_id}",
                    entry,
                    distractor_metadata(scenario, index, outranking),
                )
            )
        members.sort(key=lambda member: member[0])
        now = self._stamp(0)
        usage = {
            fact_id: {
                "accessHeat": meta.access_heat,
                "accessCount": meta.access_heat,
                "lastAccessedAt": now,
            }
            for fact_id, _, meta in members
            if meta.access_heat > 0
        }
        return EvaluationCase(
            case_id=case_id,
            source=source,
            scenario=scenario,
            question_type=record.question_type,
            question=record.question,
            answer=record.answer,
            question_date=record.question_date,
            loss_rank=loss_rank,
            offset=offset,
            facts=tuple(self._fact(*member) for member in members),
            usage=usage,
            support_fact_ids=(support_id,),
        )

    def _fact(
        self, fact_id: str, record: EvidenceRecord, metadata: FactMetadata
    ) -> dict[str, object]:
        category = metadata.category or (
            "preference" if record.question_type == PREFERENCE_SOURCE_TYPE else "context"
        )
        fact: dict[str, object] = {
            "id": fact_id,
            "content": record.content,
            "category": category,
            "confidence": metadata.confidence,
            "createdAt": self._stamp(metadata.created_days),
            "source": f"{FACT_SOURCE_PREFIX}{record.question_id}",
        }
        if metadata.confirmed_days is not None:
            fact["lastConfirmedAt"] = self._stamp(metadata.confirmed_days)
            fact["confirmationCount"] = 1
        return fact

    def _stamp(self, days: int) -> str:
        stamp = self._stamps.get(days)
        if stamp is None:
            stamp = self._stamps[days] = format_timestamp(self._clock - timedelta(days=days))
        return stamp
