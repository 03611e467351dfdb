"""Learning: from a conversation to a change of memory.

One update runs through these modules, each one step, in this order (see
docs/update.md); the :class:`Learner` wires them to a chat model and a store:

* :mod:`~deermem.learning.messages` — the messages agents hand over, which of
  them memory may learn from, and what counts as upload text;
* :mod:`~deermem.learning.signals` — what the user's recent words signal
  (correction, reinforcement ...), from pattern files users may extend;
* :mod:`~deermem.learning.prompt` — the prompt: templates, the conversation
  as the model reads it, the current memory;
* :mod:`~deermem.learning.answer` — the model's answer: its pydantic models
  and JSON Schema, finding it in a reply, reading it, its limits;
* :mod:`~deermem.learning.plan` — everything up to the capacity gate: the
  label gate, confirmations, the staleness review, the upload clean-up, new
  facts (pure);
* :mod:`~deermem.learning.learner` — the :class:`Learner`: one model call,
  the capacity gate, one commit; dry runs; the watermark in the store;
* :mod:`~deermem.learning.queue` — conversations waiting for the user to pause;
* :mod:`~deermem.learning.report` — what one update did, as ids and counters.
"""

from deermem.learning.learner import Learner, check_override_files
from deermem.learning.messages import (
    KeepHidden,
    Message,
    is_clarification_answer,
    parse_message,
    parse_messages,
)
from deermem.learning.queue import FlushReport
from deermem.learning.report import FactChange, UpdateReport, UpdateResult
from deermem.learning.signals import Signal

__all__ = [
    "FactChange",
    "FlushReport",
    "KeepHidden",
    "Learner",
    "Message",
    "Signal",
    "UpdateReport",
    "UpdateResult",
    "check_override_files",
    "is_clarification_answer",
    "parse_message",
    "parse_messages",
]
