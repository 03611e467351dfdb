"""Choosing the PostgreSQL store by configuration, and never showing its password."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import psycopg
import pytest

from deermem import ConfigError, DatabaseError, Memory, MemoryConfig
from deermem.cli.app import main
from deermem.config import load_config
from deermem.store import MarkdownStore
from deermem.store.postgres import PostgresStore
from deermem.testing.postgres import TemporaryPostgres

SECRET = "pa55-w0rd-never-shown"


@pytest.fixture
def password_url(postgres_server: TemporaryPostgres, postgres_url: str) -> str:
    """The test's database, reached as a role that must log in with a password."""
    database = postgres_url.rsplit("/", 1)[1]
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(
            f"DO $$ BEGIN CREATE ROLE secretive LOGIN PASSWORD '{SECRET}'; "
            "EXCEPTION WHEN duplicate_object THEN NULL; END $$"
        )
        admin.execute("GRANT ALL ON ALL TABLES IN SCHEMA public TO secretive")
        admin.execute("GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO secretive")
        admin.execute(f"GRANT ALL ON DATABASE {database} TO secretive")
    postgres_server.require_password("secretive")
    return f"postgresql://secretive:{SECRET}@127.0.0.1:{postgres_server.port}/{database}"


def test_the_store_setting_opens_the_database(password_url: str, tmp_path: Path) -> None:
    memory = Memory.open(config=MemoryConfig(store=password_url), user="alice")
    try:
        assert isinstance(memory.store, PostgresStore)
        memory.create_fact("Stored in PostgreSQL")
        assert SECRET not in repr(memory)
        assert SECRET not in repr(memory.store)
        assert SECRET not in repr(memory.config)
        assert not list(tmp_path.iterdir())  # no file anywhere
    finally:
        memory.store.close()  # type: ignore[attr-defined]


def test_the_database_url_variable_names_the_store(
    password_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEERMEM_DATABASE_URL", password_url)
    assert load_config().store == password_url
    monkeypatch.setenv("DEERMEM_STORE", "")  # the setting's own variable wins
    assert load_config().store == ""


def test_without_a_store_setting_the_markdown_store_stays_the_default(tmp_path: Path) -> None:
    memory = Memory.open(tmp_path, MemoryConfig(), user="alice")
    assert isinstance(memory.store, MarkdownStore)


def test_a_directory_and_a_database_together_are_refused(password_url: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="use one of them") as refused:
        Memory.open(tmp_path, MemoryConfig(store=password_url))
    assert SECRET not in str(refused.value)


def test_a_store_that_is_not_a_database_url_is_refused_without_its_password() -> None:
    with pytest.raises(ConfigError, match="expected a postgresql://") as refused:
        MemoryConfig(store=f"mysql://root:{SECRET}@db/memory")
    assert SECRET not in str(refused.value)
    assert "mysql://root:***@db/memory" in str(refused.value)


def test_a_refused_login_names_the_database_but_not_the_password(
    password_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    wrong = password_url.replace(SECRET, SECRET[::-1])
    with caplog.at_level(logging.DEBUG), pytest.raises(DatabaseError) as refused:
        PostgresStore(wrong)
    assert "password authentication failed" in str(refused.value)
    assert "secretive:***@127.0.0.1" in str(refused.value)
    assert SECRET not in str(refused.value)
    assert SECRET[::-1] not in str(refused.value)
    assert SECRET not in caplog.text
    assert SECRET[::-1] not in caplog.text


def test_config_check_and_the_cli_never_print_the_password(
    password_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    config = tmp_path / "deermem.yaml"
    config.write_text(f"store: {password_url}\nmax_facts: 10\n", "utf-8")
    assert main(["config", "check", str(config)]) == 0
    shown = capsys.readouterr().out
    assert main(["config", "check", str(config), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["store"].startswith("postgresql://secretive:***@")
    with caplog.at_level(logging.DEBUG):
        assert main(["--config", str(config), "--user", "alice", "facts", "add", "Tea"]) == 0
        added = capsys.readouterr()
        assert main(["--config", str(config), "--user", "alice", "facts", "list", "--json"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)[0]["content"] == "Tea"
    bad = password_url.replace("/test_", "/missing_")
    monkeypatch.setenv("DEERMEM_DATABASE_URL", bad)
    assert main(["--user", "alice", "facts", "list"]) == 1
    err = capsys.readouterr().err
    assert "does not exist" in err
    for text in (shown, added.out, added.err, out.out, out.err, err, caplog.text):
        assert SECRET not in text
