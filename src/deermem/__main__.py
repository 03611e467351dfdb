"""``python -m deermem`` runs the command line."""

from deermem._console import run

run()
