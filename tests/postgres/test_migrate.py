"""``deermem migrate``: Markdown → PostgreSQL → Markdown copies everything, byte for byte."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest
from hypothesis import given
from hypothesis import strategies as st

from deermem import Memory, MemoryConfig
from deermem.cli.app import main
from deermem.model import Scope, format_timestamp
from deermem.store import ChangeSet, MarkdownStore
from deermem.store.markdown.sidecars import encode_regret_events
from deermem.store.markdown.transfer import MarkdownTransfer
from deermem.store.migrate import same_data
from deermem.store.postgres import PostgresStore
from deermem.store.postgres.transfer import PostgresTransfer
from deermem.testing.postgres import TemporaryPostgres
from tests.store_contract.conftest import Stores
from tests.store_contract.test_scopes import LISTED, fill_users

NOW = datetime(2026, 8, 13, tzinfo=UTC)
FIXTURES = Path(__file__).parents[1] / "store_fixtures"


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> datetime:
        self.now += timedelta(minutes=7)
        return self.now


def build_store(root: Path) -> None:
    """A store deermem wrote, with something of every kind in it."""
    clock = Clock()
    config = MemoryConfig(max_facts=10, fact_eviction_policy="hybrid-v1", archive_max_entries=4)
    alice = Memory.open(root, config, user="alice@example.com", agent="coder", clock=clock)
    alice.import_document(
        {
            "user": {
                "workContext": {"summary": "Payments team", "updatedAt": "2026-08-01T00:00:00Z"}
            },
            "history": {"recentMonths": {"summary": "Moved to Lisbon 🇵🇹", "updatedAt": ""}},
            "facts": [
                {
                    "id": "fact_rich",
                    "content": "Prefers café ☕ and 名前 in examples 😀.\nSecond line.",
                    "title": "Coffee",
                    "category": "preference",
                    "confidence": 0.95,
                    "topics": ["été", "😀", "yes", "- item"],
                    "customField": {"nested": [1, 2.5, None, "ünï"]},
                    "lastConfirmedAt": "2026-08-02T00:00:00Z",
                    "confirmationCount": 3,
                    "expected_valid_days": 400,
                },
                {"id": "fact_other", "content": "Uses ansible", "category": "Tooling"},
            ],
        }
    )
    for number in range(12):
        alice.create_fact(f"Background fact {number} " + "x" * number, confidence=0.5 + number / 40)
    alice.search("background fact")  # recalls: the usage table
    archived = alice.list_archived()
    alice.restore(archived[0].fact_id)
    alice.purge(archived[1].fact_id)
    alice.delete_fact(alice.list_facts()[-1].id)
    alice.store.commit(
        alice.scope, ChangeSet(now=clock(), watermarks={"thread-7": "m1", "线程 ☕": "m2"})
    )
    alice.scoped(user="alice@example.com", agent=None).create_fact("Default agent fact")
    bob = alice.scoped(user="bob", agent="writer")
    bob.create_fact("Bob writes novels", category="context")
    single = alice.scoped(user=None, agent=None)
    single.create_fact("The single-user layout", confidence=0.8)
    build_regret(root, clock)


def build_regret(root: Path, clock: Clock) -> None:
    """Carol, in shadow mode: regret events of both roles, a shadow mark, one in the archive."""
    config = MemoryConfig(
        max_facts=10, fact_eviction_policy="confidence", fact_eviction_shadow_enabled=True
    )
    carol = Memory.open(root, config, user="carol", clock=clock)
    old = format_timestamp(NOW - timedelta(days=400))
    facts = [{"id": "fact_olda", "content": "Old fact A", "confidence": 0.75, "createdAt": old}]
    facts.append({"id": "fact_oldb", "content": "Old fact B", "confidence": 0.95, "createdAt": old})
    facts.extend(
        {"id": f"fact_new{n}", "content": f"Fresh fact {n}", "confidence": 0.70 + (n > 0) * 0.09}
        for n in range(8)
    )
    carol.import_document({"facts": facts})
    carol.create_fact("A confident fact", confidence=0.85)  # hybrid-v1 would evict A
    carol.create_fact("Another confident fact", confidence=0.85)  # both evict A (marked)
    carol.create_fact("A third confident fact", confidence=0.85)  # hybrid-v1 would evict B
    carol.search("old fact")  # B recalled (shadow); A missed (active and shadow)
    carol.search("fresh fact 0")  # missed
    paths = root / "users/carol/agents/__default__/.metadata"
    assert (paths / "shadow-evictions.json").is_file()
    assert carol.get_archived("fact_olda").shadow is not None
    # An event a later deermem wrote, which this one cannot read: copied as it is.
    events = json.loads((paths / "regret-events.json").read_text("utf-8"))
    later = {"kind": "from-a-later-deermem", "factId": "fact_olda"}
    (paths / "regret-events.json").write_bytes(encode_regret_events([*events, later]))


def tree(root: Path) -> dict[str, bytes]:
    """Every file a store holds, but the lock files and the derived index."""
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file() and path.name != ".memory.lock" and ".retrieval" not in path.parts
    }


def test_markdown_to_postgres_to_markdown_is_byte_identical(
    tmp_path: Path, postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    source, back = tmp_path / "source", tmp_path / "back"
    build_store(source)
    before = tree(source)
    regret = [name for name in before if "regret-events" in name or "shadow-evictions" in name]
    assert len(regret) == 3  # alice's restore and missed recall; carol's events and marks
    assert main(["migrate", "--from", str(source), "--to", postgres_url, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["users"], report["copied"], report["verified"]) == (4, 4, True)
    assert report["regretEvents"] >= 5
    assert report["shadowMarks"] == 1
    assert report["facts"] == 22  # alice: 9 (coder) + 1 (default); bob 1; carol 10; single 1
    assert report["marks"] == 2
    assert report["archived"] > 0
    assert report["events"] > 0
    assert report["usage"] > 0
    assert main(["migrate", "--from", postgres_url, "--to", str(back)]) == 0
    assert "copied 4 user(s)" in capsys.readouterr().out
    assert tree(source) == before  # the source is never changed
    assert tree(back) == before  # fact files, memory.json, sidecars (regret too), archive, marks


def test_a_user_with_thread_marks_alone_comes_back_without_a_manifest(
    tmp_path: Path, postgres_url: str
) -> None:
    """A conversation learned from with nothing extracted leaves a mark and no
    `memory.json`; neither copy (through PostgreSQL, or Markdown to Markdown) adds one."""
    source = tmp_path / "source"
    with Memory.open(source, MemoryConfig(), user="hal") as hal:
        hal.store.commit(hal.scope, ChangeSet(now=NOW, watermarks={"t1": "m1"}))
    before = tree(source)
    assert not any(name.endswith("memory.json") for name in before), before
    assert main(["migrate", "--from", str(source), "--to", postgres_url]) == 0
    assert main(["migrate", "--from", postgres_url, "--to", str(tmp_path / "back")]) == 0
    assert main(["migrate", "--from", str(source), "--to", str(tmp_path / "copy")]) == 0
    assert tree(tmp_path / "back") == tree(tmp_path / "copy") == before


def build_database(url: str) -> Memory:
    """A memory deermem wrote on PostgreSQL itself: facts created (``content`` second
    as they were made), imported with a title and unknown fields, evicted, restored."""
    clock = Clock()
    config = MemoryConfig(max_facts=10, archive_max_entries=4)
    memory = Memory(PostgresStore(url), config, Scope.of("alice", "coder"), clock=clock)
    memory.import_document(
        {
            "facts": [
                {
                    "customField": [1, "ünï"],
                    "id": "fact_rich",
                    "title": "Coffee",
                    "content": "Prefers café ☕.\nSecond line.",
                    "confidence": 0.95,
                }
            ]
        }
    )
    for number in range(12):
        memory.create_fact(f"Native fact {number}", confidence=0.5 + number / 40)
    memory.restore(memory.list_archived()[0].fact_id)
    memory.update_fact(memory.list_facts()[-1].id, content="An edited native fact")
    return memory


def database_rows(url: str) -> dict[str, list[tuple[object, ...]]]:
    """Every deermem row of a database, but the arrival and position numbers."""
    columns = {
        "deermem_users": "user_id, revision, summaries",
        "deermem_facts": "*",
        "deermem_archive": "user_id, agent, fact_id, archived_at, document, content_digest",
        "deermem_receipts": "user_id, agent, document",
        "deermem_usage": "*",
        "deermem_threads": "*",
        "deermem_regret_events": "user_id, agent, document",
        "deermem_shadow_marks": "*",
        "deermem_settings": "*",
    }
    with psycopg.connect(url) as connection:
        return {
            table: sorted(connection.execute(f"SELECT {cols} FROM {table}").fetchall())
            for table, cols in columns.items()
        }


def test_postgres_to_markdown_to_postgres_is_byte_identical(
    tmp_path: Path, postgres_url: str, empty_postgres_url: str
) -> None:
    """A fact PostgreSQL wrote is stored in the key order a fact file gives back, so the
    copy through Markdown is the rows it started from, and both stores read (and export)
    it alike. (Within the process that wrote a fact, either store exports it as it was
    made, from its cache.)"""
    build_database(postgres_url).store.close()  # type: ignore[attr-defined]
    assert main(["db", "upgrade", "--database", empty_postgres_url]) == 0
    assert main(["migrate", "--from", postgres_url, "--to", str(tmp_path / "md")]) == 0
    assert main(["migrate", "--from", str(tmp_path / "md"), "--to", empty_postgres_url]) == 0
    assert database_rows(empty_postgres_url) == database_rows(postgres_url)
    exports = []
    for location in (postgres_url, str(tmp_path / "md"), empty_postgres_url):
        config = MemoryConfig(store=location) if location.startswith("postgresql:") else None
        with Memory.open(
            location if config is None else None, config, user="alice", agent="coder"
        ) as memory:
            exports.append(json.dumps(memory.export_document(), ensure_ascii=False))
    assert exports[0] == exports[1] == exports[2]


def test_a_fact_row_in_an_earlier_order_reads_in_a_fact_files_order(postgres_url: str) -> None:
    """An earlier deermem stored a created fact with ``content`` second: it reads (and
    exports) as the Markdown store reads the same fact, and is written so again."""
    memory = build_database(postgres_url)
    fact = memory.get_fact("fact_rich")
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        connection.execute(
            "UPDATE deermem_facts SET document = %s WHERE fact_id = %s",
            (json.dumps(fact.to_dict()), fact.id),
        )
        connection.execute("UPDATE deermem_users SET commit_id = gen_random_uuid()")
    [read] = [f for f in memory.export_document()["facts"] if f["id"] == fact.id]  # type: ignore[attr-defined]
    assert list(read)[-3:] == ["scope", "content", "title"]
    memory.update_fact(fact.id, confidence=0.99)
    with psycopg.connect(postgres_url) as connection:
        [(document,)] = connection.execute(
            "SELECT document FROM deermem_facts WHERE fact_id = %s", (fact.id,)
        ).fetchall()
    assert list(json.loads(document))[-3:] == ["scope", "content", "title"]
    memory.store.close()  # type: ignore[attr-defined]


def test_the_copy_works_as_the_original_does(tmp_path: Path, postgres_url: str) -> None:
    source = tmp_path / "source"
    build_store(source)
    assert main(["migrate", "--from", str(source), "--to", postgres_url]) == 0
    # the store's own settings (a new store's: hybrid-v1, shadow mode on) given explicitly,
    # so both sides run the same configuration
    hybrid = MemoryConfig(
        max_facts=10, fact_eviction_policy="hybrid-v1", fact_eviction_shadow_enabled=True
    )
    shadow = MemoryConfig(
        max_facts=10, fact_eviction_policy="confidence", fact_eviction_shadow_enabled=True
    )
    memories = (
        ("alice@example.com", "coder", hybrid),
        ("bob", "writer", hybrid),
        ("carol", None, shadow),
        (None, None, hybrid),
    )
    with PostgresStore(postgres_url) as store:
        for user, agent, config in memories:
            # BM25 counts every scope an index holds, and each memory on the
            # database keeps its own: the file starts empty too.
            shutil.rmtree(source / ".retrieval", ignore_errors=True)
            on_files = Memory.open(source, config, user=user, agent=agent, clock=lambda: NOW)
            on_database = Memory(store, config, Scope.of(user, agent), clock=lambda: NOW)
            assert on_database.export_document() == on_files.export_document()
            assert on_database.audit() == on_files.audit()
            assert on_database.list_archived() == on_files.list_archived()
            assert on_database.regret() == on_files.regret()
            scope = on_files.scope
            assert store.shadow_marks(scope) == on_files.store.shadow_marks(scope)
            assert on_database.search("fact") == on_files.search("fact")
            assert on_database.context() == on_files.context()
        scope = Scope.of("alice@example.com", "coder")
        assert store.watermark(scope, "线程 ☕") == "m2"
        assert store.usage(scope) == MarkdownStore(source).usage(scope)


def test_a_store_an_earlier_deermem_wrote_is_copied_and_verified(
    tmp_path: Path, postgres_url: str
) -> None:
    source = Path(
        shutil.copytree(FIXTURES / "written-by-deermem-e1f89b5" / "store", tmp_path / "s")
    )
    assert main(["migrate", "--from", str(source), "--to", postgres_url]) == 0
    with PostgresStore(postgres_url) as store:
        mine, theirs = MarkdownTransfer(MarkdownStore(source)), PostgresTransfer(store)
        assert mine.users() == theirs.users() == (None, "alice@example.com")
        for user in mine.users():
            copy, original = theirs.dump_user(user), mine.dump_user(user)
            assert copy is not None
            assert original is not None
            assert copy.document() == original.document()


def test_a_destination_holding_other_data_stops_the_migration_before_anything_is_copied(
    tmp_path: Path, postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "source"
    build_store(source)
    with PostgresStore(postgres_url) as store:
        Memory(store, MemoryConfig(), Scope.of("bob", "writer")).create_fact("Bob, elsewhere")
    assert main(["migrate", "--from", str(source), "--to", postgres_url]) == 1
    assert "user 'bob': the destination already holds this user" in capsys.readouterr().err
    with psycopg.connect(postgres_url) as connection:
        [(users,)] = connection.execute("SELECT count(*) FROM deermem_users").fetchall()
    assert users == 1  # nothing of alice or the single-user layout was copied


def test_an_interrupted_migration_runs_again(
    tmp_path: Path, postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "source"
    build_store(source)
    with PostgresStore(postgres_url) as store:
        transfer = PostgresTransfer(store)
        dump = MarkdownTransfer(MarkdownStore(source)).dump_user("bob")
        assert dump is not None
        transfer.load_user(dump)  # as if the migration stopped after bob
        with pytest.raises(FileExistsError):
            transfer.load_user(dump)  # a user is never written twice
    assert main(["migrate", "--from", str(source), "--to", postgres_url, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["copied"], report["skipped"]) == (3, 1)


def test_a_user_whose_records_the_database_cannot_keep_stops_the_migration_naming_them(
    tmp_path: Path, postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Markdown store holding what PostgreSQL cannot (U+0000 in a recall's time, written
    by hand or imported by an earlier deermem): `migrate` stopped with the database's
    "text fields cannot contain NUL", naming no user and no field."""
    source = tmp_path / "source"
    bob = Memory.open(source, MemoryConfig(search_mode="keyword"), user="bob", agent="writer")
    bob.create_fact("Bob writes novels", category="context")
    bob.search("novels")
    usage = source / "users" / "bob" / "agents" / "writer" / ".metadata" / "fact-usage.json"
    entries = json.loads(usage.read_text("utf-8"))
    for entry in entries.values():
        entry["lastAccessedAt"] += "\0"
    usage.write_text(json.dumps(entries), "utf-8")
    assert main(["migrate", "--from", str(source), "--to", postgres_url]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: user 'bob': not copied: field 'agents.writer.usage.fact_"), err
    assert ".lastAccessedAt' " in err
    with PostgresStore(postgres_url) as store:
        assert PostgresTransfer(store).users() == ()


def test_a_fact_holding_nan_in_a_field_of_its_own_is_copied_verified_and_run_again(
    tmp_path: Path, postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A hand-edited fact file may hold Python's NaN in a key deermem does not know
    (docs/server.md: "hand-edited files take Python's NaN"). The copy is right, but NaN is
    equal to nothing: the check called it different, stopped, and left the copied user in
    the destination, so running the migration again refused to start."""
    source = tmp_path / "source"
    bob = Memory.open(source, MemoryConfig(search_mode="keyword"), user="bob")
    fact_id = bob.create_fact("Bob writes novels", category="context").fact_id
    [path] = source.glob(f"users/bob/agents/__default__/facts/*/{fact_id}.md")
    path.write_text(path.read_text("utf-8").replace("revision: 1\n", "revision: 1\nweight: .nan\n"))
    copy = tmp_path / "copy"
    for destination in (postgres_url, postgres_url, str(copy)):
        assert main(["migrate", "--from", str(source), "--to", destination, "--json"]) == 0
    assert main(["migrate", "--from", postgres_url, "--to", str(copy), "--json"]) == 0
    out, decoder, reports = capsys.readouterr().out, json.JSONDecoder(), []
    while out.strip():
        report, end = decoder.raw_decode(out.strip())
        reports.append(report)
        out = out.strip()[end:]
    assert [(r["copied"], r["skipped"]) for r in reports] == [(1, 0), (0, 1), (1, 0), (0, 1)]


_PLAIN = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=12,
)


@given(_PLAIN, _PLAIN)
def test_same_data_is_equality_with_nan_equal_to_nan(value: object, other: object) -> None:
    copy = json.loads(json.dumps(value))  # as read back: no object shared with the value
    assert same_data(value, copy)
    if "NaN" not in json.dumps([value, other]):
        assert same_data(value, other) is (value == other)


def test_bad_locations_are_one_line_errors(
    tmp_path: Path, postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["migrate", "--from", str(tmp_path / "nowhere"), "--to", postgres_url]) == 1
    assert "no store there: the directory does not exist" in capsys.readouterr().err
    assert main(["migrate", "--from", postgres_url, "--to", postgres_url]) == 2
    assert "the same store" in capsys.readouterr().err


def recorded(url: str) -> dict[str, object]:
    """The database's own settings, as any SQL client reads them."""
    with psycopg.connect(url) as connection:
        rows = connection.execute("SELECT name, value FROM deermem_settings").fetchall()
    return {name: json.loads(value) for name, value in rows}


def test_the_settings_go_with_the_memory_both_ways(
    tmp_path: Path, postgres_url: str, empty_postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Markdown store with max_facts 10 and hybrid-v1 ran at 100 under confidence after a
    migrate to PostgreSQL (issue 24, point 7): its settings become the database's record,
    and come back into a directory from it."""
    source, copy, back = tmp_path / "source", tmp_path / "copy", tmp_path / "back"
    config = MemoryConfig(max_facts=10, fact_eviction_policy="hybrid-v1")
    assert main(["--root", str(source), "init"]) == 0
    (source / "deermem.yaml").write_text("max_facts: 10\nfact_eviction_policy: hybrid-v1\n")
    Memory.open(source, config, user="alice").create_fact("Uses uv")
    capsys.readouterr()
    assert main(["migrate", "--from", str(source), "--to", str(copy), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["settings"] == ["fact_eviction_policy", "max_facts"]
    assert (copy / "deermem.yaml").read_bytes() == (source / "deermem.yaml").read_bytes()
    moved = Memory.open(copy, user="alice")
    assert (moved.config.max_facts, moved.config.fact_eviction_policy) == (10, "hybrid-v1")

    assert main(["migrate", "--from", str(source), "--to", postgres_url]) == 0
    out = capsys.readouterr().out
    assert "settings kept: fact_eviction_policy, fact_eviction_shadow_enabled, max_facts" in out
    # The source recorded no shadow setting: it ran without, and so does the copy.
    assert recorded(postgres_url) == {
        "max_facts": 10,
        "fact_eviction_policy": "hybrid-v1",
        "fact_eviction_shadow_enabled": False,
    }
    on_database = Memory.open(config=MemoryConfig(store=postgres_url), user="alice")
    try:
        assert on_database.config.max_facts == 10
        assert on_database.config.fact_eviction_policy == "hybrid-v1"
        assert not on_database.config.fact_eviction_shadow_enabled
    finally:
        on_database.store.close()  # type: ignore[attr-defined]

    assert main(["migrate", "--from", postgres_url, "--to", str(back), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["settings"] == [
        "fact_eviction_policy",
        "fact_eviction_shadow_enabled",
        "max_facts",
    ]
    returned = Memory.open(back, user="alice")
    assert (returned.config.max_facts, returned.config.fact_eviction_policy) == (10, "hybrid-v1")
    assert not returned.config.fact_eviction_shadow_enabled
    assert [fact.content for fact in returned.list_facts()] == ["Uses uv"]


def test_a_store_made_before_new_stores_ran_hybrid_v1_keeps_confidence_on_the_move(
    tmp_path: Path, postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A directory an earlier deermem wrote records no policy and runs confidence; the
    database it moves into is new (it recorded hybrid-v1 when it was created), and takes
    the source's policy instead — and gives it back."""
    source = Path(
        shutil.copytree(FIXTURES / "written-by-deermem-e1f89b5" / "store", tmp_path / "s")
    )
    assert not (source / "deermem.yaml").exists()
    assert recorded(postgres_url)["fact_eviction_policy"] == "hybrid-v1"
    assert main(["migrate", "--from", str(source), "--to", postgres_url]) == 0
    assert recorded(postgres_url) == {
        "fact_eviction_policy": "confidence",
        "fact_eviction_shadow_enabled": False,
    }
    assert main(["migrate", "--from", postgres_url, "--to", str(tmp_path / "back")]) == 0
    back = Memory.open(tmp_path / "back", user="alice@example.com")
    assert back.config.fact_eviction_policy == "confidence"
    assert not back.config.fact_eviction_shadow_enabled


def test_a_database_with_users_and_other_settings_stops_the_migration(
    tmp_path: Path, postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "source"
    Memory.open(source, user="alice").create_fact("Uses uv")
    (source / "deermem.yaml").write_text("max_facts: 10\n", encoding="utf-8")
    with PostgresStore(postgres_url) as store:
        Memory(store, MemoryConfig(), Scope.of("bob")).create_fact("Bob, elsewhere")
    before = recorded(postgres_url)
    assert main(["migrate", "--from", str(source), "--to", postgres_url]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "deermem_settings of postgresql://" in err
    assert "already holds users and keeps other settings; nothing was copied" in err
    assert recorded(postgres_url) == before
    with PostgresStore(postgres_url) as store:
        assert PostgresTransfer(store).users() == ("bob",)


def test_scopes_list_alike_on_both_stores_whatever_the_databases_collation(
    tmp_path: Path, postgres_server: TemporaryPostgres
) -> None:
    """An ICU collation puts `alice` before `Alice` and `émile` before `Zoe`; the listing
    (and the order `migrate` copies users in) is the user id's code points on every store."""
    name = "icu_scopes"
    with psycopg.connect(postgres_server.url(), autocommit=True) as admin:
        admin.execute(
            f"CREATE DATABASE {name} TEMPLATE template0 LOCALE 'C.UTF-8'"
            " LOCALE_PROVIDER icu ICU_LOCALE 'en-US'"
        )
    try:
        url = postgres_server.url(name)
        stores = Stores("markdown", tmp_path / "md", None)
        fill_users(stores)
        assert main(["db", "upgrade", "--database", url]) == 0
        assert main(["migrate", "--from", str(tmp_path / "md"), "--to", url]) == 0
        with PostgresStore(url) as store:
            assert list(store.scopes()) == list(stores().scopes()) == LISTED
            users = PostgresTransfer(store).users()
        listed = (None, "Alice", "Zoe", "alice", "bob", "émile")
        assert users == MarkdownTransfer(MarkdownStore(tmp_path / "md")).users() == listed
    finally:
        postgres_server.drop_database(name)
