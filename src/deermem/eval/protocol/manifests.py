"""The two case manifests: 40 pinned LongMemEval questions, 5 synthetic corrections.

The official manifest holds only identifiers and the selection rule that
picked them, never dataset text; the rule is recomputed against the dataset
on every run (:mod:`deermem.eval.protocol.selection`), so a manifest cannot
silently drift from the file it claims to describe. The synthetic manifest
holds the five correction cases in full, since they are ours.

Schemas follow reference ``eval-harness-spec.md`` §2.2–§2.3 key for key, so
the original project's manifests load unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final, NamedTuple

from deermem.eval.errors import ProtocolError
from deermem.eval.protocol._checks import Section, describe

__all__ = [
    "CASE_ID_PATTERN",
    "ELIGIBLE_QUESTION_TYPES",
    "OFFICIAL_SCENARIOS",
    "SCENARIO_ACCESS_HELP",
    "SCENARIO_CONFIDENCE_CONTROL",
    "SCENARIO_CONFIRMATION_HELP",
    "SCENARIO_CORRECTION_RESERVE",
    "SCENARIO_NOISY_SIGNAL_CONTROL",
    "OfficialManifest",
    "SelectionRule",
    "SyntheticCase",
    "SyntheticManifest",
    "parse_official_manifest",
    "parse_synthetic_manifest",
]

SCENARIO_CONFIRMATION_HELP: Final = "confirmation_help"
SCENARIO_ACCESS_HELP: Final = "access_help"
SCENARIO_CONFIDENCE_CONTROL: Final = "confidence_control"
SCENARIO_NOISY_SIGNAL_CONTROL: Final = "noisy_signal_control"
SCENARIO_CORRECTION_RESERVE: Final = "correction_reserve"
# The registered official scenarios (each has its metadata rule in cases.py).
OFFICIAL_SCENARIOS: Final = (
    SCENARIO_CONFIRMATION_HELP,
    SCENARIO_ACCESS_HELP,
    SCENARIO_CONFIDENCE_CONTROL,
    SCENARIO_NOISY_SIGNAL_CONTROL,
)
ELIGIBLE_QUESTION_TYPES: Final = ("knowledge-update", "temporal-reasoning")
# Case ids become parts of fact ids and, later, of file names: keep them plain.
CASE_ID_PATTERN: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
CASES_PER_SCENARIO: Final = 10
SYNTHETIC_CASES: Final = 5
MAX_LOSS_RANK: Final = 10


class SelectionRule(NamedTuple):
    """How the 40 official questions are picked from the dataset (§3.2)."""

    eligible_question_types: tuple[str, ...]
    excluded_pilot_ids: tuple[str, ...]
    exclude_abstention_suffix: str
    answer_min_chars: int
    answer_max_chars: int
    answer_excluded_substrings: tuple[str, ...]
    evidence_min_chars: int
    evidence_max_chars: int
    take_per_question_type: int
    cases_per_type_per_scenario: int


class OfficialManifest(NamedTuple):
    """The pinned LongMemEval questions, grouped by scenario.

    Attributes:
        scenario_order: the order cases are built and reported in.
        loss_ranks: the support fact's rank among the ten facts of a pool, by
            position within a scenario (after sorting its ids by type, id).
        scenarios: scenario → its ten question ids, as pinned.
    """

    schema_version: int
    protocol_id: str
    selection: SelectionRule
    scenario_order: tuple[str, ...]
    loss_ranks: tuple[int, ...]
    scenarios: Mapping[str, tuple[str, ...]]

    @property
    def question_ids(self) -> tuple[str, ...]:
        """Every pinned id, scenario by scenario in ``scenario_order``."""
        return tuple(qid for name in self.scenario_order for qid in self.scenarios[name])


class SyntheticCase(NamedTuple):
    """One correction case: the support fact, the question, the expected answer."""

    case_id: str
    support_fact: str
    question: str
    answer: str
    loss_rank: int


class SyntheticManifest(NamedTuple):
    """The five correction cases of the ``correction_reserve`` scenario."""

    schema_version: int
    protocol_id: str
    scenario: str
    cases: tuple[SyntheticCase, ...]


_SELECTION_KEYS: Final = (
    "eligible_question_types",
    "excluded_pilot_ids",
    "exclude_abstention_suffix",
    "answer_min_chars",
    "answer_max_chars",
    "answer_excluded_substrings",
    "evidence_min_chars",
    "evidence_max_chars",
    "take_per_question_type",
    "cases_per_type_per_scenario",
)


def parse_official_manifest(data: object, *, file: str) -> OfficialManifest:
    """Validate a loaded official manifest.

    Raises:
        ProtocolError: the first problem found, naming ``file`` and the key.
    """
    top = Section(
        data,
        file=file,
        key=None,
        fields=(
            "schema_version",
            "protocol_id",
            "selection",
            "scenario_order",
            "loss_ranks",
            "scenarios",
        ),
    )
    top.literal("schema_version", 1)
    order = top.text_list("scenario_order")
    if sorted(order) != sorted(OFFICIAL_SCENARIOS):
        raise top.error(
            "scenario_order",
            f"must list each registered scenario exactly once ({', '.join(OFFICIAL_SCENARIOS)}),"
            f" got {list(order)}",
        )
    loss_ranks = top.integer_list("loss_ranks", minimum=1, maximum=MAX_LOSS_RANK, unique=False)
    if len(loss_ranks) != CASES_PER_SCENARIO:
        raise top.error(
            "loss_ranks",
            f"must hold {CASES_PER_SCENARIO} values (one per case of a scenario), "
            f"got {len(loss_ranks)}",
        )
    selection = _selection(top.section("selection", _SELECTION_KEYS))
    _check_grouping(top, selection)
    return OfficialManifest(
        schema_version=1,
        protocol_id=top.text("protocol_id"),
        selection=selection,
        scenario_order=order,
        loss_ranks=loss_ranks,
        scenarios=_scenarios(top),
    )


def _check_grouping(top: Section, rule: SelectionRule) -> None:
    """The rule must pick exactly what the scenarios hold: 4 × 5 per type, 2 × 5 per scenario."""
    wanted = len(OFFICIAL_SCENARIOS) * rule.cases_per_type_per_scenario
    if rule.take_per_question_type != wanted:
        raise top.error(
            "selection.take_per_question_type",
            f"must equal {len(OFFICIAL_SCENARIOS)} scenarios x cases_per_type_per_scenario "
            f"{rule.cases_per_type_per_scenario} = {wanted}, got {rule.take_per_question_type}",
        )
    per_scenario = len(rule.eligible_question_types) * rule.cases_per_type_per_scenario
    if per_scenario != CASES_PER_SCENARIO:
        raise top.error(
            "selection.cases_per_type_per_scenario",
            f"{len(rule.eligible_question_types)} question types x "
            f"{rule.cases_per_type_per_scenario} cases must give the {CASES_PER_SCENARIO} "
            f"cases of a scenario, got {per_scenario}",
        )


def _selection(section: Section) -> SelectionRule:
    types = section.text_list("eligible_question_types")
    for position, name in enumerate(types):
        if name not in ELIGIBLE_QUESTION_TYPES:
            raise ProtocolError(
                section.file,
                f"{section.path('eligible_question_types')}[{position}]",
                f"must be one of {', '.join(ELIGIBLE_QUESTION_TYPES)}, got {describe(name)}",
            )
    answer_min = section.integer("answer_min_chars", minimum=0)
    answer_max = section.integer("answer_max_chars", minimum=answer_min)
    evidence_min = section.integer("evidence_min_chars", minimum=0)
    evidence_max = section.integer("evidence_max_chars", minimum=evidence_min)
    return SelectionRule(
        eligible_question_types=types,
        excluded_pilot_ids=section.text_list("excluded_pilot_ids", non_empty=False),
        exclude_abstention_suffix=section.text("exclude_abstention_suffix"),
        answer_min_chars=answer_min,
        answer_max_chars=answer_max,
        answer_excluded_substrings=section.text_list("answer_excluded_substrings", non_empty=False),
        evidence_min_chars=evidence_min,
        evidence_max_chars=evidence_max,
        take_per_question_type=section.integer("take_per_question_type", minimum=1),
        cases_per_type_per_scenario=section.integer("cases_per_type_per_scenario", minimum=1),
    )


def _scenarios(top: Section) -> dict[str, tuple[str, ...]]:
    section = top.section("scenarios", OFFICIAL_SCENARIOS)
    scenarios: dict[str, tuple[str, ...]] = {}
    seen: dict[str, str] = {}
    for name in OFFICIAL_SCENARIOS:
        ids = section.text_list(name)
        if len(ids) != CASES_PER_SCENARIO:
            raise section.error(
                name, f"must hold {CASES_PER_SCENARIO} question ids, got {len(ids)}"
            )
        for position, qid in enumerate(ids):
            key = f"{section.path(name)}[{position}]"
            if not CASE_ID_PATTERN.fullmatch(qid):
                raise ProtocolError(top.file, key, f"is not a plain identifier: {describe(qid)}")
            if qid in seen:
                raise ProtocolError(
                    top.file, key, f"question id {qid!r} is already pinned under {seen[qid]!r}"
                )
            seen[qid] = name
        scenarios[name] = ids
    return scenarios


def parse_synthetic_manifest(data: object, *, file: str) -> SyntheticManifest:
    """Validate a loaded synthetic manifest.

    Raises:
        ProtocolError: the first problem found, naming ``file`` and the key.
    """
    top = Section(
        data, file=file, key=None, fields=("schema_version", "protocol_id", "scenario", "cases")
    )
    top.literal("schema_version", 1)
    top.literal("scenario", SCENARIO_CORRECTION_RESERVE)
    raw_cases = top.raw("cases")
    if not isinstance(raw_cases, list) or len(raw_cases) != SYNTHETIC_CASES:
        count = len(raw_cases) if isinstance(raw_cases, list) else describe(raw_cases)
        raise top.error("cases", f"must be a list of {SYNTHETIC_CASES} cases, got {count}")
    cases: list[SyntheticCase] = []
    for position, raw in enumerate(raw_cases):
        case = Section(
            raw,
            file=file,
            key=f"cases[{position}]",
            fields=("case_id", "support_fact", "question", "answer", "loss_rank"),
        )
        case_id = case.text(
            "case_id", pattern=CASE_ID_PATTERN, meaning="a plain identifier ([A-Za-z0-9_.-])"
        )
        if any(known.case_id == case_id for known in cases):
            raise case.error("case_id", f"repeats the case id {case_id!r}")
        cases.append(
            SyntheticCase(
                case_id=case_id,
                support_fact=case.text("support_fact"),
                question=case.text("question"),
                answer=case.text("answer"),
                loss_rank=case.integer("loss_rank", minimum=1, maximum=MAX_LOSS_RANK),
            )
        )
    return SyntheticManifest(
        schema_version=1,
        protocol_id=top.text("protocol_id"),
        scenario=SCENARIO_CORRECTION_RESERVE,
        cases=tuple(cases),
    )
