"""deermem's own start-up never imports a host: each binding imports its host when imported."""

from __future__ import annotations

import ast
import subprocess
import sys

HOSTS = ("langgraph", "langchain", "langchain_core", "langmem", "anthropic", "mem0")


def test_deermem_and_its_interfaces_import_no_host() -> None:
    probe = (
        "import sys, deermem, deermem.memory, deermem.integrations, deermem.cli, "
        "deermem.integrations.deerflow\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {HOSTS!r}))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_each_binding_imports_only_its_host() -> None:
    for binding, host in [
        ("deermem.integrations.langgraph", "langgraph"),
        ("deermem.integrations.langchain", "langchain"),
        ("deermem.integrations.anthropic", "anthropic"),
    ]:
        probe = (
            f"import sys, {binding}\n"
            f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({HOSTS!r})))"
        )
        done = subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, check=True
        )
        loaded = set(ast.literal_eval(done.stdout))
        assert host in loaded
        assert not loaded & {"anthropic", "mem0", "langmem"} - {host}, (binding, loaded)
