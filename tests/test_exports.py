"""What the packages export: every public name resolves to its definition.

``deermem.__all__`` is the public API (ARCHITECTURE §3). Some of its names are
imported on first read (``deermem._ON_FIRST_USE``); type checkers see those
through an ``if TYPE_CHECKING:`` block, which must name exactly the same ones.
"""

from __future__ import annotations

import ast
import importlib
import inspect

import pytest

import deermem

PACKAGES = ("deermem", "deermem.model", "deermem.policy", "deermem.memory", "deermem.config")


@pytest.mark.parametrize("name", PACKAGES)
def test_every_exported_name_is_defined_once(name: str) -> None:
    package = importlib.import_module(name)
    assert len(package.__all__) == len(set(package.__all__)), name
    for export in package.__all__:
        assert getattr(package, export) is not None, export
    assert set(package.__all__) <= set(dir(package))


def test_the_public_api_is_exported() -> None:
    """ARCHITECTURE §3: the names every user of the library starts from."""
    public = {
        "Memory",
        "MemoryConfig",
        "Fact",
        "select_facts_for_capacity",
        "CapacityDecision",
        "POLICY_CONFIDENCE",
        "POLICY_HYBRID_V1",
    }
    assert public <= set(deermem.__all__)
    for name in ("DeerMemError", "ConfigError", "EvaluationError", "__version__"):
        assert name in deermem.__all__


@pytest.mark.parametrize("name", sorted(deermem._ON_FIRST_USE))
def test_a_name_imported_on_first_use_is_its_definition(name: str) -> None:
    defining = importlib.import_module(deermem._ON_FIRST_USE[name])
    value = getattr(deermem, name)
    assert value is getattr(defining, name)
    assert vars(deermem)[name] is value  # later reads are plain lookups
    namespace: dict[str, object] = {}
    exec(f"from deermem import {name}", namespace)
    assert namespace[name] is value


def test_the_names_for_type_checkers_are_the_names_imported_on_first_use() -> None:
    tree = ast.parse(inspect.getsource(deermem))
    (block,) = [
        node
        for node in tree.body
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
    ]
    seen = {}
    for statement in block.body:
        assert isinstance(statement, ast.ImportFrom)
        for alias in statement.names:
            assert alias.asname == alias.name  # re-exported explicitly
            seen[alias.name] = statement.module
    assert seen == deermem._ON_FIRST_USE


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = deermem.no_such_name
    with pytest.raises(ImportError, match="no_such_name"):
        exec("from deermem import no_such_name", {})


def test_eager_names_are_their_definitions() -> None:
    from deermem.model import Fact
    from deermem.policy.selection import select_facts_for_capacity

    assert deermem.Fact is Fact
    assert deermem.select_facts_for_capacity is select_facts_for_capacity


def test_policy_names_are_one_object_wherever_imported() -> None:
    from deermem import POLICY_HYBRID_V1 as from_root
    from deermem.policy import POLICY_HYBRID_V1 as from_package
    from deermem.policy.names import POLICIES, POLICY_CONFIDENCE, POLICY_HYBRID_V1

    assert from_root is from_package is POLICY_HYBRID_V1 == "hybrid-v1"
    assert POLICIES == (POLICY_CONFIDENCE, POLICY_HYBRID_V1)
