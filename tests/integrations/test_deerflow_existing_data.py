"""A store DeerFlow's bundled DeerMem wrote opens as it is, and what deermem writes stays
in the shape the bundled backend reads (so a user can switch back).

The fixture (tests/integrations/data/deerflow-f1f4af99/, see its README) was
written by the bundled DeerMem through DeerFlow's own factory; its
``expected.json`` is what the bundled backend itself read back. The switch
back is run for real by scripts/check-deerflow.sh; here the files deermem
writes are checked against the rules the bundled reader applies.
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from deermem.integrations.deerflow import DeerFlowBackend, read_backend_config

FIXTURE = Path(__file__).parent / "data" / "deerflow-f1f4af99"
EXPECTED: dict[str, Any] = json.loads((FIXTURE / "expected.json").read_text("utf-8"))
DAY_AFTER = datetime(2026, 12, 2, tzinfo=UTC)  # the fixture was written on 2026-12-01
# The bundled backend's settings when it wrote the fixture (make_fixture.py).
SETTINGS = {"max_facts": 10, "fact_eviction_policy": "hybrid-v1"}
ALICE = "alice@example.com"


def open_copy(tmp_path: Path, **settings: Any) -> DeerFlowBackend:
    store = Path(shutil.copytree(FIXTURE / "store", tmp_path / "store"))
    config = {"storage_path": str(store), **SETTINGS, **settings}
    return DeerFlowBackend(read_backend_config(config), clock=lambda: DAY_AFTER)


@pytest.fixture
def manager(tmp_path: Path) -> Any:
    opened = open_copy(tmp_path)
    yield opened
    opened.close()


def scope_of(user: str, agent: str | None) -> dict[str, Any]:
    return next(s for s in EXPECTED["scopes"] if (s["user"], s["agent"]) == (user, agent))


# The bundled backend derives a title from the first line; deermem shows it only when
# it was set. DeerFlow's gateway does not use it.
DERIVED = {"title"}


@pytest.mark.parametrize(("user", "agent"), [(ALICE, None), (ALICE, "coder"), ("bob", None)])
def test_every_scope_reads_as_the_bundled_backend_read_it(
    manager: DeerFlowBackend, user: str, agent: str | None
) -> None:
    theirs = scope_of(user, agent)["document"]
    ours = manager.get_memory(user_id=user, agent_name=agent)
    for key in ("version", "revision", "lastUpdated", "user", "history"):
        assert ours[key] == theirs[key], key
    by_id = {fact["id"]: fact for fact in ours["facts"]}
    assert sorted(by_id) == sorted(fact["id"] for fact in theirs["facts"])
    for fact in theirs["facts"]:
        mine = by_id[fact["id"]]
        for key in fact.keys() - DERIVED:
            assert mine[key] == fact[key], (fact["id"], key)
        assert mine["consolidatedFrom"] == fact["consolidatedFrom"] == []


def test_the_bundled_backends_eviction_receipt_answers_why(manager: DeerFlowBackend) -> None:
    (event,) = scope_of(ALICE, None)["sidecars"]["eviction-audit"]
    (evicted,) = event["evicted"]
    why = manager.memory(user_id=ALICE, agent_name=None).why(evicted["factId"])
    assert why.status == "gone"  # the bundled backend deletes for good
    (receipt,) = why.receipts
    assert receipt.policy_version == event["policyVersion"] == "hybrid-v1"
    assert receipt.reason == "capacity"
    (entry,) = receipt.evicted
    assert entry.score == evicted["score"]
    assert entry.components == evicted["components"]


def test_recall_heat_and_confirmations_the_bundled_backend_recorded_count(
    manager: DeerFlowBackend,
) -> None:
    usage = scope_of(ALICE, None)["sidecars"]["fact-usage"]
    (searched,) = usage
    memory = manager.memory(user_id=ALICE, agent_name=None)
    fact = memory.get_fact(searched)
    assert fact.confirmationCount == 1
    assert fact.lastConfirmedAt is not None
    standing = memory.why(searched).standing
    assert standing is not None
    assert standing.components["accessHeat"] > 0.3  # a recall a day ago
    assert standing.components["confirmationFreshness"] > 0.99  # confirmed a day ago
    block = manager.get_context(ALICE)
    assert block.index("[correction | 0.95]") < block.index("[context")


def test_search_works_over_the_bundled_backends_facts(manager: DeerFlowBackend) -> None:
    (hit,) = manager.search("uv pip", top_k=1, user_id=ALICE)
    assert hit["content"] == "Uses uv, never pip, for Python projects."
    assert hit["source"] == "thread-1"
    assert manager.search("cello", user_id="bob")[0]["categoryExtension"] == "hobby"


# --- what deermem writes, read by the bundled backend's rules ---------------------------


def test_what_deermem_writes_the_bundled_backend_can_read(tmp_path: Path) -> None:
    manager = open_copy(tmp_path)
    try:
        scope = manager.memory(user_id=ALICE, agent_name=None)
        kept = [fact.id for fact in scope.list_facts()]
        manager.update_fact(kept[0], content="Uses uv — never pip — for Python.", user_id=ALICE)
        manager.delete_fact(kept[1], user_id=ALICE)
        _, created = manager.create_fact("Prefers short answers.", "preference", 0.9, user_id=ALICE)
        _, evicted_at_once = manager.create_fact("A weak guess.", "context", 0.05, user_id=ALICE)
        assert created is not None
        assert evicted_at_once is None
        manager.create_fact("Writes Go at work.", "skill", 0.8, agent_name="coder", user_id=ALICE)
        manager.import_memory(
            {"user": {"topOfMind": {"summary": "Moving to Berlin.", "updatedAt": ""}}, "facts": []},
            user_id="bob",
        )
        expected_alice = {f["id"] for f in manager.get_memory(user_id=ALICE)["facts"]}
    finally:
        manager.close()
    store = tmp_path / "store"
    facts = bundled_read(store)
    assert {
        fact_id for (user, agent, fact_id) in facts if agent == "__default__" and "alice" in user
    } == expected_alice
    assert not any(user == "bob" and agent == "__default__" for (user, agent, _) in facts)
    for audit in store.glob("users/*/agents/*/.metadata/eviction-audit.json"):
        check_audit(json.loads(audit.read_text("utf-8")))


def bundled_read(store: Path) -> set[tuple[str, str, str]]:
    """Read every scope by the rules the bundled reader applies (DeerFlow f1f4af99's
    ``FileMemoryStorage``): a version-2 summary document without facts, and fact files
    whose front matter matches their file name, shard, user and agent. Returns
    (user directory, agent, fact id) for every fact."""
    found: set[tuple[str, str, str]] = set()
    for user_dir in sorted((store / "users").iterdir()):
        document = json.loads((user_dir / "memory.json").read_text("utf-8"))
        assert document["version"] == "2.0"
        assert "facts" not in document
        assert set(document) == {"version", "revision", "lastUpdated", "user", "history"}
        for path in sorted(user_dir.glob("agents/*/facts/**/*.md")):
            agent = path.parts[-4]
            fact = read_fact_file(path)
            assert fact["id"] == path.stem
            assert path.parent.name == hashlib.sha256(path.stem.encode()).hexdigest()[:2]
            assert fact["agent_name"] == agent
            assert isinstance(fact["user_id"], str)
            check_fact(fact)
            found.add((user_dir.name, agent, fact["id"]))
    return found


def read_fact_file(path: Path) -> dict[str, Any]:
    text = path.read_text("utf-8")
    assert text.startswith("---\n")
    front, body = text[4:].split("\n---\n", 1)
    metadata = yaml.safe_load(front)
    assert isinstance(metadata, dict)
    lines = body.lstrip("\n").splitlines()
    assert lines[0].startswith("# ")
    metadata["content"] = "\n".join(lines[2:]).rstrip("\n")
    return metadata


def check_fact(fact: dict[str, Any]) -> None:
    assert isinstance(fact["content"], str)
    assert fact["content"].strip()
    assert isinstance(fact.get("category", "context"), str)
    confidence = fact.get("confidence", 0.5)
    assert isinstance(confidence, int | float)
    assert not isinstance(confidence, bool)
    assert 0 <= confidence <= 1
    assert math.isfinite(confidence)
    assert fact.get("status", "active") == "active"
    for key in ("topics", "consolidatedFrom"):
        assert all(isinstance(item, str) for item in fact.get(key, []))
    assert fact.get("lastConfirmedAt") is None or isinstance(fact["lastConfirmedAt"], str)
    count = fact.get("confirmationCount")
    assert count is None or (isinstance(count, int) and count >= 1)
    revision = fact.get("revision", 1)
    assert isinstance(revision, int)
    assert revision >= 1
    source = fact.get("source")
    assert isinstance(source, str | dict)
    if isinstance(source, dict):
        assert isinstance(source.get("type", "unknown"), str)
        assert source.get("threadId") is None or isinstance(source["threadId"], str)
    assert isinstance(fact["createdAt"], str)
    assert isinstance(fact["updatedAt"], str)


def check_audit(events: list[dict[str, Any]]) -> None:
    """The bundled backend keeps an event only with a list of ``{factId: str}`` entries."""
    assert isinstance(events, list)
    for event in events:
        for key in ("occurredAt", "reason", "policyVersion", "maxFacts", "reservedCorrectionSlots"):
            assert key in event
        assert all(isinstance(entry["factId"], str) for entry in event["evicted"])


def test_the_cli_explains_a_bundled_receipt_without_placeholders(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The original's receipts hold no trigger, rank or occupancy: `why` and `audit` leave
    those out instead of printing "rank None" or "(trigger ?)"."""
    from deermem.cli import main

    store = shutil.copytree(FIXTURE / "store", tmp_path / "store")
    (event,) = scope_of(ALICE, None)["sidecars"]["eviction-audit"]
    (evicted,) = event["evicted"]
    assert main(["--root", str(store), "--user", ALICE, "why", evicted["factId"]]) == 0
    assert main(["--root", str(store), "--user", ALICE, "audit"]) == 0
    out = capsys.readouterr().out
    assert "evicted at capacity on" in out
    assert f"score {evicted['score']:.4f}" in out
    for placeholder in ("None", "?", "trigger"):
        assert placeholder not in out, out
