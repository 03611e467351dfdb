"""Shared fixtures. Every test runs hermetically: no DEERMEM_*/OPENAI_* from the host."""

from __future__ import annotations

import os

import pytest

_HOST_PREFIXES = ("DEERMEM_", "OPENAI_", "LONGMEMEVAL_")


@pytest.fixture(autouse=True)
def clean_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    """Strip host settings that would change what deermem reads from the environment."""
    for name in list(os.environ):
        if name.startswith(_HOST_PREFIXES):
            monkeypatch.delenv(name)


pytest_plugins = ["tests.postgres_plugin", "tests.reference_plugin"]
