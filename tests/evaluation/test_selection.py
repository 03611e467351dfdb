"""The 40 official questions and the distractor bank, recomputed from the dataset."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from deermem.eval.dataset import (
    Dataset,
    build_distractor_bank,
    check_official_selection,
    load_dataset,
    select_by_type,
)
from deermem.eval.errors import DatasetIntegrityError, ProtocolError
from deermem.eval.protocol import SelectionRule
from tests.evaluation.conftest import Prepared
from tests.evaluation.longmemeval_data import (
    BANK_IDS,
    KNOWLEDGE_UPDATE,
    TEMPORAL_REASONING,
    official_ids_by_type,
    single_session,
)


def dataset_of(tmp_path: Path, rows: list[dict[str, Any]]) -> Dataset:
    data = json.dumps(rows).encode()
    path = tmp_path / "rows.json"
    path.write_bytes(data)
    return load_dataset(path, expected_sha256=hashlib.sha256(data).hexdigest())


def question(
    question_id: str, question_type: str, answer: object = "yes", chars: int = 100
) -> dict[str, Any]:
    return {
        "question_id": question_id,
        "question_type": question_type,
        "question": "Which?",
        "answer": answer,
        "question_date": None,
        **single_session(question_id, chars),
    }


def test_the_rule_picks_exactly_the_pinned_ids_from_a_shuffled_file(prepared: Prepared) -> None:
    dataset, manifest = prepared.dataset, prepared.protocol.official
    file_order = [row["question_id"] for row in dataset.rows]
    pinned = [qid for qid in file_order if qid in set(manifest.question_ids)]
    assert pinned != sorted(pinned)  # file order is not id order
    by_type = select_by_type(dataset, manifest.selection)
    assert by_type[KNOWLEDGE_UPDATE] == tuple(official_ids_by_type()[KNOWLEDGE_UPDATE])
    assert by_type[TEMPORAL_REASONING] == tuple(official_ids_by_type()[TEMPORAL_REASONING])
    check_official_selection(dataset, manifest, file="manifest.json")  # does not raise


# Weakening any one exclusion lets its decoy into the first 20 of a type.
WEAKENED_RULES = [
    pytest.param({"excluded_pilot_ids": ()}, id="pilot ids"),
    pytest.param({"exclude_abstention_suffix": "_none"}, id="_abs suffix"),
    pytest.param({"answer_max_chars": 101}, id="answer over 100 chars"),
    pytest.param({"answer_min_chars": 0}, id="empty answer"),
    pytest.param({"answer_excluded_substrings": ("only mentioned",)}, id="not enough"),
    pytest.param({"answer_excluded_substrings": ("not enough",)}, id="only mentioned"),
    pytest.param({"evidence_max_chars": 2001}, id="evidence over 2000 chars"),
    pytest.param({"evidence_min_chars": 0}, id="empty evidence"),
]


@pytest.mark.parametrize("change", WEAKENED_RULES)
def test_every_exclusion_matters(prepared: Prepared, change: dict[str, Any]) -> None:
    manifest = prepared.protocol.official
    weakened = manifest.model_copy(
        update={"selection": manifest.selection.model_copy(update=change)}
    )
    with pytest.raises(ProtocolError, match="does not match the selection rule") as caught:
        check_official_selection(prepared.dataset, weakened, file="official.json")
    assert caught.value.file == "official.json"
    assert caught.value.key is not None
    assert caught.value.key.startswith("scenarios.")


def test_pinned_ids_in_another_scenario_or_order_do_not_match(prepared: Prepared) -> None:
    manifest = prepared.protocol.official
    scenarios = dict(manifest.scenarios)
    first = scenarios["confirmation_help"]
    scenarios["confirmation_help"] = (first[1], first[0], *first[2:])  # order matters
    with pytest.raises(ProtocolError) as caught:
        check_official_selection(
            prepared.dataset, manifest.model_copy(update={"scenarios": scenarios}), file="m"
        )
    assert caught.value.key == "scenarios.confirmation_help"
    assert "'01493427', '06db6396'" in str(caught.value)  # what the rule expects

    scenarios = dict(manifest.scenarios)
    a, b = scenarios["access_help"], scenarios["confidence_control"]
    scenarios["access_help"], scenarios["confidence_control"] = (b[0], *a[1:]), (a[0], *b[1:])
    with pytest.raises(ProtocolError, match=r"scenarios\.access_help"):
        check_official_selection(
            prepared.dataset, manifest.model_copy(update={"scenarios": scenarios}), file="m"
        )


def test_too_few_eligible_rows_is_a_dataset_error(tmp_path: Path, prepared: Prepared) -> None:
    rows = [row for row in prepared.dataset.rows if row["question_id"] != "45dc21b6"]
    rows = [row for row in rows if row["question_id"] not in ("ffff0001",)]
    dataset = dataset_of(tmp_path, rows)
    with pytest.raises(DatasetIntegrityError, match="only 19 'knowledge-update' questions"):
        select_by_type(dataset, prepared.protocol.official.selection)


def test_bounds_are_inclusive_and_the_rule_takes_the_first_ids(tmp_path: Path) -> None:
    rule = SelectionRule(
        eligible_question_types=(KNOWLEDGE_UPDATE,),
        excluded_pilot_ids=(),
        exclude_abstention_suffix="_abs",
        answer_min_chars=1,
        answer_max_chars=10,
        answer_excluded_substrings=("Not Enough",),  # phrases compare lower-cased too
        evidence_min_chars=50,
        evidence_max_chars=60,
        take_per_question_type=3,
        cases_per_type_per_scenario=1,
    )
    rows = [
        question("d", KNOWLEDGE_UPDATE, answer=" " * 5 + "x" * 10 + " ", chars=55),  # 10 stripped
        question("c", KNOWLEDGE_UPDATE, chars=50),
        question("b", KNOWLEDGE_UPDATE, chars=60),
        question("a", KNOWLEDGE_UPDATE, answer="not enough info", chars=55),
        question("a0", KNOWLEDGE_UPDATE, answer="x" * 11, chars=55),
        question("a1", KNOWLEDGE_UPDATE, chars=61),
        question("a2", KNOWLEDGE_UPDATE, chars=49),
        question("e", KNOWLEDGE_UPDATE, answer=12345, chars=55),  # qualifies, but is 4th
        question("f", TEMPORAL_REASONING),
        question("g", ["knowledge-update"]),  # type: ignore[arg-type]  # a malformed type
    ]
    assert select_by_type(dataset_of(tmp_path, rows), rule) == {KNOWLEDGE_UPDATE: ("b", "c", "d")}


def test_the_bank_filters_by_type_and_length_and_is_sorted(prepared: Prepared) -> None:
    bank = build_distractor_bank(prepared.dataset, prepared.protocol.config.pool)
    assert tuple(entry.record.question_id for entry in bank) == BANK_IDS
    assert [entry.position for entry in bank] == list(range(40))
    lengths = [len(entry.record.content) for entry in bank]
    assert (lengths[0], lengths[22], lengths[39]) == (40, 697, 700)  # both bounds inclusive
    assert bank[22].record.question_id == "35a27287"
    for decoy in ("000aaaa1", "000aaaa2", "000aaaa3", "5e000001"):
        assert decoy not in {entry.record.question_id for entry in bank}


def test_a_bank_too_small_is_refused(tmp_path: Path, prepared: Prepared) -> None:
    rows = [row for row in prepared.dataset.rows if row["question_id"] not in BANK_IDS[:2]]
    with pytest.raises(DatasetIntegrityError, match="only 39 records qualify"):
        build_distractor_bank(dataset_of(tmp_path, rows), prepared.protocol.config.pool)


def test_the_bank_ignores_the_official_exclusions(tmp_path: Path, prepared: Prepared) -> None:
    rows = [*prepared.dataset.rows, question("0000_abs", "single-session-user")]
    bank = build_distractor_bank(dataset_of(tmp_path, rows), prepared.protocol.config.pool)
    assert bank[0].record.question_id == "0000_abs"
