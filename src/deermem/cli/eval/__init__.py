"""``deermem eval``: the evaluation's command line, a typer sub-app mounted on ``deermem``."""
