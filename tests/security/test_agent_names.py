"""Agent names of any length the original accepts, on both stores; nothing left out silently.

The original DeerMem and DeerFlow accept agent names of any length; deermem
refused names over 64 characters, so a store the original wrote for a
70-character agent did not open, ``deermem scopes`` left that agent out
without a word and ``deermem migrate`` reported "each verified" while
dropping its facts (issue 20, point 11). Names up to 1,024 characters are
accepted now; a name over 254 characters — longer than a file name may be
— lives in a derived, collision-free directory that records the name.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from deermem import CorruptMemoryFile, Memory, MemoryConfig, UnsafeIdentifierError
from deermem.cli import main
from deermem.model import MAX_AGENT_NAME_LENGTH, MAX_USER_ID_BYTES, agent_directory

from ..served_store import ServedStore, files_under, on_both_stores
from ..server.conftest import start_server

NOW = datetime(2026, 8, 13, tzinfo=UTC)
SEVENTY = "research-assistant-for-the-quarterly-planning-of-the-payments-platform"
LONG = "-".join(f"agent{n:03d}" for n in range(40))  # 359 characters
LONGEST = ("x" * 1023) + "y"
assert (len(SEVENTY), len(LONG), len(LONGEST)) == (70, 359, MAX_AGENT_NAME_LENGTH)


def memory(store: ServedStore, agent: str, user: str | None = "alice") -> Memory:
    return store.memory(store.config(), user=user, agent=agent, clock=lambda: NOW)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@on_both_stores
@pytest.mark.parametrize("agent", [SEVENTY, LONG, LONGEST], ids=["70", "359", "1024"])
def test_a_long_agent_name_is_a_scope_of_its_own(store: ServedStore, agent: str) -> None:
    memory(store, agent).create_fact(f"A fact of the {len(agent)}-character agent.")
    memory(store, agent.upper()).create_fact("The same agent, in capitals.")
    memory(store, agent[:-1]).create_fact("Another agent: one character shorter.")
    assert len(memory(store, agent).list_facts()) == 2
    assert len(memory(store, agent[:-1]).list_facts()) == 1
    unscoped = store.unscoped(store.config())
    listed = {(s.scope.agent, s.facts) for s in unscoped.scopes()}
    assert listed == {(agent, 2), (agent[:-1], 1)}
    assert unscoped.store_problems() == ()


def test_a_long_name_gets_a_bounded_directory_that_names_it(tmp_path: Path) -> None:
    Memory.open(tmp_path, MemoryConfig(), user="alice", agent=LONG).create_fact("Kept.")
    [directory] = (tmp_path / "users" / "alice" / "agents").iterdir()
    assert len(directory.name) == 255
    assert directory.name == f"{LONG[:190]}-{hashlib.sha256(LONG.encode()).hexdigest()}"
    assert json.loads((directory / ".memory.owner.json").read_text("utf-8")) == {
        "userId": "alice",
        "agentName": LONG,
    }
    # Names up to 254 characters are their own directory, as in the original.
    assert agent_directory("a" * 254) == "a" * 254
    assert len({agent_directory("a" * n) for n in range(250, 300)}) == 50


@on_both_stores
def test_a_name_over_the_limit_is_refused(store: ServedStore) -> None:
    with pytest.raises(UnsafeIdentifierError, match="at most 1024 characters"):
        memory(store, LONGEST + "z")


@on_both_stores
def test_the_longest_names_are_stored_together(store: ServedStore) -> None:
    """A fact row is keyed by (user id, agent, fact id): the longest of each fit
    PostgreSQL's index together (a B-tree entry holds at most 2,704 bytes)."""
    user = "名" * (MAX_USER_ID_BYTES // 3)
    longest_id = "fact_" + "f" * 245
    at_the_limit = memory(store, LONGEST, user=user)
    at_the_limit.import_document({"facts": [{"id": longest_id, "content": "At every limit."}]})
    assert [fact.id for fact in memory(store, LONGEST, user=user).list_facts()] == [longest_id]


# --- a store the original wrote -----------------------------------------------------------------


def original_fact(agent_dir: Path, fact_id: str, agent: str) -> None:
    shard = hashlib.sha256(fact_id.encode()).hexdigest()[:2]
    path = agent_dir / "facts" / shard / f"{fact_id}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f"---\nid: {fact_id}\ncategory: goal\nconfidence: 0.7\nstatus: active\nschemaVersion: 2\n"
        "source:\n  type: manual\n  threadId: null\nuser_id: alice\n"
        f"agent_name: {agent}\ntopics: []\ncreatedAt: '2026-08-01T00:00:00Z'\n"
        "updatedAt: '2026-08-01T00:00:00Z'\nrevision: 1\n---\n\n# Plan Q3.\n\nPlan Q3.\n",
        "utf-8",
    )


@pytest.fixture
def original(tmp_path: Path) -> Path:
    """``users/alice`` as the original writes it, with a 70-character agent."""
    root = tmp_path / "original"
    original_fact(root / "users" / "alice" / "agents" / SEVENTY, "fact_0a0a0a0a", SEVENTY)
    original_fact(
        root / "users" / "alice" / "agents" / "__default__", "fact_0b0b0b0b", "__default__"
    )
    (root / "users" / "alice" / ".memory.lock").write_bytes(b"")  # the original's lock file
    return root


def test_a_store_the_original_wrote_for_a_long_agent_opens_lists_and_migrates(
    original: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = files_under(original)
    facts = Memory.open(original, MemoryConfig(), user="alice", agent=SEVENTY).list_facts()
    assert [fact.id for fact in facts] == ["fact_0a0a0a0a"]
    code, out, err = run(capsys, "--root", str(original), "scopes", "--json")
    assert (code, err) == (0, "")
    assert {(row["agent"], row["facts"]) for row in json.loads(out)} == {
        (SEVENTY, 1),
        ("__default__", 1),
    }
    copy = tmp_path / "copy"
    code, out, err = run(capsys, "migrate", "--from", str(original), "--to", str(copy), "--json")
    assert (code, err) == (0, "")
    assert json.loads(out)["facts"] == 2
    copied = Memory.open(copy, MemoryConfig(), user="alice", agent=SEVENTY).list_facts()
    assert copied == facts
    assert files_under(original) == before


def test_migrate_and_scopes_fail_loudly_on_an_agent_directory_they_cannot_read(
    original: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A name no agent has (an underscore, capitals): its facts would be left behind."""
    stray = original / "users" / "alice" / "agents" / "Research_Bot"
    original_fact(stray, "fact_0c0c0c0c", "Research_Bot")
    code, out, err = run(capsys, "--root", str(original), "scopes", "--json")
    assert code == 1
    assert {row["agent"] for row in json.loads(out)} == {SEVENTY, "__default__"}
    assert f"{stray}: the name is not an agent's directory name" in err
    copy = tmp_path / "copy"
    code, out, err = run(capsys, "migrate", "--from", str(original), "--to", str(copy))
    assert code == 1
    assert "each verified" not in out
    assert str(stray) in err
    assert not (copy / "users").exists()
    with pytest.raises(CorruptMemoryFile, match="not an agent's directory name"):
        Memory.open(original, MemoryConfig(), user="alice").clear_user()


def test_a_derived_agent_directory_without_its_record_is_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    Memory.open(tmp_path, MemoryConfig(), user="alice", agent=LONG).create_fact("Kept.")
    [directory] = (tmp_path / "users" / "alice" / "agents").iterdir()
    (directory / ".memory.owner.json").unlink()
    code, _, err = run(capsys, "--root", str(tmp_path), "scopes")
    assert code == 1
    assert f"{directory}: a long agent name's directory without a matching owner record" in err


@on_both_stores
def test_over_http_a_long_agent_name_is_a_scope(store: ServedStore) -> None:
    server, _ = start_server(store)
    try:
        client = server.client()
        url = f"/v1/users/alice/agents/{LONG.upper()}/facts"
        created = client.post(url, json={"content": "Kept under a long agent name."})
        listed = client.get(f"/v1/users/alice/agents/{LONG}/facts")
        over = client.get(f"/v1/users/alice/agents/{LONGEST}z/facts")
    finally:
        server.stop()
    assert created.status_code == 201, created.text
    assert [fact["content"] for fact in listed.json()["facts"]] == ["Kept under a long agent name."]
    assert over.status_code == 422
