"""Pools: offsets, fact ids, sort order, scenario metadata and build order."""

from __future__ import annotations

import pytest

from deermem.eval.dataset import (
    EvaluationCase,
    build_cases,
    case_offset,
    distractor_metadata,
    support_metadata,
)
from tests.evaluation.conftest import Prepared
from tests.evaluation.longmemeval_data import BANK_IDS

# Offsets of all 45 cases (reference eval-harness-spec.md §3.4).
PINNED_OFFSETS = {
    "01493427": 4, "06db6396": 2, "07741c44": 13, "07741c45": 24, "08e075c7": 26,
    "08f4fc43": 16, "0bb5a684": 26, "0bc8ad92": 36, "0db4c65d": 20, "2a1811e2": 13,
    "0977f2af": 28, "0ddfec37": 19, "0e4e4c46": 32, "10e09553": 11, "184da446": 31,
    "2c63a862": 30, "2ebe6c90": 28, "2ebe6c92": 36, "370a8ff4": 18, "4dfccbf7": 25,
    "18bc8abd": 23, "1cea1afa": 21, "2133c1b5": 28, "22d2cb42": 28, "2698e78f": 39,
    "5e1b23de": 39, "6e984301": 22, "71017276": 2, "71017277": 26, "8c18457d": 22,
    "26bdc477": 30, "3ba21379": 23, "41698283": 32, "42ec0761": 11, "45dc21b6": 31,
    "982b5123": 19, "993da5e2": 22, "9a707b81": 13, "a3045048": 10, "af082822": 23,
    "correction_peanut_allergy": 5, "correction_language": 9, "correction_timezone": 12,
    "correction_review_resolution": 25, "correction_shipping_address": 39,
}  # fmt: skip


def case(prepared: Prepared, case_id: str) -> EvaluationCase:
    return next(item for item in prepared.cases if item.case_id == case_id)


def window(offset: int, bank: list[str], size: int) -> list[str]:
    return [bank[(offset + index) % len(bank)] for index in range(size)]


def test_offsets_are_the_first_four_digest_bytes_big_endian_mod_the_bank() -> None:
    # sha256("deermem-medium-v1:01493427") starts bf78a83c = 3212355644; mod 40 = 4
    assert case_offset("deermem-medium-v1", "01493427", 40) == 3212355644 % 40 == 4
    bank = ["b0", "b1", "b2", "b3", "b4"]
    assert window(case_offset("offset-ns", "case-a", 5), bank, 3) == ["b0", "b1", "b2"]
    assert window(case_offset("offset-ns", "case-c", 5), bank, 3) == ["b3", "b4", "b0"]
    assert window(case_offset("alt-ns", "case-a", 5), bank, 3) == ["b1", "b2", "b3"]


def test_every_case_has_its_pinned_offset(prepared: Prepared) -> None:
    assert {item.case_id: item.offset for item in prepared.cases} == PINNED_OFFSETS


def test_fact_ids_name_case_index_and_source_and_wrap_around_the_bank(prepared: Prepared) -> None:
    item = case(prepared, "2698e78f")  # offset 39: the window wraps after one distractor
    ids = [fact["id"] for fact in item.facts]
    assert ids == [
        "d_2698e78f_0_5d3d2817",
        *(f"d_2698e78f_{index}_{BANK_IDS[index - 1]}" for index in range(1, 9)),
        "gold_2698e78f",
    ]
    assert item.support_fact_ids == ("gold_2698e78f",)
    sources = [str(fact["source"]) for fact in item.facts]
    assert sources[-1] == "deermem-eviction-eval:2698e78f"
    assert sources[0] == "deermem-eviction-eval:5d3d2817"


def test_facts_are_sorted_by_id_and_carry_the_canonical_keys(prepared: Prepared) -> None:
    for item in prepared.cases:
        ids = [str(fact["id"]) for fact in item.facts]
        assert ids == sorted(ids)
        assert ids[-1].startswith("gold_")  # 'g' sorts after 'd'
        assert len(ids) == len(set(ids)) == 10
    support = case(prepared, "01493427").facts[-1]
    assert support == {
        "id": "gold_01493427",
        "content": prepared.dataset.evidence("01493427").content,
        "category": "context",
        "confidence": 0.70,
        "createdAt": "2026-02-14T00:00:00Z",
        "lastConfirmedAt": "2026-08-06T00:00:00Z",
        "confirmationCount": 1,
        "source": "deermem-eviction-eval:01493427",
    }
    confidence_control = case(prepared, "18bc8abd").facts[-1]
    assert confidence_control["createdAt"] == "2026-07-14T00:00:00Z"  # 30 days
    assert "lastConfirmedAt" not in confidence_control


def test_usage_marks_hot_facts_at_the_clock(prepared: Prepared) -> None:
    entry = {"accessHeat": 8, "accessCount": 8, "lastAccessedAt": "2026-08-13T00:00:00Z"}
    assert case(prepared, "0977f2af").usage == {"gold_0977f2af": entry}  # access_help
    assert case(prepared, "01493427").usage == {}  # confirmation_help: no heat anywhere
    control = case(prepared, "18bc8abd")  # confidence_control: even distractors >= 5
    hot = [
        str(f["id"])
        for f in control.facts
        if str(f["id"]).startswith(("d_18bc8abd_6_", "d_18bc8abd_8_"))
    ]
    assert len(hot) == 2
    assert sorted(control.usage) == hot


def test_distractor_categories_follow_the_source_type(prepared: Prepared) -> None:
    for fact in case(prepared, "01493427").facts[:-1]:
        source = str(fact["source"]).rsplit(":", 1)[1]
        source_type = prepared.dataset.evidence(source).question_type
        expected = "preference" if source_type == "single-session-preference" else "context"
        assert fact["category"] == expected
    assert case(prepared, "correction_language").facts[-1]["category"] == "correction"


# Distractor confidences are Python float expressions, compared bit for bit.
@pytest.mark.parametrize(
    ("scenario", "outranking", "expected"),
    [
        (
            "confirmation_help",
            5,
            [
                0.94,
                0.9199999999999999,
                0.8999999999999999,
                0.8799999999999999,
                0.86,
                0.68,
                0.66,
                0.64,
                0.6200000000000001,
            ],
        ),
        (
            "access_help",
            9,
            [
                0.94,
                0.9199999999999999,
                0.8999999999999999,
                0.8799999999999999,
                0.86,
                0.84,
                0.82,
                0.7999999999999999,
                0.7799999999999999,
            ],
        ),
        (
            "confidence_control",
            7,
            [
                0.94,
                0.9199999999999999,
                0.8999999999999999,
                0.8799999999999999,
                0.86,
                0.7,
                0.7,
                0.7,
                0.7,
            ],
        ),
        ("noisy_signal_control", 5, [0.7] * 9),
        (
            "correction_reserve",
            7,
            [0.9, 0.87, 0.8400000000000001, 0.81, 0.78, 0.75, 0.72, 0.6, 0.58],
        ),
        (
            "correction_reserve",
            5,
            [0.9, 0.87, 0.8400000000000001, 0.81, 0.78, 0.6, 0.58, 0.5599999999999999, 0.54],
        ),
    ],
)
def test_distractor_confidence_is_ieee_exact(
    scenario: str, outranking: int, expected: list[float]
) -> None:
    got = [distractor_metadata(scenario, index, outranking).confidence for index in range(9)]
    assert [value.hex() for value in got] == [value.hex() for value in expected]


def test_scenario_signals_on_distractors() -> None:
    control = [distractor_metadata("confidence_control", index, 7) for index in range(9)]
    assert [(m.confirmed_days, m.access_heat) for m in control[5:]] == [
        (7, 0),
        (None, 8),
        (7, 0),
        (None, 8),
    ]
    noisy = [distractor_metadata("noisy_signal_control", index, 5) for index in range(9)]
    assert [(m.confirmed_days, m.access_heat) for m in noisy] == [
        (None, 8), (7, 0), (None, 8), (7, 0), (None, 8), (None, 0), (None, 0), (None, 0), (None, 0),
    ]  # fmt: skip
    assert all(m.created_days == 180 for m in control + noisy)
    with pytest.raises(ValueError, match="unknown evaluation scenario"):
        distractor_metadata("nope", 0, 1)
    with pytest.raises(ValueError, match="unknown evaluation scenario"):
        support_metadata("nope")


def test_cases_come_in_build_order_with_zipped_loss_ranks(prepared: Prepared) -> None:
    cases = prepared.cases
    assert len(cases) == 45
    assert [item.scenario for item in cases[::10]] == [
        "confirmation_help",
        "access_help",
        "confidence_control",
        "noisy_signal_control",
        "correction_reserve",
    ]
    first = cases[:10]
    assert [item.question_type for item in first] == ["knowledge-update"] * 5 + [
        "temporal-reasoning"
    ] * 5
    assert [item.loss_rank for item in first] == [6, 6, 6, 8, 8, 8, 10, 10, 10, 10]
    assert [item.outranking_count for item in first[:3]] == [5, 5, 5]
    assert all(item.source == "longmemeval" for item in cases[:40])
    synthetic = cases[40:]
    assert [item.case_id for item in synthetic] == [
        c.case_id for c in prepared.protocol.synthetic.cases
    ]
    assert [item.loss_rank for item in synthetic] == [6, 8, 8, 10, 10]
    for item in synthetic:
        assert (item.source, item.question_type, item.question_date) == (
            "synthetic",
            "synthetic-correction",
            None,
        )
        assert item.facts[-1]["content"] == next(
            c.support_fact for c in prepared.protocol.synthetic.cases if c.case_id == item.case_id
        )


def test_official_cases_carry_their_question(prepared: Prepared) -> None:
    item = case(prepared, "0bb5a684")  # the generated integer answer
    record = prepared.dataset.evidence("0bb5a684")
    assert (item.question, item.answer, item.question_date) == (
        record.question,
        record.answer,
        record.question_date,
    )
    assert case(prepared, "08f4fc43").answer == "3"


def test_building_twice_gives_identical_cases(prepared: Prepared) -> None:
    assert build_cases(prepared.protocol, prepared.dataset) == prepared.cases
