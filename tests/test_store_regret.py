"""The store's side of regret: the sidecars (bounded, malformed-file-safe) and the archive index."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from deermem import CorruptMemoryFile, Memory, MemoryConfig
from deermem.model import Scope
from deermem.store import ChangeSet, MarkdownStore
from deermem.store.records import RegretEvent, ShadowMark

NOW = datetime(2026, 8, 13, tzinfo=UTC)
SCOPE = Scope.of("alice", None)


def metadata(root: Path) -> Path:
    return root / "users/alice/agents/__default__/.metadata"


def event(number: int) -> RegretEvent:
    return RegretEvent(
        kind="missed_recall",
        occurred_at=(NOW + timedelta(minutes=number)).isoformat().replace("+00:00", "Z"),
        fact_id=f"fact_{number:08x}",
        category="context",
        policy_version="confidence",
        role="active",
        evicted_at="2026-08-01T00:00:00Z",
        receipt_id=None,
        reason="capacity",
        trigger="search",
        query_digest="sha256:0000000000000000",
        rank=1,
    )


def test_the_event_log_keeps_the_newest_events_only(tmp_path: Path) -> None:
    store = MarkdownStore(tmp_path, regret_max_events=3)
    for number in range(5):
        store.commit(SCOPE, ChangeSet(now=NOW, regret_events=(event(number),)))
    assert [e.fact_id for e in store.regret_events(SCOPE)] == [
        "fact_00000002",
        "fact_00000003",
        "fact_00000004",
    ]
    lines = (metadata(tmp_path) / "regret-events.json").read_text("utf-8").splitlines()
    assert len(lines) == 5  # one event per line, between the brackets


def test_no_events_are_kept_at_a_bound_of_zero(tmp_path: Path) -> None:
    store = MarkdownStore(tmp_path, regret_max_events=0)
    store.commit(SCOPE, ChangeSet(now=NOW, regret_events=(event(1),)))
    assert not (metadata(tmp_path) / "regret-events.json").exists()


def test_events_it_cannot_read_are_skipped_and_kept(tmp_path: Path) -> None:
    store = MarkdownStore(tmp_path)
    log = metadata(tmp_path) / "regret-events.json"
    log.parent.mkdir(parents=True)
    log.write_text('[{"kind": "unknown"}, 7]\n', "utf-8")
    assert store.regret_events(SCOPE) == ()
    store.commit(SCOPE, ChangeSet(now=NOW, regret_events=(event(1),)))
    raw = json.loads(log.read_text("utf-8"))
    assert raw[:2] == [{"kind": "unknown"}, 7]
    assert [e.fact_id for e in store.regret_events(SCOPE)] == ["fact_00000001"]


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("regret-events.json", "{}", "not a JSON list"),
        ("regret-events.json", "[ broken", "not valid JSON"),
        ("shadow-evictions.json", "[]", "not a JSON object"),
        ("shadow-evictions.json", "{ broken", "not valid JSON"),
    ],
)
def test_a_damaged_sidecar_is_an_error_and_is_not_overwritten(
    tmp_path: Path, name: str, content: str, message: str
) -> None:
    store = MarkdownStore(tmp_path)
    path = metadata(tmp_path) / name
    path.parent.mkdir(parents=True)
    path.write_text(content, "utf-8")
    mark = ShadowMark("hybrid-v1", "2026-08-01T00:00:00Z", None, "context")
    changes = ChangeSet(now=NOW, regret_events=(event(1),), shadow_marks={"fact_a": mark})
    with pytest.raises(CorruptMemoryFile, match=message):
        store.commit(SCOPE, changes)
    assert path.read_text("utf-8") == content
    with pytest.raises(CorruptMemoryFile, match=name.replace(".", r"\.")):
        store.regret_events(SCOPE) if name.startswith("regret") else store.shadow_marks(SCOPE)


def test_marks_are_set_and_cleared_and_the_file_goes_with_the_last(tmp_path: Path) -> None:
    store = MarkdownStore(tmp_path)
    mark = ShadowMark("hybrid-v1", "2026-08-01T00:00:00Z", "rcpt_1", "goal")
    store.commit(SCOPE, ChangeSet(now=NOW, shadow_marks={"fact_a": mark, "fact_b": mark}))
    assert store.shadow_marks(SCOPE) == {"fact_a": mark, "fact_b": mark}
    store.commit(SCOPE, ChangeSet(now=NOW, shadow_marks={"fact_a": None}))
    assert store.shadow_marks(SCOPE) == {"fact_b": mark}
    store.commit(SCOPE, ChangeSet(now=NOW, shadow_marks={"fact_b": None}))
    assert not (metadata(tmp_path) / "shadow-evictions.json").exists()


def test_a_regret_only_commit_changes_no_revision(tmp_path: Path) -> None:
    store = MarkdownStore(tmp_path)
    result = store.commit(SCOPE, ChangeSet(now=NOW, regret_events=(event(1),)))
    assert (result.changed, result.revision) == (False, 0)  # the search index stays current


def test_a_search_records_its_events_and_recalls_in_one_change(tmp_path: Path) -> None:
    memory = Memory.open(
        tmp_path, MemoryConfig(fact_eviction_policy="hybrid-v1"), user="alice", clock=lambda: NOW
    )
    fact_id = memory.create_fact("Likes oolong tea").fact_id
    assert fact_id is not None
    memory.store.record_access(memory.scope, [fact_id], NOW, regret=(event(1),))
    assert memory.store.usage(memory.scope)[fact_id].access_count == 1
    assert [e.fact_id for e in memory.store.regret_events(memory.scope)] == ["fact_00000001"]
    assert not (tmp_path / "users/alice/.memory.journal.json").exists()


def test_damaged_shadow_marks_never_fail_a_search(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The marks are read with the facts a search ranks (one read of the scope): marks
    that cannot be read come back as their error, and the search answers all the same,
    unrecorded, naming the file in the log; the file is left as it is."""
    memory = Memory.open(tmp_path, MemoryConfig(), user="alice", clock=lambda: NOW)
    fact_id = memory.create_fact("Likes oolong tea").fact_id
    marks = metadata(tmp_path) / "shadow-evictions.json"
    marks.parent.mkdir(parents=True, exist_ok=True)
    marks.write_text("{ broken", "utf-8")
    snapshot, read = memory.store.load_with_marks(memory.scope)
    assert [fact.id for fact in snapshot.facts] == [fact_id]
    assert isinstance(read, CorruptMemoryFile)
    with caplog.at_level(logging.WARNING):
        assert [result.fact_id for result in memory.search("oolong")] == [fact_id]
    assert "shadow-evictions.json" in caplog.text
    assert marks.read_text("utf-8") == "{ broken"


def test_a_recorded_search_checks_the_scope_s_directories_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 23: the facts a search ranks and the shadow marks its results are checked
    against are read after one check of the directories (an interrupted commit rolled
    back, the owner records read); it checked them twice, once per read. (Under a policy
    that counts recalls, the write that counts them checks once more, under the lock.)"""
    config = MemoryConfig(fact_eviction_policy="confidence", fact_eviction_shadow_enabled=False)
    memory = Memory.open(tmp_path, config, user="alice", clock=lambda: NOW)
    memory.create_fact("Likes oolong tea")
    assert memory.search("oolong")  # the first search brings the index in step
    checks: list[Scope] = []
    check = MarkdownStore._check

    def counted(store: MarkdownStore, scope: Scope, *rest: Any) -> Any:
        checks.append(scope)
        return check(store, scope, *rest)

    monkeypatch.setattr(MarkdownStore, "_check", counted)
    assert memory.search("oolong")
    assert checks == [memory.scope]


# --- the archive index ------------------------------------------------------------------


def archived_memory(root: Path) -> tuple[Memory, str]:
    memory = Memory.open(root, MemoryConfig(max_facts=10), user="alice", clock=lambda: NOW)
    fact_id = memory.create_fact("Lives in Lisbon").fact_id
    assert fact_id is not None
    memory.delete_fact(fact_id)
    return memory, fact_id


def test_the_archive_index_lists_a_digest_of_each_text_and_no_text(tmp_path: Path) -> None:
    _, fact_id = archived_memory(tmp_path)
    index = (metadata(tmp_path) / "archive-index.json").read_text("utf-8")
    [[listed, archived_at, digest]] = json.loads(index)
    assert (listed, archived_at) == (fact_id, "2026-08-13T00:00:00Z")
    assert len(digest) == 16
    assert "Lisbon" not in index


def test_an_index_written_before_digests_still_finds_what_is_said_again(tmp_path: Path) -> None:
    memory, fact_id = archived_memory(tmp_path)
    index = metadata(tmp_path) / "archive-index.json"
    index.write_text(json.dumps([[fact_id, "2026-08-13T00:00:00Z"]]), "utf-8")
    other = memory.create_fact("Works in Porto").fact_id
    assert other is not None
    memory.delete_fact(other)  # an archive commit: the old entry gets its digest
    assert all(len(item) == 3 for item in json.loads(index.read_text("utf-8")))
    assert memory.create_fact("lives in lisbon").relearned == fact_id


def test_a_damaged_archive_entry_never_stops_a_fact_from_being_added(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    memory, fact_id = archived_memory(tmp_path)
    (metadata(tmp_path) / "archive" / f"{fact_id}.json").write_text("{ broken", "utf-8")
    (metadata(tmp_path) / "archive-index.json").unlink()  # nothing says what it held
    with caplog.at_level(logging.WARNING, logger="deermem.store"):
        result = memory.create_fact("Lives in Lisbon")
    assert result.kept
    assert result.relearned is None
    assert f"{fact_id}.json" in caplog.text


def test_a_markdown_copy_keeps_the_regret_byte_for_byte(tmp_path: Path) -> None:
    from deermem.store.markdown.transfer import MarkdownTransfer
    from deermem.store.migrate import MigrationReport, migrate

    config = MemoryConfig(max_facts=10, fact_eviction_shadow_enabled=True)
    memory = Memory.open(tmp_path / "source", config, user="alice", clock=lambda: NOW)
    old = {"id": "fact_old", "content": "An old fact", "confidence": 0.8}
    old["createdAt"] = (NOW - timedelta(days=400)).isoformat()
    fresh = [
        {"id": f"fact_{n}", "content": f"Fact number {n}", "confidence": 0.7 + n / 100}
        for n in range(9)
    ]
    memory.import_document({"facts": [old, *fresh]})
    memory.create_fact("A confident new fact", confidence=0.9)  # hybrid-v1 would evict fact_old
    memory.search("fact number 0")  # a missed recall
    source = metadata(tmp_path / "source")
    assert (source / "regret-events.json").exists()
    assert (source / "shadow-evictions.json").exists()
    report = migrate(
        MarkdownTransfer(MarkdownStore(tmp_path / "source")),
        MarkdownTransfer(MarkdownStore(tmp_path / "copy")),
        MigrationReport("source", "copy"),
    )
    assert report.counts["regretEvents"] > 0
    copy = metadata(tmp_path / "copy")
    for name in ("regret-events.json", "shadow-evictions.json"):
        assert (copy / name).read_bytes() == (source / name).read_bytes()
