"""Finding the memory update in a model's answer (catalogue: TestExtractText,
TestUpdateMemoryStructuredResponse parsing, TestParseMemoryUpdateFactsToRemoveGate)."""

from __future__ import annotations

import json

import pytest

from deermem.learning.answer import (
    MAX_DECODE_ATTEMPTS,
    MAX_RESPONSE_CHARS,
    NoUpdate,
    UpdatePayload,
    parse_update_response,
    response_text,
)

UPDATE = {"user": {}, "history": {}, "newFacts": [{"content": "Uses uv", "confidence": 0.9}]}
UPDATE_JSON = json.dumps(UPDATE)


def found(content: object) -> dict[str, object]:
    result = parse_update_response(content)
    assert isinstance(result, UpdatePayload), result
    return dict(result.data)


# --- the text of an answer ------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "text"),
    [
        ("plain text", "plain text"),  # strings pass through
        ([{"type": "text", "text": "one"}], "one"),  # a single text block
        ([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}], "a\nb"),  # blocks: newline
        (["only"], "only"),  # a list of one plain string
        (['{"us', 'er": 1}'], '{"user": 1}'),  # adjacent chunks join directly
        (["lead", {"type": "text", "text": "block"}], "lead\nblock"),  # string, then block
        (["a", "b", {"type": "text", "text": "c"}], "ab\nc"),  # chunks merged, then the block
        ([{"type": "image_url", "image_url": "x"}, {"type": "text", "text": "t"}], "t"),
        ([], ""),  # empty list
        ([{"type": "image_url", "image_url": "x"}], ""),  # no text blocks
        (42, "42"),  # anything else is rendered
        (None, ""),  # no content at all
    ],
)
def test_response_text(content: object, text: str) -> None:
    assert response_text(content) == text


# --- tolerated wrappers -----------------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    [
        UPDATE_JSON,
        f"<think>let me see {{ what }} changed</think>\n{UPDATE_JSON}",  # closed think tag
        f"<think>the user wants uv, so {UPDATE_JSON}",  # think tag never closed
        f"Here is the update you asked for:\n{UPDATE_JSON}",  # leading prose
        f"{UPDATE_JSON}\nLet me know if anything else should change.",  # trailing text
        f"```json\n{UPDATE_JSON}\n```",  # code fence
        f"<THINK>upper case</THINK>```\n{UPDATE_JSON}\n```\ndone",  # all at once
    ],
)
def test_wrapped_updates_are_found(answer: str) -> None:
    assert found(answer) == UPDATE


def test_content_blocks_are_parsed() -> None:
    blocks = [{"type": "text", "text": "Sure."}, {"type": "text", "text": UPDATE_JSON}]
    assert found(blocks) == UPDATE


def test_unrelated_json_before_the_update_is_skipped() -> None:
    answer = '{"user": "alice"} was mentioned; the update: ' + UPDATE_JSON
    result = parse_update_response(answer)
    assert isinstance(result, UpdatePayload)
    assert result.data == UPDATE
    assert result.offset == answer.index(UPDATE_JSON)


def test_a_decoy_without_history_and_new_facts_is_not_an_update() -> None:
    assert parse_update_response('{"user": "alice"}') == NoUpdate("no-update-object")


def test_an_update_without_facts_to_remove_is_accepted() -> None:
    assert "factsToRemove" not in found(UPDATE_JSON)


def test_an_update_nested_in_a_wrapper_object_is_found() -> None:
    assert found(json.dumps({"result": UPDATE})) == UPDATE


def test_the_answer_wins_over_a_draft_in_the_reasoning() -> None:
    draft = json.dumps({**UPDATE, "newFacts": []})
    assert found(f"<think>draft: {draft}</think>{UPDATE_JSON}") == UPDATE


def test_an_update_only_inside_closed_reasoning_is_still_used() -> None:
    assert found(f"<think>{UPDATE_JSON}</think> I am done.") == UPDATE


# --- no update --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ("", "empty"),
        ("   \n ", "empty"),
        ([], "empty"),
        ("I could not find anything worth remembering.", "no-update-object"),
        (UPDATE_JSON[:-5], "no-update-object"),  # truncated JSON
        ("[1, 2, 3]", "no-update-object"),
        ("{" * 10_000, "no-update-object"),
    ],
)
def test_answers_without_an_update(answer: object, reason: str) -> None:
    assert parse_update_response(answer) == NoUpdate(reason)  # type: ignore[arg-type]


def test_an_answer_over_the_size_limit_is_not_parsed() -> None:
    answer = UPDATE_JSON + " " * MAX_RESPONSE_CHARS
    assert parse_update_response(answer) == NoUpdate("too-large")


def test_nesting_past_the_recursion_limit_is_no_update() -> None:
    answer = '{"a": ' * 20_000 + "1" + "}" * 20_000
    assert parse_update_response(answer) == NoUpdate("scan-limit")


def test_many_long_failing_candidates_exhaust_the_scan_budget() -> None:
    # Every "{" starts an object that is read a long way before it fails:
    # quadratic without a budget, bounded with one.
    answer = ('{"k": [' + "1, " * 1000) * 80
    assert parse_update_response(answer + UPDATE_JSON) == NoUpdate("scan-limit")


def test_many_short_failing_candidates_exhaust_the_attempts() -> None:
    answer = '{"a' * (MAX_DECODE_ATTEMPTS + 10)
    assert parse_update_response(answer + UPDATE_JSON) == NoUpdate("scan-limit")


def test_stray_braces_cost_no_attempts() -> None:
    # Code in the answer is full of braces; none of them can start an object.
    answer = "if (x) { y(); }\n" * (MAX_DECODE_ATTEMPTS * 2)
    assert found(answer + UPDATE_JSON) == UPDATE


def test_an_integer_beyond_the_digit_limit_is_not_a_crash() -> None:
    answer = '{"user": {}, "history": {}, "newFacts": [' + "9" * 5000 + "]}"
    assert parse_update_response(answer) == NoUpdate("no-update-object")


@pytest.mark.parametrize(
    "answer",
    [
        "<think>" * 36_000,  # openings without an end
        "<think " * 36_000,  # openings without even a ">"
        "<think></think>" * 17_000,  # many closed blocks
    ],
)
def test_reasoning_tags_cannot_make_parsing_quadratic(answer: str) -> None:
    # Bounded patterns and a forward scan: each of these parses in milliseconds.
    # (A backtracking pattern took minutes on the first one.)
    assert parse_update_response(answer + UPDATE_JSON) == UpdatePayload(UPDATE, len(answer))


def test_think_tag_names_must_match_to_close() -> None:
    draft = json.dumps({**UPDATE, "newFacts": []})
    answer = f"<thinking>{draft}</think> still thinking</thinking>{UPDATE_JSON}"
    assert found(answer) == UPDATE
