"""The answer prompt: a two-part template that becomes the chat request of a QA row.

The file format is the original harness's (reference ``eval-harness-spec.md``
§2.4): a ``SYSTEM:`` part and a ``USER:`` part separated by a blank line, the
user part carrying three placeholders. The wording is each bundle's own; the
protocol pins the file's SHA-256, so a changed word is a changed protocol.

Rendering is plain sequential string replacement, exactly as the original
does it, because the request fingerprint of every QA row hashes its result.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Final, NamedTuple

from deermem.eval.errors import EvaluationError, ProtocolError

__all__ = ["CURRENT_DATE_SECTION", "QUESTION", "STORED_MEMORY", "AnswerTemplate"]

CURRENT_DATE_SECTION: Final = "{{CURRENT_DATE_SECTION}}"
STORED_MEMORY: Final = "{{STORED_MEMORY}}"
QUESTION: Final = "{{QUESTION}}"
_SYSTEM_HEADER: Final = "SYSTEM:\n"
_SEPARATOR: Final = "\n\nUSER:\n"


class AnswerTemplate(NamedTuple):
    """A parsed answer prompt.

    Attributes:
        system: the system message, as sent.
        user: the user message with its placeholders still in place.
    """

    system: str
    user: str

    @classmethod
    def parse(cls, text: str, *, file: str) -> AnswerTemplate:
        """Split a prompt file into its two parts and check the placeholders.

        Raises:
            ProtocolError: the file lacks the ``SYSTEM:``/``USER:`` structure
                or a placeholder.
        """
        if not text.startswith(_SYSTEM_HEADER) or _SEPARATOR not in text:
            raise ProtocolError(
                file,
                None,
                "an answer prompt must start with a 'SYSTEM:' line and hold a 'USER:' line "
                "after a blank line",
            )
        system, user = text[len(_SYSTEM_HEADER) :].split(_SEPARATOR, 1)
        for placeholder in (CURRENT_DATE_SECTION, STORED_MEMORY, QUESTION):
            if placeholder not in user:
                raise ProtocolError(
                    file, None, f"the USER part of the answer prompt lacks {placeholder}"
                )
        return cls(system=system.strip("\n"), user=user.strip("\n"))

    def render(
        self,
        *,
        question: str,
        question_date: str | None,
        facts: Sequence[tuple[str, str]],
    ) -> list[dict[str, str]]:
        """The chat messages for one question over the retained facts.

        Args:
            question: the question text.
            question_date: the question's date line; ``None`` or empty omits it.
            facts: ``(fact_id, content)`` pairs; rendered sorted by id, each as
                ``[id]`` on one line and its content below, separated by a
                blank line.

        Raises:
            EvaluationError: no facts, or two facts with the same id.
        """
        if not facts:
            raise EvaluationError("an answer prompt needs at least one retained fact")
        ordered = sorted(facts, key=lambda fact: fact[0])
        for previous, current in itertools.pairwise(ordered):
            if previous[0] == current[0]:
                raise EvaluationError(f"retained fact id {current[0]!r} appears twice")
        memory = "\n\n".join(f"[{fact_id}]\n{content}" for fact_id, content in ordered)
        date_section = f"CURRENT DATE: {question_date}\n" if question_date else ""
        user = (
            self.user.replace(CURRENT_DATE_SECTION, date_section)
            .replace(STORED_MEMORY, memory)
            .replace(QUESTION, question)
        )
        return [{"role": "system", "content": self.system}, {"role": "user", "content": user}]
