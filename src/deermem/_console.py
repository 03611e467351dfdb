"""The ``deermem`` console script: route ``eval`` before the typer stack is imported.

Importing typer and rich costs a few tenths of a second on a small machine —
as much as ``deermem eval validate`` needs for all its work on a 15 MB file.
So the console script (and ``python -m deermem``) land here, and
``deermem eval ...`` goes straight to the lightweight evaluation command line;
every other command goes to the typer application in :mod:`deermem.cli`,
which also lists ``eval`` in ``deermem --help`` and forwards it when called
directly.

The batch evaluation commands (every one but ``run-qa``) also start with
CPython's cyclic garbage collector paused
(:class:`deermem.evaluation.cli.CyclicCollector`) — importing their modules
and parsing the dataset allocate some 100,000 containers, none of them in a
reference cycle — and, run as a program, end without the interpreter's
teardown (:func:`run`). Together that is 40-60 ms, a sixth of what ``validate``
took before.
"""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

__all__ = ["main", "run"]


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


def run() -> NoReturn:
    """The program: the console script and ``python -m deermem``. Never returns.

    After a batch evaluation command the process ends at once
    (:func:`os._exit`) once standard output and error are flushed. The
    interpreter's teardown — a last garbage collection over every object,
    then freeing every module and the parsed dataset piece by piece — takes
    20-30 ms, a tenth of ``validate``, and does nothing such a command needs:
    its files are written, synced and closed before it returns, and it
    starts no thread and registers no exit handler. Every other command
    (and any command that raised) exits the ordinary way.
    """
    arguments = sys.argv[1:]
    code = main(arguments)
    if _is_batch_evaluation(arguments) and _flushed():
        os._exit(code)
    sys.exit(code)


def _is_batch_evaluation(arguments: Sequence[str]) -> bool:
    if len(arguments) < 2 or arguments[0] != "eval":
        return False
    from deermem.evaluation.cli import COMMANDS  # imported already: the command just ran

    return any(command.name == arguments[1] and command.batch for command in COMMANDS)


def _flushed() -> bool:
    """Flush stdout and stderr; False if that fails (the ordinary exit reports it)."""
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):
        return False
    return True
