"""Database addresses in the configuration: recognised, and printable without the password.

The ``store`` setting holds a PostgreSQL URL (``postgresql://user:password@host:5432/db``).
A URL is a credential when it holds a password, so every place that shows
one — ``deermem config check``, configuration errors, logs, reprs, error
messages — shows :func:`redact_database_url`'s form instead, which keeps
everything but the password (and ``sslpassword``) so a person can still tell
which database is meant.
"""

from __future__ import annotations

from typing import Final
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

__all__ = ["DATABASE_URL_SCHEMES", "REDACTED", "is_database_url", "redact_database_url"]

DATABASE_URL_SCHEMES: Final = ("postgresql://", "postgres://")
REDACTED: Final = "***"
_SECRET_PARAMETERS: Final = frozenset({"password", "sslpassword"})


def is_database_url(value: str) -> bool:
    """Whether ``value`` names a PostgreSQL database (``postgresql://`` or ``postgres://``)."""
    return value.strip().lower().startswith(DATABASE_URL_SCHEMES)


def redact_database_url(url: str) -> str:
    """The URL with its password replaced by ``***`` (in the user part and the query).

    A URL that cannot be taken apart is hidden whole: showing it could show
    the password.
    """
    try:
        parts = urlsplit(url.strip())
        netloc = parts.netloc
        if "@" in netloc:
            userinfo, _, hosts = netloc.rpartition("@")
            user, colon, _password = userinfo.partition(":")
            netloc = f"{user}:{REDACTED}@{hosts}" if colon else f"{user}@{hosts}"
        query = parts.query
        if query:
            pairs = parse_qsl(query, keep_blank_values=True)
            if any(key in _SECRET_PARAMETERS for key, _ in pairs):
                redacted = [(k, REDACTED if k in _SECRET_PARAMETERS else v) for k, v in pairs]
                query = urlencode(redacted, safe="*")
        return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
    except ValueError:
        scheme = url.strip().partition("://")[0] or "postgresql"
        return f"{scheme}://(address hidden: it cannot be parsed)"
