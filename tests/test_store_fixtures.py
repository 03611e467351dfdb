"""Stores written before, by deermem or by hand in the original's formats, read the same today.

The fixtures (tests/store_fixtures/, made by its ``make.py``) hold what
deermem at commit e1f89b5 — with its own YAML and JSON codecs — wrote and
read: a store it wrote, and a DeerMem-shaped store written by hand in YAML
styles ``yaml.safe_dump`` never produces. Reading them now must give what it
gave then, and what deermem writes now must read back, in PyYAML's C and
pure-Python loaders alike (the original reads with ``yaml.safe_load``), as
the same values.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from deermem.model import Fact, Scope
from deermem.store import MarkdownStore
from deermem.store.markdown.files import UserPaths, decode_fact, encode_fact
from tests.store_fixtures.make import SCOPES, describe

FIXTURES = Path(__file__).parent / "store_fixtures"
STORES = ["written-by-deermem-e1f89b5", "handwritten-deermem"]


def copy_of(name: str, tmp_path: Path) -> Path:
    """A copy: reading takes locks, which must not touch the fixtures."""
    return Path(shutil.copytree(FIXTURES / name / "store", tmp_path / "store"))


def front_matter(data: bytes) -> str:
    text = data.decode("utf-8")
    assert text.startswith("---\n")
    return text[4 : text.index("\n---\n", 3) + 1]


def with_list_defaults(described: Any) -> Any:
    """``consolidatedFrom`` as a fact's mapping now always gives it: ``[]`` when unset.

    (e1f89b5 left an empty list out; the original writes it, and so does deermem now.)
    """
    if isinstance(described, dict):
        out = {key: with_list_defaults(value) for key, value in described.items()}
        if "content" in out and "revision" in out:  # a fact
            out.setdefault("consolidatedFrom", [])
        return out
    if isinstance(described, list):
        return [with_list_defaults(item) for item in described]
    return described


@pytest.mark.parametrize("name", STORES)
def test_a_store_reads_as_the_earlier_deermem_read_it(name: str, tmp_path: Path) -> None:
    expected = json.loads((FIXTURES / name / "expected.json").read_text("utf-8"))
    assert describe(copy_of(name, tmp_path)) == with_list_defaults(expected)


LOADERS: list[Any] = [
    yaml.SafeLoader,
    *([yaml.CSafeLoader] if hasattr(yaml, "CSafeLoader") else []),
]


def stored_facts(root: Path) -> list[tuple[Scope, Fact, Path]]:
    """Every fact of the fixture's scopes, with its file."""
    store = MarkdownStore(root)
    return [
        (
            scope,
            fact,
            UserPaths(root, scope.user_id, "memory.json").agent(scope.agent).fact(fact.id),
        )
        for scope in (*SCOPES, Scope.of("alice@example.com", "researcher"))
        for fact in store.load(scope).facts
    ]


@pytest.mark.parametrize("name", STORES)
def test_facts_written_today_read_back_the_same_in_every_yaml_loader(
    name: str, tmp_path: Path
) -> None:
    facts = stored_facts(copy_of(name, tmp_path))
    assert len(facts) >= 4
    for scope, fact, _ in facts:
        data = encode_fact(fact, scope)
        assert decode_fact(data, "rewritten.md", scope, fact.id) == fact
        [first, *others] = [yaml.load(front_matter(data), Loader=loader) for loader in LOADERS]
        assert all(other == first for other in others)
        assert (first["user_id"], first["agent_name"]) == (scope.user_id, scope.agent)


def test_bytes_change_only_where_every_yaml_loader_reads_the_same(tmp_path: Path) -> None:
    """Today's bytes for the facts e1f89b5 wrote: the same body, the same front-matter values."""
    facts = stored_facts(copy_of(STORES[0], tmp_path))
    assert len(facts) == 15
    for scope, fact, path in facts:
        old, new = path.read_bytes(), encode_fact(fact, scope)
        assert new.split(b"\n---\n", 1)[1] == old.split(b"\n---\n", 1)[1]  # the Markdown body
        for loader in LOADERS:
            assert yaml.load(front_matter(new), Loader=loader) == {
                "consolidatedFrom": [],
                **yaml.load(front_matter(old), Loader=loader),
            }
