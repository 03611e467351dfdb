"""What the packages export: every public name resolves to its definition.

``deermem.__all__`` is the public API (ARCHITECTURE §3): ``Memory`` and its
configuration, the fact, the capacity policy, and the library's errors an
integrator catches — at most 35 names. The server's and the evaluation's
errors stay in their packages, still under :class:`~deermem.DeerMemError`.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from types import ModuleType

import pytest

import deermem
from deermem import errors
from deermem.eval import errors as evaluation_errors
from deermem.service import errors as server_errors

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
        "CapacityPolicy",
        "select_facts_for_capacity",
        "CapacityDecision",
        "POLICY_CONFIDENCE",
        "POLICY_HYBRID_V1",
        "DeerMemError",
        "ConfigError",
        "FactValidationError",
        "StorageError",
        "LLMError",
    }
    assert public <= set(deermem.__all__)
    assert len(deermem.__all__) <= 35
    assert deermem.__version__


def test_the_architecture_map_counts_the_public_api() -> None:
    """docs/architecture.md states how many names ``deermem.__all__`` holds; the two agree."""
    architecture = Path(__file__).resolve().parent.parent / "docs" / "architecture.md"
    counted = re.search(r"the public API \((\d+) names", architecture.read_text("utf-8"))
    assert counted is not None
    assert int(counted.group(1)) == len(deermem.__all__)


def test_the_exported_errors_are_the_librarys_own() -> None:
    exported = [getattr(deermem, name) for name in deermem.__all__]
    raised = [
        value for value in exported if isinstance(value, type) and issubclass(value, Exception)
    ]
    assert 10 <= len(raised) <= 16
    for error in raised:
        assert issubclass(error, deermem.DeerMemError)
        assert error is getattr(errors, error.__name__)


@pytest.mark.parametrize("module", [server_errors, evaluation_errors])
def test_server_and_evaluation_errors_stay_in_their_packages(module: ModuleType) -> None:
    names = module.__all__
    assert names
    for name in names:
        assert issubclass(getattr(module, name), deermem.DeerMemError)
        assert name not in deermem.__all__
        assert name not in errors.__all__


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = deermem.no_such_name  # type: ignore[attr-defined]
    with pytest.raises(ImportError, match="no_such_name"):
        exec("from deermem import no_such_name", {})


def test_exported_names_are_their_definitions() -> None:
    from deermem.memory import Memory
    from deermem.model import Fact
    from deermem.policy.selection import select_facts_for_capacity

    assert deermem.Memory is Memory
    assert deermem.Fact is Fact
    assert deermem.select_facts_for_capacity is select_facts_for_capacity


def test_policy_names_are_one_object_wherever_imported() -> None:
    from deermem import POLICY_HYBRID_V1 as from_root
    from deermem.policy import POLICY_HYBRID_V1 as from_package
    from deermem.policy.names import POLICIES, POLICY_CONFIDENCE, POLICY_HYBRID_V1

    assert from_root is from_package is POLICY_HYBRID_V1 == "hybrid-v1"
    assert POLICIES == (POLICY_CONFIDENCE, POLICY_HYBRID_V1)
