"""A database's own settings (``deermem_settings``, schema version 4): what a Markdown store
keeps in its ``deermem.yaml`` — recorded when deermem creates the store, laid under every
explicit choice when a memory opens it (issue 24, point 1, on PostgreSQL)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from deermem import ConfigError, Memory, MemoryConfig
from deermem.cli.app import main
from deermem.config import load_config
from deermem.store.postgres import PostgresStore
from deermem.store.postgres.database import upgrade_database
from tests.integrations.deerflow_support import backend

NOW = datetime(2026, 8, 13, tzinfo=UTC)


def recorded(url: str) -> dict[str, object]:
    """The rows of ``deermem_settings``, read as any SQL client reads them."""
    with psycopg.connect(url) as connection:
        rows = connection.execute("SELECT name, value FROM deermem_settings").fetchall()
    return {name: json.loads(value) for name, value in rows}


def ticking() -> Callable[[], datetime]:
    moments = (NOW + timedelta(minutes=n) for n in range(1000))
    return lambda: next(moments)


@contextmanager
def opened(config: MemoryConfig, **arguments: Any) -> Iterator[Memory]:
    """A memory on the database ``config`` names; its pool closed after."""
    memory = Memory.open(config=config, user="alice", **arguments)
    store = memory.store
    assert isinstance(store, PostgresStore)
    try:
        yield memory
    finally:
        memory.close()
        store.close()


def test_a_database_deermem_creates_runs_hybrid_v1_with_confidence_in_its_shadow(
    empty_postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`db upgrade` on a database without users creates the store: it records a new
    store's policy, and a memory that opens the database runs it — so a full memory of
    equal facts keeps learning (under confidence the newest fact was evicted at once)."""
    assert main(["db", "upgrade", "--database", empty_postgres_url]) == 0
    out = capsys.readouterr().out
    assert "applied 1, 2, 3, 4, 5, 6" in out
    assert "a new store: recorded its settings" in out
    assert recorded(empty_postgres_url) == {
        "fact_eviction_policy": "hybrid-v1",
        "fact_eviction_shadow_enabled": True,
    }
    config = MemoryConfig(store=empty_postgres_url, max_facts=10)
    with opened(config, clock=ticking()) as memory:
        assert memory.config.fact_eviction_policy == "hybrid-v1"
        assert memory.config.fact_eviction_shadow_enabled
        for n in range(11):
            memory.create_fact(f"Equal fact number {n}")  # every one at confidence 0.5
        kept = {fact.content for fact in memory.list_facts()}
        assert "Equal fact number 10" in kept  # the newest stays
        assert "Equal fact number 0" not in kept


def as_version_3_left_it(url: str) -> None:
    """Take the database back to schema version 3: no settings table, no archive digests."""
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("DROP TABLE deermem_settings")
        connection.execute("ALTER TABLE deermem_archive DROP COLUMN content_digest")
        connection.execute("DELETE FROM deermem_migrations WHERE version IN (4, 5, 6)")


def test_a_database_that_holds_users_keeps_confidence_when_upgraded(
    empty_postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A database an earlier deermem migrated to version 3 and filled records nothing when
    it reaches 4: it runs `confidence`, as it did, and `db upgrade` says so once."""
    url = empty_postgres_url
    upgrade_database(url)
    with opened(MemoryConfig(store=url)) as memory:
        memory.create_fact("Uses uv")
    as_version_3_left_it(url)
    assert main(["db", "upgrade", "--database", url, "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert (status["applied"], status["settings"]) == ([4, 5, 6], [])
    as_version_3_left_it(url)  # once more, for the sentence
    assert main(["db", "upgrade", "--database", url]) == 0
    out = capsys.readouterr().out
    assert "holds users and records no settings: it keeps running as before" in out
    assert main(["db", "upgrade", "--database", url]) == 0
    assert "keeps running" not in capsys.readouterr().out  # said once, by the upgrade
    assert recorded(url) == {}
    with opened(MemoryConfig(store=url)) as memory:
        assert memory.config.fact_eviction_policy == "confidence"
        assert not memory.config.fact_eviction_shadow_enabled
        assert [fact.content for fact in memory.list_facts()] == ["Uses uv"]


def test_explicit_configuration_wins_over_the_record_which_wins_over_defaults(
    empty_postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The precedence of a Markdown store's file: explicit > the store's record > default.
    `db upgrade` records the configuration's own choices too, as `init` does."""
    url = empty_postgres_url
    team = tmp_path / "team.yaml"
    team.write_text("max_facts: 10\n", encoding="utf-8")
    monkeypatch.setenv("DEERMEM_DATABASE_URL", url)
    assert main(["--config", str(team), "db", "upgrade"]) == 0
    assert recorded(url) == {
        "max_facts": 10,
        "fact_eviction_policy": "hybrid-v1",
        "fact_eviction_shadow_enabled": True,
    }
    with opened(load_config()) as memory:  # the record
        assert memory.config.max_facts == 10
        assert memory.config.fact_eviction_policy == "hybrid-v1"
    monkeypatch.setenv("DEERMEM_FACT_EVICTION_POLICY", "confidence")
    with opened(load_config()) as memory:  # a variable names one
        assert memory.config.fact_eviction_policy == "confidence"
        assert memory.config.fact_eviction_shadow_enabled  # the record's, as nothing chose
        assert memory.config.max_facts == 10
    monkeypatch.delenv("DEERMEM_FACT_EVICTION_POLICY")
    explicit = MemoryConfig(store=url, max_facts=20, fact_eviction_shadow_enabled=False)
    with opened(explicit) as memory:
        assert (memory.config.max_facts, memory.config.fact_eviction_shadow_enabled) == (20, False)
        assert memory.config.fact_eviction_policy == "hybrid-v1"
    # DeerFlow's backend keeps DeerFlow's policy and its default on a database too.
    deerflow = backend(tmp_path / "unused", store=url)
    assert deerflow._memory.config.fact_eviction_policy == "confidence"
    assert not deerflow._memory.config.fact_eviction_shadow_enabled
    deerflow._memory.store.close()  # type: ignore[attr-defined]  # a PostgresStore


def test_a_record_no_store_may_keep_is_refused_naming_it(postgres_url: str) -> None:
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        connection.execute("INSERT INTO deermem_settings VALUES ('storage_path', '\"/srv\"')")
    with pytest.raises(ConfigError, match="storage_path cannot be set") as refused:
        Memory.open(config=MemoryConfig(store=postgres_url))
    assert "deermem_settings of postgresql://" in str(refused.value)
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        connection.execute("DELETE FROM deermem_settings WHERE name = 'storage_path'")
        connection.execute("INSERT INTO deermem_settings VALUES ('max_facts', '7')")
    with pytest.raises(ConfigError, match="max_facts") as refused:
        Memory.open(config=MemoryConfig(store=postgres_url))
    assert "deermem_settings of postgresql://" in str(refused.value)


def test_config_show_names_the_databases_record_as_the_source(
    postgres_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEERMEM_DATABASE_URL", postgres_url)
    monkeypatch.setenv("DEERMEM_MAX_FACTS", "20")
    assert main(["config", "show", "--json"]) == 0
    settings = json.loads(capsys.readouterr().out)["settings"]
    record = f"deermem_settings of {postgres_url}"
    assert settings["fact_eviction_policy"] == {"value": "hybrid-v1", "source": record}
    assert settings["fact_eviction_shadow_enabled"] == {"value": True, "source": record}
    assert settings["max_facts"]["source"] == "environment variable DEERMEM_MAX_FACTS"


def test_db_upgrade_given_settings_records_them_until_the_store_holds_a_user(
    empty_postgres_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A database created by `db upgrade` could not be given its settings afterwards: a
    second `db upgrade` with settings ignored them silently (`"settings": []`), and
    `deermem init` refuses a database. While the store holds no user, `db upgrade` records
    them over its record, as `init` does in an existing directory; once it holds users,
    the record stays and the upgrade says so."""
    url = empty_postgres_url
    monkeypatch.setenv("DEERMEM_DATABASE_URL", url)
    assert main(["db", "upgrade"]) == 0
    capsys.readouterr()
    monkeypatch.setenv("DEERMEM_MAX_FACTS", "10")
    assert main(["db", "upgrade", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["settings"] == [
        "fact_eviction_policy",
        "fact_eviction_shadow_enabled",
        "max_facts",
    ]
    assert recorded(url) == {
        "fact_eviction_policy": "hybrid-v1",
        "fact_eviction_shadow_enabled": True,
        "max_facts": 10,
    }
    monkeypatch.delenv("DEERMEM_MAX_FACTS")
    assert main(["db", "upgrade", "--json"]) == 0  # nothing given: the record stays
    assert json.loads(capsys.readouterr().out)["settings"] == []
    assert recorded(url)["max_facts"] == 10
    with opened(MemoryConfig(store=url)) as memory:
        assert memory.config.max_facts == 10
        memory.create_fact("Uses uv")
    monkeypatch.setenv("DEERMEM_MAX_FACTS", "20")
    assert main(["db", "upgrade"]) == 0
    assert "settings not recorded: the database holds users" in capsys.readouterr().out
    assert recorded(url)["max_facts"] == 10


def test_db_upgrade_refuses_a_model_url_holding_a_secret_and_applies_nothing(
    empty_postgres_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Recorded, the URL would be its mask (``***``) or the secret: the upgrade that would
    record it is refused, in its one transaction; once the store holds users nothing is
    recorded, so the URL given to each command is no reason to refuse."""
    url = empty_postgres_url
    monkeypatch.setenv("DEERMEM_DATABASE_URL", url)
    monkeypatch.setenv("DEERMEM_MODEL__MODEL", "m")
    monkeypatch.setenv("DEERMEM_MODEL__BASE_URL", "https://u:s3cret-pass@models.example/v1")
    assert main(["db", "upgrade"]) == 1
    err = capsys.readouterr().err
    assert "model.base_url = 'https://u:***@models.example/v1'" in err
    assert "s3cret" not in err
    with psycopg.connect(url) as connection:
        tables = connection.execute("SELECT to_regclass('deermem_settings')").fetchone()
    assert tables == (None,)  # nothing applied
    monkeypatch.delenv("DEERMEM_MODEL__BASE_URL")
    assert main(["db", "upgrade"]) == 0
    with opened(MemoryConfig(store=url)) as memory:
        memory.create_fact("Uses uv")
    monkeypatch.setenv("DEERMEM_MODEL__BASE_URL", "https://u:s3cret-pass@models.example/v1")
    assert main(["db", "upgrade"]) == 0
    assert "s3cret" not in json.dumps(recorded(url))
