"""The pure parts of the LLM layer: the retry schedule, Retry-After, completion parsing."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deermem.llm import ChatMessage, RetryPolicy, TokenUsage, parse_retry_after
from deermem.llm.openai import InvalidCompletion, error_detail, parse_completion

# --- RetryPolicy ----------------------------------------------------------------


def test_backoff_doubles_and_stops_after_max_retries() -> None:
    policy = RetryPolicy(max_retries=3, backoff_seconds=0.5, max_total_wait_seconds=100)
    assert policy.max_attempts == 4
    assert policy.next_wait(1, 0.0) == 0.5
    assert policy.next_wait(2, 0.5) == 1.0
    assert policy.next_wait(3, 1.5) == 2.0
    assert policy.next_wait(4, 3.5) is None


def test_constant_backoff_with_multiplier_one() -> None:
    # The evaluation's schedule: 3 attempts, 2.0 s before each retry.
    policy = RetryPolicy(max_retries=2, backoff_seconds=2.0, backoff_multiplier=1.0)
    assert [policy.next_wait(1, 0.0), policy.next_wait(2, 2.0)] == [2.0, 2.0]


def test_no_retries() -> None:
    assert RetryPolicy(max_retries=0).next_wait(1, 0.0) is None


def test_retry_after_is_honoured_within_the_budget_only() -> None:
    policy = RetryPolicy(max_retries=5, backoff_seconds=1, max_total_wait_seconds=10)
    assert policy.next_wait(1, 0.0, retry_after=9.5) == 9.5
    assert policy.next_wait(1, 1.0, retry_after=9.5) is None
    ignoring = RetryPolicy(backoff_seconds=1, honour_retry_after=False)
    assert ignoring.next_wait(1, 0.0, retry_after=50) == 1


def test_backoff_is_cut_to_the_remaining_budget_then_stops() -> None:
    policy = RetryPolicy(max_retries=9, backoff_seconds=4, max_total_wait_seconds=5)
    assert policy.next_wait(1, 0.0) == 4
    assert policy.next_wait(2, 4.0) == 1.0
    assert policy.next_wait(3, 5.0) is None


@pytest.mark.parametrize(
    "settings",
    [
        {"max_retries": -1},
        {"backoff_seconds": -0.1},
        {"backoff_seconds": float("inf")},
        {"max_total_wait_seconds": float("nan")},
        {"backoff_multiplier": 0.5},
    ],
)
def test_invalid_policies_are_refused(settings: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="must be"):
        RetryPolicy(**settings)  # type: ignore[arg-type]


@given(
    max_retries=st.integers(0, 10),
    backoff=st.floats(0, 30),
    multiplier=st.floats(1, 4),
    budget=st.floats(0, 120),
    retry_afters=st.lists(st.none() | st.floats(0, 200), min_size=11, max_size=11),
)
def test_a_schedule_never_exceeds_its_budget_or_its_attempts(
    max_retries: int,
    backoff: float,
    multiplier: float,
    budget: float,
    retry_afters: list[float | None],
) -> None:
    policy = RetryPolicy(max_retries, backoff, multiplier, budget)
    waited = 0.0
    waits = 0
    for attempt in range(1, 12):
        wait = policy.next_wait(attempt, waited, retry_afters[attempt - 1])
        if wait is None:
            break
        assert wait >= 0
        waited += wait
        waits += 1
    assert waits <= max_retries
    assert waited <= budget + 1e-9


# --- Retry-After ------------------------------------------------------------------

NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        ("3", 3.0),
        (" 1.5 ", 1.5),
        ("0", 0.0),
        ("-4", 0.0),  # a negative wait means "now"
        ("Mon, 30 Nov 2026 12:00:30 GMT", 30.0),
        ("Mon, 30 Nov 2026 11:00:00 GMT", 0.0),  # in the past
        ("soon", None),
        ("", None),
        ("inf", None),
        (None, None),
    ],
)
def test_parse_retry_after(header: str | None, seconds: float | None) -> None:
    assert parse_retry_after(header, now=NOW) == seconds


# --- completion bodies --------------------------------------------------------------


def completion(content: object, **extra: object) -> dict[str, object]:
    return {"choices": [{"message": {"role": "assistant", "content": content}}], **extra}


@pytest.mark.parametrize(
    ("content", "text"),
    [
        ("plain", "plain"),
        ("", ""),
        ([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}], "ab"),
        ([{"type": "output_text", "text": "x"}], "x"),
        (["raw", " string"], "raw string"),
        ([{"type": "image_url", "image_url": {}}, {"type": "text", "text": "t"}], "t"),
        ([], ""),
    ],
)
def test_content_shapes(content: object, text: str) -> None:
    assert parse_completion(completion(content)).text == text


def test_a_list_without_any_text_is_not_an_answer() -> None:
    with pytest.raises(InvalidCompletion, match="not text"):
        parse_completion(completion([{"type": "image_url", "image_url": {}}]))


def test_usage_keeps_whole_numbers_only() -> None:
    usage = TokenUsage.from_mapping(
        {"prompt_tokens": 3, "completion_tokens": True, "total_tokens": 4.0, "cached": 2, 7: 1}
    )
    assert usage.prompt_tokens == 3
    assert usage.completion_tokens is None  # a boolean is not a count
    assert usage.total_tokens is None
    assert dict(usage.counts) == {"7": 1, "cached": 2, "prompt_tokens": 3}
    assert TokenUsage.from_mapping("lots") == TokenUsage()


@given(st.dictionaries(st.text(max_size=8), st.integers()))
def test_usage_keeps_counts_only(usage: dict[str, int]) -> None:
    """A negative or past-2**53 figure reached the update report as tokens spent."""
    counts = TokenUsage.from_mapping(usage).counts
    assert all(0 <= value <= 2**53 - 1 for value in counts.values())
    assert set(counts) == {key for key, value in usage.items() if 0 <= value <= 2**53 - 1}


def test_model_and_finish_reason_only_when_strings() -> None:
    parsed = parse_completion({"model": 5, "choices": [{"message": {"content": "x"}}]})
    assert parsed.model is None
    assert parsed.finish_reason is None


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        (b'{"error": {"message": "Model not found", "code": 404}}', "Model not found"),
        (b'{"error": "rate limited"}', "rate limited"),
        (b'{"detail": [{"msg": "field required"}]}', '[{"msg": "field required"}]'),
        (b"upstream connect error\n  or disconnect", "upstream connect error or disconnect"),
        (b"\xff\xfe broken", "\ufffd\ufffd broken"),
        (b"", ""),
    ],
)
def test_error_detail_reads_common_error_shapes(body: bytes, detail: str) -> None:
    assert error_detail(body, None) == detail


def test_error_detail_is_short_and_redacted() -> None:
    text = error_detail(b"key sk-abc " + b"x" * 1000, "sk-abc")
    assert "sk-abc" not in text
    assert text.startswith("key [redacted] ")
    assert len(text) == 300


def test_error_detail_of_a_body_nested_too_deeply_is_its_text() -> None:
    body = b'{"error": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    assert error_detail(body, None) == body[:297].decode() + "..."


def test_chat_message_validates_role_and_content() -> None:
    assert ChatMessage.user("hi").to_dict() == {"role": "user", "content": "hi"}
    with pytest.raises(ValueError, match="role"):
        ChatMessage("tool", "x")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="string"):
        ChatMessage("user", None)  # type: ignore[arg-type]
