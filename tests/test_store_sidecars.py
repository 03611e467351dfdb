"""The usage and audit sidecars: recall heat, bounded content-free receipts, clean-up."""

from __future__ import annotations

import json
import logging
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from deermem import CorruptMemoryFile, Memory, MemoryConfig
from deermem.cli.demo import seed_scenarios
from deermem.store import plan
from deermem.store.markdown import files as atomic
from deermem.store.markdown import sidecars

NOW = datetime(2026, 8, 13, tzinfo=UTC)


class Clock:
    def __init__(self, now: datetime = NOW) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def open_memory(root: Path, clock: Clock | None = None, **settings: object) -> Memory:
    settings.setdefault("fact_eviction_policy", "confidence")  # the original's, named
    settings.setdefault("fact_eviction_shadow_enabled", False)
    config = MemoryConfig(**settings)
    return Memory.open(root, config, user="alice", clock=clock or Clock())


def metadata(root: Path) -> Path:
    return root / "users/alice/agents/__default__/.metadata"


def test_recall_heat_decays_then_adds_one_and_never_touches_the_fact(tmp_path: Path) -> None:
    clock = Clock()
    memory = open_memory(tmp_path, clock, fact_eviction_policy="hybrid-v1")
    fact_id = memory.create_fact("Uses uv").fact_id
    assert fact_id is not None
    fact_file = next(tmp_path.rglob(f"{fact_id}.md"))
    before = fact_file.read_bytes()
    assert memory.record_access([fact_id])
    clock.now = NOW + timedelta(days=30)  # one half-life later
    assert memory.record_access([fact_id, "fact_unknown"])
    usage = json.loads((metadata(tmp_path) / "fact-usage.json").read_text("utf-8"))
    assert usage == {
        fact_id: {"accessHeat": 1.5, "accessCount": 2, "lastAccessedAt": "2026-09-12T00:00:00Z"}
    }
    assert fact_file.read_bytes() == before
    assert memory.get_fact(fact_id).updatedAt == "2026-08-13T00:00:00Z"


def test_the_default_policy_records_no_usage(tmp_path: Path) -> None:
    memory = open_memory(tmp_path)
    fact_id = memory.create_fact("Uses uv").fact_id
    assert fact_id is not None
    assert memory.record_access([fact_id]) is False
    assert not (metadata(tmp_path) / "fact-usage.json").exists()


def test_shadow_mode_records_usage(tmp_path: Path) -> None:
    memory = open_memory(tmp_path, fact_eviction_shadow_enabled=True)
    fact_id = memory.create_fact("Uses uv").fact_id
    assert fact_id is not None
    assert memory.record_access([fact_id])
    assert fact_id in memory.store.usage(memory.scope)


def test_receipts_are_bounded_and_hold_no_content(tmp_path: Path) -> None:
    memory = open_memory(tmp_path, max_facts=10, eviction_audit_max_entries=1)
    for number in range(12):
        memory.create_fact(f"Secret number {number} of the user", confidence=0.5 + number / 100)
    audit_file = metadata(tmp_path) / "eviction-audit.json"
    events = json.loads(audit_file.read_text("utf-8"))
    assert len(events) == 1
    [event] = events
    assert event["reason"] == "capacity"
    assert event["trigger"] == "manual"
    assert (event["maxFacts"], event["occupancy"]) == (10, 11)
    assert event["evicted"][0]["factId"] == memory.audit()[0].evicted[0].fact_id
    assert set(event["evicted"][0]) == {
        "factId",
        "category",
        "score",
        "components",
        "rank",
        "margin",
    }
    text = audit_file.read_text("utf-8")
    assert "Secret" not in text
    for sidecar in metadata(tmp_path).glob("*.json"):
        assert "Secret" not in sidecar.read_text("utf-8")


def test_no_receipts_are_written_with_a_bound_of_zero(tmp_path: Path) -> None:
    memory = open_memory(tmp_path, max_facts=10, eviction_audit_max_entries=0)
    for number in range(11):
        memory.create_fact(f"Fact {number}")
    assert not (metadata(tmp_path) / "eviction-audit.json").exists()
    assert len(memory.list_archived()) == 1  # the archive still knows why
    assert memory.list_archived()[0].eviction is not None


def test_a_malformed_usage_sidecar_is_ignored_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    memory = open_memory(tmp_path, fact_eviction_policy="hybrid-v1")
    fact_id = memory.create_fact("Uses uv").fact_id
    assert fact_id is not None
    metadata(tmp_path).mkdir(parents=True, exist_ok=True)
    (metadata(tmp_path) / "fact-usage.json").write_text("[1, 2", "utf-8")
    with caplog.at_level(logging.WARNING, logger="deermem.store"):
        assert memory.store.usage(memory.scope) == {}
        assert [f.id for f in memory.list_facts()] == [fact_id]
        memory.record_access([fact_id])  # rewrites the derived file
    assert "malformed sidecar" in caplog.text
    assert memory.store.usage(memory.scope)[fact_id].access_count == 1


@pytest.mark.parametrize("content", ['{"not": "a list"}', "[1, 2", "\xff"])
def test_a_malformed_audit_is_an_error_and_is_never_overwritten(
    tmp_path: Path, content: str
) -> None:
    memory = open_memory(tmp_path, max_facts=10)
    for number in range(10):
        memory.create_fact(f"Fact {number}", confidence=0.9)
    audit = metadata(tmp_path) / "eviction-audit.json"
    audit.parent.mkdir(parents=True, exist_ok=True)
    audit.write_text(content, "utf-8")
    with pytest.raises(CorruptMemoryFile, match=r"eviction-audit\.json"):
        memory.audit()
    with pytest.raises(CorruptMemoryFile, match=r"eviction-audit\.json"):
        memory.why(memory.list_facts()[0].id)
    facts = memory.list_facts()
    with pytest.raises(CorruptMemoryFile, match=r"eviction-audit\.json"):
        memory.create_fact("One more", confidence=0.95)  # would append a receipt
    assert audit.read_text("utf-8") == content  # the only record of purged facts stays
    assert memory.list_facts() == facts  # and nothing else changed
    assert memory.list_archived() == ()
    memory.update_fact(facts[0].id, confidence=0.5)  # commits that write no receipt still work


def test_original_audit_events_are_kept_when_receipts_are_appended(tmp_path: Path) -> None:
    original = {
        "occurredAt": "2026-07-01T00:00:00Z",
        "reason": "capacity",
        "policyVersion": "confidence",
        "maxFacts": 10,
        "reservedCorrectionSlots": 0,
        "evicted": [{"factId": "fact_old", "category": "goal", "score": 0.4, "components": {}}],
    }
    metadata(tmp_path).mkdir(parents=True)
    (metadata(tmp_path) / "eviction-audit.json").write_text(json.dumps([original]), "utf-8")
    memory = open_memory(tmp_path, max_facts=10)
    for number in range(11):
        memory.create_fact(f"Fact {number}")
    events = json.loads((metadata(tmp_path) / "eviction-audit.json").read_text("utf-8"))
    assert events[0] == original
    receipts = memory.audit()
    assert receipts[0].receipt_id is None
    assert receipts[0].trigger is None
    assert receipts[1].receipt_id is not None


def test_a_receipt_is_appended_without_reading_the_receipts_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 23: at the cap every create appends a receipt to an audit of up to
    ``eviction_audit_max_entries``; an audit this store last wrote (the same bytes)
    is neither decoded nor encoded again — one receipt is. The file is what
    encoding every receipt gives, byte for byte, and one changed by another
    writer is read afresh."""
    memory = open_memory(tmp_path, max_facts=10, eviction_audit_max_entries=5)
    for number in range(15):
        memory.create_fact(f"Fact {number}", confidence=0.5 + number / 100)
    audit = metadata(tmp_path) / "eviction-audit.json"
    assert len(json.loads(audit.read_bytes())) == 5
    encoded: list[object] = []
    real = sidecars._compact

    def counting(value: object) -> str:
        encoded.append(value)
        return real(value)

    monkeypatch.setattr(sidecars, "_compact", counting)
    memory.create_fact("Fact 15", confidence=0.9)
    assert len(encoded) == 1  # the new receipt only
    events = json.loads(audit.read_bytes())
    assert len(events) == 5
    assert audit.read_bytes() == sidecars.encode_events(events)
    # Another writer's audit (the same receipts, written otherwise) is read and rewritten.
    audit.write_text(json.dumps(events, indent=4), "utf-8")
    encoded.clear()
    memory.create_fact("Fact 16", confidence=0.95)
    assert len(encoded) == 6
    events = json.loads(audit.read_bytes())
    assert audit.read_bytes() == sidecars.encode_events(events)
    assert [receipt.receipt_id for receipt in memory.audit()] == [
        event["receiptId"] for event in events
    ]


# --- stripping ids (eviction_mode: delete, as the original) -----------------------------


def test_forgetting_ids_recomputes_the_shadow_disagreement(tmp_path: Path) -> None:
    path = tmp_path / "audit.json"
    event = {
        "occurredAt": "2026-08-13T00:00:00Z",
        "evicted": [{"factId": "a"}, {"factId": "b"}],
        "shadow": {"policyVersion": "hybrid-v1", "wouldEvict": ["a", "c"], "disagrees": True},
    }
    path.write_text(json.dumps([event]), "utf-8")
    change = sidecars.audit_after_commit(path, (), 0, forget=["b", "c"])
    assert change is not None
    [cleaned] = json.loads(change[1] or b"")
    assert cleaned["evicted"] == [{"factId": "a"}]
    assert cleaned["shadow"] == {
        "policyVersion": "hybrid-v1",
        "wouldEvict": ["a"],
        "disagrees": False,
    }


def test_forgetting_ids_copes_with_a_null_evicted_list_and_deletes_an_empty_file(
    tmp_path: Path,
) -> None:
    path = tmp_path / "audit.json"
    path.write_text(
        json.dumps(
            [
                {"occurredAt": "x", "evicted": None},
                {"occurredAt": "y", "evicted": [{"factId": "a"}]},
            ]
        ),
        "utf-8",
    )
    assert sidecars.audit_after_commit(path, (), 0, forget=["a"]) == (path, None)  # removed


def test_forgetting_ids_drops_malformed_fields() -> None:
    events: list[object] = [
        {
            "occurredAt": "x",
            "evicted": [{"factId": "a"}, "junk", {"nofactid": 1}, {"factId": 3}],
            "shadow": {
                "policyVersion": "hybrid-v1",
                "wouldEvict": ["a", 7, None],
                "disagrees": True,
            },
        },
        {"occurredAt": "y", "evicted": [{"factId": "b"}], "shadow": {"wouldEvict": "a"}},
        "not an event",
    ]
    cleaned = plan.strip_audit_events(events, {"zzz"})
    assert cleaned == [
        {
            "occurredAt": "x",
            "evicted": [{"factId": "a"}],
            "shadow": {"policyVersion": "hybrid-v1", "wouldEvict": ["a"], "disagrees": False},
        },
        {"occurredAt": "y", "evicted": [{"factId": "b"}]},
    ]


def test_delete_mode_strips_deleted_ids_from_receipts(tmp_path: Path) -> None:
    memory = open_memory(
        tmp_path, max_facts=10, eviction_mode="delete", fact_eviction_shadow_enabled=True
    )
    stale, _ = seed_scenarios(NOW)
    memory.import_document({"facts": [dict(f) for f in stale.facts]})
    [receipt] = memory.audit()
    assert receipt.fact_ids == ("fact_confirm",)
    assert receipt.shadow is not None
    assert receipt.shadow.would_evict == ("fact_stale90",)
    assert memory.list_archived() == ()  # delete mode: evicted facts are gone
    assert not list(tmp_path.rglob("fact_confirm.md"))
    memory.delete_fact("fact_stale90")
    receipt, deleted = memory.audit()
    assert receipt.shadow is not None
    assert receipt.shadow.would_evict == ()  # stripped from the earlier receipt ...
    assert (deleted.reason, deleted.fact_ids) == ("deleted", ("fact_stale90",))  # ... its own
    assert not list(tmp_path.rglob("fact_stale90.md"))
    remaining = {f.id for f in memory.list_facts()}
    memory.import_document({"facts": []})  # every fact deleted: each in one receipt of its own
    *earlier, replaced = memory.audit()
    assert [r.fact_ids for r in earlier] == [("fact_confirm",), ("fact_stale90",)]
    assert replaced.reason == "replaced"
    assert set(replaced.fact_ids) == remaining


@pytest.mark.parametrize("failing", ["write", "flush", "rename"])
def test_a_commit_whose_receipt_cannot_be_written_does_not_happen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    memory = open_memory(tmp_path, max_facts=10)
    for number in range(10):
        memory.create_fact(f"Fact {number}", confidence=0.9)
    files_before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    real_write, real_fsync, real_replace = atomic.write_temporary, os.fsync, os.replace

    def disk_full() -> None:
        raise OSError(28, "No space left on device")

    def write_fails_on_the_audit(
        path: Path, data: bytes, *, flush: bool = True, mode: int = atomic.FILE_MODE
    ) -> Path:
        if path.name == "eviction-audit.json":
            disk_full()
        return real_write(path, data, flush=flush, mode=mode)

    def fsync_fails_on_the_audit(fd: int) -> None:
        # Its content is flushed in its temporary, or (a new directory) once in place.
        name = Path(f"/proc/self/fd/{fd}").readlink().name
        if name == "eviction-audit.json" or name.startswith(".eviction-audit.json."):
            disk_full()
        real_fsync(fd)

    def rename_fails_on_the_audit(source: str | Path, target: str | Path) -> None:
        if Path(target).name == "eviction-audit.json":
            disk_full()
        real_replace(source, target)

    if failing == "write":  # writing the receipt's temporary file
        monkeypatch.setattr(atomic, "write_temporary", write_fails_on_the_audit)
    elif failing == "flush":  # flushing it
        monkeypatch.setattr(os, "fsync", fsync_fails_on_the_audit)
    else:  # renaming it into place
        monkeypatch.setattr(os, "replace", rename_fails_on_the_audit)
    with pytest.raises(OSError, match="No space"):
        memory.create_fact("One more", confidence=0.95)
    monkeypatch.undo()
    # A call that raises did not commit: no fact, no archive entry, no receipt.
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == files_before
    assert memory.audit() == ()
    assert memory.list_archived() == ()
    assert len(memory.list_facts()) == 10
    result = memory.create_fact("One more", confidence=0.95)  # the retry is a new create
    assert result.kept
    assert memory.audit() == result.receipts  # and what it returns is what the audit holds
