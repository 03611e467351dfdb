"""A connection that may only read: a role granted ``SELECT`` only, a read-only transaction.

Reading works there as on a read-only Markdown store (docs/storage.md,
"Read-only stores"): a search answers, counts no recalls and keeps no
vectors, and says so once.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime

import psycopg
import pytest

from deermem import DatabaseReadOnly, Memory, MemoryConfig
from deermem.cli.app import main
from deermem.model import Scope
from deermem.store.postgres import PostgresStore
from tests.store_contract.test_meaning import LIBRARY

NOW = datetime(2026, 8, 13, tzinfo=UTC)
SCOPE = Scope.of("alice", "coder")


@pytest.fixture(params=["select-only role", "read-only transactions"])
def reader_url(request: pytest.FixtureRequest, postgres_url: str) -> Iterator[str]:
    """The address of the database through a connection that may only read."""
    with PostgresStore(postgres_url) as store:
        Memory(store, MemoryConfig(), SCOPE, clock=lambda: NOW).import_document({"facts": LIBRARY})
    if request.param == "read-only transactions":  # what a hot standby gives
        yield postgres_url + "?options=-c%20default_transaction_read_only%3Don"
        return
    role = f"reader_{postgres_url.rsplit('/', 1)[1]}"
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN")
        admin.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {role}")
    try:
        yield postgres_url.replace("://deermem@", f"://{role}@")
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute(f"DROP OWNED BY {role}")
            admin.execute(f"DROP ROLE {role}")


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
def test_search_on_a_read_only_connection_answers_and_says_once_what_it_does_not_keep(
    reader_url: str, postgres_url: str, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    config = MemoryConfig(search_mode=mode, fact_eviction_policy="hybrid-v1")
    with caplog.at_level(logging.WARNING), PostgresStore(reader_url) as store:
        memory = Memory(store, config, SCOPE, clock=lambda: NOW)
        found = [memory.search("Am I a southpaw?") for _ in range(2)]
        found.append(memory.search("Am I a southpaw?", record=False))
        # a host's count of the hits it shows (a LangGraph page) is not kept either, as quietly
        assert memory.record_access(hit.fact_id for hit in found[0]) is False
        assert store.usage(SCOPE) == {}
        with pytest.raises(DatabaseReadOnly):
            memory.create_fact("I write code in emacs.")  # a commit is still refused
    with PostgresStore(postgres_url) as store:  # a writer's search, which keeps the vectors
        expected = Memory(store, config, SCOPE, clock=lambda: NOW).search(
            "Am I a southpaw?", record=False
        )
    assert found == [expected] * 3
    said = [record.getMessage() for record in caplog.records]
    assert sum(m.startswith("search hits are not counted as recalls") for m in said) == 1
    vectors = sum(m.startswith("search vectors are not kept in the database") for m in said)
    assert vectors == (1 if mode == "hybrid" else 0), said
    if mode == "hybrid":
        assert expected[0].match_type == "hybrid"  # ranked by meaning, vectors made in memory


def test_reindex_on_a_read_only_connection_is_refused_not_said_to_have_kept_vectors(
    reader_url: str,
    postgres_url: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`deermem reindex` exists to make the store keep vectors; on a connection that may
    not write it exited 0 saying "the store keeps their vectors", having kept none (a
    search's cache may be left unwritten, a reindex's may not). It is now refused in one
    line, and the refused write leaves no line of the driver's own on stderr."""
    monkeypatch.setenv("DEERMEM_STORE", reader_url)
    assert main(["reindex"]) == 1
    out, err = capsys.readouterr()
    assert "keeps their vectors" not in out
    assert err.startswith("error: "), err
    assert err.count("\n") == 1, err
    with psycopg.connect(postgres_url) as admin:
        assert admin.execute("SELECT count(*) FROM deermem_vectors").fetchone() == (0,)
    monkeypatch.setenv("DEERMEM_STORE", postgres_url)
    assert main(["reindex"]) == 0  # the owner's reindex keeps them
    with psycopg.connect(postgres_url) as admin:
        kept = admin.execute("SELECT count(*) FROM deermem_vectors").fetchone()
    assert kept == (len(LIBRARY),)
