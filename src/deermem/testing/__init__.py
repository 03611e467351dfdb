"""Helpers for testing code that uses deermem — ours and yours.

:class:`ScriptedChatServer` is an OpenAI-compatible chat server on 127.0.0.1
that answers from a script (completions, error statuses with ``Retry-After``,
malformed bodies, slow answers, dropped connections) and records every
request. deermem's own tests run its LLM client, retries and parsing over
real HTTP against it; an application can test its own agent the same way,
without a network or an API key. See docs/llm.md ("Testing without a model").
"""

from deermem.testing.chat_server import (
    EMPTY_QUEUE_STATUS,
    RecordedRequest,
    Reply,
    ScriptedChatServer,
    ScriptItem,
)

__all__ = [
    "EMPTY_QUEUE_STATUS",
    "RecordedRequest",
    "Reply",
    "ScriptItem",
    "ScriptedChatServer",
]
