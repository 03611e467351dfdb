"""Whether a place in a message sits inside a question.

"Is that correct?" confirms nothing, "这完全正确吗？" neither, and "should we go
with option B?" decides nothing: a question asks, it does not state. A
pattern file (or one of its patterns) can therefore say that its matches do
not count inside questions (``questions: ignore``, see
:mod:`deermem.learning.signals.patterns`). What a question is, is decided here, once,
so every such pattern — bundled or a user's — follows the same rule.

The rule works on *clauses*: a clause runs up to the next clause mark
(``, ， ; ； 、``) or sentence end (``. 。 ! ！ ? ？ …`` or a line break; a dot
between digits, as in "3.11", ends nothing). The clause a match ends in is a
question when

* its rest ends with a question mark (``?`` or ``？``) or with one of the
  question particles 吗, 么, 呢 ("对，就是这样吗？", "完全正确吗");
* or the clause after it in the same sentence is a tag question: one that
  asks by itself ("isn't it", "don't you think", "对吧", "是不是" …), or a
  short word followed by a question mark ("right?", "correct?", "ok?") —
  "That's right, isn't it", "That's correct, right?", "完全正确，对吧".

A question in *another* clause does not make the match one: in "Perfect, can
you also add tests?" the user confirms, then asks for more. Only the rest of
the clause is read, so the words a pattern matched never decide on their own.
A clause is read at most :data:`CLAUSE_WINDOW` characters far: one that runs
on longer is no short question, and the bound keeps a long message with many
matches linear to scan.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["CLAUSE_WINDOW", "in_question"]

CLAUSE_WINDOW: Final = 200
"""How far past a match its clause (and a tag after it) is read."""

_CLAUSE_MARKS: Final = ",，;；、"
_QUESTION_MARKS: Final = "?？"
# A dot followed by a digit ("3.11") is part of a number, not the end of a sentence.
_CLAUSE_END: Final = re.compile(r"[,，;；、。!！?？…\n]|\.(?!\d)")
_QUESTION_PARTICLE: Final = re.compile(r"[吗么呢][\s~～]*$")
# English tags that ask by themselves ("That is right, isn't it"), question mark or not.
_ENGLISH_TAGS: Final = re.compile(
    r"(?:isn['’]?t\s+(?:it|that|this)|wasn['’]?t\s+(?:it|that)|aren['’]?t\s+you"
    r"|don['’]?t\s+you\s+think|am\s+i\s+right|innit)",
    re.IGNORECASE,
)
# Short words that make the clause before them a question only when a question mark follows
# ("That's correct, right?"; but "Perfect, right." is no question).
_ASKING_WORDS: Final = re.compile(
    r"(?:is\s+(?:it|that)|right|correct|yes|no|yeah|ok(?:ay)?|eh|huh|true)", re.IGNORECASE
)
# Chinese tags that ask by themselves, question mark or not.
_CHINESE_TAGS: Final = re.compile(
    r"(?:对吧|是吧|对不对|是不是|对吗|是吗|没错吧|没错吗|好吗|行吗|可以吗|对么|是么|好不好|行不行)"
)


def in_question(text: str, position: int) -> bool:
    """Whether the clause of ``text`` that ``position`` falls in is a question.

    Args:
        text: the whole message.
        position: where a match ended (``match.end()``): the clause is read
            from there to its end.

    Returns:
        ``True`` when the rest of that clause ends as a question, or the
        next clause of the same sentence is a tag question (module docstring).
    """
    window = min(len(text), position + CLAUSE_WINDOW)
    end = _CLAUSE_END.search(text, position, window)
    if end is None and window < len(text):
        return False  # a clause that long is no short question
    rest = text[position : end.start() if end else window]
    if _QUESTION_PARTICLE.search(rest):
        return True
    if end is None:
        return False
    mark = end.group()
    if mark in _QUESTION_MARKS:
        return True
    if mark not in _CLAUSE_MARKS:
        return False
    window = min(len(text), end.end() + CLAUSE_WINDOW)
    after = _CLAUSE_END.search(text, end.end(), window)
    tag = text[end.end() : after.start() if after else window].strip()
    if _CHINESE_TAGS.fullmatch(tag) or _ENGLISH_TAGS.fullmatch(tag):
        return True
    asked = after is not None and after.group() in _QUESTION_MARKS
    return asked and _ASKING_WORDS.fullmatch(tag) is not None
