"""The import graph of ``src/deermem`` has no circles, type-only imports included.

Imports point down the layers (ARCHITECTURE §3), so no module may reach itself
through the imports that run when it is loaded: those at module level (class
bodies and ``try``/``if`` blocks included) and those under ``if
TYPE_CHECKING:``, which are circles for a reader and a type checker all the
same. Imports inside a function run when it is called, after every module is
loaded, and are not edges here.

``from package import name`` reads ``package`` (its ``__init__`` runs first),
so it is an edge to the package, and to ``package.name`` when that is a
module; ``import a.b`` and ``from a.b import name`` are edges to ``a.b``.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path

import deermem

SOURCE = Path(deermem.__file__).parent
PACKAGE = "deermem"


def module_names(source: Path = SOURCE) -> dict[str, Path]:
    """Every module of the package by its dotted name (a package by its ``__init__``)."""
    modules = {}
    for path in sorted(source.rglob("*.py")):
        parts = path.relative_to(source.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def _load_time_statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements that run when the module is loaded, nested blocks included."""
    for statement in body:
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        yield statement
        for field in ("body", "orelse", "finalbody"):
            nested = getattr(statement, field, None)
            if isinstance(nested, list):
                yield from _load_time_statements(nested)
        for handler in getattr(statement, "handlers", ()):
            yield from _load_time_statements(handler.body)
        for case in getattr(statement, "cases", ()):
            yield from _load_time_statements(case.body)


def imports_of(name: str, path: Path, modules: Mapping[str, Path]) -> set[str]:
    """The modules of the package that ``name`` imports when it is loaded."""
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    targets: set[str] = set()
    for statement in _load_time_statements(tree.body):
        if isinstance(statement, ast.Import):
            targets.update(alias.name for alias in statement.names)
        elif isinstance(statement, ast.ImportFrom):
            if statement.level:
                base = name.split(".")
                if not is_package:
                    base = base[:-1]
                base = base[: len(base) - statement.level + 1]
                origin = ".".join([*base, statement.module] if statement.module else base)
            else:
                origin = statement.module or ""
            targets.add(origin)
            targets.update(f"{origin}.{alias.name}" for alias in statement.names)
    return {target for target in targets if target in modules and target != name}


def import_graph(source: Path = SOURCE) -> dict[str, set[str]]:
    modules = module_names(source)
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def circles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def test_the_package_has_no_import_circle() -> None:
    graph = import_graph()
    assert len(graph) > 100  # the whole package was read
    assert circles(graph) == []


def test_a_circle_is_found_through_a_package_and_under_type_checking(tmp_path: Path) -> None:
    """The checker itself: the two shapes of circle this package had."""
    package = tmp_path / PACKAGE
    (package / "cli").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "cli" / "__init__.py").write_text("from deermem.cli.app import main\n")
    (package / "cli" / "app.py").write_text("from deermem.cli import facts\n\ndef main(): ...\n")
    (package / "cli" / "facts.py").write_text("")
    (package / "gate.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from deermem.changes import Change\n"
    )
    (package / "changes.py").write_text("from deermem.gate import Gate\n")
    (package / "store.py").write_text(
        "def load():\n    from deermem.loader import read\n"  # called later: no edge
    )
    (package / "loader.py").write_text("from deermem.store import load\n")
    assert circles(import_graph(package)) == [
        ["deermem.changes", "deermem.gate"],
        ["deermem.cli", "deermem.cli.app"],
    ]


def test_the_features_do_not_import_the_facade_or_the_interfaces() -> None:
    """learning, recall and library sit below Memory (docs/architecture.md): what they
    return is written beside them, and no import of theirs reaches up, type-only included."""
    graph = import_graph()
    features = ("deermem.learning", "deermem.recall", "deermem.library")
    above = (
        "deermem.memory",
        "deermem.cli",
        "deermem.service",
        "deermem.integrations",
        "deermem.eval",
    )
    upward = sorted(
        (module, target)
        for module, targets in graph.items()
        if module.startswith(features)
        for target in targets
        if target.startswith(above)
    )
    assert upward == []


def test_the_layers_are_a_contract_that_holds() -> None:
    """pyproject.toml states the layers of docs/architecture.md, and import-linter finds
    no import that points up (type-only imports included)."""
    pyproject = SOURCE.parent.parent / "pyproject.toml"
    config = tomllib.loads(pyproject.read_text("utf-8"))["tool"]["importlinter"]
    (contract,) = config["contracts"]
    assert contract["type"] == "layers"
    assert not config.get("exclude_type_checking_imports", False)
    assert contract["layers"][-3:] == ["config", "model", "errors"]
    # The command .ci/run runs, in its own process: its logging setup disables every logger
    # that exists when it starts (dictConfig), which would silence deermem's in this one.
    command = [str(Path(sys.executable).with_name("lint-imports")), "--no-cache", "--no-logo"]
    checked = subprocess.run(
        [*command, str(pyproject)], capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
