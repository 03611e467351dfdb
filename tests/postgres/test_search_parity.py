"""Search on PostgreSQL gives what it gives on the Markdown store, bit for bit."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

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
