"""``run-policy``: every case at every cap under both policies, and the retention table.

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

The retention table (how many cases kept their support fact, by cap and
policy) has three renderings: the rich table ``run-policy`` prints on a
terminal, the plain text it prints otherwise, and the Markdown of
``deermem eval report``. All are built from a run's ``summary.json``, so a
report drawn later from the files says exactly what the run printed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Final, NamedTuple

from deermem.eval.dataset import EvaluationCase, build_cases, load_dataset
from deermem.eval.errors import EvaluationError
from deermem.eval.files import (
    document_text,
    ensure_new_set,
    git_state,
    jsonl_line,
    write_new_files,
)
from deermem.eval.protocol import Protocol, scenario_rank
from deermem.eval.rows import OVERALL, SUITE_OF_SOURCE
from deermem.policy import (
    POLICIES,
    POLICY_HYBRID_V1,
    CapacityDecision,
    CapacityPolicy,
    select_facts_for_capacity,
)

__all__ = [
    "RetentionTable",
    "format_plain",
    "policy_summary",
    "retention_table",
    "run_and_write",
    "run_policy",
    "short_policy",
]

# --- the run and its files ------------------------------------------------------------------------

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
        for policy in POLICIES
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
    return {
        **protocol.run_header(
            schema_version=SCHEMA_VERSION,
            dataset_sha256=dataset_sha256,
            created_at=created_at,
            git=git,
        ),
        "artifacts": protocol.artifacts._asdict(),
        "evaluation_time": protocol.config.evaluation_time.isoformat(),
        "policies": list(POLICIES),
        "capacities": list(protocol.config.pool.capacities),
    }


def policy_output_paths(directory: Path) -> tuple[Path, Path, Path]:
    """The three files of a policy run, in write order."""
    return (directory / POLICY_ROWS_FILE, directory / SUMMARY_FILE, directory / RUN_FILE)


def run_and_write(protocol: Protocol, dataset: Path, directory: Path) -> tuple[PolicyOutcome, ...]:
    """``run-policy``: every case decided at every cap and written to ``directory``.

    A complete set of result files is refused before the dataset is read, not
    after the work; then the dataset (hash first), the cases, the decisions,
    the three files.

    Raises:
        ResultsExistError: the result files are already there.
        DatasetIntegrityError: the dataset is not the pinned file or breaks the rules.
        ProtocolError: the manifest disagrees with the dataset.
    """
    ensure_new_set(policy_output_paths(directory))
    data = load_dataset(dataset, expected_sha256=protocol.config.dataset.sha256)
    outcomes = run_policy(protocol, build_cases(protocol, data))
    write_policy_run(directory, protocol, data.sha256, outcomes)
    return outcomes


def write_policy_run(
    directory: Path,
    protocol: Protocol,
    dataset_sha256: str,
    outcomes: Sequence[PolicyOutcome],
    *,
    created_at: datetime | None = None,
) -> tuple[Path, Path, Path]:
    """Write the three result files as one set, ``run.json`` last; never over a complete set.

    What an interrupted write left (the set without ``run.json``) is replaced
    (:func:`~deermem.eval.files.write_new_files`). The git state recorded is
    that of the checkout deermem runs from (``null`` when it is not run from
    a git checkout).

    Raises:
        ResultsExistError: the set is complete (``run.json`` exists).
    """
    paths = policy_output_paths(directory)
    ensure_new_set(paths)
    rows = "".join(jsonl_line(policy_row(outcome)) for outcome in outcomes)
    summary = document_text(policy_summary(protocol.protocol_id, outcomes))
    record = document_text(
        run_record(protocol, dataset_sha256, created_at=created_at, git=git_state())
    )
    write_new_files(
        [(path, text.encode()) for path, text in zip(paths, (rows, summary, record), strict=True)]
    )
    return paths


# --- the retention table --------------------------------------------------------------------------

SHORT_POLICY_NAMES: Final = {"confidence": "conf", "hybrid-v1": "hybrid"}


class RetentionRow(NamedTuple):
    """One line of the table.

    Attributes:
        suite: ``official``, ``synthetic`` or ``overall``.
        scenario: a scenario name, ``total`` for a suite's sum, ``all`` overall.
        cases: how many cases the line counts.
        retained: (capacity, policy) → cases whose support fact was kept.
    """

    suite: str
    scenario: str
    cases: int
    retained: Mapping[tuple[int, str], int]

    @property
    def is_total(self) -> bool:
        return is_total_line(self.scenario)

    @property
    def label(self) -> str:
        """The row's name in the compact renderings."""
        return line_label(self.suite, self.scenario)


def is_total_line(scenario: str) -> bool:
    """Whether a table line with this scenario sums others (a suite total or overall)."""
    return scenario in ("total", "all")


def line_label(suite: str, scenario: str) -> str:
    """A table line's name in the compact renderings: the scenario, "<suite> total" or the suite.

    Shared by the retention table and the QA accuracy table, so both reports
    name their lines the same way.
    """
    if scenario == "all":
        return suite
    return f"{suite} total" if scenario == "total" else scenario


class RetentionTable(NamedTuple):
    """Rows in report order: each suite's scenarios, its total, then overall."""

    protocol_id: str
    capacities: tuple[int, ...]
    policies: tuple[str, ...]
    rows: tuple[RetentionRow, ...]

    @property
    def columns(self) -> tuple[tuple[int, str], ...]:
        return tuple((capacity, policy) for capacity in self.capacities for policy in self.policies)

    def values(self, row: RetentionRow) -> list[str]:
        """``kept/cases`` for every (capacity, policy) column."""
        return [f"{row.retained[column]}/{row.cases}" for column in self.columns]

    def overall(self, capacity: int, policy: str) -> tuple[int, int]:
        """(retained, cases) over every case."""
        row = self.rows[-1]
        return row.retained[(capacity, policy)], row.cases

    @property
    def title(self) -> str:
        return f"Support fact retained (cases kept / cases), protocol {self.protocol_id}"

    @property
    def legend(self) -> str:
        """What the short policy names of the compact renderings stand for."""
        return ", ".join(f"{short_policy(policy)} = {policy}" for policy in self.policies)

    def heading(self, capacity: int, policy: str) -> str:
        """A column's heading in the compact renderings: the cap over the short policy name."""
        return f"cap {capacity}\n{short_policy(policy)}"

    def plain(self) -> str:
        """The table as aligned plain text (:func:`format_plain`)."""
        return format_plain(self)


def short_policy(policy: str) -> str:
    """A column-sized policy name."""
    return SHORT_POLICY_NAMES.get(policy, policy)


def retention_table(summary: Mapping[str, object], *, file: str = "summary.json") -> RetentionTable:
    """Build the table from a policy run's summary document.

    Raises:
        EvaluationError: the document is not a policy-run summary.
    """
    groups = _groups(summary, file)
    capacities = tuple(sorted({capacity for _, _, capacity, _, _, _ in groups}))
    seen_policies = {policy for _, _, _, policy, _, _ in groups}
    policies = tuple(p for p in POLICIES if p in seen_policies) + tuple(
        sorted(seen_policies - set(POLICIES))
    )
    lines: dict[tuple[str, str], tuple[int, dict[tuple[int, str], int]]] = {}
    for source, scenario, capacity, policy, cases, retained in groups:
        known_cases, counts = lines.setdefault((source, scenario), (cases, {}))
        if known_cases != cases:
            raise EvaluationError(
                f"{file}: scenario {scenario!r} counts {known_cases} and {cases} cases"
            )
        counts[(capacity, policy)] = retained
    columns = [(c, p) for c in capacities for p in policies]
    for (source, scenario), (_, counts) in lines.items():
        missing = [column for column in columns if column not in counts]
        if missing:
            raise EvaluationError(f"{file}: no group for {source}/{scenario} at {missing[0]}")
    rows: list[RetentionRow] = []
    for source in sorted({source for source, _ in lines}):
        members = sorted(
            ((scenario, lines[(src, scenario)]) for src, scenario in lines if src == source),
            key=lambda member: scenario_rank(member[0]),
        )
        suite = SUITE_OF_SOURCE.get(source, source)
        rows.extend(RetentionRow(suite, name, cases, counts) for name, (cases, counts) in members)
        if len(members) > 1:
            rows.append(_sum_row(suite, "total", [line for _, line in members], columns))
    rows.append(_sum_row(OVERALL, "all", list(lines.values()), columns))
    protocol_id = summary.get("protocol_id")
    return RetentionTable(
        protocol_id=protocol_id if isinstance(protocol_id, str) else "",
        capacities=capacities,
        policies=policies,
        rows=tuple(rows),
    )


def format_plain(table: RetentionTable) -> str:
    """The table as aligned plain text, under 80 columns (for pipes, logs and CI)."""
    body = [[row.label, str(row.cases), *table.values(row)] for row in table.rows]
    policies = [short_policy(policy) for _, policy in table.columns]
    widths = [
        max(len(line[column]) for line in [["scenario", "n", *policies], *body])
        for column in range(len(body[0]))
    ]
    group = len(table.policies)
    caps = ["", ""]
    for index, capacity in enumerate(table.capacities):
        span = sum(widths[2 + index * group : 2 + (index + 1) * group]) + 2 * (group - 1)
        caps.append(f"cap {capacity}".rjust(span))
    cap_widths = [widths[0], widths[1]] + [len(cap) for cap in caps[2:]]
    lines = [
        table.title,
        _join(caps, cap_widths, gap="   "),
        _join(["scenario", "n", *policies], widths, gap="  ", group=group),
        *(_join(line, widths, gap="  ", group=group) for line in body),
        table.legend,
    ]
    return "\n".join(line.rstrip() for line in lines) + "\n"


def format_markdown(table: RetentionTable) -> str:
    """The table as GitHub-flavoured Markdown, totals in bold."""
    header = ["suite", "scenario", "cases", *(f"cap {c} {p}" for c, p in table.columns)]
    lines = [
        "| " + " | ".join(header) + " |",
        "|" + "---|" * 2 + "---:|" * (len(header) - 2),
    ]
    for row in table.rows:
        cells = [row.suite, row.scenario, str(row.cases), *table.values(row)]
        if row.is_total:
            cells = [f"**{cell}**" for cell in cells]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _join(cells: Sequence[str], widths: Sequence[int], *, gap: str, group: int = 0) -> str:
    """Label left-aligned, numbers right-aligned; an extra space between cap groups."""
    parts = [cells[0].ljust(widths[0])]
    for index, (cell, width) in enumerate(zip(cells[1:], widths[1:], strict=True)):
        separator = gap + " " if group and index > 1 and (index - 1) % group == 0 else gap
        parts.append(separator + cell.rjust(width))
    return "".join(parts)


def _sum_row(
    suite: str,
    scenario: str,
    members: Sequence[tuple[int, dict[tuple[int, str], int]]],
    columns: Sequence[tuple[int, str]],
) -> RetentionRow:
    return RetentionRow(
        suite=suite,
        scenario=scenario,
        cases=sum(cases for cases, _ in members),
        retained={column: sum(counts[column] for _, counts in members) for column in columns},
    )


def _groups(summary: Mapping[str, object], file: str) -> list[tuple[str, str, int, str, int, int]]:
    groups = summary.get("groups")
    if summary.get("schema_version") != 1 or not isinstance(groups, list) or not groups:
        raise EvaluationError(f"{file}: not a policy-run summary (schema_version 1 with groups)")
    parsed = []
    for position, group in enumerate(groups):
        try:
            item = (
                group["source"],
                group["scenario"],
                group["capacity"],
                group["policy"],
                group["cases"],
                group["support_all_retained"],
            )
        except (KeyError, TypeError):
            raise EvaluationError(f"{file}: groups[{position}] lacks a summary key") from None
        text_ok = all(isinstance(value, str) for value in item[:2]) and isinstance(item[3], str)
        numbers_ok = all(type(value) is int for value in (item[2], item[4], item[5]))
        if not (text_ok and numbers_ok) or not 0 <= item[5] <= item[4]:
            raise EvaluationError(f"{file}: groups[{position}] has malformed values")
        parsed.append(item)
    return parsed
