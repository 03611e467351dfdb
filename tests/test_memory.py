"""Memory on the Markdown store: where the store is, and what reaches its files.

Everything else about Memory runs on both stores: tests/store_contract/test_memory.py.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from deermem import (
    FactValidationError,
    Memory,
    MemoryConfig,
    UnsafeIdentifierError,
)
from deermem.cli.demo import run_demo, seed_scenarios
from deermem.config import STORE_SETTINGS_FILENAME
from deermem.errors import NotAStoreError
from deermem.store import MarkdownStore
from deermem.store.markdown import files as store_files

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
    with pytest.raises(UnsafeIdentifierError, match=r"^no user id given: strict_user_scope is on"):
        Memory.open(tmp_path, config)
    served = Memory.open_unscoped(tmp_path, config, clock=lambda: NOW)
    served.scoped(user="alice", agent="coder").create_fact("Prefers uv over pip")
    assert list((tmp_path / "users/alice/agents/coder/facts").rglob("*.md"))
    with pytest.raises(UnsafeIdentifierError):
        served.list_facts()
    assert not (tmp_path / "memory.json").exists()
    assert not (tmp_path / "agents").exists()


# --- a new store's policy (issue 24, point 1) ---------------------------------


class Ticking:
    """A clock that moves a minute on at every reading: facts added in turn are not equally old."""

    def __init__(self) -> None:
        self.now = datetime(2026, 8, 13, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(minutes=1)
        return self.now


def test_a_full_new_store_keeps_learning_facts_of_equal_confidence(tmp_path: Path) -> None:
    """Under confidence the 11th fact at 0.5 ties the lowest and is evicted at once; a new
    store runs hybrid-v1, so the oldest never-confirmed fact goes instead."""
    root = tmp_path / "memory"
    memory = Memory.open(root, MemoryConfig(max_facts=10), user="alice", clock=Ticking())
    results = [memory.create_fact(f"Fact number {number}") for number in range(15)]
    assert all(result.kept for result in results)
    assert {fact.id for fact in memory.list_facts()} == {r.fact_id for r in results[5:]}
    assert memory.config.fact_eviction_policy == "hybrid-v1"
    assert memory.config.fact_eviction_shadow_enabled
    # confidence ran in the shadow: its evictions are on the receipts, for `deermem regret`
    [first] = results[10].receipts
    assert first.shadow is not None
    assert first.shadow.policy == "confidence"
    assert [row.policy for row in memory.regret().policies] == ["hybrid-v1", "confidence"]
    # the store recorded its policy at its first write: whoever opens it later runs it
    recorded = (root / "deermem.yaml").read_text("utf-8")
    assert "fact_eviction_policy: hybrid-v1" in recorded
    assert "fact_eviction_shadow_enabled: true" in recorded
    assert Memory.open(root).config.fact_eviction_policy == "hybrid-v1"


def test_confidence_is_one_setting_away_and_stays_the_original(tmp_path: Path) -> None:
    config = MemoryConfig(max_facts=10, fact_eviction_policy="confidence")
    memory = Memory.open(tmp_path / "memory", config, user="alice", clock=Ticking())
    results = [memory.create_fact(f"Fact number {number}") for number in range(11)]
    assert results[10].fact_id is None  # the original's tie: the newest fact goes
    # the decision is the original's; a new store still runs the other policy in the shadow
    assert results[10].receipts[0].shadow is not None
    assert results[10].receipts[0].shadow.policy == "hybrid-v1"
    assert Memory.open(tmp_path / "memory").config.fact_eviction_policy == "confidence"


def test_an_existing_store_that_recorded_no_policy_keeps_confidence(tmp_path: Path) -> None:
    """A store created before the switch holds data and no recorded policy: it behaves as before."""
    root = tmp_path / "memory"
    (root / "users").mkdir(parents=True)  # what any earlier deermem left
    memory = Memory.open(root, MemoryConfig(max_facts=10), user="alice", clock=Ticking())
    assert memory.config.fact_eviction_policy == "confidence"
    assert not memory.config.fact_eviction_shadow_enabled
    memory.create_fact("A fact")
    assert not (root / "deermem.yaml").exists()


def test_a_store_file_or_a_configuration_that_names_a_policy_keeps_it(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    Memory.open(root, MemoryConfig(max_facts=10), user="alice").create_fact("A fact")
    named = MemoryConfig(fact_eviction_policy="confidence", fact_eviction_shadow_enabled=False)
    assert Memory.open(root, named).config.fact_eviction_policy == "confidence"
    assert Memory.open(root).config.fact_eviction_policy == "hybrid-v1"  # the file unchanged


def test_a_write_never_makes_a_store_among_other_files(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\n", "utf-8")
    memory = Memory.open(tmp_path, user="alice")
    with pytest.raises(NotAStoreError, match="neither empty nor a deermem store"):
        memory.create_fact("A fact")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["pyproject.toml"]


def test_a_write_to_a_root_that_is_a_link_to_nothing_names_the_link_and_its_target(
    tmp_path: Path,
) -> None:
    """It raised a builtin FileExistsError: the link exists, its directory does not."""
    root = tmp_path / "root"
    root.symlink_to("not-mounted-yet")
    memory = Memory.open(root, user="alice")
    with pytest.raises(NotAStoreError) as caught:
        memory.create_fact("A fact")
    assert str(caught.value) == (
        f"{root}: a symbolic link to {tmp_path / 'not-mounted-yet'}, which does not exist; "
        "check the path"
    )
    assert sorted(tmp_path.iterdir()) == [root]


def test_a_store_being_created_by_another_process_is_a_store_while_it_renames_its_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process creating the store writes its settings to a temporary file and
    renames it into place. A writer that looked for the settings before the rename and
    listed the directory after it saw neither, and refused the store (four processes
    creating facts in a new directory at once: one failed with NotAStoreError)."""
    root = tmp_path / "memory"
    root.mkdir()
    temporary = root / f".{STORE_SETTINGS_FILENAME}.creator.tmp"
    temporary.write_text("fact_eviction_policy: hybrid-v1\n", "utf-8")

    class RenamedWhileListed:
        """``os`` for the store's files, whose listing comes just after the rename."""

        def __getattr__(self, name: str) -> Any:
            return getattr(os, name)

        def scandir(self, path: Any) -> Any:
            if temporary.exists():
                temporary.replace(root / STORE_SETTINGS_FILENAME)
            return os.scandir(path)

    monkeypatch.setattr(store_files, "os", RenamedWhileListed())
    memory = Memory.open(root, user="alice")
    memory.create_fact("A fact")
    assert [fact.content for fact in memory.list_facts()] == ["A fact"]


# --- a misspelled core category (issue 24, point 3) ---------------------------------


@pytest.mark.parametrize(
    ("typed", "meant"),
    [("corection", "correction"), ("Behaviour", "behavior"), ("goals", "goal")],
)
def test_a_near_miss_of_a_core_category_is_refused_naming_it(
    tmp_path: Path, typed: str, meant: str
) -> None:
    """`-c corection` was stored as other:corection, and lost a correction's protection."""
    memory = Memory.open(tmp_path / "memory", user="alice")
    with pytest.raises(FactValidationError, match=f"did you mean '{meant}'") as caught:
        memory.create_fact("Use uv, not pip.", category=typed)
    assert caught.value.field == "category"
    assert not (tmp_path / "memory").exists()  # nothing written
    kept = memory.create_fact("Use uv, not pip.", category="correction")
    with pytest.raises(FactValidationError, match=f"did you mean '{meant}'"):
        memory.update_fact(kept.fact_id or "", category=typed)


def test_a_label_of_ones_own_is_still_kept_as_other(tmp_path: Path) -> None:
    memory = Memory.open(tmp_path / "memory", user="alice")
    fact = memory.create_fact("Plays the cello", category="hobby").fact
    assert (fact.category, fact.categoryExtension) == ("other", "hobby")


def test_a_naive_clock_is_taken_to_be_utc_at_the_cap_too(tmp_path: Path) -> None:
    """A naive clock wrote facts fine and then failed every write at the cap: the archive's
    age bound compared an aware stored time with it."""
    naive = datetime(2026, 8, 13, 12, 0)
    memory = Memory.open(tmp_path, MemoryConfig(max_facts=10), user="u", clock=lambda: naive)
    for number in range(12):
        memory.create_fact(f"fact number {number}", confidence=0.5 + number / 100)
    assert len(memory.list_facts()) == 10
    assert len(memory.list_archived()) == 2
    assert memory.now() == naive.replace(tzinfo=UTC)


def test_a_users_regret_is_the_sum_of_its_agents_when_their_fact_ids_repeat(
    tmp_path: Path,
) -> None:
    """The demo's scopes hold facts with the same ids (imported): the per-user report keyed
    evictions by id alone, so the user's numbers were half the agents' and its rate doubled."""
    run_demo(tmp_path, NOW)
    served = Memory.open_unscoped(tmp_path, MemoryConfig(max_facts=10), clock=lambda: NOW)
    agents = served.store.agents("demo")
    assert len(agents) == 6
    summed: dict[tuple[str, str], list[int]] = {}
    for agent in agents:
        for row in served.scoped(user="demo", agent=agent).regret().policies:
            totals = summed.setdefault((row.policy, row.role), [0, 0, 0])
            totals[0] += row.evictions
            totals[1] += row.regretted
            totals[2] += row.events_total
    whole = served.scoped(user="demo", agent=agents[0]).regret(whole_user=True)
    assert {
        (row.policy, row.role): [row.evictions, row.regretted, row.events_total]
        for row in whole.policies
    } == summed
    assert any(evictions > 1 for evictions, _, _ in summed.values())
