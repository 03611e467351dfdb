"""The global options (``--root``, ``--config``, ``--user``, ``--agent``) and the memory they open.

The root command stores the options in a :class:`CliContext`; commands that
need the memory call :func:`memory_of`, which loads the configuration and
opens the store once, on first use — so ``deermem --help`` or ``deermem
demo`` never touch a store.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import typer

from deermem.config import load_config
from deermem.memory import Memory

__all__ = ["CliContext", "memory_of"]


@dataclass
class CliContext:
    """What the root command's options say, and the memory once opened."""

    root: Path | None = None
    config_file: Path | None = None
    user: str | None = None
    agent: str | None = None
    _memory: Memory | None = field(default=None, repr=False)

    def memory(self) -> Memory:
        if self._memory is None:
            config = load_config(self.config_file)
            self._memory = Memory.open(self.root, config, user=self.user, agent=self.agent)
        return self._memory


def memory_of(ctx: typer.Context) -> Memory:
    """The memory selected by the global options of this invocation."""
    state = ctx.find_root().obj
    if not isinstance(state, CliContext):  # a sub-app run on its own (tests)
        state = CliContext()
        ctx.find_root().obj = state
    return state.memory()
