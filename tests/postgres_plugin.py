"""The PostgreSQL server the tests start: one per session, a fresh database per test.

The server is started on first use (:class:`~deermem.testing.postgres.TemporaryPostgres`:
``initdb`` in a temporary directory, 127.0.0.1 and a free port) and stopped
after the session. Each test gets a database of its own, copied from a
migrated template, and dropped afterwards.

Without PostgreSQL on the machine the tests that need it are skipped, and
the session says so once, in one line at the end; with
``DEERMEM_REQUIRE_POSTGRES=1`` (CI) a missing server fails them instead.
``DEERMEM_POSTGRES_BINDIR`` picks the server binaries (default: ``PATH``, then
Debian's newest).
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Iterator

import pytest

from deermem.testing.postgres import PostgresUnavailable, TemporaryPostgres

# Read once, before the tests' own fixture strips DEERMEM_* from the environment.
_REQUIRED = os.environ.get("DEERMEM_REQUIRE_POSTGRES", "") not in ("", "0")
_BINDIR = os.environ.get("DEERMEM_POSTGRES_BINDIR", "")
_TEMPLATE = "deermem_template"
_skipped: dict[str, int] = {}
_numbers = itertools.count(1)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[TemporaryPostgres]:
    """The session's server (skips, or fails under DEERMEM_REQUIRE_POSTGRES=1, without one)."""
    try:
        import psycopg  # noqa: F401 - the extra must be installed
    except ModuleNotFoundError as error:
        reason = f"the postgres extra is not installed ({error})"
        server = None
    else:
        try:
            server = TemporaryPostgres(bindir=_BINDIR)
            reason = ""
        except PostgresUnavailable as error:
            server, reason = None, str(error)
    if server is None:
        if _REQUIRED:
            pytest.fail(f"PostgreSQL is required (DEERMEM_REQUIRE_POSTGRES=1): {reason}")
        _skipped[reason] = 0
        pytest.skip(reason)
    try:
        server.create_database(_TEMPLATE, migrated=True)
        yield server
    finally:
        server.stop()


@pytest.fixture
def postgres_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A migrated database of this test's own."""
    server = _server(request)
    name = f"test_{next(_numbers)}"
    url = server.create_database(name, template=_TEMPLATE)
    try:
        yield url
    finally:
        server.drop_database(name)


@pytest.fixture(scope="module")
def module_postgres_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A migrated database shared by one module's tests (a server the module starts once)."""
    server = _server(request)
    name = f"module_{next(_numbers)}"
    url = server.create_database(name, template=_TEMPLATE)
    try:
        yield url
    finally:
        server.drop_database(name)


@pytest.fixture
def empty_postgres_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A database of this test's own that was never migrated."""
    server = _server(request)
    name = f"empty_{next(_numbers)}"
    url = server.create_database(name)
    try:
        yield url
    finally:
        server.drop_database(name)


def _server(request: pytest.FixtureRequest) -> TemporaryPostgres:
    try:
        server: TemporaryPostgres = request.getfixturevalue("postgres_server")
    except pytest.skip.Exception:
        for reason in _skipped:
            _skipped[reason] += 1
        raise
    return server


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for reason, count in _skipped.items():
        terminalreporter.write_line(
            f"postgres: {count or 'the'} PostgreSQL test(s) skipped: {reason} "
            "(set DEERMEM_REQUIRE_POSTGRES=1 to make this a failure)",
            yellow=True,
        )


def client_connections(url: str, *, settle: float = 0.0) -> int:
    """The client connections to ``url``'s database, this probe's left out.

    With ``settle``, waits up to that many seconds for the count to reach 0 and
    returns the last count: a server process leaves ``pg_stat_activity`` a moment
    after its client closed the connection, so a count taken at once may still
    hold one that is closing. A connection left open stays counted.
    """
    import psycopg  # the postgres extra: a test given postgres_url has it

    deadline = time.monotonic() + settle
    while True:
        with psycopg.connect(url) as probe:
            row = probe.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
            ).fetchone()
        count = 0 if row is None else int(row[0])
        if count == 0 or time.monotonic() >= deadline:
            return count
        time.sleep(0.05)
