"""The answer tasks and the request fingerprint (reference §2.4 and §4.2)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from deermem.eval.answerers import HttpAnswerer, resolve_endpoint
from deermem.eval.dataset import build_cases, load_dataset
from deermem.eval.protocol import load_protocol
from deermem.eval.qa import (
    RequestSettings,
    build_answer_tasks,
    request_fingerprint,
    request_payload,
)
from deermem.llm import ChatMessage, OpenAICompatibleModel
from deermem.llm import request_fingerprint as llm_request_fingerprint
from tests.evaluation.conftest import Answered, Generated, Prepared
from tests.evaluation.longmemeval_data import copy_protocol
from tests.evaluation.original_protocol import write_original_bundle
from tests.published import published_rows

SETTINGS = RequestSettings(model="deepseek-v4-flash", temperature=0.0, max_tokens=2048)


def _example_messages() -> list[dict[str, str]]:
    """The rendering example of reference §2.4, under the bundled prompt."""
    return load_protocol().answer_template.render(
        question="Where does the user live?",
        question_date="2023/05/20 (Sat) 02:21",
        facts=[("fact-b", "The cat sleeps in the study."), ("fact-a", "The user moved to Lyon.")],
    )


def test_the_fingerprint_hashes_the_payload_exactly_as_section_4_2_says() -> None:
    messages = _example_messages()
    system = messages[0]["content"]
    assert '"' not in system  # so it needs no escaping below
    assert "\\" not in system
    # Written out by hand: sorted keys (max_tokens, messages, model, stream,
    # temperature; content before role), ", " and ": " separators, no indent,
    # temperature as 0.0, newlines escaped, everything else as is.
    expected = (
        '{"max_tokens": 2048, "messages": [{"content": "' + system + '", "role": "system"}, '
        '{"content": "CURRENT DATE: 2023/05/20 (Sat) 02:21\\nSTORED MEMORY:\\n[fact-a]\\n'
        "The user moved to Lyon.\\n\\n[fact-b]\\nThe cat sleeps in the study.\\n\\n"
        'QUESTION: Where does the user live?", "role": "user"}], '
        '"model": "deepseek-v4-flash", "stream": false, "temperature": 0.0}'
    )
    payload = request_payload(SETTINGS, messages)
    assert request_fingerprint(payload) == hashlib.sha256(expected.encode("utf-8")).hexdigest()
    # the HTTP client's fingerprint is the same function of the payload
    assert llm_request_fingerprint(payload) == request_fingerprint(payload)


def test_non_ascii_text_is_hashed_as_utf_8_not_escaped() -> None:
    payload = request_payload(
        SETTINGS._replace(model="m", max_tokens=1),
        [{"role": "user", "content": "Zürich — 東京"}],
    )
    expected = (
        '{"max_tokens": 1, "messages": [{"content": "Zürich — 東京", "role": "user"}], '
        '"model": "m", "stream": false, "temperature": 0.0}'
    )
    assert request_fingerprint(payload) == hashlib.sha256(expected.encode()).hexdigest()


def test_an_integer_temperature_is_sent_and_hashed_as_a_float() -> None:
    payload = request_payload(SETTINGS._replace(temperature=0), _example_messages())
    assert payload["temperature"] == 0.0
    assert isinstance(payload["temperature"], float)
    assert request_fingerprint(payload) == request_fingerprint(
        request_payload(SETTINGS, _example_messages())
    )


def test_the_http_client_would_build_the_very_payload_that_is_hashed(
    answered: Answered, prepared: Prepared
) -> None:
    messages = [ChatMessage(m["role"], m["content"]) for m in answered.tasks[0].messages]  # type: ignore[arg-type]
    client = OpenAICompatibleModel(
        "deepseek-v4-flash",
        base_url="http://127.0.0.1:9/v1",
        api_key_env=None,
        temperature=0,
        max_tokens=2048,
        seed=None,
    )
    assert client.build_payload(messages) == answered.tasks[0].payload
    qa = prepared.protocol.config.qa
    environ = {qa.base_url_env: "http://127.0.0.1:9/v1", qa.api_key_env: "k"}
    answerer = HttpAnswerer(qa, resolve_endpoint(qa, environ), environ=environ)
    try:
        for task in answered.tasks[:4]:
            rebuilt = [ChatMessage(m["role"], m["content"]) for m in task.messages]  # type: ignore[arg-type]
            assert answerer.client.build_payload(rebuilt) == task.payload
    finally:
        answerer.close()


def test_tasks_follow_case_then_policy_order_at_the_qa_capacity(
    answered: Answered, prepared: Prepared
) -> None:
    tasks = answered.tasks
    assert len(tasks) == 90
    assert [task.row_id for task in tasks[:2]] == ["01493427__confidence", "01493427__hybrid-v1"]
    assert [task.case.case_id for task in tasks[::2]] == [case.case_id for case in prepared.cases]
    for task in tasks:
        outcome = prepared.outcome(task.case.case_id, 7, task.policy)
        assert (task.capacity, task.kept_fact_ids) == (7, outcome.kept_fact_ids)
        user = task.messages[1]["content"]
        for fact in task.case.facts:
            assert (f"[{fact['id']}]\n{fact['content']}" in user) is (
                fact["id"] in task.kept_fact_ids
            )
        assert user.endswith(f"QUESTION: {task.case.question}")
        assert user.startswith("CURRENT DATE: " if task.case.question_date else "STORED MEMORY:")
        assert task.fingerprint == request_fingerprint(task.payload)


def test_the_fingerprint_covers_memory_text_question_and_settings(
    prepared: Prepared, answered: Answered
) -> None:
    case = prepared.cases[0]
    base = build_answer_tasks(prepared.protocol, [case], SETTINGS)[0].fingerprint
    assert base == answered.tasks[0].fingerprint
    facts = list(case.facts)
    kept = answered.tasks[0].kept_fact_ids[0]
    position = next(i for i, fact in enumerate(facts) if fact["id"] == kept)
    facts[position] = {**facts[position], "content": str(facts[position]["content"]) + "!"}
    variants = [
        case._replace(facts=tuple(facts)),
        case._replace(question=case.question + " "),
        case._replace(question_date=None),
    ]
    for variant in variants:
        assert build_answer_tasks(prepared.protocol, [variant], SETTINGS)[0].fingerprint != base
    for settings in (
        SETTINGS._replace(model="other"),
        SETTINGS._replace(max_tokens=1024),
        SETTINGS._replace(temperature=0.1),
    ):
        assert build_answer_tasks(prepared.protocol, [case], settings)[0].fingerprint != base


def test_both_policies_send_one_request_when_they_keep_the_same_facts(
    answered: Answered,
) -> None:
    # Memory is rendered sorted by id, so rank order and policy never reach the request.
    by_case: dict[str, list[str]] = {}
    for task in answered.tasks:
        by_case.setdefault(task.case.case_id, []).append(task.fingerprint)
    for task_pair in zip(answered.tasks[::2], answered.tasks[1::2], strict=True):
        same_facts = set(task_pair[0].kept_fact_ids) == set(task_pair[1].kept_fact_ids)
        assert (task_pair[0].fingerprint == task_pair[1].fingerprint) is same_facts
    assert len({fingerprint for pair in by_case.values() for fingerprint in pair}) < 90


# --- the published fingerprints ---------------------------------------------------------------


def test_published_fingerprints_cannot_be_recomputed_without_the_dataset() -> None:
    # Every published request holds at least six distractors: LongMemEval evidence
    # text, which is neither published nor shipped. So no published fingerprint
    # can be reproduced offline; grade-qa recomputes them from the dataset.
    for row in published_rows():
        kept = row["kept_fact_ids"]
        assert isinstance(kept, list)
        assert sum(1 for fact_id in kept if str(fact_id).startswith("d_")) >= 6


def test_under_the_original_bundle_our_requests_pair_up_as_the_published_ones_do(
    generated: Generated, tmp_path: Path
) -> None:
    """What *can* be checked offline: identity, kept facts, and which requests coincide."""
    original = write_original_bundle(tmp_path / "original")
    files = copy_protocol(
        tmp_path / "repinned", generated.sha256, source=original, root=tmp_path / "original"
    )
    protocol = load_protocol(files)
    assert protocol.artifacts.answer_prompt_sha256 == (
        "2bd4f166219946ccff7ac86f52a053c6dbf8be6d27e178c398d6bf70cf8a7423"
    )
    dataset = load_dataset(generated.dataset, expected_sha256=generated.sha256)
    tasks = build_answer_tasks(
        protocol, build_cases(protocol, dataset), RequestSettings.from_protocol(protocol)
    )
    published = {str(row["row_id"]): row for row in published_rows()}
    assert sorted(published) == sorted(task.row_id for task in tasks)
    ours_same: dict[str, bool] = {}
    theirs_same: dict[str, bool] = {}
    for first, second in zip(tasks[::2], tasks[1::2], strict=True):
        case = first.case.case_id
        for task in (first, second):
            row = published[task.row_id]
            assert (row["case_id"], row["policy"], row["capacity"]) == (case, task.policy, 7)
            assert row["kept_fact_ids"] == list(task.kept_fact_ids)
            assert row["request_fingerprint"] != task.fingerprint  # other evidence text
        ours_same[case] = first.fingerprint == second.fingerprint
        theirs_same[case] = (
            published[first.row_id]["request_fingerprint"]
            == published[second.row_id]["request_fingerprint"]
        )
    assert ours_same == theirs_same
    # the same facts either way: loss rank 6 in confirmation_help, access_help and
    # correction_reserve (3 + 3 + 1), loss ranks 6 and 8 in noisy_signal_control (6)
    assert sum(ours_same.values()) == 13


@pytest.mark.parametrize("model", ["deepseek-v4-flash", "SmolLM2-135M-Instruct.Q4_1"])
def test_settings_come_from_the_protocol(prepared: Prepared, model: str) -> None:
    settings = RequestSettings.from_protocol(prepared.protocol, model=model)
    assert settings == RequestSettings(model, 0.0, 2048, False)
    assert json.dumps(request_payload(settings, [{"role": "user", "content": "x"}])["stream"]) == (
        "false"
    )
