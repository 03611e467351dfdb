"""The ``deermem`` console script: route ``eval`` before the typer stack is imported.

Importing typer and rich costs a few tenths of a second on a small machine —
as much as ``deermem eval validate`` needs for all its work on a 15 MB file.
So the console script (and ``python -m deermem``) land here, and
``deermem eval ...`` goes straight to the lightweight evaluation command line;
every other command goes to the typer application in :mod:`deermem.cli`,
which also lists ``eval`` in ``deermem --help`` and forwards it when called
directly.

The evaluation commands also start with CPython's cyclic garbage collector
paused (:class:`deermem.evaluation.cli.CyclicCollector`): importing their modules
and parsing the dataset allocate some 100,000 containers, none of them in a
reference cycle, and the collector would walk each of them at least once for
nothing — a tenth of ``validate``'s time.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``deermem`` command line and return its exit status."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments and arguments[0] == "eval":
        enabled = gc.isenabled()
        gc.disable()  # for the imports too; the command line decides for the run itself
        try:
            from deermem.evaluation.cli import main as eval_main

            return eval_main(arguments[1:])
        finally:
            if enabled:
                gc.enable()
    from deermem.cli import main as cli_main

    return cli_main(arguments)
