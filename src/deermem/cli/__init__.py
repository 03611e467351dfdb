"""The ``deermem`` command line: a thin shell over the library.

Each command parses its arguments, calls the library once, and renders the
result with rich (or as JSON with ``--json``). Nothing in the library imports
from here.
"""

from deermem.cli.app import app, main, run

__all__ = ["app", "main", "run"]
