"""The schema: migrations applied by `deermem db upgrade`, checked whenever a store opens."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote

import psycopg
import pytest

from deermem import DatabaseError, Memory, MemoryConfig
from deermem.cli.app import main
from deermem.errors import DatabaseSchemaError
from deermem.model import Fact, Scope, duplicate_digest
from deermem.store.postgres import PostgresStore, database
from deermem.store.postgres.commit import insert_archive
from deermem.store.postgres.database import Migration, database_status, upgrade_database
from deermem.store.postgres.store import ARCHIVED_MATCHES
from deermem.store.records import ArchiveEntry
from deermem.testing.postgres import TemporaryPostgres

LATER = Migration(7, "extra", "CREATE TABLE deermem_extra (user_id text NOT NULL);")


def tables(url: str) -> set[str]:
    with psycopg.connect(url) as connection:
        found = connection.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
        ).fetchall()
    return {name for (name,) in found}


def test_a_database_never_migrated_is_refused_with_what_to_do(empty_postgres_url: str) -> None:
    with pytest.raises(DatabaseSchemaError, match="run `deermem db upgrade`") as refused:
        PostgresStore(empty_postgres_url)
    assert (refused.value.found, refused.value.expected) == (None, 6)
    assert tables(empty_postgres_url) == set()  # opening never creates anything


def test_upgrade_applies_every_migration_once(empty_postgres_url: str) -> None:
    assert database_status(empty_postgres_url).found is None
    assert upgrade_database(empty_postgres_url).applied == (1, 2, 3, 4, 5, 6)
    assert upgrade_database(empty_postgres_url).applied == ()
    assert {
        "deermem_migrations",
        "deermem_users",
        "deermem_facts",
        "deermem_archive",
        "deermem_receipts",
        "deermem_usage",
        "deermem_threads",
        "deermem_regret_events",
        "deermem_shadow_marks",
        "deermem_vectors",
        "deermem_settings",
    } <= tables(empty_postgres_url)
    PostgresStore(empty_postgres_url).close()


def test_replicas_upgrading_at_once_apply_each_migration_once(empty_postgres_url: str) -> None:
    results: list[tuple[int, ...]] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            results.append(upgrade_database(empty_postgres_url).applied)
        except BaseException as error:  # collected, then checked
            errors.append(error)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sorted(results) == [(), (), (), (1, 2, 3, 4, 5, 6)]


def test_a_later_migration_extends_the_schema_and_a_store_behind_it_is_refused(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    shipped = database.migrations()
    monkeypatch.setattr(database, "migrations", lambda: (*shipped, LATER))
    with pytest.raises(DatabaseSchemaError, match="at schema version 6 and this deermem needs 7"):
        PostgresStore(postgres_url)
    assert upgrade_database(postgres_url).applied == (7,)
    assert "deermem_extra" in tables(postgres_url)
    PostgresStore(postgres_url).close()


def test_a_failed_migration_applies_nothing(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = Migration(7, "broken", "CREATE TABLE deermem_half (x int); SELECT nonsense();")
    shipped = database.migrations()
    monkeypatch.setattr(database, "migrations", lambda: (*shipped, broken))
    with pytest.raises(DatabaseError, match="nonsense"):
        upgrade_database(postgres_url)
    assert "deermem_half" not in tables(postgres_url)
    assert database_status(postgres_url).found == 6


def test_a_database_a_newer_deermem_migrated_is_refused(postgres_url: str) -> None:
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute("INSERT INTO deermem_migrations (version, name) VALUES (7, 'future')")
    with pytest.raises(DatabaseSchemaError, match="does not know") as refused:
        PostgresStore(postgres_url)
    assert refused.value.found == 7
    with pytest.raises(DatabaseSchemaError, match="does not know"):
        upgrade_database(postgres_url)


def test_db_commands(
    empty_postgres_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert main(["db", "status", "--database", empty_postgres_url]) == 1
    assert "not migrated" in capsys.readouterr().out
    monkeypatch.setenv("DEERMEM_DATABASE_URL", empty_postgres_url)
    assert main(["db", "upgrade"]) == 0
    assert "applied 1, 2, 3, 4, 5, 6" in capsys.readouterr().out
    assert main(["db", "status", "--json"]) == 0
    assert '"current": true' in capsys.readouterr().out
    monkeypatch.delenv("DEERMEM_DATABASE_URL")
    assert main(["db", "upgrade"]) == 1
    assert "no database" in capsys.readouterr().err


def test_db_upgrade_brings_a_schema_1_database_to_regret_and_keeps_its_data(
    empty_postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A database a deermem before regret migrated: 0002 to 0004 add tables, 0006 the
    archive's digests (computed for the rows there; 0005 builds nothing any more), nothing
    else moves."""
    url = empty_postgres_url
    now = datetime(2026, 8, 13, tzinfo=UTC)
    config = MemoryConfig(max_facts=10)
    assert upgrade_database(url).applied == (1, 2, 3, 4, 5, 6)
    with PostgresStore(url) as store:
        memory = Memory(store, config, Scope.of("alice"), clock=lambda: now)
        for n in range(11):  # one over the cap: a receipt and an archive entry
            memory.create_fact(f"Fact number {n}", confidence=0.5 + n / 100)
        document, receipts = memory.export_document(), memory.audit()
        [archived] = memory.list_archived()
        assert store.regret_events(memory.scope) == ()
        assert store.shadow_marks(memory.scope) == {}
    # As a deermem before regret left it: schema 1, without the (here empty) tables of
    # 0002 to 0004, and the archive as it was before 0006.
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("DROP TABLE deermem_regret_events, deermem_shadow_marks")
        connection.execute("DROP TABLE deermem_vectors, deermem_settings")
        connection.execute("ALTER TABLE deermem_archive DROP COLUMN content_digest")
        connection.execute("DELETE FROM deermem_migrations WHERE version IN (2, 3, 4, 5, 6)")
    assert "deermem_regret_events" not in tables(url)
    with pytest.raises(DatabaseSchemaError, match="at schema version 1 and this deermem needs 6"):
        PostgresStore(url)
    assert main(["db", "upgrade", "--database", url]) == 0
    assert "applied 2, 3, 4, 5, 6" in capsys.readouterr().out
    assert {"deermem_regret_events", "deermem_shadow_marks", "deermem_vectors"} <= tables(url)
    with psycopg.connect(url, autocommit=True) as connection:
        digests = connection.execute("SELECT content_digest FROM deermem_archive").fetchall()
    assert digests == [(duplicate_digest(archived.fact.content),)]
    with PostgresStore(url) as store:
        memory = Memory(store, config, Scope.of("alice"), clock=lambda: now)
        assert (memory.export_document(), memory.audit()) == (document, receipts)
        assert memory.list_archived() == (archived,)
        [policy] = memory.regret().policies
        assert (policy.evictions, policy.events_total) == (1, 0)
        memory.delete_fact(memory.list_facts()[0].id)
        memory.restore(archived.fact.id)  # regret is recorded from now on
        [event] = store.regret_events(memory.scope)
        assert (event.kind, event.fact_id) == ("restored", archived.fact.id)


def test_db_upgrade_brings_an_archive_holding_nul_or_a_damaged_row_to_version_6(
    empty_postgres_url: str,
) -> None:
    """A database at version 4 whose archive holds a fact with U+0000 (stored escaped)
    and a row that does not read: the upgrade applies 5 and 6 (building no index on
    the text, which jsonb would refuse), gives each readable row its digest, and the
    duplicate rule finds the fact."""
    url = empty_postgres_url
    now = datetime(2026, 8, 13, tzinfo=UTC)
    upgrade_database(url)
    with PostgresStore(url) as store:
        memory = Memory(store, MemoryConfig(), Scope.of("alice"), clock=lambda: now)
        secret = "My diagnosis is confidential\x00"
        memory.import_document({"facts": [{"id": "fact_nul", "content": secret}]})
        memory.delete_fact("fact_nul")
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(
            "INSERT INTO deermem_archive (user_id, agent, fact_id, archived_at, document)"
            " VALUES ('alice', '__default__', 'fact_bad', '2026-08-13T00:00:00Z', 'not json')"
        )
        connection.execute("ALTER TABLE deermem_archive DROP COLUMN content_digest")
        connection.execute("DELETE FROM deermem_migrations WHERE version IN (5, 6)")
    assert upgrade_database(url).applied == (5, 6)
    with psycopg.connect(url) as connection:
        found = connection.execute("SELECT fact_id, content_digest FROM deermem_archive")
        digests: dict[str, str | None] = dict(found.fetchall())
    assert digests == {"fact_nul": duplicate_digest(secret), "fact_bad": None}
    with PostgresStore(url) as store:
        memory = Memory(store, MemoryConfig(), Scope.of("alice"), clock=lambda: now)
        memory.import_document({"facts": [{"id": "fact_again", "content": secret.upper()}]})
        assert [fact.id for fact in memory.list_facts()] == ["fact_nul"]  # relearned


def test_an_unreachable_database_is_one_line_and_no_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = "postgresql://someone:hunter2@127.0.0.1:1/nowhere"
    assert main(["db", "status", "--database", url]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: postgresql://someone:***@127.0.0.1:1/nowhere:")
    assert "hunter2" not in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://deermem:Hunter2Secret@[::1",
        "postgresql://deermem:Hunter2Secret@[::1]x/db",
        "postgresql://deermem:Hunter2%zzSecret@host/db",
        "postgresql://deermem:Hunter2Secret@host/db?sslmode",
    ],
)
def test_an_address_libpq_cannot_parse_is_refused_without_quoting_it(
    url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """libpq's parse error quotes the whole address, password included: the error says
    the address cannot be parsed and what is wrong with it, never the address."""
    assert main(["db", "status", "--database", url]) == 1
    assert main(["--root", str(tmp_path), "init"]) == 0  # a store to migrate from
    assert main(["migrate", "--from", str(tmp_path), "--to", url]) == 1
    monkeypatch.setenv("DEERMEM_STORE", url)
    assert main(["--user", "alice", "facts", "list"]) == 1
    err = capsys.readouterr().err
    assert err.count("the address cannot be parsed") == 3, err
    assert "Hunter2" not in err
    with pytest.raises(DatabaseError, match="the address cannot be parsed") as refused:
        PostgresStore(url, check=False)  # before the pool, which would log libpq's message
    assert "Hunter2" not in str(refused.value)


def test_a_database_option_that_is_a_path_says_it_is_no_address(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A directory given where a database is wanted was "the address cannot be parsed
    (missing)": libpq's one word, the rest of its message quoting the address."""
    assert main(["db", "status", "--database", str(tmp_path / "store")]) == 1
    err = capsys.readouterr().err
    assert err == (
        f"error: {tmp_path / 'store'}: the address cannot be parsed (it is neither a "
        "postgresql:// URL nor libpq's key=value settings)\n"
    )


def test_an_upper_case_scheme_is_refused_naming_it_before_anything_connects(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """libpq refuses `POSTGRESQL://` with "missing"; the error named the address
    lower-cased, so it looked valid. It names the scheme, as given."""
    url = "POSTGRESQL://deermem:Hunter2Secret@127.0.0.1:1/d1"
    assert main(["db", "status", "--database", url]) == 1
    err = capsys.readouterr().err
    assert err == (
        "error: POSTGRESQL://deermem:***@127.0.0.1:1/d1: the scheme POSTGRESQL:// must be "
        "written in lower case, as libpq reads it: postgresql://\n"
    )


@pytest.mark.parametrize(
    "password",
    ["p@ssTAILSECRET", "p@ss/TAILSECRET", "p?ss@TAILSECRET", "p/ss@TAILSECRET"],
)
def test_a_password_holding_an_unencoded_at_sign_is_refused_without_showing_it(
    password: str,
    postgres_server: TemporaryPostgres,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """libpq ends the password at its first `@`; the rest became the host, and the
    resolver's message quoted it (`failed to resolve host 'ssTAILSECRET@127.0.0.1'`).
    Such an address is refused before anything connects, naming the rule."""
    url = f"postgresql://deermem:{password}@127.0.0.1:{postgres_server.port}/postgres"
    assert main(["db", "status", "--database", url]) == 1
    monkeypatch.setenv("DEERMEM_STORE", url)
    assert main(["--user", "alice", "facts", "list"]) == 1
    err = capsys.readouterr().err
    assert (
        err.count("write an `@` inside the password (or user, host or database name) as `%40`") == 2
    ), err
    assert "TAILSECRET" not in err
    with pytest.raises(DatabaseError, match="%40") as refused:
        PostgresStore(url, check=False)
    assert "TAILSECRET" not in str(refused.value)


def test_a_password_holding_an_unencoded_slash_is_refused_naming_the_slash(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """libpq ends the user and password at the first `/` as well as at an `@`: the
    refusal named only the `@` (which this password does not hold), and writing
    `%40` changed nothing. It now says to write the `/` as `%2F`."""
    url = "postgresql://app:Ri/ghtTAILSECRET@127.0.0.1:1/db"
    monkeypatch.setenv("DEERMEM_STORE", url)
    assert main(["--user", "alice", "facts", "list"]) == 1
    err = capsys.readouterr().err
    assert "write a `/` inside the password (or user) as `%2F`" in err, err
    assert "TAILSECRET" not in err
    encoded = "postgresql://app:Ri%2FghtTAILSECRET@127.0.0.1:1/db"
    database.check_address(encoded, "db")


def test_an_at_sign_in_the_query_or_percent_encoded_is_the_address_libpq_reads() -> None:
    """Only an `@` libpq would read as part of the hosts or the path is refused."""
    for url in (
        "postgresql://deermem:p%40ss@127.0.0.1:1/db",
        "postgresql://127.0.0.1:1/db?user=me@example.com",
        "postgresql://deermem:pass@127.0.0.1:1/db?application_name=a@b",
        "host=127.0.0.1 password=p@ss@word",
    ):
        database.check_address(url, "db")


def test_the_drivers_message_never_holds_the_password() -> None:
    """Whatever the driver says, the password as deermem or libpq reads it is `***`."""
    url = "postgresql://deermem:Hunter2Secret@127.0.0.1:1/db"
    with (
        pytest.raises(DatabaseError) as refused,
        database.translated("db", database.address_secrets(url)),
    ):
        raise psycopg.OperationalError("no login for Hunter2Secret (or Hunter2)")
    assert str(refused.value) == "db: no login for *** (or Hunter2)"
    secrets = database.address_secrets("host=h password='a b'")
    assert secrets == ("a b",)


def test_the_duplicate_check_reads_the_archive_by_its_index(postgres_url: str) -> None:
    """Schema version 6 indexes the digest of each archived fact's duplicate key: with
    the archive at its default bound (1,000 entries) the check reads the index, and it
    finds the entry the rule finds."""
    scope = Scope.of("alice", "coder")
    entries = [
        ArchiveEntry(
            Fact.from_dict(
                {
                    "id": f"fact_{n:08x}",
                    "content": f"Archived note number {n} about an older preference.",
                    "confidence": 0.5,
                    "createdAt": "2026-08-01T00:00:00Z",
                }
            ),
            "2026-08-10T00:00:00Z",
            "capacity",
            "manual",
            f"rcpt_{n}",
        )
        for n in range(1000)
    ]
    said = "  ARCHIVED note number 7 about an older preference. "
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        connection.execute(
            "INSERT INTO deermem_users (user_id, revision, commit_id, summaries)"
            " VALUES ('alice', 1, gen_random_uuid(), '{}')"
        )
        insert_archive(connection, "alice", "coder", entries)
        connection.execute("ANALYZE deermem_archive")
        plan = connection.execute(
            f"EXPLAIN {ARCHIVED_MATCHES}", ("alice", "coder", [duplicate_digest(said)])
        ).fetchall()
    assert "deermem_archive_by_digest" in "\n".join(line for (line,) in plan)
    with PostgresStore(postgres_url) as store:
        now = datetime(2026, 8, 13, tzinfo=UTC)
        [found] = store.archived_matches(scope, [said], now).values()
    assert found.fact.id == "fact_00000007"


def test_the_duplicate_check_is_the_rule_whatever_the_databases_locale(
    postgres_server: TemporaryPostgres,
) -> None:
    """Under LOCALE 'C' PostgreSQL's lower() leaves every letter outside ASCII as it
    is; the check compares digests deermem computed, so it finds what Python's
    strip() and casefold() find there too."""
    name = "locale_c_duplicates"
    with psycopg.connect(postgres_server.url(), autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name} TEMPLATE template0 LOCALE 'C' ENCODING 'UTF8'")
    try:
        url = postgres_server.url(name)
        upgrade_database(url)
        pairs = [
            ("Lives in Straße 5", "LIVES IN STRASSE 5"),
            ("Studied at ÉCOLE Normale", "studied at école normale"),
            ("Likes ΟΔΟΣ walks", "likes οδος walks"),
            ("Uses Ǆ digraph", "uses ǆ digraph"),
        ]
        with PostgresStore(url) as store:
            for n, (first, again) in enumerate(pairs):
                memory = Memory(store, MemoryConfig(), Scope.of(f"user{n}", "coder"))
                fact_id = memory.create_fact(first).fact_id
                assert fact_id is not None
                memory.delete_fact(fact_id)
                assert memory.create_fact(again).relearned == fact_id
    finally:
        postgres_server.drop_database(name)


def test_an_erase_finds_the_tables_the_store_uses_whatever_the_current_schema(
    postgres_url: str,
) -> None:
    """The tables were migrated into ``public``; the role's search path starts with a
    schema of its own (as PostgreSQL's default ``"$user", public`` does for a role that
    owns one), so ``current_schema()`` is not where they are. Every statement finds
    them by the search path, the erase too."""
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute("CREATE SCHEMA app")
    options = quote("-c search_path=app,public", safe="")
    with PostgresStore(f"{postgres_url}?options={options}") as store:
        memory = Memory(store, MemoryConfig(), Scope.of("carol", "coder"))
        memory.create_fact("Carol keeps bees")
        assert [hit.fact.content for hit in memory.search("bees")] == ["Carol keeps bees"]
        erased = memory.erase_user("carol")
        assert erased.counts["facts"] == 1
        assert not store.holds_user("carol")
    with psycopg.connect(postgres_url) as connection:
        left = connection.execute(
            "SELECT (SELECT count(*) FROM deermem_facts) + (SELECT count(*) FROM deermem_vectors)"
            " + (SELECT count(*) FROM deermem_users)"
        ).fetchone()
    assert left == (0,)


@pytest.mark.parametrize("encoding", ["SQL_ASCII", "LATIN1"])
def test_a_database_that_is_not_utf8_is_refused_in_one_line_naming_its_encoding(
    postgres_server: TemporaryPostgres,
    encoding: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """SQL_ASCII (what ``initdb`` gives under the C locale) hands text back as bytes;
    LATIN1 cannot hold most user ids and facts. ``db upgrade`` refuses either, and so
    does opening one migrated by other means."""
    name = f"encoding_{encoding.lower()}"
    with psycopg.connect(postgres_server.url(), autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name} TEMPLATE template0 LOCALE 'C' ENCODING '{encoding}'")
    try:
        url = postgres_server.url(name)
        refusal = f"the database's encoding is {encoding}"
        with pytest.raises(DatabaseError, match=refusal):
            upgrade_database(url)
        assert database_status(url).found is None  # nothing applied
        assert main(["db", "upgrade", "--database", url]) == 1
        err = capsys.readouterr().err
        assert err.startswith(f"error: {url}: {refusal}")
        assert err.count("\n") == 1
        with psycopg.connect(url, autocommit=True) as connection:  # migrated by hand
            connection.execute(
                "CREATE TABLE deermem_migrations (version integer PRIMARY KEY, name text NOT NULL,"
                " applied_at timestamptz NOT NULL DEFAULT now())"
            )
            for migration in database.migrations():
                connection.execute(migration.sql.encode("utf-8"))
                connection.execute(
                    "INSERT INTO deermem_migrations (version, name) VALUES (%s, %s)",
                    (migration.version, migration.name),
                )
        with pytest.raises(DatabaseError, match=refusal):
            PostgresStore(url)
        monkeypatch.setenv("DEERMEM_STORE", url)
        assert main(["--user", "東京", "facts", "add", "Likes sushi"]) == 1
        err = capsys.readouterr().err
        assert err.startswith(f"error: {url}: {refusal}")
        assert err.count("\n") == 1
    finally:
        postgres_server.drop_database(name)


def test_a_client_encoding_in_the_address_does_not_change_what_is_stored(
    postgres_url: str,
) -> None:
    with PostgresStore(f"{postgres_url}?client_encoding=LATIN1") as store:
        memory = Memory(store, MemoryConfig(), Scope.of("東京", "coder"))
        memory.create_fact("Likes 寿司")
        assert [fact.content for fact in store.reload(memory.scope).facts] == ["Likes 寿司"]
