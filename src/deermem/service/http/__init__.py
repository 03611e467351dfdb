"""deermem as an HTTP API (``deermem serve``): FastAPI over one store, behind bearer tokens.

:func:`deermem.service.http.app.create_app` builds the application
(:mod:`~deermem.service.http.routes` its routes, :mod:`~deermem.service.http.jobs`
the queued extraction every worker can see, :mod:`~deermem.service.http.run`
the server). It needs the ``server`` extra (``uv sync --extra server``).
What it shares with the MCP server — tokens, problems, the middleware at the
door, settings — is in :mod:`deermem.service`.
"""
