"""The ``deermem`` entry point: route ``eval`` before the typer stack is imported.

Importing typer and rich costs a few tenths of a second on a small machine —
more than ``deermem eval validate`` needs for all its work. So the console
script lands here, and ``deermem eval ...`` goes straight to the lightweight
evaluation command line; every other command goes to the typer application.
``deermem --help`` still lists ``eval`` (it is registered there too).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``deermem`` command line and return its exit status."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments and arguments[0] == "eval":
        from deermem.evaluation.cli import main as eval_main

        return eval_main(arguments[1:])
    from deermem.cli.app import main as app_main

    return app_main(arguments)
