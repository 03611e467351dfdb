"""The regret tables as the Markdown store's regret files are kept: bounded, damage-safe.

A row that is not JSON is an error naming its table and row, never read as
no events and never overwritten; an event or mark this deermem cannot read
is skipped when reading and kept as it is; a damaged row never fails a
search.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime

import psycopg
import pytest

from deermem import CorruptMemoryFile, Memory, MemoryConfig
from deermem.model import Scope
from deermem.store import ChangeSet
from deermem.store.postgres import PostgresStore
from deermem.store.records import RegretEvent, ShadowMark

NOW = datetime(2026, 8, 13, tzinfo=UTC)
SCOPE = Scope.of("alice")


@pytest.fixture
def store(postgres_url: str) -> Iterator[PostgresStore]:
    with PostgresStore(postgres_url, regret_max_events=3) as opened:
        yield opened


def event(fact_id: str) -> RegretEvent:
    return RegretEvent(
        kind="restored",
        occurred_at="2026-08-13T00:00:00Z",
        fact_id=fact_id,
        category="context",
        policy_version="confidence",
        role="active",
        evicted_at="2026-08-01T00:00:00Z",
        receipt_id=None,
        reason="capacity",
        trigger="restore",
        query_digest=None,
        rank=None,
    )


def documents(url: str, table: str) -> list[str]:
    with psycopg.connect(url, autocommit=True) as admin:
        found = admin.execute(f"SELECT document FROM {table} ORDER BY 1").fetchall()
    return [document for (document,) in found]


def test_a_row_that_is_not_json_is_an_error_naming_it_and_is_kept(
    store: PostgresStore, postgres_url: str
) -> None:
    mark = ShadowMark("hybrid-v1", "2026-08-01T00:00:00Z", None, "context")
    store.commit(SCOPE, ChangeSet(now=NOW, regret_events=(event("fact_a"),)))
    store.commit(SCOPE, ChangeSet(now=NOW, shadow_marks={"fact_m": mark}))
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute("UPDATE deermem_regret_events SET document = '[ broken'")
        admin.execute("UPDATE deermem_shadow_marks SET document = '{ broken'")
    with pytest.raises(CorruptMemoryFile, match=r"deermem_regret_events .*not valid JSON"):
        store.regret_events(SCOPE)
    with pytest.raises(CorruptMemoryFile, match=r"deermem_shadow_marks .*fact_m.*not valid JSON"):
        store.shadow_marks(SCOPE)
    with pytest.raises(CorruptMemoryFile, match="deermem_regret_events"):
        Memory(store, MemoryConfig(), SCOPE, clock=lambda: NOW).regret()
    store.commit(SCOPE, ChangeSet(now=NOW, regret_events=(event("fact_b"),)))  # appended ...
    assert "[ broken" in documents(postgres_url, "deermem_regret_events")  # ... the row kept
    assert documents(postgres_url, "deermem_shadow_marks") == ["{ broken"]


def test_events_and_marks_it_cannot_read_are_skipped_and_kept(
    store: PostgresStore, postgres_url: str
) -> None:
    mark = ShadowMark("hybrid-v1", "2026-08-01T00:00:00Z", None, "context")
    store.commit(SCOPE, ChangeSet(now=NOW, shadow_marks={"fact_m": mark}))
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(
            "INSERT INTO deermem_regret_events (user_id, agent, document) "
            "VALUES ('alice', '__default__', '{\"kind\": \"from-a-later-deermem\"}')"
        )
        admin.execute(
            "INSERT INTO deermem_shadow_marks (user_id, agent, fact_id, document) "
            "VALUES ('alice', '__default__', 'fact_x', '7')"
        )
    assert store.regret_events(SCOPE) == ()
    assert store.shadow_marks(SCOPE) == {"fact_m": mark}
    store.commit(SCOPE, ChangeSet(now=NOW, regret_events=(event("fact_a"), event("fact_b"))))
    store.commit(SCOPE, ChangeSet(now=NOW, shadow_marks={"fact_m": None}))
    assert [e.fact_id for e in store.regret_events(SCOPE)] == ["fact_a", "fact_b"]
    assert '{"kind": "from-a-later-deermem"}' in documents(postgres_url, "deermem_regret_events")
    assert documents(postgres_url, "deermem_shadow_marks") == ["7"]
    store.commit(SCOPE, ChangeSet(now=NOW, regret_events=(event("fact_c"),)))  # the bound: 3
    assert len(documents(postgres_url, "deermem_regret_events")) == 3
    assert [e.fact_id for e in store.regret_events(SCOPE)] == ["fact_a", "fact_b", "fact_c"]


def test_a_damaged_row_never_fails_a_search(
    store: PostgresStore, postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    memory = Memory(
        store, MemoryConfig(fact_eviction_shadow_enabled=True), SCOPE, clock=lambda: NOW
    )
    fact_id = memory.create_fact("Drinks oolong tea").fact_id
    mark = ShadowMark("hybrid-v1", "2026-08-01T00:00:00Z", None, "context")
    assert fact_id is not None
    store.commit(SCOPE, ChangeSet(now=NOW, shadow_marks={fact_id: mark}))
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute("UPDATE deermem_shadow_marks SET document = '{ broken'")
    with caplog.at_level(logging.WARNING):
        assert [r.fact_id for r in memory.search("oolong")] == [fact_id]
    assert "deermem_shadow_marks" in caplog.text
    assert documents(postgres_url, "deermem_shadow_marks") == ["{ broken"]
