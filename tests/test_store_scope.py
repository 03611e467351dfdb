"""Identifiers cannot address a path outside the root; scopes never see each other."""

from __future__ import annotations

import os
import unicodedata
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deermem import Memory, MemoryConfig, UnsafeIdentifierError
from deermem.model import (
    DEFAULT_AGENT,
    Scope,
    check_user_id,
    normalise_agent,
    safe_user_id,
    shown_user_id,
)
from deermem.store.markdown.files import UserPaths

NOW = datetime(2026, 8, 13, tzinfo=UTC)


def test_safe_user_id_matches_the_original() -> None:
    assert safe_user_id("alice") == "alice"
    assert safe_user_id("Alice_B-2") == "Alice_B-2"
    assert safe_user_id("alice@example.com") == "alice-example-com-ff8d9819fc0e12bf"


@pytest.mark.parametrize(
    "raw",
    [
        "..",  # parent directory
        "../../etc",
        "/etc/passwd",  # absolute path
        "a/b",
        "a\\b",
        "x" * 1000,  # longer than any file name
        "名前",  # unicode
        "Ünïcødé",
        " ",
        ".",
        "~root",
    ],
)
def test_any_user_id_becomes_one_plain_directory_name(raw: str) -> None:
    safe = safe_user_id(raw)
    assert safe.replace("-", "").replace("_", "").isalnum()
    assert len(safe) <= 120
    assert safe not in {".", ".."}
    assert safe != raw
    assert safe_user_id(raw) == safe  # stable


def test_ids_differing_only_in_replaced_characters_get_different_directories() -> None:
    assert safe_user_id("a@b") != safe_user_id("a.b")
    assert safe_user_id("x" * 1000) != safe_user_id("x" * 999 + "y")


@settings(max_examples=300)
@given(st.text(min_size=1, max_size=300))
def test_no_user_id_leaves_the_users_directory(raw: str) -> None:
    try:
        check_user_id(raw)
    except UnsafeIdentifierError:
        return  # refused before any path is built (tests/security/test_identities.py)
    root = Path("/srv/deermem")
    user_dir = UserPaths(root, raw, "memory.json").user_dir
    assert user_dir.parent == root / "users"
    assert os.path.normpath(user_dir) == str(user_dir)
    assert user_dir.name == safe_user_id(raw)


@settings(max_examples=300)
@given(
    st.lists(
        st.text(st.characters(codec="utf-8", exclude_categories=["Cc", "Cs"]), min_size=1),
        min_size=2,
        max_size=2,
        unique=True,
    )
)
def test_two_user_ids_are_never_shown_alike(ids: list[str]) -> None:
    """A listing shows every id so that a person can tell it from any other: nothing
    invisible is left in it (but the plain space), and no two ids read the same."""
    first, second = (shown_user_id(raw) for raw in ids)
    assert first != second
    for shown in (first, second):
        assert all(
            char == " " or unicodedata.category(char) not in {"Cf", "Zl", "Zp", "Zs"}
            for char in shown
        )


def test_an_invisible_character_of_a_user_id_is_written_out() -> None:
    assert shown_user_id("alice") == "alice"
    assert shown_user_id("ad\u200bmin") == r"ad\u200bmin"
    assert shown_user_id("admin\u2060") == r"admin\u2060"
    assert shown_user_id("x\u00a0y") == r"x\u00a0y"
    assert shown_user_id("Ana Lima") == "Ana Lima"
    # typed as six characters, not invisible: the backslash is doubled
    assert shown_user_id(r"ad\u200bmin") == r"ad\\u200bmin"


@pytest.mark.parametrize("raw", ["", 5, None])
def test_an_empty_or_non_string_user_id_is_refused(raw: object) -> None:
    if raw is None:
        assert Scope.of(None).user_id is None  # None is the single-user layout
        return
    with pytest.raises(UnsafeIdentifierError):
        safe_user_id(raw)


def test_agent_names_are_lower_cased_and_default_is_reserved() -> None:
    assert normalise_agent(None) == DEFAULT_AGENT
    assert normalise_agent("Lead-Agent") == normalise_agent("LEAD-AGENT") == "lead-agent"
    assert normalise_agent("__default__") == "__default__"


@pytest.mark.parametrize(
    "name",
    [
        "",
        "..",
        "../x",
        "a/b",
        "/abs",
        "a b",
        "a@b",
        "under_score",
        "__DEFAULT__",
        "ağent",
        "x\x00",
        "a" * 1025,
    ],
)
def test_unsafe_agent_names_are_refused(name: str) -> None:
    with pytest.raises(UnsafeIdentifierError) as caught:
        normalise_agent(name)
    assert caught.value.kind == "agent name"


def memory(root: Path, user: str | None, agent: str | None = None) -> Memory:
    return Memory.open(root, MemoryConfig(), user=user, agent=agent, clock=lambda: NOW)


def test_scopes_are_isolated(tmp_path: Path) -> None:
    alice = memory(tmp_path, "alice")
    mallory = memory(tmp_path, "../alice")
    upper = memory(tmp_path, "Alice")
    other_agent = memory(tmp_path, "alice", "writer")
    single = memory(tmp_path, None)
    alice.create_fact("Alice's secret")
    for stranger in (mallory, upper, other_agent, single):
        assert stranger.list_facts() == ()
    assert [f.content for f in alice.list_facts()] == ["Alice's secret"]
    # every file of the store stays below the root
    for path in tmp_path.rglob("*"):
        assert path.resolve().is_relative_to(tmp_path.resolve())


def test_a_fact_moved_into_another_users_directory_is_refused(tmp_path: Path) -> None:
    alice = memory(tmp_path, "alice")
    fact_id = alice.create_fact("Alice's secret").fact_id
    assert fact_id is not None
    bob = memory(tmp_path, "bob")
    bob.create_fact("Bob's note")
    source = next(tmp_path.glob(f"users/alice/agents/__default__/facts/*/{fact_id}.md"))
    target = tmp_path / "users/bob/agents/__default__/facts" / source.parent.name / source.name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(source.read_bytes())
    from deermem import CorruptMemoryFile

    with pytest.raises(CorruptMemoryFile, match="scope mismatch"):
        bob.reload()


def test_layout_of_users_agents_and_the_single_user_root(tmp_path: Path) -> None:
    memory(tmp_path, "alice", "test-agent").create_fact("Agent fact")
    memory(tmp_path, "alice").create_fact("Default fact")
    memory(tmp_path, None).create_fact("Single-user fact")
    user = tmp_path / "users" / "alice"
    assert (user / "memory.json").is_file()
    assert list((user / "agents" / "test-agent" / "facts").glob("*/*.md"))
    assert list((user / "agents" / "__default__" / "facts").glob("*/*.md"))
    assert not list(user.glob("agents/*/memory.json"))  # no per-agent JSON
    assert (tmp_path / "memory.json").is_file()  # user None: the root's own document
    assert list((tmp_path / "agents" / "__default__" / "facts").glob("*/*.md"))


def test_strict_user_scope_requires_a_user(tmp_path: Path) -> None:
    config = MemoryConfig(strict_user_scope=True)
    with pytest.raises(UnsafeIdentifierError, match="no user id given: strict_user_scope"):
        Memory.open(tmp_path, config)
    assert Memory.open(tmp_path, config, user="alice").scope.user_id == "alice"
