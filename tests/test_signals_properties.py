"""Properties of filtering and detection, over generated conversations."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from deermem.learning.messages import Message, MessageRole, filter_messages, strip_upload_blocks
from deermem.learning.signals import SIGNAL_WINDOW, detect_signals, filter_trivial, load_patterns

PATTERNS = load_patterns()

# Texts that exercise every rule, mixed with arbitrary text.
PHRASES = [
    "ok",
    "好的！",
    "thanks",
    "perfect",
    "对，就是这样",
    "对",
    "That's wrong, try again.",
    "I prefer uv over pip",
    "I am an engineer",
    "let's go with uv",
    "我打算迁移到 uv",
    "<uploaded_files>/mnt/user-data/uploads/a.pdf</uploaded_files>",
    "<current_uploads>x.csv</current_uploads> what is in it?",
    "see <UPLOADED_FILES>/tmp/y",
    "   ",
    "",
]
ROLES: list[MessageRole] = ["human", "ai", "system", "tool"]
texts = st.one_of(st.sampled_from(PHRASES), st.text(max_size=40))


@st.composite
def messages(draw: st.DrawFn) -> Message:
    role = draw(st.sampled_from(ROLES))
    return Message(
        role=role,
        text=draw(texts),
        id=draw(st.none() | st.text(min_size=1, max_size=4)),
        hidden=draw(st.booleans()) if role == "human" else False,
        has_tool_calls=draw(st.booleans()) if role == "ai" else False,
    )


conversations = st.lists(messages(), max_size=14)


def is_subsequence(part: list[Message], whole: list[Message]) -> bool:
    """``part`` matches ``whole`` in order, each item equal to its source or its upload-free
    form."""
    position = 0
    for kept in part:
        while position < len(whole):
            source = whole[position]
            position += 1
            same_source = (source.role, source.id, source.hidden) == (
                kept.role,
                kept.id,
                kept.hidden,
            )
            if same_source and kept.text in (source.text, strip_upload_blocks(source.text)):
                break
        else:
            return False
    return True


@given(conversations)
def test_filtering_never_invents_messages(conversation: list[Message]) -> None:
    kept = filter_messages(conversation)
    assert is_subsequence(kept, conversation)
    assert all(message.role in ("human", "ai") for message in kept)
    assert all(not message.has_tool_calls for message in kept)
    assert all(message.text.strip() for message in kept)


@given(conversations)
def test_no_upload_block_and_no_hidden_turn_survives(conversation: list[Message]) -> None:
    for message in filter_messages(conversation):
        if message.role != "human":
            continue  # upload blocks are what users attach; assistant text is left as it is
        lowered = message.text.lower()
        assert "<uploaded_files" not in lowered
        assert "<current_uploads" not in lowered
        assert not message.hidden  # none of these carries a clarification answer


@given(conversations)
def test_filtering_is_idempotent(conversation: list[Message]) -> None:
    once = filter_messages(conversation)
    assert filter_messages(once) == once
    trimmed = filter_trivial(once, PATTERNS)
    assert filter_trivial(trimmed, PATTERNS) == trimmed


@given(conversations)
def test_trivial_filter_only_removes_and_leaves_no_acknowledgement(
    conversation: list[Message],
) -> None:
    filtered = filter_messages(conversation)
    trimmed = filter_trivial(filtered, PATTERNS)
    assert is_subsequence(trimmed, filtered)
    assert not any(
        message.role == "human" and PATTERNS.is_trivial(message.text) for message in trimmed
    )


@given(conversations)
def test_detection_depends_only_on_the_last_six_human_messages(
    conversation: list[Message],
) -> None:
    filtered = filter_trivial(filter_messages(conversation), PATTERNS)
    window = [message for message in filtered[-SIGNAL_WINDOW:] if message.role == "human"]
    assert detect_signals(filtered, PATTERNS) == detect_signals(window, PATTERNS)


@settings(max_examples=50)
@given(conversations, conversations)
def test_older_turns_do_not_change_detection(older: list[Message], recent: list[Message]) -> None:
    if len(recent) < SIGNAL_WINDOW:
        recent = recent + [Message("ai", "filler")] * (SIGNAL_WINDOW - len(recent))
    assert detect_signals(older + recent, PATTERNS) == detect_signals(recent, PATTERNS)


@given(conversations)
def test_detection_is_deterministic(conversation: list[Message]) -> None:
    assert detect_signals(conversation, PATTERNS) == detect_signals(list(conversation), PATTERNS)
