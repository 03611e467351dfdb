"""Remembered timestamp parsing reads what parse_timestamp reads, in bounded memory."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from deermem.model import format_timestamp, parse_timestamp
from deermem.policy.scoring import TIMESTAMP_MEMO_SIZE, _parse_text, read_timestamp

NOW = datetime(2026, 8, 13, tzinfo=UTC)


@given(
    st.one_of(
        st.none(),
        st.integers(),
        st.lists(st.integers(), max_size=2),
        st.text(max_size=40),
        st.datetimes(timezones=st.none() | st.just(UTC)),
        st.floats(min_value=-400, max_value=400).map(
            lambda days: format_timestamp(NOW - timedelta(days=days))
        ),
        st.sampled_from(
            [
                "2026-01-02T03:04:05+05:30",
                " 2026-01-02T03:04:05Z ",
                "2026-01-02T03:04:05",
                "2026-13-01",
            ]
        ),
    )
)
def test_remembered_timestamps_read_as_parsed_ones(value: object) -> None:
    first, again = read_timestamp(value), read_timestamp(value)
    parsed = parse_timestamp(value)
    assert first == again == parsed
    assert (first is None) == (parsed is None)
    if first is not None:
        assert first.tzinfo is not None
        assert first.utcoffset() == timedelta(0)


def test_the_memo_forgets_beyond_its_bound() -> None:
    texts = [
        format_timestamp(NOW - timedelta(seconds=second))
        for second in range(TIMESTAMP_MEMO_SIZE + 100)
    ]
    for text in texts:
        read_timestamp(text)
    assert _parse_text.cache_info().currsize == TIMESTAMP_MEMO_SIZE
    # The oldest texts were forgotten, and still read correctly when they come back.
    assert read_timestamp(texts[0]) == parse_timestamp(texts[0])
