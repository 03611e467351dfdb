"""Generated LongMemEval-shaped data for the evaluation tests and benchmark.

Never the real dataset: every row here is made up. The rows are shaped so
that the protocol's selection rule picks exactly the 40 pinned question ids,
and every exclusion of the rule has a decoy that *would* be picked without
it (an id sorting inside the first 20 of its type). The distractor bank is
made of the 40 source ids the original's published rows reveal, at their
positions, so pools built from this file carry the same fact ids as the
published run. File order is shuffled, so file order is never id order.

Used by ``tests/evaluation`` and by ``bench/bench_evaluation.py`` (which pads the file
to the real file's size with rows no rule picks).
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from deermem.eval.protocol import ProtocolFiles, bundled_protocol_files

__all__ = [
    "BANK_IDS",
    "KNOWLEDGE_UPDATE",
    "PINNED_SHA256",
    "TEMPORAL_REASONING",
    "build_rows",
    "copy_protocol",
    "official_ids_by_type",
    "protocol_flags",
    "single_session",
    "write_dataset",
]

KNOWLEDGE_UPDATE = "knowledge-update"
TEMPORAL_REASONING = "temporal-reasoning"
PINNED_SHA256 = "821a2034d219ab45846873dd14c14f12cfe7776e73527a483f9dac095d38620c"
TINY = 40  # the shortest evidence a bank record may have

# Bank position -> source question id, as derived from the published rows.
# fmt: off
BANK_IDS = (
    "001be529", "06f04340", "07b6f563", "0862e8bf", "09d032c9", "0a34ad58", "0edc2aef", "118b2229",
    "15745da0", "195a1a1b", "19b5f2b3", "1a1907b4", "1c0ddc50", "1d4e3b97", "1da05512", "1e043500",
    "1faac195", "21436231", "25e5aa4f", "29f2956b", "311778f1", "32260d93", "35a27287", "36580ce8",
    "37d43f65", "38146c39", "3b6f954b", "3d86fd0a", "3f1e9474", "4100d0a0", "4fd1909e", "505af2f5",
    "51a45a95", "54026fce", "545bd2b5", "577d4d32", "57f827a0", "58bf7951", "58ef2f1c", "5d3d2817",
)
# fmt: on

# fmt: off
_WORDS = (
    "garden", "kettle", "window", "bicycle", "ticket", "harbor", "lantern", "pocket",
    "violin", "meadow", "orange", "ladder", "basket", "candle", "marble", "pillow",
    "quartz", "ribbon", "saddle", "thimble", "tunnel", "velvet", "walnut", "yarrow",
    "zipper", "anchor", "bamboo", "cactus", "dolphin", "ember",
)
# fmt: on


def _text(length: int, seed: int) -> str:
    """Filler prose of exactly ``length`` characters."""
    rng = random.Random(seed)
    words: list[str] = []
    size = -1
    while size < length:
        word = rng.choice(_WORDS)
        words.append(word)
        size += len(word) + 1
    return " ".join(words)[:length]


def single_session(question_id: str, evidence_chars: int, *, role: str = "user") -> dict[str, Any]:
    """Haystack fields whose rendered evidence has exactly ``evidence_chars`` characters."""
    header = "SESSION s1 AT 2023/05/20"
    content_chars = evidence_chars - len(header) - 1 - len(role) - 2
    assert content_chars >= 0, (question_id, evidence_chars)
    return {
        "haystack_session_ids": ["s1"],
        "haystack_dates": ["2023/05/20"],
        "haystack_sessions": [
            [
                {
                    "role": role,
                    "content": _text(content_chars, hash_seed(question_id)),
                    "has_answer": True,
                },
                {"role": "assistant", "content": "Noted."},
            ]
        ],
    }


def hash_seed(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big")


def _question(
    question_id: str, question_type: str, *, answer: object = None, **haystack: Any
) -> dict[str, Any]:
    row: dict[str, Any] = {
        "question_id": question_id,
        "question_type": question_type,
        "question": f"What did I say about item {question_id}?",
        "answer": f"item {question_id}" if answer is None else answer,
        "question_date": "2023/05/30 (Tue) 10:00",
        "answer_session_ids": [f"s_{question_id}"],
    }
    row.update(haystack or _two_sessions(question_id))
    return row


def _two_sessions(question_id: str) -> dict[str, Any]:
    """A marked answer turn in one session, only the user-turn fallback in the other."""
    return {
        "haystack_session_ids": [f"a_{question_id}", f"b_{question_id}"],
        "haystack_dates": ["2023/05/01 (Mon) 09:00", "2023/05/08 (Mon) 09:00"],
        "haystack_sessions": [
            [
                {"role": "user", "content": "I keep a note of things."},
                {
                    "role": "assistant",
                    "content": _text(60, hash_seed(question_id)),
                    "has_answer": True,
                },
            ],
            [
                {"role": "user", "content": _text(80, hash_seed(question_id) + 1)},
                {"role": "assistant", "content": "Understood."},
            ],
        ],
    }


def official_ids_by_type(files: ProtocolFiles | None = None) -> dict[str, list[str]]:
    """The pinned ids of a manifest, by question type (5 KU then 5 TR per scenario)."""
    files = files or bundled_protocol_files()
    manifest = json.loads(files.official_manifest.read_text())
    by_type: dict[str, list[str]] = {KNOWLEDGE_UPDATE: [], TEMPORAL_REASONING: []}
    for scenario in manifest["scenario_order"]:
        ids = manifest["scenarios"][scenario]
        by_type[KNOWLEDGE_UPDATE].extend(ids[:5])
        by_type[TEMPORAL_REASONING].extend(ids[5:])
    return by_type


def _selection_decoys() -> Iterator[dict[str, Any]]:
    """Eligible-type rows the rule must drop; each sorts inside its type's first 20."""
    ku, tr = KNOWLEDGE_UPDATE, TEMPORAL_REASONING
    # pilot ids (0f05491a, 4b24c848, 7e974930 and 8077ef71 sort inside the first 20)
    for pilot, kind in (
        ("0f05491a", ku), ("dfde3500", ku), ("4b24c848", tr), ("7e974930", tr),
        ("8077ef71", tr), ("bcbe585f", tr), ("gpt4_85da3956", ku), ("gpt4_af6db32f", tr),
    ):  # fmt: skip
        yield _question(pilot, kind)
    yield _question("01493427_abs", ku)  # abstention variant of a pinned id
    yield _question("0a000001", ku, answer="x" * 101)  # answer too long
    yield _question("0b000002", tr, answer="There is Not Enough information.")
    yield _question("0c000003", ku, answer="You only MENTIONED it once.")
    yield _question("0d000004", tr, **single_session("0d000004", 2001))  # evidence too long
    yield _question(  # no selectable turn: empty evidence
        "0d000005",
        ku,
        haystack_session_ids=["s"],
        haystack_dates=["2023/05/01"],
        haystack_sessions=[[{"role": "assistant", "content": "nothing marked"}]],
    )
    yield _question("0e000006", tr, answer="   ")  # empty once stripped
    # qualifying rows beyond the first 20 of their type
    yield _question("ffff0001", ku)
    yield _question("ffff0002", tr)


def _bank_rows(*, tiny_evidence: bool = False) -> Iterator[dict[str, Any]]:
    for position, question_id in enumerate(BANK_IDS):
        kind = "single-session-preference" if position % 3 == 0 else "single-session-user"
        # evidence lengths cover both bounds: 40 (first), 700 (last), 697 (35a27287)
        chars = {0: 40, 22: 697, 39: 700}.get(position, 60 + 16 * position)
        chars = TINY if tiny_evidence else chars
        yield _question(question_id, kind, **single_session(question_id, chars))
    # bank decoys: too short, too long, wrong type (all sort before the bank), and a 41st
    yield _question("000aaaa1", "single-session-user", **single_session("000aaaa1", 39))
    yield _question("000aaaa2", "single-session-preference", **single_session("000aaaa2", 701))
    yield _question("000aaaa3", "single-session-assistant", **single_session("000aaaa3", 200))
    yield _question("5e000001", "single-session-user", **single_session("5e000001", 200))


def build_rows(
    *, padding_bytes: int = 0, seed: int = 4789, tiny_evidence: bool = False
) -> list[dict[str, Any]]:
    """A LongMemEval-shaped dataset for the bundled protocol, in shuffled order.

    Args:
        padding_bytes: add ``multi-session`` rows (which no rule picks) until
            the JSON text is about this large.
        seed: the shuffle seed.
        tiny_evidence: give every official and bank question the shortest
            evidence the rules accept (40 characters), for prompts a small
            local model reads in seconds.
    """
    rows: list[dict[str, Any]] = []
    by_type = official_ids_by_type()
    for kind, ids in by_type.items():
        for position, question_id in enumerate(ids):
            # one integer answer, to exercise answer stringification
            answer = 3 if position == 0 and kind == TEMPORAL_REASONING else None
            haystack = single_session(question_id, TINY) if tiny_evidence else {}
            rows.append(_question(question_id, kind, answer=answer, **haystack))
    rows.extend(_selection_decoys())
    rows.extend(_bank_rows(tiny_evidence=tiny_evidence))
    rows.append(_question("00000000", "multi-session"))
    size = len(json.dumps(rows))
    counter = 0
    while size < padding_bytes:
        counter += 1
        row = _question(f"pad{counter:06d}", "multi-session", **_padding_haystack(counter))
        rows.append(row)
        size += len(json.dumps(row)) + 2
    random.Random(seed).shuffle(rows)
    return rows


def _padding_haystack(counter: int) -> dict[str, Any]:
    sessions = [
        [
            {
                "role": "user" if turn % 2 == 0 else "assistant",
                "content": _text(400 + 37 * turn, counter * 100 + turn),
            }
            for turn in range(12)
        ]
        for _ in range(3)
    ]
    return {
        "haystack_session_ids": [f"p{counter}_{n}" for n in range(3)],
        "haystack_dates": ["2023/04/01 (Sat) 12:00"] * 3,
        "haystack_sessions": sessions,
    }


def write_dataset(path: Path, rows: list[dict[str, Any]]) -> str:
    """Write rows as a dataset file; returns its SHA-256."""
    data = json.dumps(rows, ensure_ascii=False).encode()
    path.write_bytes(data)
    return hashlib.sha256(data).hexdigest()


def protocol_flags(files: ProtocolFiles) -> list[str]:
    """The command-line flags that point ``deermem eval`` at these protocol files."""
    return [
        "--config",
        str(files.config),
        "--official-manifest",
        str(files.official_manifest),
        "--synthetic-manifest",
        str(files.synthetic_manifest),
    ]


def copy_protocol(
    directory: Path,
    dataset_sha256: str,
    *,
    source: ProtocolFiles | None = None,
    root: Path | None = None,
) -> ProtocolFiles:
    """Copy a protocol bundle, pinning ``dataset_sha256`` instead of the real file's hash.

    Everything under ``root`` (default: the config's folder) is copied with its
    layout, so relative paths resolve as in the original bundle.
    """
    source = source or bundled_protocol_files()
    root = root or source.config.parent
    shutil.copytree(root, directory, ignore=shutil.ignore_patterns("__pycache__"))
    files = ProtocolFiles(
        config=directory / source.config.relative_to(root),
        official_manifest=directory / source.official_manifest.relative_to(root),
        synthetic_manifest=directory / source.synthetic_manifest.relative_to(root),
    )
    text = files.config.read_text()
    assert text.count(PINNED_SHA256) == 1
    files.config.write_text(text.replace(PINNED_SHA256, dataset_sha256))
    return files
