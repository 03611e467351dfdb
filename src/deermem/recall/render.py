"""How memory is written into a prompt: the sections, the line formats, the escaping.

The injected text sits inside a ``<memory>`` block that the host adds around
it, and everything in it comes from stored data that a user, a model or an
import wrote. So every piece of stored text is made inert before it is placed:

* ``&``, ``<`` and ``>`` are HTML-escaped (quotes are left alone, so ordinary
  text stays byte-identical), so no stored text can open or close the
  ``<memory>`` block or any other tag (``</memory>``, ``<system>``,
  ``<|im_start|>``);
* line breaks of every kind, and other control characters, become single
  spaces, so a stored text is always exactly one line: it cannot start a new
  section (``Facts:``), fake a fact line (``- [correction | 1.00] ...``) or a
  Markdown heading, because those only mean something at the start of a line
  and every line starts with a prefix deermem writes.

The layout is the original's: ``User Context:``, ``History:`` and ``Facts:``
sections joined by one blank line, empty ones left out.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

__all__ = [
    "FACTS_HEADER",
    "HISTORY_HEADER",
    "MEMORY_CLOSE",
    "MEMORY_OPEN",
    "USER_CONTEXT_HEADER",
    "Summaries",
    "fact_line",
    "inert",
    "wrap_memory_block",
]

USER_CONTEXT_HEADER: Final = "User Context:"
HISTORY_HEADER: Final = "History:"
FACTS_HEADER: Final = "Facts:"
MEMORY_OPEN: Final = "<memory>"
MEMORY_CLOSE: Final = "</memory>"

# Line breaks (every Unicode kind) and the other C0/C1 controls except tab,
# with the spaces around them: all collapse into one space.
_BREAKS: Final = re.compile(r"[ \t]*[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]+[ \t]*")

# Characters that delimit the ``[category | 0.90]`` label; a category cannot
# contain them (stored categories never do; raw mappings might).
_LABEL_DELIMITERS: Final = str.maketrans("", "", "[]|")

# (document section, key, label) in the order they are rendered.
_USER_LINES: Final = (
    ("workContext", "Work"),
    ("personalContext", "Personal"),
    ("topOfMind", "Current Focus"),
)
_HISTORY_LINES: Final = (
    ("recentMonths", "Recent"),
    ("earlierContext", "Earlier"),
    ("longTermBackground", "Background"),
)


def inert(text: str) -> str:
    """Make stored text safe to place on one line of the memory block.

    Escapes ``&``, ``<`` and ``>``, folds every line break and control
    character (with the blanks around it) into one space, and strips the ends.
    Text without any of those characters comes back unchanged.
    """
    if not text.isprintable():  # line breaks, controls and tabs are "not printable"
        text = _BREAKS.sub(" ", text)
    if "&" in text or "<" in text or ">" in text:
        text = html.escape(text, quote=False)
    return text.strip()


def fact_line(category: str, confidence: float, content: str, avoid: str | None = None) -> str:
    """One fact as the model sees it: ``- [category | 0.90] content``.

    Args:
        category: the stored category (escaped here, and stripped of ``[``,
            ``]`` and ``|`` so it cannot fake a second label).
        confidence: shown with two decimals.
        content: the fact's text (escaped here).
        avoid: for a correction, the mistake it corrects; appended as
            ``(avoid: <error>)`` when not blank.
    """
    label = inert(category).translate(_LABEL_DELIMITERS)
    line = f"- [{label} | {confidence:.2f}] {inert(content)}"
    if avoid is not None:
        error = inert(avoid)
        if error:
            line = f"{line} (avoid: {error})"
    return line


@dataclass(frozen=True, slots=True)
class Summaries:
    """The six user-global summaries, as plain text (empty when unknown)."""

    work: str = ""
    personal: str = ""
    top_of_mind: str = ""
    recent: str = ""
    earlier: str = ""
    background: str = ""

    @classmethod
    def from_document(cls, document: Mapping[str, object] | None) -> Summaries:
        """Read the summaries from a memory document (``{"user": ..., "history": ...}``).

        Each summary lives at ``document[section][key]["summary"]``. Missing or
        malformed parts read as empty; a summary that is not a string is
        converted with ``str()`` rather than dropped.
        """
        if not isinstance(document, Mapping):
            return cls()
        user = [_summary(document, "user", key) for key, _ in _USER_LINES]
        history = [_summary(document, "history", key) for key, _ in _HISTORY_LINES]
        return cls(*user, *history)

    def sections(self) -> list[list[str]]:
        """The rendered, non-empty summary sections, each a list of lines with its header."""
        user = _section(
            USER_CONTEXT_HEADER,
            zip(
                (label for _, label in _USER_LINES),
                (self.work, self.personal, self.top_of_mind),
                strict=True,
            ),
        )
        history = _section(
            HISTORY_HEADER,
            zip(
                (label for _, label in _HISTORY_LINES),
                (self.recent, self.earlier, self.background),
                strict=True,
            ),
        )
        return [lines for lines in (user, history) if lines]


def wrap_memory_block(body: str) -> str:
    """Wrap injected text in the ``<memory>`` block a host places in the prompt.

    Empty text gives an empty string: no block at all rather than an empty one.
    """
    if not body:
        return ""
    return f"{MEMORY_OPEN}\n{body}\n{MEMORY_CLOSE}"


def _summary(document: Mapping[str, object], section: str, key: str) -> str:
    part = document.get(section)
    entry = part.get(key) if isinstance(part, Mapping) else None
    value = entry.get("summary") if isinstance(entry, Mapping) else None
    if value is None:
        return ""
    return value if isinstance(value, str) else str(value)


def _section(header: str, items: Iterable[tuple[str, str]]) -> list[str]:
    lines = []
    for label, raw in items:
        text = inert(raw)
        if text:
            lines.append(f"- {label}: {text}")
    return [header, *lines] if lines else []
