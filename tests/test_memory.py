"""Memory on the Markdown store: where the store is, and what reaches its files.

Everything else about Memory runs on both stores: tests/store_contract/test_memory.py.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from deermem import (
    FactValidationError,
    Memory,
    MemoryConfig,
    UnsafeIdentifierError,
)
from deermem.cli.demo import seed_scenarios
from deermem.store import MarkdownStore

NOW = datetime(2026, 8, 13, tzinfo=UTC)


def test_the_root_comes_from_the_argument_the_config_the_environment_or_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))

    def root(memory: Memory) -> Path:
        assert isinstance(memory.store, MarkdownStore)
        return memory.store.root

    assert root(Memory.open(config=MemoryConfig())) == tmp_path / "home/.deermem"
    monkeypatch.setenv("DEERMEM_DATA_DIR", str(tmp_path / "env"))
    assert root(Memory.open(config=MemoryConfig())) == tmp_path / "env"
    configured = MemoryConfig(storage_path=str(tmp_path / "configured"))
    assert root(Memory.open(config=configured)) == tmp_path / "configured"
    assert root(Memory.open(tmp_path / "arg", configured)) == tmp_path / "arg"
    monkeypatch.setenv("DEERMEM_STORAGE_PATH", str(tmp_path / "from-env"))
    assert root(Memory.open()) == tmp_path / "from-env"


def test_an_existing_file_as_storage_path_is_a_config_error(tmp_path: Path) -> None:
    from deermem import ConfigError

    path = tmp_path / "memory.json"
    path.write_text("{}", "utf-8")
    with pytest.raises(ConfigError, match="storage_path"):
        MemoryConfig(storage_path=str(path))


def test_a_refused_create_writes_no_file(tmp_path: Path) -> None:
    memory = Memory.open(tmp_path, MemoryConfig(), user="alice", clock=lambda: NOW)
    with pytest.raises(FactValidationError):
        memory.create_fact("   ")
    assert not any(tmp_path.iterdir())


def test_import_without_an_agent_writes_the_default_bucket(tmp_path: Path) -> None:
    Memory.open(tmp_path, user="alice").import_document({"facts": [{"content": "Hello"}]})
    assert list((tmp_path / "users/alice/agents/__default__/facts").glob("*/*.md"))


def test_receipts_in_the_audit_file_hold_no_content(tmp_path: Path) -> None:
    memory = Memory.open(
        tmp_path, MemoryConfig(max_facts=10, fact_eviction_policy="hybrid-v1"), user="alice"
    )
    document = {"facts": [dict(f) for f in seed_scenarios(NOW)[1].facts]}
    assert memory.import_document(document).receipts
    audit = (tmp_path / "users/alice/agents/__default__/.metadata/eviction-audit.json").read_text()
    for fact in document["facts"]:
        assert str(fact["content"]) not in audit


def test_open_unscoped_opens_a_store_under_strict_scope_without_a_single_user_memory(
    tmp_path: Path,
) -> None:
    config = MemoryConfig(strict_user_scope=True)
    with pytest.raises(UnsafeIdentifierError, match="strict_user_scope"):
        Memory.open(tmp_path, config)
    served = Memory.open_unscoped(tmp_path, config, clock=lambda: NOW)
    served.scoped(user="alice", agent="coder").create_fact("Prefers uv over pip")
    assert list((tmp_path / "users/alice/agents/coder/facts").rglob("*.md"))
    with pytest.raises(UnsafeIdentifierError):
        served.list_facts()
    assert not (tmp_path / "memory.json").exists()
    assert not (tmp_path / "agents").exists()
