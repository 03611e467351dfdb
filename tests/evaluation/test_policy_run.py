"""The policy run: the production selector, the expected figures, the result files."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from deermem.eval import policy_run as eviction
from deermem.eval.errors import ResultsExistError
from deermem.eval.policy_run import (
    decide,
    policy_row,
    policy_summary,
    run_record,
    write_policy_run,
)
from deermem.policy import CapacityPolicy, select_facts_for_capacity
from tests.evaluation.conftest import Prepared
from tests.evaluation.original_protocol import PUBLISHED_KEPT_IDS

# Support facts retained, per scenario: (cap 5, 7, 9) x (confidence, hybrid-v1).
EXPECTED = {
    "confirmation_help": {5: (0, 10), 7: (3, 10), 9: (6, 10)},
    "access_help": {5: (0, 0), 7: (3, 10), 9: (6, 10)},
    "confidence_control": {5: (10, 10), 7: (10, 10), 9: (10, 10)},
    "noisy_signal_control": {5: (10, 10), 7: (10, 10), 9: (10, 10)},
    "correction_reserve": {5: (0, 5), 7: (1, 5), 9: (3, 5)},
}
# The kept order at cap 7 (distractor index or G for the support fact), by loss rank.
KEPT_PATTERNS = {
    ("confirmation_help", "confidence"): {6: "01234G5", 8: "0123456", 10: "0123456"},
    ("confirmation_help", "hybrid-v1"): {6: "G012345", 8: "G012345", 10: "G012345"},
    ("access_help", "confidence"): {6: "01234G5", 8: "0123456", 10: "0123456"},
    ("access_help", "hybrid-v1"): {6: "01234G5", 8: "01234G5", 10: "01234G5"},
    ("confidence_control", "confidence"): {6: "G012345", 8: "G012345", 10: "G012345"},
    ("confidence_control", "hybrid-v1"): {6: "G570123", 8: "G570123", 10: "G570123"},
    ("noisy_signal_control", "confidence"): {6: "G012345", 8: "G012345", 10: "G012345"},
    ("noisy_signal_control", "hybrid-v1"): {6: "13G0245", 8: "135G024", 10: "1357G02"},
    ("correction_reserve", "confidence"): {6: "01234G5", 8: "0123456", 10: "0123456"},
    ("correction_reserve", "hybrid-v1"): {6: "01234G5", 8: "012345G", 10: "012345G"},
}
ROW_KEYS = {
    "schema_version",
    "case_id",
    "source",
    "scenario",
    "question_type",
    "policy",
    "capacity",
    "support_fact_ids",
    "kept_fact_ids",
    "evicted",
    "scores",
    "support_all_retained",
    "support_recall",
    "reserved_correction_slots",
}


def retained(prepared: Prepared, scenario: str, capacity: int, policy: str) -> int:
    return sum(
        outcome.support_all_retained
        for outcome in prepared.outcomes
        if (outcome.case.scenario, outcome.capacity, outcome.policy) == (scenario, capacity, policy)
    )


def pattern(kept: tuple[str, ...]) -> str:
    return "".join(
        "G" if fact_id.startswith("gold_") else fact_id.split("_")[-2] for fact_id in kept
    )


@pytest.mark.parametrize("capacity", [5, 7, 9])
def test_support_retention_per_scenario(prepared: Prepared, capacity: int) -> None:
    for scenario, by_capacity in EXPECTED.items():
        got = (
            retained(prepared, scenario, capacity, "confidence"),
            retained(prepared, scenario, capacity, "hybrid-v1"),
        )
        assert got == by_capacity[capacity], scenario


@pytest.mark.parametrize(
    ("capacity", "official", "synthetic", "overall"),
    [
        (5, (20, 30), (0, 5), (20, 35)),
        (7, (26, 40), (1, 5), (27, 45)),  # the headline: 27/45 vs 45/45
        (9, (32, 40), (3, 5), (35, 45)),
    ],
)
def test_suite_totals(
    prepared: Prepared,
    capacity: int,
    official: tuple[int, int],
    synthetic: tuple[int, int],
    overall: tuple[int, int],
) -> None:
    def total(source: str | None, policy: str) -> int:
        return sum(
            outcome.support_all_retained
            for outcome in prepared.outcomes
            if outcome.capacity == capacity
            and outcome.policy == policy
            and source in (None, outcome.case.source)
        )

    for source, expected in (("longmemeval", official), ("synthetic", synthetic), (None, overall)):
        assert (total(source, "confidence"), total(source, "hybrid-v1")) == expected


def test_the_kept_order_at_cap_7(prepared: Prepared) -> None:
    for outcome in prepared.outcomes:
        if outcome.capacity != 7:
            continue
        expected = KEPT_PATTERNS[(outcome.case.scenario, outcome.policy)][outcome.case.loss_rank]
        assert pattern(outcome.kept_fact_ids) == expected, outcome.case.case_id


def test_the_published_rows_kept_exactly_these_facts_in_this_order(prepared: Prepared) -> None:
    published = json.loads(PUBLISHED_KEPT_IDS.read_text())
    ours = {
        f"{outcome.case.case_id}__{outcome.policy}": list(outcome.kept_fact_ids)
        for outcome in prepared.outcomes
        if outcome.capacity == 7
    }
    assert ours == published


def test_ties_favour_the_earlier_id(prepared: Prepared) -> None:
    # 41698283 (offset 32): distractors 5..8 all score alike; input order decides
    for policy in ("confidence", "hybrid-v1"):
        kept = prepared.outcome("41698283", 7, policy).kept_fact_ids
        assert "d_41698283_5_58bf7951" in kept
        assert "d_41698283_8_001be529" not in kept


def test_scores_are_the_production_scores(prepared: Prepared) -> None:
    expected = {
        "01493427": 0.6918790019537095,  # confirmation_help
        "0977f2af": 0.5862499999999999,  # access_help
        "18bc8abd": 0.7167125657480125,  # confidence_control
        "26bdc477": 0.6162500000000001,  # noisy_signal_control
        "correction_language": 0.45375000000000004,
    }
    for case_id, score in expected.items():
        scores = prepared.outcome(case_id, 7, "hybrid-v1").decision.scores
        assert scores[f"gold_{case_id}"].score == score
    components = prepared.outcome("01493427", 7, "hybrid-v1").decision.scores
    assert components["gold_01493427"].components == {
        "confidence": 0.7,
        "confirmationFreshness": 0.9475160078148386,
        "accessHeat": 0.0,
    }
    assert components["d_01493427_0_09d032c9"].components["confirmationFreshness"] == 0.125
    heat = prepared.outcome("0977f2af", 7, "hybrid-v1").decision.scores["gold_0977f2af"]
    assert heat.components["accessHeat"] == 1.0
    fresh = prepared.outcome("18bc8abd", 7, "hybrid-v1").decision.scores["gold_18bc8abd"]
    assert fresh.components["confirmationFreshness"] == 0.3968502629920499


def test_the_run_calls_the_production_selector_as_the_protocol_says(
    prepared: Prepared, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert vars(eviction)["select_facts_for_capacity"] is select_facts_for_capacity
    calls: list[dict[str, Any]] = []

    def spy(facts: Any, **kwargs: Any) -> Any:
        calls.append({"facts": facts, **kwargs})
        return select_facts_for_capacity(facts, **kwargs)

    monkeypatch.setattr(eviction, "select_facts_for_capacity", spy)
    case = prepared.cases[0]
    clock = prepared.protocol.config.evaluation_time
    decide(prepared.protocol, case, "confidence", 7)
    decide(prepared.protocol, case, "hybrid-v1", 7)
    assert calls[0] == {
        "facts": case.facts,
        "max_facts": 7,
        "policy": "confidence",
        "usage": case.usage,
        "now": clock,
    }
    assert calls[1] == {
        "facts": case.facts,
        "max_facts": 7,
        "policy": CapacityPolicy(
            name="hybrid-v1",
            confidence_weight=0.65,
            confirmation_weight=0.25,
            access_weight=0.10,
            confirmation_half_life_days=90,
            access_half_life_days=30,
            correction_reserved_fraction=0.10,
            correction_reserved_max=10,
        ),
        "usage": case.usage,
        "now": clock,
    }


def test_rows_hold_identifiers_scores_and_flags_only(prepared: Prepared) -> None:
    rows: list[dict[str, Any]] = [policy_row(outcome) for outcome in prepared.outcomes]
    assert len(rows) == 270
    assert [(row["case_id"], row["capacity"], row["policy"]) for row in rows[:6]] == [
        ("01493427", capacity, policy)
        for capacity in (5, 7, 9)
        for policy in ("confidence", "hybrid-v1")
    ]
    text = "".join(json.dumps(row) for row in rows)
    for case in prepared.cases:
        assert case.question not in text
        for fact in case.facts:
            assert str(fact["content"]) not in text
    for row in rows:
        assert set(row) == ROW_KEYS
        assert len(row["scores"]) == 10
        assert len(row["kept_fact_ids"]) + len(row["evicted"]) == 10
        assert row["support_fact_ids"] == [f"gold_{row['case_id']}"]
        assert all(fact_id.startswith(("gold_", "d_")) for fact_id in row["scores"])
        for evicted in row["evicted"]:
            assert set(evicted) == {"category", "components", "fact_id", "score"}
        assert row["support_recall"] == (1.0 if row["support_all_retained"] else 0.0)


def test_evicted_lowest_first_and_the_correction_reserve(prepared: Prepared) -> None:
    confirmation: dict[str, Any] = policy_row(prepared.outcome("07741c45", 7, "confidence"))
    assert confirmation["support_all_retained"] is False  # loss rank 8
    scores = [item["score"] for item in confirmation["evicted"]]
    assert scores == sorted(scores)
    assert policy_row(prepared.outcome("07741c45", 7, "hybrid-v1"))["support_all_retained"] is True
    correction = prepared.outcome("correction_language", 7, "hybrid-v1")  # loss rank 8
    assert correction.support_all_retained
    assert correction.decision.reserved_correction_slots == 1
    assert not prepared.outcome("correction_language", 7, "confidence").support_all_retained
    assert (
        prepared.outcome("correction_language", 7, "confidence").decision.reserved_correction_slots
        == 0
    )
    assert prepared.outcome("07741c45", 7, "hybrid-v1").decision.reserved_correction_slots == 0


def test_the_summary_keeps_sources_scenarios_caps_and_policies_apart(prepared: Prepared) -> None:
    summary = policy_summary("p", prepared.outcomes)
    groups: list[dict[str, Any]] = summary["groups"]  # type: ignore[assignment]
    assert (summary["schema_version"], summary["protocol_id"], len(groups)) == (1, "p", 30)
    keys = [(g["source"], g["scenario"], g["capacity"], g["policy"]) for g in groups]
    assert keys == sorted(keys)
    first = groups[0]
    assert first == {
        "source": "longmemeval",
        "scenario": "access_help",
        "capacity": 5,
        "policy": "confidence",
        "cases": 10,
        "support_all_retained": 0,
        "support_all_retained_rate": 0.0,
        "mean_support_recall": 0.0,
    }
    confirmation_7 = next(
        g for g in groups if g["scenario"] == "confirmation_help" and g["capacity"] == 7
    )
    assert confirmation_7["support_all_retained_rate"] == 0.3
    assert confirmation_7["mean_support_recall"] == 0.3


def test_the_run_record(prepared: Prepared) -> None:
    record = run_record(
        prepared.protocol,
        prepared.dataset.sha256,
        created_at=datetime(2026, 11, 30, 12, 0, tzinfo=UTC),
        git=None,
    )
    assert record == {
        "schema_version": 1,
        "protocol_id": prepared.protocol.protocol_id,
        "created_at": "2026-11-30T12:00:00.000000Z",
        "git": None,
        "dataset": {
            "repository": "xiaowu0162/longmemeval-cleaned",
            "revision": "98d7416c24c778c2fee6e6f3006e7a073259d48f",
            "filename": "longmemeval_oracle.json",
            "sha256": prepared.dataset.sha256,
        },
        "artifacts": prepared.protocol.artifacts._asdict(),
        "evaluation_time": "2026-08-13T00:00:00+00:00",
        "policies": ["confidence", "hybrid-v1"],
        "capacities": [5, 7, 9],
    }


def write(prepared: Prepared, directory: Path) -> tuple[Path, Path, Path]:
    return write_policy_run(
        directory, prepared.protocol, prepared.dataset.sha256, prepared.outcomes
    )


def test_the_files_are_canonical_and_byte_identical_across_runs(
    prepared: Prepared, tmp_path: Path
) -> None:
    rows, summary, run = write(prepared, tmp_path / "a" / "nested")
    again = write(prepared, tmp_path / "b")
    assert rows.read_bytes() == again[0].read_bytes()
    assert summary.read_bytes() == again[1].read_bytes()
    first, second = json.loads(run.read_text()), json.loads(again[2].read_text())
    for volatile in ("created_at", "git"):
        first.pop(volatile)
        second.pop(volatile)
    assert first == second
    lines = rows.read_text().splitlines(keepends=True)
    assert len(lines) == 270
    assert all(line.endswith("}\n") for line in lines)
    assert lines[0] == json.dumps(json.loads(lines[0]), sort_keys=True, ensure_ascii=False) + "\n"
    assert '"score": 0.6200000000000001' in lines[0]  # Python float repr, unrounded
    for document in (summary, run):
        text = document.read_text()
        assert (
            text
            == json.dumps(json.loads(text), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
        )
    assert sorted(path.name for path in (tmp_path / "b").iterdir()) == [
        "policy.raw.jsonl",
        "run.json",
        "summary.json",
    ]  # no temporary files left behind


def test_a_complete_set_refuses_the_whole_write(prepared: Prepared, tmp_path: Path) -> None:
    # run.json is written last: with it, the set is complete.
    (tmp_path / "run.json").write_text("earlier results\n")
    with pytest.raises(ResultsExistError, match="refusing to overwrite") as caught:
        write(prepared, tmp_path)
    assert caught.value.paths == [str(tmp_path / "run.json")]
    assert [path.name for path in tmp_path.iterdir()] == ["run.json"]
    assert (tmp_path / "run.json").read_text() == "earlier results\n"


@pytest.mark.parametrize("existing", ["policy.raw.jsonl", "summary.json"])
def test_files_of_a_set_without_its_run_json_are_replaced(
    prepared: Prepared, tmp_path: Path, existing: str, caplog: pytest.LogCaptureFixture
) -> None:
    # What a run-policy killed before it linked run.json left.
    (tmp_path / existing).write_text("an interrupted write\n")
    write(prepared, tmp_path)
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        "policy.raw.jsonl",
        "run.json",
        "summary.json",
    ]
    assert (tmp_path / existing).read_text() != "an interrupted write\n"
    assert f"replacing what an interrupted write left: {tmp_path / existing}" in caplog.text
