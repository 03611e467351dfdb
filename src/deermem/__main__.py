"""``python -m deermem`` runs the command line."""

import sys

from deermem.cli import main

sys.exit(main())
