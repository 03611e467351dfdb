"""What the attack suite shares: the store under attack, and reading it past deermem.

``store`` is a :class:`~tests.served_store.ServedStore`: Markdown unless a test
asks for both kinds with ``on_both_stores``, so every attack that does not
depend on files runs against a PostgreSQL database too.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ..served_store import ServedStore


@pytest.fixture
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ServedStore]:
    with ServedStore.of_fixture(request, tmp_path) as served:
        yield served
