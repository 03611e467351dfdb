"""Search on PostgreSQL gives what it gives on the Markdown store, bit for bit."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from deermem import Memory, MemoryConfig
from deermem.model import Scope
from deermem.store.postgres import PostgresStore
from tests.store_contract.test_search import LIBRARY

NOW = datetime(2026, 8, 13, tzinfo=UTC)
QUERIES = [
    "python",
    "install python packages with uv",
    "green tea",
    "TML",  # the substring fallback
    "机器学习",
    "東京",
    "문장",
    "安装 Python",
    '"unbalanced NOT NEAR( col: ^ -x',
    "🦌",
    "every",
]


def new_id() -> str:
    return "fact_extra"


@pytest.mark.parametrize("policy", ["confidence", "hybrid-v1"])
def test_every_query_ranks_the_same_on_both_stores(
    tmp_path: Path, postgres_url: str, policy: str
) -> None:
    # shadow mode named too: a new Markdown store would turn it on (issue 24), a database not
    config = MemoryConfig(fact_eviction_policy=policy, fact_eviction_shadow_enabled=False)
    on_files = Memory.open(
        tmp_path, config, user="alice", agent="coder", clock=lambda: NOW, id_factory=new_id
    )
    with PostgresStore(postgres_url) as store:
        on_database = Memory(
            store, config, Scope.of("alice", "coder"), clock=lambda: NOW, id_factory=new_id
        )
        for memory in (on_files, on_database):
            memory.import_document({"facts": LIBRARY})
            memory.create_fact("Every morning starts with python and tea.", confidence=0.8)
        for query in QUERIES:
            for top_k, category in ((5, None), (2, None), (10, "context"), (3, "tooling")):
                found = on_database.search(query, top_k=top_k, category=category)
                assert found == on_files.search(query, top_k=top_k, category=category), query
        assert on_database.store.usage(on_database.scope) == on_files.store.usage(on_files.scope)


def test_recall_heat_reads_back_exactly_whatever_the_servers_float_digits(
    tmp_path: Path, postgres_url: str
) -> None:
    """With `extra_float_digits = 0` (PostgreSQL 11's default, still set by some servers,
    roles and poolers) a `double precision` came back rounded to 15 digits: every
    recall heat read on PostgreSQL differed from the Markdown store's, and `migrate`
    into such a database failed its comparison. deermem's connections set it to 3."""
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        name = admin.execute("SELECT current_database()").fetchone()
        assert name is not None
        admin.execute(
            sql.SQL("ALTER DATABASE {} SET extra_float_digits = 0").format(sql.Identifier(name[0]))
        )
    config = MemoryConfig(fact_eviction_policy="hybrid-v1", search_mode="keyword")
    now = [NOW]  # hours apart, so the heat decays to a float of all 17 digits
    on_files = Memory.open(tmp_path, config, user="alice", clock=lambda: now[0], id_factory=new_id)
    with PostgresStore(postgres_url) as store:
        on_database = Memory(
            store, config, Scope.of("alice"), clock=lambda: now[0], id_factory=new_id
        )
        for memory in (on_files, on_database):
            now[0] = NOW
            memory.create_fact("Green tea every morning.", confidence=0.5)
            for query in ("tea", "green tea", "morning tea"):
                now[0] += timedelta(hours=7)
                memory.search(query)
    with PostgresStore(postgres_url) as fresh:
        read_back = dict(fresh.usage(Scope.of("alice")))
    assert read_back == dict(on_files.store.usage(on_files.scope))
    assert any(len(repr(entry.access_heat)) > 16 for entry in read_back.values()), read_back
