"""The inspector: a web UI at ``/ui/`` of ``deermem serve`` (see docs/inspector.md).

:mod:`~deermem.service.ui.inspector` holds the pages, sessions and CSRF
checks; :mod:`~deermem.service.ui.chart` draws the regret chart as SVG.
Templates and the style sheet ship inside the package: no asset comes from
anywhere but the server.
"""

from deermem.service.ui.inspector import UI_PREFIX, Inspector, SessionStore, inspector_router

__all__ = ["UI_PREFIX", "Inspector", "SessionStore", "inspector_router"]
