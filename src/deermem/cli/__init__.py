"""The ``deermem`` command line: a thin shell over the library.

Each command parses its arguments, calls the library once, and renders the
result with rich (or as JSON with ``--json``). Nothing in the library imports
from here.

Importing this package is cheap: :func:`main` decides which command line to
load, so ``deermem eval ...`` runs without importing typer (see
:mod:`deermem.cli._entry`). ``app``, the typer application, is loaded on first
access.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from deermem.cli._entry import main

if TYPE_CHECKING:
    from deermem.cli.app import app

__all__ = ["app", "main"]


def __getattr__(name: str) -> Any:
    if name == "app":
        from deermem.cli.app import app

        return app
    raise AttributeError(f"module 'deermem.cli' has no attribute {name!r}")
