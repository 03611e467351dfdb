"""``python -m deermem`` runs the command line."""

from deermem.cli import run

if __name__ == "__main__":
    run()
