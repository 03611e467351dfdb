"""Signal detection: what the user's recent words say about memory.

A signal is present when one of its patterns is found in a human message
(outside questions, for the patterns that ask so) among the **last six**
filtered messages (human and assistant counted
together, so roughly the last three exchanges). Older turns were already
seen by an earlier extraction; looking further back would let one "perfect"
from last hour keep confirming facts.

Signals are hints and gates for extraction: ``correction`` asks for a
durable correction, ``reinforcement`` is the only way a fact can be
confirmed, the others point the extractor at what kind of fact to look for.
Detection is pure: the same messages and patterns give the same signals.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from deermem.learning.signals.filtering import KeepHidden, filter_messages, filter_trivial
from deermem.learning.signals.messages import Message
from deermem.learning.signals.patterns import PatternSet, Signal

__all__ = [
    "SIGNAL_WINDOW",
    "PreparedConversation",
    "SignalMatch",
    "detect_signals",
    "explain_signals",
    "prepare_conversation",
]

SIGNAL_WINDOW: Final = 6
"""How many of the last filtered messages are searched (only the human ones among them)."""


@dataclass(frozen=True, slots=True)
class SignalMatch:
    """Why a signal fired: which message, which pattern, from which file.

    Holds no message text, so it can be logged or shown without leaking what
    the user said.
    """

    signal: Signal
    message_index: int
    pattern: str
    source: str


def explain_signals(messages: Sequence[Message], patterns: PatternSet) -> tuple[SignalMatch, ...]:
    """Every (signal, message) pair that fired, with the first pattern that matched it.

    Args:
        messages: a filtered conversation (see :func:`filter_messages`), oldest first.
        patterns: the pattern lists to search with.

    Returns:
        Matches ordered by signal (in :class:`Signal` order), then message
        position; ``message_index`` indexes into ``messages``.
    """
    start = max(len(messages) - SIGNAL_WINDOW, 0)
    window = [
        (index, message)
        for index, message in enumerate(messages[start:], start)
        if message.role == "human"
    ]
    found: list[SignalMatch] = []
    for signal in Signal:
        for index, message in window:
            for pattern in patterns.for_signal(signal):
                if pattern.search(message.text):
                    found.append(SignalMatch(signal, index, pattern.text, pattern.source))
                    break
    return tuple(found)


def detect_signals(messages: Sequence[Message], patterns: PatternSet) -> frozenset[Signal]:
    """The signals present in the human messages among the last six of ``messages``."""
    return frozenset(match.signal for match in explain_signals(messages, patterns))


@dataclass(frozen=True, slots=True)
class PreparedConversation:
    """A conversation ready for extraction: what memory may read, and what it signals."""

    messages: tuple[Message, ...]
    signals: frozenset[Signal]


def prepare_conversation(
    messages: Sequence[Message],
    patterns: PatternSet,
    *,
    keep_hidden: KeepHidden | None = None,
) -> PreparedConversation | None:
    """Filter, drop trivial turns, and detect signals; ``None`` when nothing is left to learn.

    A conversation is worth an extraction only when, after filtering, it
    still holds at least one human turn and one assistant reply.
    """
    kept = filter_trivial(filter_messages(messages, keep_hidden=keep_hidden), patterns)
    roles = {message.role for message in kept}
    if "human" not in roles or "ai" not in roles:
        return None
    return PreparedConversation(tuple(kept), detect_signals(kept, patterns))
