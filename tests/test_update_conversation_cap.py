"""What one update sends is bounded: ``max_conversation_chars`` (issue 12, item 7).

The pure part (:func:`fit_conversation`) is pinned by examples and a
hypothesis property; the wired part runs ``Memory.learn`` and the queue over
real HTTP against a ScriptedChatServer and measures the request body the
server actually received.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deermem import ConfigError, MemoryConfig
from deermem.learning.plan import (
    DEFAULT_MAX_CONVERSATION_CHARS,
    MIN_CONVERSATION_CHARS,
    UpdateSettings,
)
from deermem.learning.prompt import (
    MAX_TURN_CHARS,
    TRUNCATION_MARKER,
    ConversationTurn,
    fit_conversation,
    format_conversation,
    render_turn,
)
from deermem.testing import ScriptedChatServer
from tests.wire_support import (
    answer,
    close_memories,  # noqa: F401 (autouse fixture)
    conversation,
    new_fact,
    open_memory,
    prompt_of,
    reinforce,
    seed,
    stored_fact,
)

MIN = MIN_CONVERSATION_CHARS
LONG = "I tuned the build cache and the linker flags again today. " * 20  # shortened per turn
WORST = "&" * 2000  # shortened to 1000 characters, each escaped to five


def turns(*texts: str) -> list[ConversationTurn]:
    return [
        ConversationTurn("human" if index % 2 == 0 else "ai", text)
        for index, text in enumerate(texts)
    ]


def sent_conversation(prompt: str) -> str:
    """The text between the prompt's conversation tags."""
    match = re.search(r"<conversation>\n?(.*?)\n?</conversation>", prompt, re.DOTALL)
    assert match is not None
    return match.group(1)


# --- the window, pure ------------------------------------------------------------------


def test_a_conversation_within_the_cap_is_sent_whole() -> None:
    chat = turns("I use uv.", "Noted.", "And ruff.", "Noted too.")
    window = fit_conversation(chat, MIN)
    assert window.text == format_conversation(chat)
    assert (window.start, window.sent, window.left_out) == (0, 4, 0)


def test_beyond_the_cap_the_oldest_turns_are_left_out() -> None:
    chat = turns(*(f"{index}: {LONG}" for index in range(40)))
    window = fit_conversation(chat, MIN)
    assert len(window.text) <= MIN
    assert window.sent + window.left_out == 40
    assert window.left_out > 0
    assert window.start == window.left_out  # no empty turns here
    assert window.text == format_conversation(chat[window.start :])
    assert window.text.startswith(f"{'User' if window.start % 2 == 0 else 'Assistant'}: ")
    assert window.text.endswith(render_turn(chat[-1]))  # the newest, whole
    # One more (older) turn would not have fitted.
    assert len(format_conversation(chat[window.start - 1 :])) > MIN


def test_the_cap_counts_the_rendered_text_escapes_included() -> None:
    chat = turns("&" * 900, "<" * 900, "ok")  # 1,802 characters before escaping
    window = fit_conversation(chat, MIN)
    assert window.text == "Assistant: " + "&lt;" * 900 + "\n\nUser: ok"
    assert (window.sent, window.left_out) == (2, 1)


def test_the_newest_turn_always_fits_whole_even_at_its_longest() -> None:
    assert len(render_turn(ConversationTurn("ai", WORST))) == MAX_TURN_CHARS
    assert MAX_TURN_CHARS < MIN
    window = fit_conversation(turns(WORST, WORST), MIN)
    assert window.text == "Assistant: " + "&amp;" * 500 + TRUNCATION_MARKER + "&amp;" * 500
    assert (window.sent, window.left_out) == (1, 1)


def test_turns_without_text_cost_nothing_and_are_not_counted() -> None:
    chat = turns(
        "<uploaded_files>/mnt/a.pdf</uploaded_files>",  # nothing left after the cut
        "   ",
        *(f"{index}: {LONG}" for index in range(20)),
        "<current_uploads>/mnt/b.csv</current_uploads>",
        "The end.",
    )
    window = fit_conversation(chat, MIN)
    assert window.sent + window.left_out == 21
    assert window.text.endswith("Assistant: The end.")


def test_nothing_to_send_gives_an_empty_window() -> None:
    assert fit_conversation(turns("  ", ""), MIN) == fit_conversation([], MIN)
    window = fit_conversation([], MIN)
    assert (window.text, window.start, window.sent, window.left_out) == ("", 0, 0, 0)


def test_a_cap_below_the_minimum_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 8,000"):
        fit_conversation(turns("hi"), MIN - 1)
    with pytest.raises(ValueError, match="max_conversation_chars must be at least 8,000"):
        UpdateSettings(max_conversation_chars=100)


# Fragments that matter: escapes (up to 5x), CJK, whitespace, upload tags, long runs.
turn_texts = st.lists(
    st.sampled_from(
        ["a", " ", "&", "<", ">", "\n", "好", "<uploaded_files>", "x" * 200, "&" * 300]
    ),
    max_size=60,
).map("".join)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(st.sampled_from(["human", "ai"]), turn_texts), max_size=40),
    st.integers(min_value=MIN, max_value=3 * MIN),
)
def test_the_window_is_the_longest_newest_stretch_within_the_cap(
    raw: list[tuple[str, str]], cap: int
) -> None:
    chat = [ConversationTurn(role, text) for role, text in raw]  # type: ignore[arg-type]
    window = fit_conversation(chat, cap)
    spoken = [turn for turn in chat if render_turn(turn)]
    assert len(window.text) <= cap
    assert window.text == format_conversation(chat[window.start :])
    assert window.sent == sum(1 for turn in chat[window.start :] if render_turn(turn))
    assert window.sent + window.left_out == len(spoken)
    if spoken:
        assert window.sent >= 1  # the newest turn with text is always sent
        assert window.text.endswith(render_turn(spoken[-1]))
    if window.left_out:  # maximal: the next older turn with text would not fit
        assert len(format_conversation(chat[window.start - 1 :])) > cap


# --- the setting -----------------------------------------------------------------------


def test_the_setting_defaults_to_the_update_default_and_reaches_the_updater() -> None:
    assert MemoryConfig().max_conversation_chars == DEFAULT_MAX_CONVERSATION_CHARS == 24_000
    assert UpdateSettings().max_conversation_chars == DEFAULT_MAX_CONVERSATION_CHARS
    config = MemoryConfig(max_conversation_chars=MIN)
    assert UpdateSettings.from_config(config).max_conversation_chars == MIN


@pytest.mark.parametrize(
    "value",
    [MIN - 1, 1_000_001, 0, True, "lots"],
)
def test_an_invalid_cap_names_the_setting_the_value_and_the_range(value: object) -> None:
    with pytest.raises(ConfigError) as caught:
        MemoryConfig(max_conversation_chars=value)
    message = str(caught.value)
    assert "max_conversation_chars" in message
    assert repr(value) in message or str(value) in message
    expected = "not true/false" if value is True else "whole number"
    assert expected in message
    if not isinstance(value, str | bool):
        assert "between 8000 and 1000000" in message


def test_the_setting_loads_from_a_file_and_the_environment(tmp_path: Path) -> None:
    from deermem.config import load_config

    path = tmp_path / "deermem.yaml"
    path.write_text("max_conversation_chars: 12000\n", encoding="utf-8")
    assert load_config(path, environ={}).max_conversation_chars == 12_000
    env = {"DEERMEM_MAX_CONVERSATION_CHARS": "9000"}
    assert load_config(path, environ=env).max_conversation_chars == 9_000


# --- over real HTTP --------------------------------------------------------------------


@pytest.fixture
def server() -> Iterator[ScriptedChatServer]:
    with ScriptedChatServer() as running:
        yield running


def huge_conversation(megabytes: float) -> list[dict[str, str]]:
    """Alternating messages of about 1 KB each, numbered, adding up to ``megabytes``."""
    count = int(megabytes * 1_000_000 / (len(LONG) + 8))
    return conversation(*(f"{index}: {LONG}" for index in range(count)))


def test_a_huge_conversation_becomes_a_bounded_request(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    chat = huge_conversation(5)
    memory = open_memory(tmp_path / "store", server)
    server.enqueue(answer(newFacts=[new_fact("Tunes build caches.")]))
    report = memory.learn("thread-big", chat).report
    assert report.outcome == "applied"
    body = server.requests[0].body
    sent = sent_conversation(prompt_of(server))
    # What a request to the model costs no longer grows with the conversation:
    # the conversation part is within the cap, the body within a small multiple.
    assert len(sent) <= DEFAULT_MAX_CONVERSATION_CHARS
    assert len(body) < 2 * DEFAULT_MAX_CONVERSATION_CHARS < sum(len(m["content"]) for m in chat)
    assert report.messages_sent + report.messages_left_out == len(chat)
    assert report.messages_left_out > len(chat) - 40
    assert report.to_dict()["messagesLeftOut"] == report.messages_left_out
    # The newest messages are the ones sent, whole and in order, up to the last.
    newest = turns(*(message["content"] for message in chat))[report.messages_left_out :]
    assert sent == format_conversation(newest)
    assert sent.startswith(f"{'User' if report.messages_left_out % 2 == 0 else 'Assistant'}: ")


def test_a_conversation_within_the_cap_reports_nothing_left_out(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    memory = open_memory(tmp_path / "store", server)
    server.enqueue(answer())
    report = memory.learn("t", conversation("I use uv.", "Noted.")).report
    assert (report.messages_sent, report.messages_left_out) == (2, 0)
    assert sent_conversation(prompt_of(server)) == "User: I use uv.\n\nAssistant: Noted."


def test_a_smaller_cap_from_the_configuration_is_honoured(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    memory = open_memory(tmp_path / "store", server, max_conversation_chars=MIN)
    server.enqueue(answer())
    report = memory.learn("t", huge_conversation(0.1)).report
    assert len(sent_conversation(prompt_of(server))) <= MIN
    assert report.messages_sent < 10


@pytest.mark.parametrize(("cap", "confirmed"), [(MIN, False), (3 * MIN, True)])
def test_signals_are_detected_only_on_what_is_sent(
    tmp_path: Path, server: ScriptedChatServer, cap: int, confirmed: bool
) -> None:
    """A confirmation the model never sees must not confirm anything."""
    memory = open_memory(tmp_path / "store", server, max_conversation_chars=cap)
    seed(memory, stored_fact("fact_uv", "Uses uv", confidence=0.8))
    confirming = "That's exactly right. " + "&" * 2000  # its block alone: over 5,000
    chat = conversation("Use uv, please.", "Done with uv.", confirming, WORST)
    server.enqueue(answer(factsToReinforce=[reinforce("fact_uv")]))
    report = memory.learn("t", chat).report
    assert ("exactly right" in prompt_of(server)) is confirmed
    assert ("reinforcement" in report.signals) is confirmed
    assert (report.confirmed == ("fact_uv",)) is confirmed
    assert (memory.get_fact("fact_uv").lastConfirmedAt is not None) is confirmed
    expected = (4, 0) if confirmed else (1, 3)
    assert (report.messages_sent, report.messages_left_out) == expected


@pytest.mark.parametrize(("where", "confirmed"), [("middle", False), ("tail", True)])
def test_signals_are_detected_on_a_long_turn_as_it_is_shortened(
    tmp_path: Path, server: ScriptedChatServer, where: str, confirmed: bool
) -> None:
    """A confirmation in the cut-out middle of a long turn is not sent, so it confirms nothing."""
    memory = open_memory(tmp_path / "store", server)
    seed(memory, stored_fact("fact_uv", "Uses uv", confidence=0.8))
    filler = "The build log follows and it is long. " * 40  # over 1,000 characters
    confirming = {
        "middle": filler + "That's exactly right. " + filler,
        "tail": filler + filler + "That's exactly right.",
    }[where]
    chat = conversation("Use uv, please.", "Done with uv.", confirming, "Here is my analysis.")
    server.enqueue(answer(factsToReinforce=[reinforce("fact_uv")]))
    report = memory.learn("t", chat).report
    assert ("exactly right" in prompt_of(server)) is confirmed
    assert ("reinforcement" in report.signals) is confirmed
    assert (report.confirmed == ("fact_uv",)) is confirmed
    assert (memory.get_fact("fact_uv").lastConfirmedAt is not None) is confirmed
    assert (report.messages_sent, report.messages_left_out) == (4, 0)


def test_the_queue_sends_a_bounded_request_too(tmp_path: Path, server: ScriptedChatServer) -> None:
    memory = open_memory(tmp_path / "store", server)
    server.enqueue(answer())
    assert memory.queue_conversation("thread-q", huge_conversation(2))
    assert memory.flush_queue(timeout=30).ok
    assert len(sent_conversation(prompt_of(server))) <= DEFAULT_MAX_CONVERSATION_CHARS
    assert len(server.requests[0].body) < 2 * DEFAULT_MAX_CONVERSATION_CHARS
