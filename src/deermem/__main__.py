"""``python -m deermem`` runs the command line."""

import sys

from deermem._console import main

sys.exit(main())
