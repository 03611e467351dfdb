"""A pytest plugin for DeerFlow's own test suite: deermem selected by dotted path.

Loaded with ``-p deermem_selected`` (this directory on ``PYTHONPATH``) by
``scripts/check-deerflow.sh``. Before any test runs it makes deermem the
process's configured memory backend — ``manager_class:
deermem.integrations.deerflow.DeerMemManager``, as a user's ``config.yaml``
would — so every DeerFlow test that builds the backend from the configuration
builds deermem. Tests that configure or mock their own backend are
unaffected, and that is the point: they must keep passing with deermem
installed and selected.

It also records which tests actually built a deermem backend, and prints
them (and writes them as JSON to ``$DEERMEM_CHECK_REPORT`` when set): most of
DeerFlow's memory tests exercise DeerFlow's own classes or a mock, and the
report says so rather than letting a pass suggest otherwise.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

DOTTED = "deermem.integrations.deerflow.DeerMemManager"

_current: list[str] = [""]
_built: dict[str, int] = {}


def pytest_configure(config: pytest.Config) -> None:
    from deerflow.config.memory_config import MemoryConfig, set_memory_config

    from deermem.integrations.deerflow.backend import DeerFlowBackend

    storage = tempfile.mkdtemp(prefix="deermem-selected-")
    set_memory_config(MemoryConfig(manager_class=DOTTED, backend_config={"storage_path": storage}))

    original = DeerFlowBackend.__init__

    def recording_init(self: DeerFlowBackend, *args: Any, **kwargs: Any) -> None:
        _built[_current[0]] = _built.get(_current[0], 0) + 1
        original(self, *args, **kwargs)

    DeerFlowBackend.__init__ = recording_init  # type: ignore[method-assign]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, None, None]:
    _current[0] = item.nodeid
    yield
    _current[0] = ""


def pytest_terminal_summary(terminalreporter: Any) -> None:
    terminalreporter.section("deermem selected by dotted path")
    terminalreporter.write_line(f"manager_class: {DOTTED}")
    terminalreporter.write_line(f"tests that built a deermem backend: {len(_built)}")
    for nodeid in sorted(_built):
        terminalreporter.write_line(f"  {nodeid or '(outside a test)'}")
    report = os.environ.get("DEERMEM_CHECK_REPORT")
    if report:
        found = {"manager_class": DOTTED, "built_deermem": sorted(_built)}
        Path(report).write_text(json.dumps(found, indent=2) + "\n", "utf-8")
