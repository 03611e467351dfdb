"""The regret report: pure counting over receipts and events, and its stable JSON form."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deermem.library.regret import (
    MOST_REGRETTED,
    REPORT_SCHEMA,
    build_report,
    build_user_report,
    parse_since,
)
from deermem.policy import ShadowComparison
from deermem.store import EvictionReceipt, ReceiptEntry
from deermem.store.records import REGRET_KINDS, RegretEvent, RegretKind, RegretRole

NOW = datetime(2026, 9, 1, tzinfo=UTC)


def stamp(days: float) -> str:
    return (NOW - timedelta(days=days)).isoformat().replace("+00:00", "Z")


def receipt(
    days: float,
    evicted: list[str],
    *,
    policy: str = "confidence",
    reason: str = "capacity",
    would: list[str] | None = None,
) -> EvictionReceipt:
    return EvictionReceipt(
        receipt_id=f"rcpt_{days}",
        occurred_at=stamp(days),
        reason=reason,
        trigger="manual",
        policy_version=policy,
        max_facts=10,
        occupancy=11,
        reserved_correction_slots=0,
        evicted=tuple(ReceiptEntry(i, "context") for i in evicted),
        shadow=None if would is None else ShadowComparison("hybrid-v1", tuple(would), True),
    )


def event(
    days: float,
    fact_id: str,
    kind: RegretKind = "relearned",
    *,
    role: RegretRole = "active",
    policy: str = "confidence",
    reason: str = "capacity",
    category: str = "context",
) -> RegretEvent:
    return RegretEvent(
        kind=kind,
        occurred_at=stamp(days),
        fact_id=fact_id,
        category=category,
        policy_version=policy,
        role=role,
        evicted_at=stamp(days + 1),
        receipt_id=None,
        reason=reason,
        trigger="manual",
    )


RECEIPTS = [
    receipt(10, ["fact_a"], would=["fact_x"]),
    receipt(9, ["fact_b"], would=["fact_x", "fact_b"]),
    receipt(8, ["fact_c"], would=["fact_y"]),
    receipt(7, ["fact_d"], reason="deleted"),
]
EVENTS = [
    event(6, "fact_a", "missed_recall"),
    event(5, "fact_a", "relearned"),
    event(5, "fact_x", "confirmed", role="shadow", policy="hybrid-v1", category="goal"),
    event(4, "fact_b", "restored"),
    event(4, "fact_b", "restored", role="shadow", policy="hybrid-v1"),
    event(3, "fact_d", "relearned", reason="deleted"),
]


def test_each_policy_counts_its_evictions_events_and_rate() -> None:
    report = build_report(RECEIPTS, EVENTS, active="confidence", shadow="hybrid-v1", until=NOW)
    confidence = report.policy("confidence", "active")
    hybrid = report.policy("hybrid-v1", "shadow")
    assert confidence is not None
    assert hybrid is not None
    assert (confidence.evictions, confidence.regretted, confidence.regret_rate) == (3, 2, 2 / 3)
    assert confidence.events == {
        "relearned": 1,
        "restored": 1,
        "missed_recall": 1,
        "confirmed": 0,
        "recalled": 0,
        "corrected": 0,
    }
    assert (hybrid.evictions, hybrid.regretted, hybrid.regret_rate) == (3, 2, 2 / 3)
    assert hybrid.events["confirmed"] == 1
    assert hybrid.events["restored"] == 1
    assert report.uncounted["relearned"] == 1  # fact_d was deleted by a person
    assert [f.fact_id for f in confidence.most_regretted] == ["fact_a", "fact_b"]
    assert confidence.most_regretted[0].kinds == {"missed_recall": 1, "relearned": 1}
    assert hybrid.most_regretted[1].category == "goal"


def test_a_users_report_keeps_the_same_fact_id_of_two_agents_apart() -> None:
    """Per user, the evictions were keyed by fact id alone: two agents holding `fact_a`
    (imported, or keyed by the host) counted it once, and the rate came out doubled."""
    one = build_report(RECEIPTS, EVENTS, active="confidence", shadow="hybrid-v1", until=NOW)
    both = build_user_report(
        {"coder": (RECEIPTS, EVENTS), "writer": (RECEIPTS, EVENTS)},
        active="confidence",
        shadow="hybrid-v1",
        until=NOW,
    )
    for alone, together in zip(one.policies, both.policies, strict=True):
        assert (together.policy, together.role) == (alone.policy, alone.role)
        assert together.evictions == 2 * alone.evictions
        assert together.regretted == 2 * alone.regretted
        assert together.regret_rate == alone.regret_rate
        assert together.events_total == 2 * alone.events_total
        last, last_alone = together.timeline[-1], alone.timeline[-1]
        assert (last.evictions, last.regretted) == (
            2 * last_alone.evictions,
            2 * last_alone.regretted,
        )
        assert [f.fact_id for f in together.most_regretted] == [
            f.fact_id for f in alone.most_regretted for _ in range(2)
        ]
    assert both.uncounted["relearned"] == 2
    # one agent alone is that agent's report
    only = build_user_report(
        {"coder": (RECEIPTS, EVENTS)}, active="confidence", shadow="hybrid-v1", until=NOW
    )
    assert only == one


def test_a_users_report_orders_records_by_moment_not_by_their_text() -> None:
    """The original writes ``+00:00`` (and a hand-made record any offset), deermem ``Z``:
    sorted as text, 07:00Z written as 12:00+05:00 came after 08:00Z, and ``auditFrom``
    named the later receipt."""
    written_elsewhere = dataclasses.replace(
        receipt(0, ["fact_x"]), receipt_id="rcpt_x", occurred_at="2026-08-31T12:00:00+05:00"
    )
    ours = dataclasses.replace(
        receipt(0, ["fact_y"]), receipt_id="rcpt_y", occurred_at="2026-08-31T08:00:00.5Z"
    )
    report = build_user_report(
        {"coder": ([ours], []), "writer": ([written_elsewhere], [])},
        active="confidence",
        shadow=None,
        until=NOW,
    )
    assert report.audit_from == "2026-08-31T12:00:00+05:00"


def test_the_window_keeps_what_happened_since() -> None:
    report = build_report(
        RECEIPTS,
        EVENTS,
        active="confidence",
        shadow="hybrid-v1",
        until=NOW,
        since=NOW - timedelta(days=8, hours=12),
    )
    confidence = report.policy("confidence", "active")
    assert confidence is not None
    assert confidence.evictions == 1  # fact_c only
    assert confidence.regretted == 0  # fact_a and fact_b left before the window
    assert confidence.events_total == 3
    assert report.since == "2026-08-23T12:00:00Z"
    assert report.audit_from == stamp(10)
    later = build_report(
        RECEIPTS, EVENTS, active="confidence", shadow=None, until=NOW - timedelta(days=9, hours=12)
    )
    only = later.policy("confidence", "active")
    assert only is not None
    assert (only.evictions, only.events_total) == (1, 0)  # the future is not counted


def test_policies_without_records_are_listed_with_no_rate() -> None:
    report = build_report((), (), active="hybrid-v1", shadow=None, until=NOW)
    [row] = report.policies
    assert (row.policy, row.role, row.evictions, row.regret_rate) == (
        "hybrid-v1",
        "active",
        0,
        None,
    )
    assert row.to_dict()["regretRate"] is None
    assert (report.audit_from, report.events_from) == (None, None)


def test_a_switched_policy_keeps_its_own_row() -> None:
    receipts = [receipt(9, ["fact_a"]), receipt(2, ["fact_b"], policy="hybrid-v1")]
    report = build_report(receipts, (), active="hybrid-v1", shadow=None, until=NOW)
    assert [(p.policy, p.role, p.evictions) for p in report.policies] == [
        ("confidence", "active", 1),
        ("hybrid-v1", "active", 1),
    ]


def test_most_regretted_is_bounded_and_ordered() -> None:
    events = [event(1, f"fact_{n:02d}") for n in range(15) for _ in range(n % 4)]
    report = build_report((), events, active="confidence", shadow=None, until=NOW)
    [row] = report.policies
    assert len(row.most_regretted) == MOST_REGRETTED
    counts = [(f.events, f.fact_id) for f in row.most_regretted]
    assert counts == sorted(counts, key=lambda c: (-c[0], c[1]))
    assert counts[0] == (3, "fact_03")


def test_the_timeline_runs_totals_by_day() -> None:
    report = build_report(RECEIPTS, EVENTS, active="confidence", shadow=None, until=NOW)
    confidence = report.policy("confidence", "active")
    assert confidence is not None
    assert [(p.date, p.evictions, p.events, p.regretted) for p in confidence.timeline] == [
        ("2026-08-22", 1, 0, 0),
        ("2026-08-23", 2, 0, 0),
        ("2026-08-24", 3, 0, 0),
        ("2026-08-26", 3, 1, 1),
        ("2026-08-27", 3, 2, 1),
        ("2026-08-28", 3, 3, 2),
    ]


def test_the_timeline_splits_its_events_by_kind() -> None:
    report = build_report(RECEIPTS, EVENTS, active="confidence", shadow=None, until=NOW)
    confidence = report.policy("confidence", "active")
    assert confidence is not None
    last = confidence.timeline[-1]
    assert list(last.kinds) == list(REGRET_KINDS)
    assert {kind: n for kind, n in last.kinds.items() if n} == {
        "missed_recall": 1,
        "relearned": 1,
        "restored": 1,
    }
    assert [p.kinds["relearned"] for p in confidence.timeline] == [0, 0, 0, 0, 1, 1]


def test_the_json_schema_is_stable() -> None:
    data = build_report(
        RECEIPTS, EVENTS, active="confidence", shadow="hybrid-v1", until=NOW
    ).to_dict()
    assert set(data) == {
        "schema",
        "since",
        "until",
        "auditFrom",
        "eventsFrom",
        "policies",
        "uncounted",
    }
    assert data["schema"] == REPORT_SCHEMA == "deermem.regret/1"
    assert list(data["uncounted"]) == list(REGRET_KINDS)  # type: ignore[call-overload]
    policies = data["policies"]
    assert isinstance(policies, list)
    for row in policies:
        assert set(row) == {
            "policyVersion",
            "role",
            "evictions",
            "regretted",
            "regretRate",
            "events",
            "eventsTotal",
            "mostRegretted",
            "timeline",
        }
        assert list(row["events"]) == list(REGRET_KINDS)
        for fact in row["mostRegretted"]:
            assert set(fact) == {"factId", "category", "events", "kinds"}
        for point in row["timeline"]:
            assert set(point) == {"date", "evictions", "events", "regretted", "kinds"}
            assert list(point["kinds"]) == list(REGRET_KINDS)
            assert sum(point["kinds"].values()) == point["events"]
    json.dumps(data, allow_nan=False)  # plain JSON


@given(
    st.lists(
        st.tuples(
            st.integers(0, 30),
            st.sampled_from(("fact_a", "fact_b", "fact_c")),
            st.sampled_from(REGRET_KINDS),
            st.sampled_from(("active", "shadow")),
        ),
        max_size=30,
    )
)
@settings(max_examples=60, deadline=None)
def test_the_same_records_make_the_same_report(
    raw: list[tuple[int, str, RegretKind, RegretRole]],
) -> None:
    events = sorted(
        (
            event(
                days,
                fact_id,
                kind,
                role=role,
                policy="confidence" if role == "active" else "hybrid-v1",
            )
            for days, fact_id, kind, role in raw
        ),
        key=lambda e: e.occurred_at,
    )
    first = build_report(RECEIPTS, events, active="confidence", shadow="hybrid-v1", until=NOW)
    again = build_report(RECEIPTS, list(events), active="confidence", shadow="hybrid-v1", until=NOW)
    assert json.dumps(first.to_dict()) == json.dumps(again.to_dict())
    for row in first.policies:
        assert 0 <= row.regretted <= row.evictions
        assert row.events_total == sum(row.events.values())


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("30d", NOW - timedelta(days=30)),  # a span back from now
        ("2w", NOW - timedelta(days=14)),
        ("2026-08-01", datetime(2026, 8, 1, tzinfo=UTC)),  # a date is UTC midnight
        ("2026-08-01T12:00:00+02:00", datetime(2026, 8, 1, 10, tzinfo=UTC)),
        (" 2026-08-01T12:00:00Z ", datetime(2026, 8, 1, 12, tzinfo=UTC)),
    ],
)
def test_since_reads_dates_times_and_spans(text: str, expected: datetime) -> None:
    assert parse_since(text, NOW) == expected


@pytest.mark.parametrize("text", ["yesterday", "30", "-3d", "2026-13-01", ""])
def test_an_unreadable_since_names_the_value_and_the_forms(text: str) -> None:
    with pytest.raises(ValueError, match="30d, 4w") as refused:
        parse_since(text, NOW)
    assert repr(text) in str(refused.value)
