"""The store a server under test runs on, and what that store holds, read past deermem.

The HTTP API and the MCP server are thin shells over ``Memory``, so what
they do must not depend on the store: their tests run on a Markdown
directory and on a PostgreSQL database (:data:`KINDS`). A
:class:`ServedStore` opens memories on one of them, tells a ``deermem``
process how to reach it (arguments and environment, as a user would), and
reads what it holds the way an operator would — the files, or the rows —
so a test checks the store itself rather than deermem's own reading of it.

The PostgreSQL address carries a password (the test server trusts every
login from 127.0.0.1, so any password works): the tests that look at logs,
``/v1/config`` and error messages check it never shows.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Final

import pytest

from deermem import Memory, MemoryConfig
from deermem.cli import main

__all__ = ["KINDS", "PASSWORD", "ServedStore", "files_under", "on_both_stores"]

KINDS: Final = ("markdown", "postgres")
PASSWORD: Final = "pw-7c1e5d"
DEFAULT_AGENT: Final = "__default__"

# A test's ``store`` fixture is Markdown unless the test asks for both kinds with this.
on_both_stores = pytest.mark.parametrize("store", KINDS, indirect=True)


def files_under(directory: Path) -> dict[str, bytes]:
    """Every file below ``directory`` and its bytes (to prove nothing changed)."""
    return {
        str(path.relative_to(directory)): path.read_bytes()
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    }


@dataclass
class ServedStore:
    """One store of one kind, in (or beside) the test's directory ``base``.

    Attributes:
        kind: ``markdown`` or ``postgres``.
        base: a directory of the test's own. The Markdown store is
            ``base/store``; the server's state directory is that store's
            default (``store/.server``) on Markdown and ``base/state`` on
            PostgreSQL, which has no directory of its own.
        url: the database (``postgres`` only), with a password.
    """

    kind: str
    base: Path
    url: str | None = None
    _opened: list[Memory] = field(default_factory=list, repr=False)

    @classmethod
    def make(
        cls,
        kind: str,
        base: Path,
        request: pytest.FixtureRequest,
        *,
        database: str = "postgres_url",
    ) -> ServedStore:
        """A store of ``kind``; on PostgreSQL the database of the fixture ``database``
        (``postgres_url``: the test's own; ``module_postgres_url``: the module's)."""
        if kind == "markdown":
            return cls(kind, base)
        return cls(kind, base, _with_password(str(request.getfixturevalue(database))))

    @classmethod
    def of_fixture(cls, request: pytest.FixtureRequest, base: Path) -> ServedStore:
        """The store of a ``store`` fixture: Markdown, or the kind :data:`on_both_stores` gives."""
        return cls.make(getattr(request, "param", "markdown"), base, request)

    def __post_init__(self) -> None:
        if self.kind == "markdown" and not self.root.exists():
            # As a user makes one: a server refuses a --root that holds no store.
            with contextlib.redirect_stdout(io.StringIO()):
                assert main(["--root", str(self.root), "init"]) == 0

    def __enter__(self) -> ServedStore:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def root(self) -> Path:
        """The Markdown store's directory, made by ``deermem init`` (on PostgreSQL: where it
        would be, never created)."""
        return self.base / "store"

    @property
    def state_dir(self) -> Path:
        return self.root / ".server" if self.kind == "markdown" else self.base / "state"

    @property
    def tokens_file(self) -> Path:
        return self.state_dir / "tokens.json"

    # --- opening it ------------------------------------------------------------------------

    def config(self, **settings: Any) -> MemoryConfig:
        """A configuration naming this store (a ``store`` URL on PostgreSQL)."""
        return MemoryConfig(**({"store": self.url} if self.url else {}), **settings)

    def unscoped(self, config: MemoryConfig) -> Memory:
        """A memory for many users, as a server opens it; closed by :meth:`close`."""
        memory = Memory.open_unscoped(self._root_argument(), config)
        self._opened.append(memory)
        return memory

    def memory(
        self,
        config: MemoryConfig,
        *,
        user: str | None,
        agent: str | None,
        clock: Callable[[], datetime] | None = None,
    ) -> Memory:
        """A memory of one scope; closed by :meth:`close`."""
        memory = Memory.open(self._root_argument(), config, user=user, agent=agent, clock=clock)
        self._opened.append(memory)
        return memory

    def close(self) -> None:
        """Close every memory opened here, and its store (a database's connection pool)."""
        for memory in self._opened:
            memory.close()
            close = getattr(memory.store, "close", None)
            if callable(close):
                close()
        self._opened.clear()

    def global_args(self) -> list[str]:
        """``deermem``'s global options that choose this store."""
        return ["--root", str(self.root)] if self.kind == "markdown" else []

    def server_args(self) -> list[str]:
        """``serve`` and ``mcp --transport http`` options: a state directory on PostgreSQL."""
        return [] if self.kind == "markdown" else ["--state-dir", str(self.state_dir)]

    def environ(self, base: Mapping[str, str]) -> dict[str, str]:
        """``base`` plus the variable that names the database, as a deployment sets it."""
        return {**base, **({"DEERMEM_DATABASE_URL": self.url} if self.url else {})}

    def _root_argument(self) -> Path | None:
        return self.root if self.kind == "markdown" else None

    # --- what it holds ---------------------------------------------------------------------

    def facts(self, user: str | None, agent: str | None = None) -> dict[str, str]:
        """The scope's active facts: id -> the stored text (a fact file, or a row's document)."""
        agent = agent or DEFAULT_AGENT
        if self.kind == "markdown":
            directory = self._user_dir(user) / "agents" / agent / "facts"
            return {path.stem: path.read_text("utf-8") for path in directory.rglob("*.md")}
        rows = self._rows(
            "SELECT fact_id, document FROM deermem_facts WHERE user_id = %s AND agent = %s",
            (user or "", agent),
        )
        return {str(fact_id): str(document) for fact_id, document in rows}

    def archived(self, user: str | None, agent: str | None = None) -> set[str]:
        """The ids of the scope's archived facts."""
        agent = agent or DEFAULT_AGENT
        if self.kind == "markdown":
            directory = self._user_dir(user) / "agents" / agent / ".metadata" / "archive"
            return {path.stem for path in directory.rglob("*") if path.is_file()}
        rows = self._rows(
            "SELECT fact_id FROM deermem_archive WHERE user_id = %s AND agent = %s",
            (user or "", agent),
        )
        return {str(fact_id) for (fact_id,) in rows}

    def holdings(self, user: str) -> dict[str, str]:
        """Everything stored for ``user`` (every agent), to prove nothing of it changed."""
        if self.kind == "markdown":
            return {
                name: data.decode("utf-8", "replace")
                for name, data in files_under(self._user_dir(user)).items()
            }
        held: dict[str, str] = {}
        for table in self._tables(per_user=True):
            rows = self._rows(f"SELECT t::text FROM {table} t WHERE user_id = %s", (user,))
            held[table] = "\n".join(sorted(str(row) for (row,) in rows))
        return held

    def everything(self) -> str:
        """All the store and the state directory hold, as text (to prove a value is nowhere)."""
        texts = [data.decode("utf-8", "replace") for data in files_under(self.base).values()]
        if self.kind == "postgres":
            for table in self._tables():
                texts += [str(row) for (row,) in self._rows(f"SELECT t::text FROM {table} t")]
        return "\n".join(texts)

    def _user_dir(self, user: str | None) -> Path:
        return self.root / "users" / user if user is not None else self.root

    def _tables(self, *, per_user: bool = False) -> list[str]:
        """deermem's tables (``per_user``: those whose rows carry a user id, not the
        database's own settings)."""
        rows = self._rows(
            "SELECT table_name FROM information_schema.tables "
            "WHERE table_schema = 'public' AND table_name LIKE 'deermem\\_%' "
            "AND table_name <> 'deermem_migrations' ORDER BY table_name"
        )
        tables = [str(name) for (name,) in rows]
        if per_user:
            with_users = self._rows(
                "SELECT table_name FROM information_schema.columns "
                "WHERE table_schema = 'public' AND column_name = 'user_id'"
            )
            tables = [table for table in tables if (table,) in with_users]
        return tables

    def _rows(
        self, query: str, parameters: tuple[object, ...] | None = None
    ) -> list[tuple[Any, ...]]:
        import psycopg

        assert self.url is not None
        with psycopg.connect(self.url) as connection:
            return list(connection.execute(query.encode(), parameters).fetchall())


def _with_password(url: str) -> str:
    scheme, _, rest = url.partition("://")
    user, _, host = rest.partition("@")
    return f"{scheme}://{user}:{PASSWORD}@{host}"
