"""Regret: evidence, from a deployment's own traffic, of when forgetting was a mistake.

The store records regret events with what caused them
(:mod:`deermem.store.records`); this module turns them into what a
deployment reads: the event that counts against the shadow policy
(:func:`shadow_regret`, also used by the capacity gate's ledger), what a
search reveals (:func:`search_regret`) and the per-policy report behind
``Memory.regret()`` and ``deermem regret`` (:func:`build_report`). See
docs/regret.md.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final, NamedTuple

from deermem.model import Record, format_timestamp, json_key, parse_moment, parse_timestamp
from deermem.store.records import (
    REASON_CAPACITY,
    REGRET_KINDS,
    ArchiveEntry,
    EvictionReceipt,
    RegretEvent,
    RegretKind,
    RegretRole,
    ShadowMark,
    query_digest,
)

__all__ = [
    "MOST_REGRETTED",
    "REPORT_SCHEMA",
    "Found",
    "PolicyRegret",
    "RegretReport",
    "RegrettedFact",
    "TimelinePoint",
    "build_report",
    "build_user_report",
    "parse_since",
    "search_regret",
    "shadow_regret",
]


def shadow_regret(
    mark: ShadowMark,
    kind: RegretKind,
    fact_id: str,
    *,
    occurred_at: str,
    trigger: str,
    query_digest: str | None = None,
    rank: int | None = None,
) -> RegretEvent:
    """The event that counts ``kind`` against the shadow policy that marked the fact."""
    return RegretEvent(
        kind=kind,
        occurred_at=occurred_at,
        fact_id=fact_id,
        category=mark.category,
        policy_version=mark.policy_version,
        role="shadow",
        evicted_at=mark.since,
        receipt_id=mark.receipt_id,
        reason=REASON_CAPACITY,
        trigger=trigger,
        query_digest=query_digest,
        rank=rank,
    )


# --- what a search reveals ------------------------------------------------------------
#
# The regret a search reveals: missed recalls, and recalls of shadow-evicted facts.
#
# A search asks one counterfactual question of the archive (see
# :func:`deermem.recall.search.search_with_archive`): which archived facts would have
# been among its results had they still been in the library. Each such fact is
# a *missed recall* — against the policy that evicted it and, when its archive
# entry carries the shadow policy's mark, against the shadow policy too. A
# result that the shadow policy would have evicted (it holds a shadow mark) is
# a *recall* against the shadow policy: under it, that result would have been
# missed.
#
# Pure: the caller reads the archive entries and the marks and records the
# events (:meth:`deermem.store.Store.record_access`).

TRIGGER_SEARCH: Final = "search"


class Found(NamedTuple):
    """A fact a search found, at its rank (1 = first)."""

    fact_id: str
    rank: int


def search_regret(
    query: str,
    *,
    now: datetime,
    missed: Sequence[tuple[ArchiveEntry, int]],
    results: Iterable[Found],
    marks: Mapping[str, ShadowMark],
) -> tuple[RegretEvent, ...]:
    """The regret events of one search.

    Most searches have none (nothing archived among the top results, no
    result the shadow policy marked): then neither the query's digest nor
    the stamp is computed, as every search pays for what it records.

    Args:
        query: what was searched for (only its digest is kept).
        now: the search's clock.
        missed: the archived facts among the top results, with their ranks.
        results: the library's results, with their ranks.
        marks: the shadow policy's marks on library facts.
    """
    marked = [found for found in results if found.fact_id in marks]
    if not missed and not marked:
        return ()
    digest = query_digest(query)
    stamp = format_timestamp(now)
    events: list[RegretEvent] = []
    for entry, rank in missed:
        category = entry.eviction.category if entry.eviction else entry.fact.category
        events.append(
            RegretEvent(
                kind="missed_recall",
                occurred_at=stamp,
                fact_id=entry.fact_id,
                category=category,
                policy_version=entry.policy_version or "",
                role="active",
                evicted_at=entry.archived_at,
                receipt_id=entry.receipt_id,
                reason=entry.reason,
                trigger=TRIGGER_SEARCH,
                query_digest=digest,
                rank=rank,
            )
        )
        if entry.shadow is not None:
            events.append(
                shadow_regret(
                    entry.shadow,
                    "missed_recall",
                    entry.fact_id,
                    occurred_at=stamp,
                    trigger=TRIGGER_SEARCH,
                    query_digest=digest,
                    rank=rank,
                )
            )
    for found in marked:
        events.append(
            shadow_regret(
                marks[found.fact_id],
                "recalled",
                found.fact_id,
                occurred_at=stamp,
                trigger=TRIGGER_SEARCH,
                query_digest=digest,
                rank=found.rank,
            )
        )
    return tuple(events)


# --- the report ------------------------------------------------------------------------
#
# The regret report: per policy, how often its evictions turned out to be mistakes.
#
# Built from two content-free records the store keeps: the eviction receipts
# (what each policy evicted — the active policy in ``evicted``, the shadow
# policy in ``shadow.wouldEvict``) and the regret events (what later showed an
# eviction was wrong, :mod:`deermem.store.records`). For each policy and
# role (``active``: it decided; ``shadow``: it was computed beside the active
# one) the report counts, within the window:
#
# * ``evictions`` — distinct facts the policy evicted (or would have);
# * ``events`` — regret events against it, by kind;
# * ``regretted`` — those evicted facts with at least one regret event;
# * ``regretRate`` — ``regretted / evictions`` (``null`` without evictions);
# * ``mostRegretted`` — the facts with the most events (ids and categories);
# * ``timeline`` — per day, the running totals (for a chart).
#
# Events about facts that left for another reason than the capacity gate (a
# person deleted them, the staleness review removed them ...) do not count
# against a policy; they are totalled under ``uncounted``.
#
# The window is ``[since, until]`` on the times the records carry; the audit
# and the event log are bounded, so ``auditFrom`` and ``eventsFrom`` say how
# far back each still reaches. Pure: same records, same report, byte for byte.

REPORT_SCHEMA: Final = "deermem.regret/1"
"""The ``schema`` of the report's JSON form; changes only with an incompatible change."""
MOST_REGRETTED: Final = 10
"""How many facts ``mostRegretted`` lists per policy."""


@dataclass(frozen=True, slots=True)
class RegrettedFact(Record):
    """A fact regretted under one policy: id, category, how often and how."""

    fact_id: str
    category: str
    events: int
    kinds: Mapping[str, int]


@dataclass(frozen=True, slots=True)
class TimelinePoint(Record):
    """Running totals of one policy at the end of one day (UTC).

    ``kinds`` splits ``events`` by kind (every kind of ``REGRET_KINDS``, in
    that order), so a chart can draw each kind over time.
    """

    date: str
    evictions: int
    events: int
    regretted: int
    kinds: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PolicyRegret(Record):
    """One policy in one role (see the module docstring for each number)."""

    policy: str = field(metadata=json_key("policyVersion"))
    role: RegretRole
    evictions: int
    regretted: int
    events: Mapping[str, int]
    most_regretted: tuple[RegrettedFact, ...] = ()
    timeline: tuple[TimelinePoint, ...] = ()

    json_fields = (
        "policy",
        "role",
        "evictions",
        "regretted",
        "regret_rate",
        "events",
        "events_total",
        "most_regretted",
        "timeline",
    )

    @property
    def events_total(self) -> int:
        return sum(self.events.values())

    @property
    def regret_rate(self) -> float | None:
        return self.regretted / self.evictions if self.evictions else None


@dataclass(frozen=True, slots=True)
class RegretReport(Record):
    """The report (see the module docstring); :meth:`to_dict` is its JSON form."""

    since: str | None
    until: str
    audit_from: str | None
    events_from: str | None
    policies: tuple[PolicyRegret, ...]
    uncounted: Mapping[str, int] = field(default_factory=dict)

    json_fields = (
        "schema",
        "since",
        "until",
        "audit_from",
        "events_from",
        "policies",
        "uncounted",
    )

    @property
    def schema(self) -> str:
        """The JSON form's schema, :data:`REPORT_SCHEMA`."""
        return REPORT_SCHEMA

    def policy(self, name: str, role: RegretRole) -> PolicyRegret | None:
        return next((p for p in self.policies if (p.policy, p.role) == (name, role)), None)


# A fact as the report counts it: the agent whose scope holds it, and its id. Ids are unique
# within one scope only (imported or host-keyed facts repeat across agents), so a report over
# several agents keeps their facts apart; a one-scope report has one agent, "".
_FactKey = tuple[str, str]


def build_report(
    receipts: Sequence[EvictionReceipt],
    events: Sequence[RegretEvent],
    *,
    active: str,
    shadow: str | None,
    until: datetime,
    since: datetime | None = None,
) -> RegretReport:
    """The report over one scope's records within ``[since, until]``.

    Args:
        receipts: the audit, oldest first.
        events: the regret events, oldest first.
        active: the policy in force (listed even without records).
        shadow: the shadow policy when shadow mode runs (listed even without records).
        until: the end of the window (the injected clock).
        since: the start of the window; ``None``: everything kept.
    """
    return _report(
        [("", receipt) for receipt in receipts],
        [("", event) for event in events],
        active=active,
        shadow=shadow,
        until=until,
        since=since,
    )


def build_user_report(
    agents: Mapping[str, tuple[Sequence[EvictionReceipt], Sequence[RegretEvent]]],
    *,
    active: str,
    shadow: str | None,
    until: datetime,
    since: datetime | None = None,
) -> RegretReport:
    """The report over several agents' records together (a user's): each agent's receipts
    and events, oldest first; the same fact id in two agents is two facts.

    The other arguments are :func:`build_report`'s.
    """
    receipts = sorted(
        ((agent, receipt) for agent, (audit, _) in agents.items() for receipt in audit),
        key=lambda pair: _in_time_order(pair[1].occurred_at),
    )
    events = sorted(
        ((agent, event) for agent, (_, logged) in agents.items() for event in logged),
        key=lambda pair: _in_time_order(pair[1].occurred_at),
    )
    return _report(receipts, events, active=active, shadow=shadow, until=until, since=since)


def _in_time_order(stamp: str) -> tuple[bool, datetime, str]:
    """A record's place in time: the moment it names, so that ``+00:00``, ``Z`` and
    other offsets, with or without fractions, compare as moments (as text they do
    not); a time that does not read as one goes last (the window skips it anyway)."""
    moment = parse_timestamp(stamp)
    return (False, moment, "") if moment is not None else (True, datetime.min, stamp)


def _report(
    receipts: Sequence[tuple[str, EvictionReceipt]],
    events: Sequence[tuple[str, RegretEvent]],
    *,
    active: str,
    shadow: str | None,
    until: datetime,
    since: datetime | None,
) -> RegretReport:
    """The report over (agent, record) pairs, oldest first."""
    window = _Window(since, until)
    evicted: dict[tuple[str, RegretRole], dict[_FactKey, str]] = {(active, "active"): {}}
    if shadow is not None:
        evicted[(shadow, "shadow")] = {}
    for agent, receipt in receipts:
        moment = window.moment(receipt.occurred_at)
        if moment is None:
            continue
        if receipt.reason == REASON_CAPACITY:
            first = evicted.setdefault((receipt.policy_version, "active"), {})
            for line in receipt.evicted:
                first.setdefault((agent, line.fact_id), moment)
        if receipt.shadow is not None:
            first = evicted.setdefault((receipt.shadow.policy, "shadow"), {})
            for fact_id in receipt.shadow.would_evict:
                first.setdefault((agent, fact_id), moment)
    counted: dict[tuple[str, RegretRole], list[tuple[str, _FactKey, RegretEvent]]] = {}
    uncounted: Counter[str] = Counter()
    for agent, event in events:
        moment = window.moment(event.occurred_at)
        if moment is None:
            continue
        if event.role == "active" and event.reason != REASON_CAPACITY:
            uncounted[event.kind] += 1
            continue
        counted.setdefault((event.policy_version, event.role), []).append(
            (moment, (agent, event.fact_id), event)
        )
        evicted.setdefault((event.policy_version, event.role), {})
    rows = [
        _policy_row(policy, role, evicted[(policy, role)], counted.get((policy, role), []))
        for policy, role in sorted(evicted, key=lambda key: (key[1] != "active", key[0]))
    ]
    return RegretReport(
        since=None if since is None else format_timestamp(since),
        until=format_timestamp(until),
        audit_from=receipts[0][1].occurred_at if receipts else None,
        events_from=events[0][1].occurred_at if events else None,
        policies=tuple(rows),
        uncounted={kind: uncounted[kind] for kind in REGRET_KINDS},
    )


class _Window:
    """Reads a record's time and says whether it falls in ``[since, until]``."""

    def __init__(self, since: datetime | None, until: datetime) -> None:
        self.since = since
        self.until = until

    def moment(self, stamp: str) -> str | None:
        """The record's time, normalised, if inside the window; else ``None``."""
        moment = parse_timestamp(stamp)
        if moment is None or moment > self.until:
            return None
        if self.since is not None and moment < self.since:
            return None
        return format_timestamp(moment)


def _policy_row(
    policy: str,
    role: RegretRole,
    evicted: Mapping[_FactKey, str],
    events: Sequence[tuple[str, _FactKey, RegretEvent]],
) -> PolicyRegret:
    kinds = Counter(event.kind for _, _, event in events)
    regretted = {key for _, key, _ in events if key in evicted}
    return PolicyRegret(
        policy=policy,
        role=role,
        evictions=len(evicted),
        regretted=len(regretted),
        events={kind: kinds[kind] for kind in REGRET_KINDS},
        most_regretted=_most_regretted((key, event) for _, key, event in events),
        timeline=_timeline(evicted, events),
    )


def _most_regretted(events: Iterable[tuple[_FactKey, RegretEvent]]) -> tuple[RegrettedFact, ...]:
    by_fact: dict[_FactKey, list[RegretEvent]] = {}
    for key, event in events:
        by_fact.setdefault(key, []).append(event)
    ranked = sorted(by_fact.items(), key=lambda item: (-len(item[1]), item[0][1], item[0][0]))
    return tuple(
        RegrettedFact(
            fact_id=fact_id,
            category=found[-1].category,
            events=len(found),
            kinds={
                kind: count
                for kind, count in sorted(Counter(e.kind for e in found).items())
                if count
            },
        )
        for (_, fact_id), found in ranked[:MOST_REGRETTED]
    )


def _timeline(
    evicted: Mapping[_FactKey, str], events: Sequence[tuple[str, _FactKey, RegretEvent]]
) -> tuple[TimelinePoint, ...]:
    """Running totals at the end of each day that has a record."""
    days: dict[str, tuple[list[_FactKey], list[tuple[_FactKey, RegretEvent]]]] = {}
    for key, moment in evicted.items():
        days.setdefault(moment[:10], ([], []))[0].append(key)
    for moment, key, event in events:
        days.setdefault(moment[:10], ([], []))[1].append((key, event))
    seen: set[_FactKey] = set()
    regretted: set[_FactKey] = set()
    kinds: Counter[str] = Counter()
    points = []
    for day in sorted(days):
        new_evictions, new_events = days[day]
        seen.update(new_evictions)
        kinds.update(e.kind for _, e in new_events)
        regretted.update(key for key, _ in new_events if key in evicted)
        points.append(
            TimelinePoint(
                day,
                len(seen),
                kinds.total(),
                len(regretted & seen),
                {kind: kinds[kind] for kind in REGRET_KINDS},
            )
        )
    return tuple(points)


def parse_since(text: str, now: datetime) -> datetime:
    """The moment ``text`` names.

    An ISO 8601 date or time (UTC unless it says otherwise), or ``N`` hours
    (``12h``), days (``30d``) or weeks (``4w``) before ``now``. A moment after
    ``now`` is refused: the window ends at ``now``, so it would be empty and
    the report all zeros, which reads as "no regret" rather than as a typo.

    Raises:
        ValueError: naming the value and the accepted forms, or saying that
            it is after ``now``.
    """
    moment = parse_moment(text, now, option="--since")
    if moment > now:
        raise ValueError(
            f"--since {text!r} is after now ({format_timestamp(now)}): the report covers "
            "records up to now"
        )
    return moment
