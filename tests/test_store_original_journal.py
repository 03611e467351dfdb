"""Interrupted commits, both ways: deermem's journals and the original DeerMem's.

* A deermem commit interrupted by a crash leaves a journal the original's
  recovery must refuse rather than mis-recover. Its rules are modelled here
  from reference §2 (``original_recovery``), and replayed on such a journal.
* An original commit interrupted by a crash (``store_fixtures/original-
  interrupted``, written by the original's own code, see its ``make.py``) is
  recovered by deermem exactly as the original recovers it: byte for byte
  the files the original's recovery leaves.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from deermem import Memory, MemoryConfig
from deermem.store.markdown import journal

NOW = datetime(2026, 8, 13, tzinfo=UTC)
FIXTURE = Path(__file__).parent / "store_fixtures" / "original-interrupted"
CAP = 10


class OriginalRefuses(Exception):
    """The original reports its storage as corrupt and changes nothing."""


def original_recovery(user_dir: Path) -> None:
    """The original DeerMem's journal recovery (reference §2), as a model.

    ``prepared``: ``memory.json`` comes back from ``.recovery/<op>/memory.json``
    (without a backup and with an expected revision of 0 it is deleted), every
    fact the journal names that is not in ``oldEntries`` is deleted, every fact
    in ``oldEntries`` comes back from ``.recovery/<op>/<id>.md`` if that exists;
    ``committed``: clean-up only; any other state, or no operation id: refused.
    Then the backups and the journal go.
    """
    path = user_dir / ".memory.journal.json"
    if not path.exists():
        return
    data = json.loads(path.read_text("utf-8"))
    if "operationId" not in data:
        raise OriginalRefuses("no operationId")
    backups = user_dir / ".recovery" / str(data["operationId"])
    state = data.get("state")
    if state == "prepared":
        manifest = backups / "memory.json"
        if manifest.exists():
            (user_dir / "memory.json").write_bytes(manifest.read_bytes())
        elif int(data.get("expectedRevision") or 0) == 0:
            (user_dir / "memory.json").unlink(missing_ok=True)
        old = data.get("oldEntries", {})
        for fact_id in data.get("factIds", []):
            if fact_id not in old:
                shard = hashlib.sha256(fact_id.encode()).hexdigest()[:2]
                agent = user_dir / "agents" / data["agentName"]
                (agent / "facts" / shard / f"{fact_id}.md").unlink(missing_ok=True)
        for fact_id, entry in old.items():
            backup = backups / f"{fact_id}.md"
            if backup.exists():
                (user_dir / entry["path"]).write_bytes(backup.read_bytes())
    elif state != "committed":
        raise OriginalRefuses(f"unknown journal state {state!r}")
    shutil.rmtree(backups, ignore_errors=True)
    path.unlink()


def files_of(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != ".memory.lock"
    }


def interrupted_create_at_the_cap(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Memory, dict[str, bytes]]:
    """A deermem create at the cap (one eviction) killed before its journal went."""
    memory = Memory.open(root, MemoryConfig(max_facts=CAP), user="alice", clock=lambda: NOW)
    for number in range(CAP):
        memory.create_fact(f"Fact number {number}.", confidence=0.5 + number / 100)
    before = files_of(root)

    class Crash(BaseException):
        pass

    def crash(path: Path) -> bool:
        raise Crash

    with monkeypatch.context() as patch:
        patch.setattr(journal, "remove_durably", crash)
        patch.setattr(journal, "_roll_back_now", lambda user: None)  # a crash undoes nothing
        with pytest.raises(Crash):
            memory.create_fact("One more fact.", confidence=0.95)
    return memory, before


def test_the_originals_recovery_refuses_an_interrupted_deermem_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory, before = interrupted_create_at_the_cap(tmp_path, monkeypatch)
    user_dir = tmp_path / "users" / "alice"
    interrupted = files_of(tmp_path)
    with pytest.raises(OriginalRefuses, match="unknown journal state"):
        original_recovery(user_dir)
    assert files_of(tmp_path) == interrupted  # refused: nothing lost, deermem can recover
    facts = Memory.open(tmp_path, MemoryConfig(max_facts=CAP), user="alice").list_facts()
    assert len(facts) == CAP
    assert files_of(tmp_path) == before
    assert memory.audit() == ()


def test_a_deermem_journal_in_the_originals_state_would_lose_a_fact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Why deermem's state is its own: read as the original's, its journal mis-recovers."""
    interrupted_create_at_the_cap(tmp_path, monkeypatch)
    user_dir = tmp_path / "users" / "alice"
    path = user_dir / ".memory.journal.json"
    data = json.loads(path.read_text("utf-8"))
    data["state"] = "prepared"  # what deermem wrote before
    path.write_text(json.dumps(data), "utf-8")
    original_recovery(user_dir)  # no backups: the evicted fact is not restored
    assert not path.exists()
    library = list((user_dir / "agents/__default__/facts").rglob("*.md"))
    assert len(library) == CAP - 1  # neither the state before the commit nor after it


def test_an_interrupted_original_commit_is_recovered_as_the_original_recovers_it(
    tmp_path: Path,
) -> None:
    root = Path(shutil.copytree(FIXTURE / "store", tmp_path / "store"))
    user_dir = root / "users" / "alice"
    assert json.loads((user_dir / ".memory.journal.json").read_text("utf-8"))["state"] == (
        "prepared"
    )
    memory = Memory.open(root, MemoryConfig(max_facts=CAP), user="alice", clock=lambda: NOW)
    facts = memory.list_facts()  # recovers
    assert len(facts) == CAP  # not 11: the interrupted commit's new fact is gone
    assert "fact_0000000a" not in {fact.id for fact in facts}
    assert memory.get_fact("fact_00000000").content == "Stored fact 0."  # deleted: restored
    assert memory.get_fact("fact_00000003").content == "Stored fact 3."  # edited: restored
    expected = json.loads((FIXTURE / "expected.json").read_text("utf-8"))
    assert {name: data.decode("utf-8") for name, data in files_of(root).items()} == expected
    assert not (user_dir / ".memory.journal.json").exists()
    assert list((user_dir / ".recovery").iterdir()) == []  # the backups went too
    assert memory.create_fact("A new fact after recovery.", confidence=0.9).kept


def test_an_original_journal_that_created_the_manifest_removes_it(tmp_path: Path) -> None:
    """No manifest backup and an expected revision of 0: the commit made memory.json."""
    user_dir = tmp_path / "users" / "alice"
    shard = hashlib.sha256(b"fact_new").hexdigest()[:2]
    fact_file = user_dir / "agents/__default__/facts" / shard / "fact_new.md"
    fact_file.parent.mkdir(parents=True)
    fact_file.write_text("half of a commit", "utf-8")
    (user_dir / "memory.json").write_text('{"version": "2.0", "revision": 1}', "utf-8")
    (user_dir / ".recovery/op1").mkdir(parents=True)
    data = {
        "operationId": "op1",
        "state": "prepared",
        "agentName": "__default__",
        "expectedRevision": 0,
        "nextRevision": 1,
        "factIds": ["fact_new"],
        "oldEntries": {},
    }
    (user_dir / ".memory.journal.json").write_text(json.dumps(data), "utf-8")
    expected_dir = Path(shutil.copytree(tmp_path, tmp_path.parent / "expected"))
    original_recovery(expected_dir / "users" / "alice")
    memory = Memory.open(tmp_path, MemoryConfig(), user="alice", clock=lambda: NOW)
    assert memory.list_facts() == ()
    assert files_of(tmp_path) == files_of(expected_dir)
    assert not (user_dir / "memory.json").exists()


def test_a_journal_an_earlier_deermem_wrote_is_still_recovered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """State ``prepared`` with the prior contents inside: deermem's own, from before."""
    _, before = interrupted_create_at_the_cap(tmp_path, monkeypatch)
    path = tmp_path / "users" / "alice" / ".memory.journal.json"
    data = json.loads(path.read_text("utf-8"))
    data["state"] = "prepared"
    path.write_text(json.dumps(data), "utf-8")
    assert len(Memory.open(tmp_path, MemoryConfig(), user="alice").list_facts()) == CAP
    assert files_of(tmp_path) == before
