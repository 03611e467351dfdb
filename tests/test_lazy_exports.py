"""The packages that export lazily: every name resolves, and only on demand.

``deermem``, ``deermem.policy`` and ``deermem.model`` import a name's module
when the name is first read, so that a caller pays only for what it uses
(``deermem eval validate`` needs the policy names, not the selector).
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from types import ModuleType

import pytest

PACKAGES = ("deermem", "deermem.policy", "deermem.model")


def _modules_after(code: str) -> set[str]:
    """Run ``code`` in a fresh interpreter; the modules it had imported at the end."""
    script = f"{code}\nimport sys\nprint(','.join(sorted(sys.modules)))\n"
    completed = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    return set(completed.stdout.strip().splitlines()[-1].split(","))


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


def test_reading_a_policy_name_imports_no_scoring_code() -> None:
    loaded = _modules_after("from deermem.policy import POLICY_HYBRID_V1")
    assert "deermem.policy.names" in loaded
    assert {"deermem.policy.selection", "deermem.policy.capacity", "deermem.model.fact"}.isdisjoint(
        loaded
    )


def test_timestamp_helpers_import_no_fact_dataclasses() -> None:
    loaded = _modules_after("from deermem.model import format_timestamp, parse_timestamp")
    assert "deermem.model.timestamps" in loaded
    assert {"deermem.model.fact", "dataclasses"}.isdisjoint(loaded)
