"""The ``deermem`` console script: route ``eval`` before the typer stack is imported.

Importing typer and rich costs a few tenths of a second on a small machine —
as much as ``deermem eval validate`` needs for all its work on a 15 MB file.
So the console script (and ``python -m deermem``) land here, and
``deermem eval ...`` goes straight to the lightweight evaluation command line;
every other command goes to the typer application in :mod:`deermem.cli`,
which also lists ``eval`` in ``deermem --help`` and forwards it when called
directly.
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
    from deermem.cli import main as cli_main

    return cli_main(arguments)
