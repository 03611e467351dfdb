"""deermem writes a fact's file as the original DeerMem writes it, byte for byte, and reads it back.

The expected files in tests/store_fixtures/original-f1f4af99/ were written by
the original's own storage and updater code from our fact data
(tests/store_fixtures/original_cases.py says how); these tests drive
deermem's paths with the same data and compare bytes, so a git diff of a
directory both systems write stays quiet. Where deermem writes otherwise on
purpose, docs/storage.md lists it.
"""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from deermem import Fact, Memory, MemoryConfig
from deermem.learning.answer import ReinforceEntry
from deermem.learning.plan import confirm_facts
from deermem.model import Scope
from deermem.store import ChangeSet, FactWrite, MarkdownStore
from deermem.store.markdown.files import UserPaths, decode_fact, encode_fact
from tests.store_fixtures.original_cases import (
    CHANGED,
    CREATED,
    STORE_AGENT,
    STORE_FACTS,
    STORE_USER,
    STORED,
)

EXPECTED = Path(__file__).parent / "store_fixtures" / "original-f1f4af99"
NOW = datetime(2026, 8, 13, tzinfo=UTC)
LATER = datetime(2026, 9, 1, 12, 30, 0, 250000, tzinfo=UTC)
ALICE = Scope.of("alice", "coder")


def expected(name: str) -> bytes:
    return (EXPECTED / f"{name}.md").read_bytes()


def fact_path(root: Path, scope: Scope, fact_id: str) -> Path:
    return UserPaths(root, scope.user_id, "memory.json").agent(scope.agent).fact(fact_id)


def test_every_expected_file_has_its_case() -> None:
    names = {path.name.removesuffix(".md") for path in EXPECTED.glob("*.md")}
    cases = {*STORED, *CREATED, *CHANGED, *(f"{name}.before" for name in CHANGED)}
    assert names == cases


@pytest.mark.parametrize("name", sorted(STORED))
def test_a_stored_fact_is_written_as_the_original_writes_it(name: str) -> None:
    case = STORED[name]
    scope = Scope.of(case["user"], case["agent"])  # type: ignore[arg-type]
    fact = Fact.from_dict(case["fact"])  # type: ignore[arg-type]
    assert encode_fact(fact, scope) == expected(name)


@pytest.mark.parametrize("name", sorted(STORED))
def test_the_originals_file_reads_back_as_the_fact_and_rewrites_unchanged(name: str) -> None:
    case = STORED[name]
    scope = Scope.of(case["user"], case["agent"])  # type: ignore[arg-type]
    given = Fact.from_dict(case["fact"])  # type: ignore[arg-type]
    read = decode_fact(expected(name), f"{name}.md", scope, given.id)
    assert read.to_dict() == {**given.to_dict(), "scope": read.scope.to_dict()}  # type: ignore[union-attr]
    body = {"content", "title", "scope"}
    assert [k for k in read.to_dict() if k not in body] == [
        k for k in given.to_dict() if k not in body
    ]
    assert encode_fact(read, scope) == expected(name)


@pytest.mark.parametrize("name", sorted(CREATED))
def test_a_fact_added_by_hand_is_written_as_the_original_writes_it(
    name: str, tmp_path: Path
) -> None:
    spec = CREATED[name]
    memory = Memory.open(
        tmp_path,
        MemoryConfig(),
        user="alice",
        agent="coder",
        clock=lambda: NOW,
        id_factory=lambda: str(spec["id"]),
    )
    memory.create_fact(
        str(spec["content"]),
        category=str(spec["category"]),
        confidence=float(spec["confidence"]),  # type: ignore[arg-type]
    )
    assert fact_path(tmp_path, ALICE, str(spec["id"])).read_bytes() == expected(name)


@pytest.mark.parametrize("name", sorted(CHANGED))
def test_a_fact_the_original_wrote_is_changed_as_the_original_changes_it(
    name: str, tmp_path: Path
) -> None:
    """Both systems on one directory: the same change gives the same file."""
    fact_id = str(CREATED["created-correction"]["id"])
    path = fact_path(tmp_path, ALICE, fact_id)
    path.parent.mkdir(parents=True)
    shutil.copyfile(EXPECTED / f"{name}.before.md", path)
    change = CHANGED[name]
    if change.get("confirm"):
        store = MarkdownStore(tmp_path)
        [fact] = store.load(ALICE).facts
        outcome = confirm_facts(
            [fact],
            [ReinforceEntry(id=fact_id, scope="user", reason="the user said so")],
            signals={"reinforcement"},
            now=LATER,
        )
        [confirmed] = outcome.facts
        store.commit(ALICE, ChangeSet(now=LATER, writes=(FactWrite(confirmed, create=False),)))
    else:
        memory = Memory.open(
            tmp_path, MemoryConfig(), user="alice", agent="coder", clock=lambda: LATER
        )
        memory.update_fact(fact_id, **change)  # type: ignore[arg-type]
    assert path.read_bytes() == expected(name)


# --- a directory the original wrote, with data at the edges of what it accepts ---------------

STORE = Path(__file__).parent / "store_fixtures" / "original-f1f4af99-store"
EDGE = Scope.of(STORE_USER, STORE_AGENT)
LONG_ID = "fact_" + "e" * 209


@pytest.fixture
def original_store(tmp_path: Path) -> Path:
    """A copy: opening a store takes its lock, which must not touch the fixture."""
    return Path(shutil.copytree(STORE / "store", tmp_path / "store"))


def open_edge(root: Path, now: datetime = LATER) -> Memory:
    return Memory.open(root, MemoryConfig(), user=STORE_USER, agent=STORE_AGENT, clock=lambda: now)


def test_data_the_original_accepts_opens_as_it_was_written(original_store: Path) -> None:
    memory = open_edge(original_store)
    facts = {fact.id: fact for fact in memory.list_facts()}
    assert set(facts) == {fact["id"] for fact in STORE_FACTS}
    drinks = facts["fact_edge0001"]
    assert (drinks.category, drinks.categoryExtension) == ("preference", None)
    assert drinks.extra == {"categoryExtension": "drinks"}  # kept, not used
    assert drinks.source.extra == {"channel": "slack", "turn": 3}
    blank = facts["fact_edge0002"]
    assert (blank.createdAt, blank.lastConfirmedAt) == ("", None)  # blank reads as absent
    assert facts[LONG_ID].extra == {"reviewFlag": True, "nested": STORE_FACTS[2]["nested"]}
    summaries = memory.summaries()
    assert summaries.user["workContext"].summary == "42"  # the text the original shows
    assert summaries.user["topOfMind"].extra == {"source": "import"}
    assert summaries.history["recentMonths"].summary == ""
    assert "Work: 42" in memory.context()


def test_a_commit_keeps_every_key_it_does_not_change(original_store: Path) -> None:
    files = sorted(original_store.rglob("*.md"))
    before = {path: path.read_bytes() for path in files}
    manifest = next(original_store.rglob("memory.json"))
    sections = {key: json.loads(manifest.read_bytes())[key] for key in ("user", "history")}
    open_edge(original_store).create_fact("A fact of deermem's.", category="goal")
    assert {path: path.read_bytes() for path in files} == before
    after = json.loads(manifest.read_bytes())
    assert {key: after[key] for key in ("user", "history")} == sections
    assert after["revision"] == 2


@pytest.mark.parametrize("fact_id", ["fact_edge0001", LONG_ID])
def test_an_edit_of_the_originals_fact_writes_what_the_original_writes(
    original_store: Path, fact_id: str
) -> None:
    open_edge(original_store).update_fact(fact_id, confidence=0.3)
    written = fact_path(original_store, EDGE, fact_id).read_bytes()
    assert written == (STORE / "edited" / f"{fact_id}.md").read_bytes()


def test_a_blank_creation_time_stays_blank_where_the_original_fills_it_in(
    original_store: Path,
) -> None:
    """The one documented difference on this directory (docs/storage.md)."""
    open_edge(original_store).update_fact("fact_edge0002", confidence=0.3)
    ours = fact_path(original_store, EDGE, "fact_edge0002").read_text("utf-8").splitlines()
    theirs = (STORE / "edited" / "fact_edge0002.md").read_text("utf-8").splitlines()
    assert [(a, b) for a, b in zip(ours, theirs, strict=True) if a != b] == [
        ("createdAt: ''", "createdAt: '2026-09-01T12:30:00.250000Z'")
    ]
