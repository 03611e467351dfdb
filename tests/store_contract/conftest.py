"""One contract, two stores: every test here runs on the Markdown store and on PostgreSQL.

``stores`` opens stores of the kind under test. Every store it opens holds
the same memory — a second instance stands for a second process (Markdown)
or a second replica (PostgreSQL) — and is closed after the test.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from deermem import Memory, MemoryConfig
from deermem.model import Scope
from deermem.store import MarkdownStore, Store


class Stores:
    """Opens stores (and memories on them) of one kind, all on the same data."""

    def __init__(self, kind: str, root: Path, url: str | None) -> None:
        self.kind = kind
        self.root = root
        self.url = url
        self._opened: list[Any] = []

    def __call__(self, config: MemoryConfig | None = None) -> Store:
        config = config or MemoryConfig()
        if self.kind == "markdown":
            return MarkdownStore.from_config(config, self.root)
        from deermem.store.postgres import PostgresStore

        assert self.url is not None
        store = PostgresStore.from_config(config, self.url)
        self._opened.append(store)
        return store

    def memory(
        self,
        config: MemoryConfig | None = None,
        *,
        user: str | None = "alice",
        agent: str | None = None,
        clock: Callable[[], datetime] | None = None,
        id_factory: Callable[[], str] | None = None,
    ) -> Memory:
        config = config or MemoryConfig()
        scope = Scope.of(user, agent)
        return Memory(self(config), config, scope, clock=clock, id_factory=id_factory)

    def close(self) -> None:
        for store in self._opened:
            store.close()


@pytest.fixture(params=["markdown", "postgres"])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stores]:
    url = request.getfixturevalue("postgres_url") if request.param == "postgres" else None
    opened = Stores(request.param, tmp_path / "store", url)
    try:
        yield opened
    finally:
        opened.close()
