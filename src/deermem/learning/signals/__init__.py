"""Conversation signals: which messages memory may learn from, and what they signal.

* :func:`parse_messages` reads OpenAI-format or LangChain/DeerFlow-format
  messages into one typed :class:`Message`;
* :func:`filter_messages` keeps human turns and plain assistant replies
  (dropping hidden turns, tool traffic and upload blocks), and
  :func:`filter_trivial` drops pure acknowledgements;
* :func:`detect_signals` finds ``correction``, ``reinforcement``,
  ``preference``, ``identity``, ``goal`` and ``decision`` in the human
  messages among the last six, using YAML pattern files that ship with
  deermem and that a ``patterns_dir`` can extend or replace
  (:func:`load_patterns`); a file can say that matches inside questions do
  not count (:func:`in_question` decides what a question is).

All of it is pure (no I/O except reading pattern files). See docs/signals.md.
"""

from deermem.learning.signals.detection import (
    SIGNAL_WINDOW,
    PreparedConversation,
    SignalMatch,
    detect_signals,
    explain_signals,
    prepare_conversation,
)
from deermem.learning.signals.filtering import (
    KeepHidden,
    filter_messages,
    filter_trivial,
    is_clarification_answer,
    strip_upload_blocks,
)
from deermem.learning.signals.messages import Message, MessageRole, parse_message, parse_messages
from deermem.learning.signals.patterns import (
    PATTERN_FILES,
    TRIVIAL_PUNCTUATION,
    Pattern,
    PatternSet,
    Signal,
    load_patterns,
    strip_trailing_punctuation,
)
from deermem.learning.signals.questions import in_question

__all__ = [
    "PATTERN_FILES",
    "SIGNAL_WINDOW",
    "TRIVIAL_PUNCTUATION",
    "KeepHidden",
    "Message",
    "MessageRole",
    "Pattern",
    "PatternSet",
    "PreparedConversation",
    "Signal",
    "SignalMatch",
    "detect_signals",
    "explain_signals",
    "filter_messages",
    "filter_trivial",
    "in_question",
    "is_clarification_answer",
    "load_patterns",
    "parse_message",
    "parse_messages",
    "prepare_conversation",
    "strip_trailing_punctuation",
    "strip_upload_blocks",
]
