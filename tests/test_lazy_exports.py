"""The packages that export lazily: every name resolves to its definition.

``deermem``, ``deermem.policy`` and ``deermem.model`` import a name's module
when the name is first read.
"""

from __future__ import annotations

import importlib
from types import ModuleType

import pytest

PACKAGES = ("deermem", "deermem.policy", "deermem.model")


@pytest.mark.parametrize("name", PACKAGES)
def test_every_exported_name_resolves_to_its_definition(name: str) -> None:
    package = importlib.import_module(name)
    table: dict[str, str] = package._EXPORTS
    for export in package.__all__:
        if export in table:
            defining: ModuleType = importlib.import_module(table[export])
            assert getattr(package, export) is getattr(defining, export), export
        else:  # eager: deermem's exceptions and __version__
            assert hasattr(package, export), export
    assert set(package.__all__) <= set(dir(package))
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = package.no_such_name


def test_policy_names_are_one_object_wherever_imported() -> None:
    from deermem import POLICY_HYBRID_V1 as from_root
    from deermem.policy import POLICY_HYBRID_V1 as from_package
    from deermem.policy.names import POLICIES, POLICY_CONFIDENCE, POLICY_HYBRID_V1

    assert from_root is from_package is POLICY_HYBRID_V1 == "hybrid-v1"
    assert POLICIES == (POLICY_CONFIDENCE, POLICY_HYBRID_V1)
