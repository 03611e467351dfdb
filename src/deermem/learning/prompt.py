"""The memory-update prompt: a system message and a user message.

The system message is the same for every call (so a provider's prompt
cache can reuse it); everything that changes is in the user message:

* ``current_memory`` — the six summary sections and the bucket's facts as
  JSON (``ensure_ascii=False``, so CJK text stays readable and costs fewer
  tokens), every string value HTML-escaped so stored text cannot close the
  ``<current_memory>`` block; facts written by hand are marked
  ``[MANUAL]``;
* ``conversation`` — the newest turns within ``max_conversation_chars``
  (a :class:`~deermem.learning.conversation.ConversationWindow`), see
  :mod:`deermem.learning.conversation`;
* ``signal_hints`` — one line per detected signal;
* ``staleness_review`` — the aged facts, when a review is due (see
  :mod:`deermem.learning.staleness`).

The texts live in ``prompts/memory_update.yaml`` and can be overridden (see
:mod:`deermem.learning.templates`).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from deermem.learning._text import display_category, escape_text
from deermem.learning.conversation import ConversationWindow
from deermem.learning.settings import UpdateSettings
from deermem.learning.staleness import review_due, stale_candidate_lines, stale_candidates
from deermem.learning.state import MemoryState
from deermem.learning.templates import MEMORY_UPDATE, PromptTemplate
from deermem.model import Fact

__all__ = [
    "MANUAL_MARKER",
    "SIGNAL_ORDER",
    "UpdatePrompt",
    "build_update_prompt",
    "render_current_memory",
    "render_signal_hints",
    "render_staleness_review",
]

MANUAL_MARKER: Final = "[MANUAL] "
SIGNAL_ORDER: Final = ("correction", "reinforcement", "preference", "identity", "goal", "decision")


@dataclass(frozen=True, slots=True)
class UpdatePrompt:
    """The two messages of one memory-update call."""

    system: str
    user: str

    def messages(self) -> list[dict[str, str]]:
        """The messages in the OpenAI wire form (``deermem.llm.ChatMessage`` takes the same)."""
        return [{"role": "system", "content": self.system}, {"role": "user", "content": self.user}]


def build_update_prompt(
    memory: MemoryState,
    conversation: ConversationWindow,
    *,
    signals: Collection[str],
    settings: UpdateSettings,
    now: datetime,
    template: PromptTemplate,
) -> UpdatePrompt | None:
    """Render the memory-update prompt.

    Args:
        memory: the bucket as it is now.
        conversation: the turns to learn from, fitted to the cap by
            :func:`~deermem.learning.conversation.fit_conversation`.
        signals: the signals detected in them (``correction``, ``reinforcement`` ...).
        settings: staleness settings (is a review due, which categories are protected).
        now: the clock the staleness candidates are computed against.
        template: the ``memory_update`` template, from a
            :class:`~deermem.learning.templates.PromptLoader`.

    Returns:
        The prompt, or ``None`` when no turn sent has any text: there is
        nothing to learn from, so no model call should be made.
    """
    if template.name != MEMORY_UPDATE.name:
        raise ValueError(f"expected the {MEMORY_UPDATE.name!r} template, got {template.name!r}")
    text = conversation.text
    if not text:
        return None
    candidates = stale_candidates(memory.facts, now=now, settings=settings)
    review = review_due(candidates, settings)
    manual = any(fact.source.type == "manual" for fact in memory.facts)
    user = template.fill(
        "user",
        current_memory=render_current_memory(memory),
        conversation=text,
        signal_hints=render_signal_hints(signals, template, manual_facts=manual),
        staleness_review=render_staleness_review(candidates, settings, template) if review else "",
    )
    return UpdatePrompt(system=template.text("system"), user=user)


def render_current_memory(memory: MemoryState) -> str:
    """The memory as escaped JSON: ``{"user": ..., "history": ..., "facts": [...]}``."""
    document: dict[str, object] = {"user": {}, "history": {}}
    for (group, name), section in memory.sections():
        sections = document[group]
        assert isinstance(sections, dict)
        sections[name] = {"summary": section.summary, "updatedAt": section.updatedAt}
    document["facts"] = [_fact_view(fact) for fact in memory.facts]
    return json.dumps(_escaped(document), indent=2, ensure_ascii=False)


def _fact_view(fact: Fact) -> dict[str, object]:
    """What the model needs of a fact: no revisions, scopes or file metadata."""
    manual = fact.source.type == "manual"
    view: dict[str, object] = {
        "id": fact.id,
        "content": MANUAL_MARKER + fact.content if manual else fact.content,
        "category": display_category(fact),
        "confidence": fact.confidence,
        "createdAt": fact.createdAt,
    }
    if fact.lastConfirmedAt is not None:
        view["lastConfirmedAt"] = fact.lastConfirmedAt
    if isinstance(fact.sourceError, str) and fact.sourceError.strip():
        view["sourceError"] = fact.sourceError
    if fact.expected_valid_days is not None:
        view["expected_valid_days"] = fact.expected_valid_days
    return view


def _escaped(value: object) -> object:
    if isinstance(value, str):
        return escape_text(value)
    if isinstance(value, dict):
        return {key: _escaped(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_escaped(item) for item in value]
    return value


def render_signal_hints(
    signals: Collection[str], template: PromptTemplate, *, manual_facts: bool = False
) -> str:
    """The hint block: a header and one line per detected signal (in a fixed
    order), plus the note on hand-written facts; ``""`` when there is nothing to say."""
    hints = template.tables["signal_hints"]
    lines = [f"- {hints[name]}" for name in SIGNAL_ORDER if name in signals]
    if manual_facts:
        lines.append(f"- {template.text('manual_facts_note')}")
    if not lines:
        return ""
    return template.text("signal_hints_header") + "\n" + "\n".join(lines) + "\n\n"


def render_staleness_review(
    candidates: Sequence[Fact], settings: UpdateSettings, template: PromptTemplate
) -> str:
    """The review section listing ``candidates``; ``""`` when there are none."""
    if not candidates:
        return ""
    lines = stale_candidate_lines(candidates, settings)
    return template.fill("staleness_review", candidates=lines).rstrip("\n") + "\n\n"
