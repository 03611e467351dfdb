"""Which turns memory may learn from: hidden turns, tool traffic, uploads, acknowledgements."""

from __future__ import annotations

import pytest

from deermem.learning.messages import (
    Message,
    filter_messages,
    is_clarification_answer,
    parse_messages,
    strip_upload_blocks,
)
from deermem.learning.prompt import ConversationTurn, render_turn
from deermem.learning.signals import (
    PatternSet,
    Signal,
    filter_trivial,
    load_patterns,
    prepare_conversation,
)

PATTERNS = load_patterns()
UPLOAD = "<uploaded_files>\n- /mnt/user-data/uploads/report-q3.pdf (212 KB)\n</uploaded_files>"


def human(text: str, **metadata: object) -> Message:
    hidden = metadata.pop("hide_from_ui", False) is True
    return Message("human", text, hidden=hidden, metadata=metadata)


def ai(text: str, *, tools: bool = False) -> Message:
    return Message("ai", text, has_tool_calls=tools)


def texts(messages: list[Message]) -> list[tuple[str, str]]:
    return [(message.role, message.text) for message in messages]


# --- uploads --------------------------------------------------------------------


@pytest.mark.parametrize("tag", ["uploaded_files", "current_uploads", "UPLOADED_FILES"])
def test_an_upload_only_turn_goes_with_its_reply(tag: str) -> None:
    block = f"<{tag}>/mnt/user-data/uploads/a.csv</{tag}>"
    conversation = [human(block), ai("I see a CSV file."), human("thanks, summarise it")]
    assert texts(filter_messages(conversation)) == [("human", "thanks, summarise it")]


@pytest.mark.parametrize("tag", ["uploaded_files", "current_uploads"])
def test_a_question_next_to_an_upload_is_kept_without_the_block(tag: str) -> None:
    text = f"<{tag}>\n/mnt/user-data/uploads/q3.pdf\n</{tag}>\n\nWhat was Q3 revenue?"
    kept = filter_messages([human(text), ai("It was 4.2M.")])
    assert texts(kept) == [("human", "What was Q3 revenue?"), ("ai", "It was 4.2M.")]


def test_only_the_upload_pair_is_removed_from_a_longer_conversation() -> None:
    conversation = [
        human("I work on the billing team"),
        ai("Good to know."),
        human(UPLOAD),
        ai("You uploaded a PDF."),
        human("I prefer short answers"),
        ai("Understood."),
    ]
    assert texts(filter_messages(conversation)) == [
        ("human", "I work on the billing team"),
        ("ai", "Good to know."),
        ("human", "I prefer short answers"),
        ("ai", "Understood."),
    ]


def test_multimodal_content_holding_only_an_upload_is_dropped() -> None:
    conversation = parse_messages(
        [
            {"role": "user", "content": [{"type": "text", "text": UPLOAD}]},
            {"role": "assistant", "content": "Got the file."},
        ]
    )
    assert filter_messages(conversation) == []


def test_no_upload_path_survives() -> None:
    kept = filter_messages([human(UPLOAD + "\nPlease review"), ai("Sure.")])
    assert all("/mnt/user-data" not in message.text for message in kept)
    assert all("uploaded_files" not in message.text for message in kept)


def test_an_unclosed_upload_block_is_cut_to_the_end() -> None:
    assert strip_upload_blocks("Check this <uploaded_files> /mnt/x.pdf") == "Check this"
    assert strip_upload_blocks("stray </current_uploads> tag") == "stray  tag"
    assert strip_upload_blocks("no tags <b>here</b>") == "no tags <b>here</b>"


@pytest.mark.parametrize(
    "text",
    [
        f"<uploaded_files {'x' * 300}>/mnt/user-data/uploads/a.pdf</uploaded_files> Summarise it",
        "<current_uploads>/mnt/user-data/uploads/b.csv</current_uploads          > Summarise it",
        "Summarise it <UPLOADED_FILES>/mnt/user-data/uploads/c.txt",
    ],
)
def test_the_filter_and_the_prompt_cut_the_same_upload_text(text: str) -> None:
    (kept, _) = filter_messages([human(text), ai("Sure.")])
    assert "/mnt/user-data" not in kept.text
    assert render_turn(ConversationTurn("human", text)) == f"User: {kept.text}"


def test_upload_tags_cannot_make_filtering_quadratic() -> None:
    hostile = "<uploaded_files " * 50_000  # openings that never end
    (kept, _) = filter_messages([human(hostile + "I use uv"), ai("Noted.")])
    assert kept.text.endswith("I use uv")


# --- tool traffic and roles -----------------------------------------------------------


def test_tool_messages_and_tool_calling_replies_are_dropped() -> None:
    conversation = parse_messages(
        [
            {"role": "system", "content": "system prompt"},
            {"role": "user", "content": "what's the weather?"},
            {"role": "assistant", "content": "", "tool_calls": [{"id": "1"}]},
            {"role": "tool", "content": "sunny"},
            {"role": "assistant", "content": "It is sunny."},
        ]
    )
    assert texts(filter_messages(conversation)) == [
        ("human", "what's the weather?"),
        ("ai", "It is sunny."),
    ]


def test_a_plain_conversation_passes_through_unchanged() -> None:
    conversation = [human("I prefer uv over pip"), ai("Noted."), human("Thanks!"), ai("Welcome")]
    kept = filter_messages(conversation)
    assert kept == conversation
    assert all(a is b for a, b in zip(kept, conversation, strict=True))


def test_empty_turns_are_dropped() -> None:
    conversation = [human("  "), ai("Hello?"), human("hi"), ai(""), ai("hello")]
    assert texts(filter_messages(conversation)) == [("human", "hi"), ("ai", "hello")]


def test_a_dropped_turn_takes_every_reply_up_to_the_next_kept_turn() -> None:
    conversation = [
        ai("Welcome!"),  # before any human turn: kept
        human("<current_uploads>x</current_uploads>"),
        ai("Reading the file...", tools=True),
        ai("Done reading."),
        ai("Anything else?"),
        human("yes: I am a nurse"),
        ai("Thanks for telling me."),
    ]
    assert texts(filter_messages(conversation)) == [
        ("ai", "Welcome!"),
        ("human", "yes: I am a nurse"),
        ("ai", "Thanks for telling me."),
    ]


# --- hidden turns ---------------------------------------------------------------

CLARIFICATION = {
    "version": 1,
    "kind": "human_input_response",
    "source": "ask_clarification",
    "request_id": "req-7",
    "value": "Use the staging database",
    "response_kind": "text",
}


def test_hidden_human_turns_are_dropped_with_their_reply() -> None:
    injected = human("<memory>User prefers uv.</memory>", hide_from_ui=True)
    conversation = [injected, ai("(internal)"), human("hello"), ai("hi")]
    assert texts(filter_messages(conversation)) == [("human", "hello"), ("ai", "hi")]


def test_hide_from_ui_false_is_kept() -> None:
    message = parse_messages(
        [{"type": "human", "content": "visible", "additional_kwargs": {"hide_from_ui": False}}]
    )
    assert filter_messages(message) == message


@pytest.mark.parametrize(
    "payload",
    [
        CLARIFICATION,
        {**CLARIFICATION, "response_kind": "option", "option_id": "opt-2"},
    ],
)
def test_a_well_formed_clarification_answer_is_kept(payload: dict[str, object]) -> None:
    answer = human("Use the staging database", hide_from_ui=True, human_input_response=payload)
    assert is_clarification_answer(answer)
    assert filter_messages([answer, ai("Switching to staging.")]) == [
        answer,
        ai("Switching to staging."),
    ]


@pytest.mark.parametrize(
    "payload",
    [
        {**CLARIFICATION, "version": 2},
        {**CLARIFICATION, "kind": "something_else"},
        {**CLARIFICATION, "source": ""},
        {**CLARIFICATION, "request_id": None},
        {**CLARIFICATION, "value": "   "},
        {**CLARIFICATION, "response_kind": "voice"},
        {**CLARIFICATION, "response_kind": "option"},  # no option_id
        {**CLARIFICATION, "response_kind": "option", "option_id": ""},
        "not a mapping",
    ],
)
def test_a_malformed_clarification_answer_stays_dropped(payload: object) -> None:
    answer = human("whatever", hide_from_ui=True, human_input_response=payload)
    assert not is_clarification_answer(answer)
    assert filter_messages([answer, ai("ok")]) == []


def test_a_host_hook_decides_about_hidden_turns() -> None:
    hidden = human("typed by the user in a side panel", hide_from_ui=True)
    assert filter_messages([hidden, ai("noted")]) == []
    kept = filter_messages([hidden, ai("noted")], keep_hidden=lambda message: True)
    assert texts(kept) == [("human", hidden.text), ("ai", "noted")]


# --- trivial turns --------------------------------------------------------------


def test_a_pure_acknowledgement_goes_with_its_reply() -> None:
    conversation = [human("I use vim"), ai("Noted."), human("ok"), ai("Anything else?")]
    assert texts(filter_trivial(conversation, PATTERNS)) == [
        ("human", "I use vim"),
        ("ai", "Noted."),
    ]


@pytest.mark.parametrize(
    "text",
    ["ok.", "OK!", "好的！", "谢谢。", "thanks!!", "  got it  ", "嗯嗯…", "Thank you very much."],
)
def test_trailing_punctuation_does_not_hide_an_acknowledgement(text: str) -> None:
    assert PATTERNS.is_trivial(text)
    assert filter_trivial([human(text), ai("You're welcome")], PATTERNS) == []


@pytest.mark.parametrize(
    "text",
    [
        "ok, but use uv instead of pip",
        "I'm ok with tabs",
        "perfect",
        "对，就是这样",
        "好的，以后都用中文回答",
        "yes",
        "对",
    ],
)
def test_a_message_that_says_more_is_not_trivial(text: str) -> None:
    assert not PATTERNS.is_trivial(text)


def test_all_trivial_leaves_nothing() -> None:
    conversation = [human("ok"), ai("..."), human("thanks"), ai("np")]
    assert filter_trivial(conversation, PATTERNS) == []


def test_without_trivial_patterns_everything_stays() -> None:
    no_trivial = PatternSet(trivial=(), signals=PATTERNS.signals)
    conversation = [human("ok"), ai("...")]
    assert filter_trivial(conversation, no_trivial) == conversation


# --- preparing a conversation -----------------------------------------------------


def test_prepare_needs_a_human_turn_and_a_reply() -> None:
    assert prepare_conversation([human("I prefer uv")], PATTERNS) is None
    assert prepare_conversation([ai("hello")], PATTERNS) is None
    assert (
        prepare_conversation([human("ok"), ai("fine"), human("thanks"), ai("np")], PATTERNS) is None
    )


@pytest.mark.parametrize(
    ("text", "signal"),
    [
        ("That's wrong, use uv instead", Signal.CORRECTION),
        ("对，就是这样", Signal.REINFORCEMENT),
        ("I prefer uv over pip", Signal.PREFERENCE),
    ],
)
def test_prepare_returns_the_kept_messages_and_their_signals(text: str, signal: Signal) -> None:
    conversation = parse_messages(
        [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": text},
            {"role": "assistant", "content": "Understood."},
            {"role": "user", "content": "ok"},
            {"role": "assistant", "content": "Anything else?"},
        ]
    )
    prepared = prepare_conversation(conversation, PATTERNS)
    assert prepared is not None
    assert texts(list(prepared.messages)) == [("human", text), ("ai", "Understood.")]
    assert signal in prepared.signals
