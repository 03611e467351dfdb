"""PostgreSQL's equivalents of the Markdown store's crash tests: a commit is all or nothing.

A connection killed in the middle of a transaction, the server restarted
between commits, a statement cut off by ``statement_timeout``, a statement
that fails half-way through a commit: each leaves the memory as it was
before the commit (or after it), and the next operation works.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from urllib.parse import quote

import psycopg
import pytest

from deermem import (
    CorruptMemoryFile,
    DatabaseError,
    Memory,
    MemoryConfig,
    StoreLockTimeout,
    UnsafeIdentifierError,
)
from deermem.cli.app import main
from deermem.library import Proposal
from deermem.model import Fact, Scope
from deermem.store import ChangeSet
from deermem.store.postgres import PostgresStore
from deermem.store.postgres.database import translated
from deermem.testing.postgres import TemporaryPostgres
from tests.privacy.fakes import MAKERS

NOW = datetime(2026, 8, 13, tzinfo=UTC)
ALICE = Scope.of("alice", "coder")


@pytest.fixture
def store(postgres_url: str) -> Iterator[PostgresStore]:
    with PostgresStore(postgres_url) as opened:
        yield opened


def memory_on(store: PostgresStore, **settings: object) -> Memory:
    config = MemoryConfig(max_facts=10, **settings)
    return Memory(store, config, ALICE, clock=lambda: NOW)


def state(memory: Memory) -> tuple[object, ...]:
    """Everything the database holds for the scope, read fresh."""
    snapshot = memory.store.reload(memory.scope)
    return (
        snapshot.summaries,
        snapshot.facts,
        memory.audit(),
        memory.store.archive(memory.scope, NOW),
        dict(memory.store.usage(memory.scope)),
    )


def full(memory: Memory) -> None:
    for number in range(10):
        memory.create_fact(f"Background fact {number}", confidence=0.5)


def test_a_connection_killed_mid_transaction_commits_nothing(
    store: PostgresStore, postgres_url: str
) -> None:
    memory = memory_on(store)
    full(memory)
    before = state(memory)
    with store.transaction(ALICE) as transaction:
        assert len(transaction.snapshot.facts) == 10  # the lock is held, the library read
        pid = transaction._connection.info.backend_pid
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        with pytest.raises(DatabaseError) as lost:
            memory.gate.apply(
                transaction,
                memory_proposal(memory),
                trigger="manual",
                now=NOW,
            )
    assert "terminat" in str(lost.value) or "connection" in str(lost.value)
    assert state(memory) == before  # no fact, no receipt, no archive entry
    result = memory.create_fact("After the kill", confidence=0.9)  # a fresh connection
    assert result.fact_id is not None
    assert len(memory.list_facts()) == 10
    assert memory.audit()[-1].fact_ids == result.evicted


def memory_proposal(memory: Memory) -> Proposal:

    fact = Fact.from_dict(
        {"id": "fact_killed", "content": "Never stored", "confidence": 0.9, "createdAt": NOW}
    )
    return Proposal(new_facts=(fact,))


def test_the_server_restarted_between_commits(
    store: PostgresStore, postgres_server: TemporaryPostgres
) -> None:
    memory = memory_on(store)
    memory.create_fact("Before the restart")
    postgres_server.restart()  # every pooled connection is now broken
    result = memory.create_fact("After the restart")
    assert result.fact_id is not None
    assert {f.content for f in memory.list_facts()} == {"Before the restart", "After the restart"}
    other = PostgresStore(store_url(postgres_server, store))
    try:
        assert len(other.load(ALICE).facts) == 2
    finally:
        other.close()


def store_url(server: TemporaryPostgres, store: PostgresStore) -> str:
    return server.url(store.address.rsplit("/", 1)[1])


def test_a_statement_timeout_commits_nothing(postgres_url: str) -> None:
    options = quote("-c statement_timeout=300", safe="")
    with PostgresStore(f"{postgres_url}?options={options}") as store:
        memory = memory_on(store)
        full(memory)
        before = state(memory)
        with psycopg.connect(postgres_url) as blocker:
            # Another session holds the user's row: the commit's last statement waits on it.
            blocker.execute("SELECT 1 FROM deermem_users WHERE user_id = 'alice' FOR UPDATE")
            with pytest.raises(DatabaseError, match="statement timeout"):
                memory.create_fact("Cut off", confidence=0.9)  # evicts, archives, receipts
            blocker.rollback()
        assert state(memory) == before
        assert memory.create_fact("Not cut off", confidence=0.9).fact_id is not None


def test_a_statement_failing_half_way_rolls_back_the_whole_commit(
    store: PostgresStore, postgres_url: str
) -> None:
    memory = memory_on(store)
    full(memory)
    before = state(memory)
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        # The receipt is written after the facts, the usage and before the archive.
        admin.execute("ALTER TABLE deermem_receipts ADD CONSTRAINT refuse CHECK (false)")
        with pytest.raises(DatabaseError, match="refuse"):
            memory.create_fact("Evicts one", confidence=0.9)
        assert state(memory) == before
        admin.execute("ALTER TABLE deermem_receipts DROP CONSTRAINT refuse")
    assert memory.create_fact("Evicts one", confidence=0.9).evicted


def test_a_refused_statement_is_named_without_the_data_it_carried(
    store: PostgresStore, postgres_url: str
) -> None:
    """The server's DETAIL ("Failing row contains …") and CONTEXT ("JSON data, line 1:
    …") quote the statement's data — a fact's text; the error keeps the primary message."""
    memory = memory_on(store)
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute("ALTER TABLE deermem_facts ADD CONSTRAINT refuse CHECK (false)")
        with pytest.raises(DatabaseError, match="refuse") as refused:
            memory.create_fact("My diagnosis is confidential", confidence=0.9)
        admin.execute("ALTER TABLE deermem_facts DROP CONSTRAINT refuse")
    assert "diagnosis" not in str(refused.value)
    with (
        pytest.raises(DatabaseError, match="unsupported Unicode escape sequence") as refused,
        psycopg.connect(postgres_url, autocommit=True) as connection,
        translated("the database"),
    ):
        connection.execute("""SELECT '{"content": "confidential\\u0000"}'::jsonb""")
    assert str(refused.value) == "the database: unsupported Unicode escape sequence"


def test_a_writer_on_another_replica_holds_the_users_lock(postgres_url: str) -> None:
    config = MemoryConfig(file_lock_timeout_seconds=1)
    with (
        PostgresStore.from_config(config, postgres_url) as first,
        PostgresStore.from_config(config, postgres_url) as second,
    ):
        held, release = threading.Event(), threading.Event()

        def holder() -> None:
            with first.transaction(ALICE):
                held.set()
                release.wait(10)

        thread = threading.Thread(target=holder)
        thread.start()
        try:
            assert held.wait(10)
            with pytest.raises(StoreLockTimeout, match="could not take the lock"):
                memory_on(second).create_fact("Waits in vain")
            # Other users are not held up.
            bob = Memory(second, config, Scope.of("bob", "coder"), clock=lambda: NOW)
            assert bob.create_fact("Bob is not blocked").fact_id is not None
        finally:
            release.set()
            thread.join()
        assert memory_on(second).create_fact("Now it can").fact_id is not None


def test_writers_waiting_for_one_user_leave_the_pool_to_other_users(postgres_url: str) -> None:
    """A process's writers of one user wait for their turn before they take a pooled
    connection: however many wait for a user another replica holds, one connection
    waits on the lock, and other users' reads and writes get the rest at once."""
    config = MemoryConfig(max_facts=10)
    with (
        PostgresStore(postgres_url) as replica,
        PostgresStore(postgres_url, lock_timeout=3, pool_size=2) as store,
    ):
        bob = Memory(store, config, Scope.of("bob", "coder"), clock=lambda: NOW)
        bob.create_fact("Bob likes tea")
        held, release = threading.Event(), threading.Event()
        outcomes: list[Exception | None] = []

        def stuck_replica() -> None:
            with replica.transaction(ALICE):
                held.set()
                release.wait(30)

        def alice_writer(number: int) -> None:
            try:
                memory_on(store).create_fact(f"Alice waits {number}")
                outcomes.append(None)
            except Exception as error:  # every outcome is checked below
                outcomes.append(error)

        holder = threading.Thread(target=stuck_replica)
        holder.start()
        writers = [threading.Thread(target=alice_writer, args=(n,)) for n in range(4)]
        try:
            assert held.wait(10)
            for writer in writers:
                writer.start()
            waiting_for_a_lock(postgres_url)
            time.sleep(0.3)  # the other writers queue behind the first
            started = time.monotonic()
            assert [fact.content for fact in bob.list_facts()] == ["Bob likes tea"]
            assert bob.create_fact("Bob is not held up").fact_id is not None
            elapsed = time.monotonic() - started
        finally:
            for writer in writers:
                writer.join()
            release.set()
            holder.join()
    assert elapsed < 1.5, f"bob waited {elapsed:.1f} s for alice's writers"
    assert len(outcomes) == 4
    assert all(isinstance(outcome, StoreLockTimeout) for outcome in outcomes), outcomes


def test_a_redaction_reads_what_it_redacts_on_its_own_connection(postgres_url: str) -> None:
    """``deermem redact`` reads a scope's archive and records inside its transaction: on
    that transaction's connection, not on a second one the pool would have to give while
    the first is held (a pool of one waited for itself, then failed as if the database
    were out of reach)."""
    fake = MAKERS["openai-key"](random.Random(7))
    config = MemoryConfig(max_facts=10, redact_secrets=False)
    with PostgresStore(postgres_url, pool_size=1, connect_timeout=1, redact_secrets=False) as store:
        memory = Memory(store, config, ALICE, clock=lambda: NOW)
        kept = memory.create_fact(f"the deploy uses {fake.snippet} today").fact_id
        gone = memory.create_fact(f"the old deploy used {fake.snippet}").fact_id
        assert kept is not None
        assert gone is not None
        memory.delete_fact(gone)

        report = memory.redact_stored()

        assert {(item.where, item.id) for item in report.items} == {
            ("fact", kept),
            ("archive", gone),
        }
        assert fake.secret not in memory.get_fact(kept).content
        assert fake.secret not in memory.get_archived(gone).fact.content


def waiting_for_a_lock(url: str) -> None:
    """Return once a session of ``url``'s database waits for a lock (10 s at most)."""
    deadline = time.monotonic() + 10
    with psycopg.connect(url, autocommit=True) as probe:
        while time.monotonic() < deadline:
            row = probe.execute(
                "SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database"
                " WHERE d.datname = current_database() AND NOT l.granted"
            ).fetchone()
            if row is not None and row[0] > 0:
                return
            time.sleep(0.02)
    raise AssertionError("no session waited for a lock")


@pytest.mark.parametrize("level", ["repeatable read", "serializable"])
def test_a_writer_that_waited_for_the_lock_commits_whatever_the_default_isolation(
    postgres_url: str, level: str
) -> None:
    """The database's default isolation (also a role's, the server's, the URL's
    ``options``) is not what deermem's transactions run under: they run under
    READ COMMITTED, so a writer that queued behind another reads what it committed."""
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        name = postgres_url.rsplit("/", 1)[1]
        admin.execute(f"ALTER DATABASE {name} SET default_transaction_isolation = '{level}'")
    with PostgresStore(postgres_url) as first, PostgresStore(postgres_url) as second:
        memory_on(first).create_fact("Before")
        waited: list[object] = []

        def writer() -> None:
            try:
                waited.append(memory_on(second).create_fact("Waited for its turn"))
            except DatabaseError as error:
                waited.append(error)

        with first.transaction(ALICE) as transaction:
            assert len(transaction.snapshot.facts) == 1
            thread = threading.Thread(target=writer)
            thread.start()
            waiting_for_a_lock(postgres_url)  # the writer took its snapshot, if any, by now
            first_in_line = Fact.from_dict(
                {"id": "fact_first", "content": "First in line", "createdAt": NOW}
            )
            proposal = Proposal(new_facts=(first_in_line,))
            memory_on(first).gate.apply(transaction, proposal, trigger="manual", now=NOW)
        thread.join()
        assert not isinstance(waited[0], DatabaseError), waited[0]
        contents = {fact.content for fact in memory_on(first).list_facts()}
        assert contents == {"Before", "First in line", "Waited for its turn"}
        with second._connection() as connection:  # a read is a transaction of its own
            isolation = connection.execute("SHOW transaction_isolation").fetchone()
        assert isolation == ("read committed",)


def test_a_corrupt_row_is_an_error_naming_it_and_is_not_overwritten(
    store: PostgresStore, postgres_url: str
) -> None:
    memory = memory_on(store)
    fact_id = memory.create_fact("Will be damaged").fact_id
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute("UPDATE deermem_facts SET document = '{broken'")
    fresh = PostgresStore(postgres_url)
    try:
        with pytest.raises(CorruptMemoryFile, match=rf"deermem_facts .*{fact_id}.*not valid JSON"):
            fresh.load(ALICE)
        with pytest.raises(CorruptMemoryFile):
            memory_on(fresh).create_fact("Something new")
    finally:
        fresh.close()
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        [(document,)] = admin.execute("SELECT document FROM deermem_facts").fetchall()
    assert document == "{broken"


def test_a_row_of_another_scope_is_refused(store: PostgresStore, postgres_url: str) -> None:
    memory_on(store).create_fact("Alice's fact")
    bob = Memory(store, MemoryConfig(), Scope.of("bob", "coder"), clock=lambda: NOW)
    bob.create_fact("Bob's fact")
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        # Bob's row, copied under Alice's key: isolation is checked on every read.
        admin.execute(
            "UPDATE deermem_facts SET document = (SELECT document FROM deermem_facts "
            "WHERE user_id = 'bob') WHERE user_id = 'alice'"
        )
    with pytest.raises(CorruptMemoryFile):
        store.reload(ALICE)


def test_user_ids_the_database_cannot_hold_are_refused(store: PostgresStore) -> None:
    # One rule for both stores (issue 20): a NUL is a control character, refused everywhere.
    with pytest.raises(UnsafeIdentifierError, match="control character"):
        store.load(Scope.of("nul\x00byte", "coder"))
    with pytest.raises(UnsafeIdentifierError, match="control character"):
        store.load(Scope("nul\x00byte", "coder"))
    # A scope made without Scope.of (which refuses it already) is refused all the same.
    with pytest.raises(UnsafeIdentifierError, match="valid Unicode"):
        store.load(Scope("lone\ud800surrogate", "coder"))


def test_a_mark_of_another_conversation_is_an_error(
    store: PostgresStore, postgres_url: str
) -> None:
    store.commit(ALICE, ChangeSet(now=NOW, watermarks={"thread-1": "m1"}))
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute("""UPDATE deermem_threads SET document = '{"threadId": "x", "mark": "m"}'""")
    with pytest.raises(CorruptMemoryFile, match="another conversation"):
        store.watermark(ALICE, "thread-1")


def test_a_part_of_a_change_set_the_store_does_not_write_is_refused(store: PostgresStore) -> None:
    @dataclasses.dataclass(frozen=True, slots=True)
    class Extended(ChangeSet):
        later_events: tuple[str, ...] = ()

    memory_on(store).create_fact("Before")
    before = store.reload(ALICE)
    with pytest.raises(NotImplementedError, match="later_events"):
        store.commit(ALICE, Extended(now=NOW, later_events=("an event",)))
    assert store.reload(ALICE) == before
    store.commit(ALICE, Extended(now=NOW))  # empty: nothing to lose


def test_the_drivers_own_warnings_stay_off_the_commands_stderr(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The pool logs a connection attempt it retries (`error connecting in 'deermem': …
    too many clients already`) and psycopg an aborted pipeline it cleans up; with no
    handler configured Python printed them raw on the command's stderr, also on a
    command that succeeded. The command reports the outcome itself."""
    driver = logging.getLogger("psycopg")
    monkeypatch.setattr(driver, "level", logging.WARNING)  # psycopg's own default, restored
    monkeypatch.setenv("DEERMEM_STORE", postgres_url)
    assert main(["--user", "bob", "facts", "list"]) == 0
    assert capsys.readouterr().err == ""
    for name in ("psycopg", "psycopg.pool"):
        assert not logging.getLogger(name).isEnabledFor(logging.WARNING), name
        assert logging.getLogger(name).isEnabledFor(logging.ERROR), name
