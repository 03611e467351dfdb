"""The global options (``--root``, ``--config``, ``--user``, ``--agent``) and what they open.

The root command stores the options in a :class:`CliContext`. Commands that
need the memory call :func:`memory_of`, which works out the store root,
reads the configuration — the defaults, the store's own settings file,
``--config``, the environment (:func:`deermem.config.resolve_config`) — and
opens the store once, on first use, so ``deermem --help`` or ``deermem
demo`` never touch a store. A command that only reads passes
``existing=True``: a root that does not exist is then an error, not an empty
memory that hides a mistyped path.

The configuration, the store and :class:`~deermem.memory.Memory` are imported
where they are first needed, not with this module: every command goes through
the root command, and the ones that open no memory (``deermem eval ...``,
``deermem token ...``, ``--help``) should not wait for pydantic and the store.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from deermem.cli._output import fail

if TYPE_CHECKING:
    from deermem.config import ResolvedConfig
    from deermem.memory import Memory

__all__ = ["CliContext", "cli_context", "memory_of"]


@dataclass
class CliContext:
    """What the root command's options say, and what they resolved to once asked."""

    root: Path | None = None
    config_file: Path | None = None
    user: str | None = None
    agent: str | None = None
    _explicit_settings: ResolvedConfig | None = field(default=None, repr=False)
    _settings: ResolvedConfig | None = field(default=None, repr=False)
    _root_dir: Path | None = field(default=None, repr=False)
    _memory: Memory | None = field(default=None, repr=False)

    def _explicit(self) -> ResolvedConfig:
        """The configuration from ``--config``, the environment and defaults: no store's file."""
        if self._explicit_settings is None:
            from deermem.config import resolve_config

            self._explicit_settings = resolve_config(self.config_file)
        return self._explicit_settings

    def uses_database(self) -> bool:
        """Whether the configuration names a database (``store``) and no ``--root`` is given."""
        return self.root is None and bool(self._explicit().config.store)

    def store_root(self) -> Path:
        """``--root``, else ``storage_path`` (file, environment), else ``$DEERMEM_DATA_DIR``,
        else ``~/.deermem``."""
        if self._root_dir is None:
            if self.root is not None:
                self._root_dir = self.root
            else:
                from deermem.store import resolve_root

                self._root_dir = resolve_root(self._explicit().config.storage_path)
        return self._root_dir

    def root_origin(self) -> str:
        """Which option or setting chose the store root, for messages."""
        if self.root is not None:
            return "--root"
        if self._explicit().config.storage_path:
            return "storage_path"
        return "$DEERMEM_DATA_DIR" if os.environ.get("DEERMEM_DATA_DIR", "").strip() else "default"

    def settings(self) -> ResolvedConfig:
        """The effective configuration and where each value came from.

        A Markdown store's own settings file counts; a database keeps none.
        """
        if self._settings is None:
            if self.uses_database():
                self._settings = self._explicit()
            else:
                from deermem.config import resolve_config

                self._settings = resolve_config(self.config_file, root=self.store_root())
        return self._settings

    def memory(self, *, existing: bool = False) -> Memory:
        database = self.uses_database()
        if existing and not database and not self.store_root().exists():
            fail(
                f"no store at {self.store_root()} (from {self.root_origin()}): the directory "
                "does not exist; check the path, or create the store with `deermem init`"
            )
        if self._memory is None:
            from deermem.memory import Memory

            self._memory = Memory.open(
                None if database else self.store_root(),
                self.settings().config,
                user=self.user,
                agent=self.agent,
            )
        return self._memory

    def close(self) -> None:
        """Release the store's connections (a database's pool; a Markdown store holds none).

        Registered when the memory is first opened, to run as the invocation ends:
        a command run in-process (tests, a host embedding the CLI) leaves no pool
        behind to be torn down by whichever thread the collector happens to run on.
        """
        if self._memory is not None:
            close = getattr(self._memory.store, "close", None)
            if callable(close):
                close()


def cli_context(ctx: typer.Context) -> CliContext:
    """The global options of this invocation (defaults for a sub-app run on its own)."""
    state = ctx.find_root().obj
    if not isinstance(state, CliContext):  # a sub-app run on its own (tests)
        state = CliContext()
        ctx.find_root().obj = state
    return state


def memory_of(ctx: typer.Context, *, existing: bool = False) -> Memory:
    """The memory selected by the global options of this invocation.

    Args:
        ctx: the command's context.
        existing: the command only reads: a store root that does not exist is
            an error (exit status 1), not an empty memory.
    """
    state = cli_context(ctx)
    opening = state._memory is None
    memory = state.memory(existing=existing)
    if opening:
        ctx.find_root().call_on_close(state.close)
    return memory
