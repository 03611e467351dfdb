"""The retention table: how many cases kept their support fact, by cap and policy.

One table, three renderings: the rich table ``run-policy`` prints on a
terminal, the plain text it prints otherwise, and the Markdown of
``deermem eval report``. All are built from a run's ``summary.json``, so a
report drawn later from the files says exactly what the run printed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final, NamedTuple

from deermem.eval.errors import EvaluationError
from deermem.eval.protocol.bundle import POLICY_ORDER
from deermem.eval.protocol.manifests import OFFICIAL_SCENARIOS

__all__ = [
    "RetentionRow",
    "RetentionTable",
    "format_markdown",
    "format_plain",
    "is_total_line",
    "line_label",
    "retention_table",
    "short_policy",
]

SUITES: Final = {"longmemeval": "official", "synthetic": "synthetic"}
OVERALL: Final = "overall"
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
    policies = tuple(p for p in POLICY_ORDER if p in seen_policies) + tuple(
        sorted(seen_policies - set(POLICY_ORDER))
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
            key=lambda member: _scenario_key(member[0]),
        )
        suite = SUITES.get(source, source)
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


def _scenario_key(scenario: str) -> tuple[int, str]:
    """Registered scenarios in protocol order, any others after them by name."""
    if scenario in OFFICIAL_SCENARIOS:
        return (OFFICIAL_SCENARIOS.index(scenario), "")
    return (len(OFFICIAL_SCENARIOS), scenario)


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
