"""Reading conversations in the OpenAI chat format and the LangChain/DeerFlow shape."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from deermem.errors import MessageFormatError
from deermem.learning.messages import Message, parse_message, parse_messages


def test_openai_format() -> None:
    messages = parse_messages(
        [
            {"role": "system", "content": "be nice"},
            {"role": "developer", "content": "rules"},
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f"}}],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "42"},
            {"role": "assistant", "content": "the answer is 42"},
            {"role": "assistant", "content": "", "function_call": {"name": "old"}},
        ]
    )
    assert [message.role for message in messages] == [
        "system",
        "system",
        "human",
        "ai",
        "tool",
        "ai",
        "ai",
    ]
    assert [message.has_tool_calls for message in messages] == [
        False,
        False,
        False,
        True,
        False,
        False,
        True,
    ]
    assert messages[3].text == ""
    assert messages[5] == Message("ai", "the answer is 42")


def test_langchain_dict_shape() -> None:
    message, reply, call = parse_messages(
        [
            {
                "type": "human",
                "content": "secret instructions",
                "id": "m1",
                "additional_kwargs": {"hide_from_ui": True, "extra": 1},
            },
            {"type": "ai", "content": "ok", "tool_calls": []},
            {"type": "ai", "content": "", "additional_kwargs": {"tool_calls": [{"id": "x"}]}},
        ]
    )
    assert message.role == "human"
    assert message.id == "m1"
    assert message.hidden
    assert message.metadata["extra"] == 1
    assert not reply.has_tool_calls  # an empty list is no call
    assert call.has_tool_calls


@dataclass
class FakeLangChainMessage:
    """Stands for a LangChain ``BaseMessage``: attributes, not keys."""

    type: str
    content: Any
    additional_kwargs: dict[str, Any] = field(default_factory=dict)
    tool_calls: list[Any] = field(default_factory=list)
    id: str | None = None


def test_message_objects_are_read_by_attribute() -> None:
    human, ai = parse_messages(
        [
            FakeLangChainMessage("human", "I prefer uv", {"hide_from_ui": False}, id="a"),
            FakeLangChainMessage("ai", "noted", tool_calls=[{"name": "memory_add"}]),
        ]
    )
    assert (human.role, human.text, human.id, human.hidden) == ("human", "I prefer uv", "a", False)
    assert ai.has_tool_calls


def test_content_blocks_keep_text_only() -> None:
    (message,) = parse_messages(
        [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "look at this"},
                    {"type": "image_url", "image_url": {"url": "data:..."}},
                    "and this",
                    {"type": "input_text", "text": "too"},
                ],
            }
        ]
    )
    assert message.text == "look at this\nand this\ntoo"


def test_hide_from_ui_must_be_true_exactly() -> None:
    (message,) = parse_messages(
        [{"type": "human", "content": "x", "additional_kwargs": {"hide_from_ui": "yes"}}]
    )
    assert not message.hidden


def test_mixed_shapes_and_existing_messages() -> None:
    already = Message("human", "hi")
    parsed = parse_messages([already, {"type": "ai", "content": "hello"}])
    assert parsed[0] is already
    assert parsed[1].role == "ai"


def test_metadata_is_read_only() -> None:
    message = parse_message({"role": "user", "content": "x", "additional_kwargs": {"a": 1}})
    with pytest.raises(TypeError):
        message.metadata["a"] = 2  # type: ignore[index]


@pytest.mark.parametrize(
    ("raw", "field", "fragment"),
    [
        ({"content": "no role"}, "role", "needs a 'role' or a 'type'"),
        ({"role": "robot", "content": "x"}, "role", "expected one of ai, assistant"),
        ({"type": "chat_bot", "content": "x"}, "type", "expected one of"),
        ({"role": 3, "content": "x"}, "role", "expected one of"),
        ({"role": "user", "content": 42}, "content", "text, a list of content blocks, or null"),
        ({"role": "user", "content": {"text": "x"}}, "content", "text, a list"),
        ({"role": "user", "content": "x", "additional_kwargs": []}, "additional_kwargs", "mapping"),
        ("just text", "message", "a mapping or a message object"),
        (None, "message", "a mapping or a message object"),
    ],
)
def test_unreadable_messages_name_position_and_field(
    raw: object, field: str, fragment: str
) -> None:
    with pytest.raises(MessageFormatError) as caught:
        parse_messages([{"role": "user", "content": "fine"}, raw])
    error = caught.value
    assert error.index == 1
    assert error.field == field
    assert fragment in str(error)
    assert str(error).startswith("message 1: ")
    assert isinstance(error, ValueError)
