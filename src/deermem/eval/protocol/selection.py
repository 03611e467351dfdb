"""Which dataset questions a protocol uses: the 40 official cases and the distractor bank.

Both are recomputed from the dataset on every run instead of being trusted
from a file. The official selection (reference ``eval-harness-spec.md`` §3.2)
must reproduce the manifest's pinned ids exactly, order included; the bank
(§3.3) is the first 40 single-session records, by id, whose evidence has a
usable length.
"""

from __future__ import annotations

from typing import NamedTuple

from deermem.eval.errors import DatasetIntegrityError, ProtocolError
from deermem.eval.protocol.config import PoolSettings
from deermem.eval.protocol.dataset import Dataset, EvidenceRecord
from deermem.eval.protocol.manifests import OfficialManifest, SelectionRule

__all__ = [
    "BankEntry",
    "build_distractor_bank",
    "check_official_selection",
    "expected_scenarios",
    "select_by_type",
]


class BankEntry(NamedTuple):
    """A distractor source: its evidence record, at its position in the bank."""

    position: int
    record: EvidenceRecord


def select_by_type(dataset: Dataset, rule: SelectionRule) -> dict[str, tuple[str, ...]]:
    """Apply the selection rule: per eligible type, the first ids in id order.

    A row qualifies when its type is eligible; its id is neither a pilot id
    nor an abstention (``_abs``) id; its stripped answer has an allowed
    length and none of the excluded phrases (compared lower-cased); and its
    rendered evidence has an allowed length.

    Raises:
        DatasetIntegrityError: a type has fewer qualifying rows than the rule
            takes, or a candidate row is malformed.
    """
    eligible = set(rule.eligible_question_types)
    pilots = set(rule.excluded_pilot_ids)
    phrases = [phrase.lower() for phrase in rule.answer_excluded_substrings]
    found: dict[str, list[str]] = {name: [] for name in rule.eligible_question_types}
    for row in dataset.rows:
        question_type = row.get("question_type")
        question_id = row["question_id"]
        if not isinstance(question_type, str) or question_type not in eligible:
            continue
        if question_id in pilots or question_id.endswith(rule.exclude_abstention_suffix):
            continue
        record = dataset.evidence(question_id)
        answer = record.answer.strip()
        if not rule.answer_min_chars <= len(answer) <= rule.answer_max_chars:
            continue
        lowered = answer.lower()
        if any(phrase in lowered for phrase in phrases):
            continue
        if not rule.evidence_min_chars <= len(record.content) <= rule.evidence_max_chars:
            continue
        found[record.question_type].append(question_id)
    selected: dict[str, tuple[str, ...]] = {}
    for name, ids in found.items():
        if len(ids) < rule.take_per_question_type:
            raise DatasetIntegrityError(
                dataset.path,
                f"only {len(ids)} {name!r} questions pass the selection rule; "
                f"the protocol takes {rule.take_per_question_type}",
            )
        selected[name] = tuple(sorted(ids)[: rule.take_per_question_type])
    return selected


def expected_scenarios(
    manifest: OfficialManifest, by_type: dict[str, tuple[str, ...]]
) -> dict[str, tuple[str, ...]]:
    """Deal the selected ids to the scenarios: scenario i gets slice i of each type."""
    size = manifest.selection.cases_per_type_per_scenario
    return {
        scenario: tuple(
            qid
            for question_type in manifest.selection.eligible_question_types
            for qid in by_type[question_type][index * size : (index + 1) * size]
        )
        for index, scenario in enumerate(manifest.scenario_order)
    }


def check_official_selection(dataset: Dataset, manifest: OfficialManifest, *, file: str) -> None:
    """Recompute the selection and require the manifest to pin exactly its result.

    Raises:
        ProtocolError: a scenario's pinned ids differ from the recomputed ones
            (order included); the error names the manifest file and key.
        DatasetIntegrityError: too few qualifying rows, or malformed rows.
    """
    expected = expected_scenarios(manifest, select_by_type(dataset, manifest.selection))
    for scenario in manifest.scenario_order:
        pinned = manifest.scenarios[scenario]
        if pinned != expected[scenario]:
            raise ProtocolError(
                file,
                f"scenarios.{scenario}",
                "does not match the selection rule applied to the dataset: the rule picks "
                f"{list(expected[scenario])}, the manifest pins {list(pinned)}",
            )


def build_distractor_bank(dataset: Dataset, pool: PoolSettings) -> tuple[BankEntry, ...]:
    """The first ``distractor_bank_size`` qualifying single-session records, by id.

    No pilot or abstention exclusion applies here: the bank draws from other
    question types than the official cases.

    Raises:
        DatasetIntegrityError: fewer qualifying records than the bank size.
    """
    types = set(pool.distractor_types)
    qualifying: list[EvidenceRecord] = []
    for row in dataset.rows:
        question_type = row.get("question_type")
        if not isinstance(question_type, str) or question_type not in types:
            continue
        record = dataset.evidence(row["question_id"])
        if (
            pool.distractor_min_evidence_chars
            <= len(record.content)
            <= pool.distractor_max_evidence_chars
        ):
            qualifying.append(record)
    qualifying.sort(key=lambda record: record.question_id)
    if len(qualifying) < pool.distractor_bank_size:
        raise DatasetIntegrityError(
            dataset.path,
            f"only {len(qualifying)} records qualify for the distractor bank; "
            f"the protocol needs {pool.distractor_bank_size}",
        )
    return tuple(
        BankEntry(position, record)
        for position, record in enumerate(qualifying[: pool.distractor_bank_size])
    )
