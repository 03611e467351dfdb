"""``deermem serve``: check the settings, then hand the application to uvicorn.

The check that matters runs here, before a socket is opened: a server that
would listen beyond loopback while tokens are not in use (no tokens file) refuses to
start (:class:`~deermem.service.errors.InsecureBindError`). The tokens file is read once
too, so a damaged one stops start-up instead of the first request, and the
store is opened once, so a database that cannot be reached or is not
migrated is one line for the user instead of a traceback from every worker.

Logging: one format for every line — deermem's loggers and uvicorn's —
with the request id (``-`` outside a request); uvicorn's own access log is
off, because its line holds the raw path and query (user ids, search text);
:class:`~deermem.service.http.request_ids.RequestIdMiddleware` writes a route
template instead.
"""

from __future__ import annotations

import os
from typing import Any, Final

from deermem.config import MemoryConfig
from deermem.service.errors import InsecureBindError
from deermem.service.http.context import close_store
from deermem.service.http.settings import SETTINGS_VARIABLE, ServerSettings, is_loopback
from deermem.service.http.tokens import TokenFile
from deermem.store import open_store

__all__ = ["LOG_FORMAT", "check_startup", "check_store", "log_config", "serve"]

LOG_FORMAT: Final = "%(asctime)s %(levelname)s %(name)s request_id=%(request_id)s %(message)s"
_FACTORY: Final = "deermem.service.http.app:app_from_environment"


def check_startup(settings: ServerSettings) -> TokenFile:
    """Refuse settings that would expose memories; return the tokens file.

    Raises:
        InsecureBindError: a non-loopback host and tokens not in use (no tokens file).
        TokenFileError: the tokens file cannot be read.
        ConfigError: the configuration is invalid, or the store is a
            database and neither a state directory nor a tokens file is given.
    """
    config = settings.load_config()
    tokens = TokenFile(settings.tokens_path(config))
    if not tokens.configured() and not is_loopback(settings.host):
        raise InsecureBindError(settings.host)
    return tokens


def log_config(level: str) -> dict[str, Any]:
    """A :func:`logging.config.dictConfig` for uvicorn and deermem: one format, request ids."""
    level = level.upper()
    handler = {
        "class": "logging.StreamHandler",
        "formatter": "plain",
        "filters": ["request_id"],
        "stream": "ext://sys.stderr",
    }
    quiet = {"handlers": ["stderr"], "level": level, "propagate": False}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"request_id": {"()": "deermem.service.http.request_ids.RequestIdFilter"}},
        "formatters": {"plain": {"format": LOG_FORMAT}},
        "handlers": {"stderr": handler},
        "loggers": {
            "uvicorn": quiet,
            "uvicorn.error": {"level": level},
            "uvicorn.access": {"handlers": [], "level": "WARNING", "propagate": False},
            "deermem": quiet,
        },
    }


def check_store(settings: ServerSettings, config: MemoryConfig) -> None:
    """Open the store once and find the state directory, as every worker will.

    Raises:
        ConfigError: no state directory (a database store), or both a root
            and a database.
        DatabaseError / DatabaseSchemaError: the database cannot be used.
    """
    settings.state_path(config)
    close_store(open_store(config, settings.root))


def serve(settings: ServerSettings) -> None:
    """Run the server until interrupted (blocks).

    Raises:
        InsecureBindError / TokenFileError / ConfigError: see :func:`check_startup`.
        DatabaseError / DatabaseSchemaError: see :func:`check_store`.
    """
    import uvicorn

    from deermem.service.http.tcp import ServerHTTPProtocol

    check_startup(settings)
    check_store(settings, settings.load_config())
    # Workers are fresh processes: they read the settings from the environment.
    os.environ[SETTINGS_VARIABLE] = settings.to_json()
    uvicorn.run(
        _FACTORY,
        factory=True,
        host=settings.host,
        port=settings.port,
        workers=settings.workers,
        http=ServerHTTPProtocol,
        log_config=log_config(settings.log_level),
        log_level=settings.log_level,
        access_log=False,
        server_header=False,
        proxy_headers=False,
    )
