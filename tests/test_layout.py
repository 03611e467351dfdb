"""The layout of issue 21 ("one house") for the core and the store, read from the files.

Each idea lives in one place: the configuration and the data model are one
module each, the store keeps one durable writer, and the twins the issue
named dead stay gone.
"""

from __future__ import annotations

import ast
from pathlib import Path

import deermem
import deermem.config
import deermem.model
from deermem.store import MarkdownStore, Store, StoreTransaction
from deermem.store.postgres.store import PostgresStore, PostgresTransaction

SOURCE = Path(deermem.__file__).parent

# The writers allowed to create temporary files: the store's one durable writer,
# and the evaluation's, until its owner switches it to the store's (issue 21).
WRITERS = {"store/markdown/files.py", "eval/files.py"}


def _modules(package: str) -> list[Path]:
    return sorted((SOURCE / package).rglob("*.py"))


def test_the_core_is_one_module_per_idea() -> None:
    assert Path(deermem.config.__file__).name == "config.py"
    assert Path(deermem.model.__file__).name == "model.py"
    assert not (SOURCE / "config").exists()
    assert not (SOURCE / "model").exists()


def test_the_core_packages_have_few_rooms() -> None:
    """Issue 21: ~74 modules in the core and store packages before, about 35 after."""
    counted = [*_modules("store"), *_modules("llm"), *_modules("testing")]
    assert len(counted) <= 25, [str(path.relative_to(SOURCE)) for path in counted]


def test_one_module_creates_temporary_files() -> None:
    found = set()
    for path in SOURCE.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            called = node.func if isinstance(node, ast.Call) else None
            name = getattr(called, "attr", getattr(called, "id", None))
            if name in {"mkstemp", "NamedTemporaryFile", "write_temporary"} and isinstance(
                called, ast.Attribute | ast.Name
            ):
                found.add(str(path.relative_to(SOURCE)))
    assert found <= WRITERS


def test_the_dead_twins_stay_gone() -> None:
    for kind in (Store, StoreTransaction, MarkdownStore, PostgresStore, PostgresTransaction):
        assert not hasattr(kind, "records_regret"), kind  # both stores record regret
    assert "watermark_max_keys" not in deermem.config.MemoryConfig.model_fields
    assert "__getattr__" not in vars(deermem)  # no lazy-export table
    assert not (SOURCE / "store" / "duplicates.py").exists()  # deermem.model.duplicate_key
