"""The bundled patterns against tables of messages labelled by a person.

``tests/data/confirmations.tsv`` holds English and Chinese messages with the
label a person would give — does the user confirm what the assistant did or
said? — grouped by why (explicit statements, bare agreement, negations,
hedges, questions, reported speech, full-width punctuation ...).
``tests/data/signals.tsv`` does the same for the other signals and the
trivial filter. Every line is one test, named after its file and line, so a
failure points at the row to review.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from deermem.learning.messages import Message
from deermem.learning.signals import Signal, detect_signals, load_patterns

DATA = Path(__file__).parent / "data"
PATTERNS = load_patterns()
_HAN = re.compile(r"[\u4e00-\u9fff]")


@dataclass(frozen=True)
class Row:
    file: str
    line: int
    columns: tuple[str, ...]

    @property
    def id(self) -> str:
        return f"{self.file}:{self.line}"


def rows(name: str, width: int) -> list[Row]:
    """The data lines of a table (comments and blank lines skipped), each checked for shape."""
    found = []
    for number, line in enumerate((DATA / name).read_text("utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        columns = tuple(line.split("\t"))
        assert len(columns) == width, f"{name}:{number}: expected {width} tab-separated columns"
        assert columns[-1], f"{name}:{number}: no text"
        assert columns[-1] == columns[-1].strip(), f"{name}:{number}: spaces around the text"
        found.append(Row(name, number, columns))
    return found


CONFIRMATIONS = rows("confirmations.tsv", 2)
SIGNALS = rows("signals.tsv", 3)


def said(text: str) -> list[Message]:
    return [Message("human", text), Message("ai", "Understood.")]


def confirms(text: str) -> bool:
    return Signal.REINFORCEMENT in detect_signals(said(text), PATTERNS)


def test_the_confirmation_table_is_large_and_covers_both_languages() -> None:
    labels = [row.columns[0] for row in CONFIRMATIONS]
    assert set(labels) == {"confirms", "no"}
    assert len(CONFIRMATIONS) >= 150
    texts = [row.columns[1] for row in CONFIRMATIONS]
    assert len(set(texts)) == len(texts), "a message is listed twice"
    chinese = [text for text in texts if _HAN.search(text)]
    assert len(chinese) >= 60
    assert len(texts) - len(chinese) >= 60


@pytest.mark.parametrize("row", CONFIRMATIONS, ids=[row.id for row in CONFIRMATIONS])
def test_a_confirmation_is_what_a_person_would_call_one(row: Row) -> None:
    label, text = row.columns
    assert confirms(text) is (label == "confirms")


ONE_CLAUSE = [
    row
    for row in CONFIRMATIONS
    if row.columns[0] == "confirms"
    and not re.search(r"[,，;；、.。!！?？…\n]", row.columns[1].rstrip(".。!！~～ "))
]


@pytest.mark.parametrize("mark", ["?", "？"])
@pytest.mark.parametrize("row", ONE_CLAUSE, ids=[row.id for row in ONE_CLAUSE])
def test_asking_a_confirmation_confirms_nothing(row: Row, mark: str) -> None:
    text = row.columns[1].rstrip(".。!！~～ ")
    assert confirms(text)
    assert not confirms(text + mark)


@pytest.mark.parametrize("row", SIGNALS, ids=[row.id for row in SIGNALS])
def test_the_other_signals_and_the_trivial_filter_follow_their_table(row: Row) -> None:
    name, label, text = row.columns
    assert label in ("yes", "no")
    if name == "trivial":
        found = PATTERNS.is_trivial(text)
    else:
        found = Signal(name) in detect_signals(said(text), PATTERNS)
    assert found is (label == "yes")
