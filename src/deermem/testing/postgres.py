"""A throwaway PostgreSQL server on 127.0.0.1, for tests and benchmarks.

:class:`TemporaryPostgres` runs the server binaries installed on the machine
(Debian's ``postgresql`` package: ``/usr/lib/postgresql/<version>/bin``, or
whatever ``initdb`` is on ``PATH``): ``initdb`` in a temporary directory,
``pg_ctl start`` on a free port of 127.0.0.1 (no Unix socket), and on
:meth:`~TemporaryPostgres.stop` the server stops and the directory goes::

    from deermem.store.postgres import PostgresStore
    from deermem.testing.postgres import TemporaryPostgres

    with TemporaryPostgres() as server:
        url = server.create_database("memory", migrated=True)
        store = PostgresStore(url)

The server refuses to run as root; run as root, the helper runs it as the
``postgres`` user (the one the Debian package creates) and hands the
directory to that user. Every login from 127.0.0.1 is trusted (``trust``),
which is what a test server on the loopback needs and nothing else should
use. ``fsync`` is off unless asked for: a crash of a test machine loses
nothing a test needs.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    import psycopg
    from psycopg.rows import TupleRow

__all__ = ["PostgresUnavailable", "TemporaryPostgres", "find_binaries"]

_SERVER_USER: Final = "postgres"
_SUPERUSER: Final = "deermem"


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL server can be started here (no binaries, no user to run it as)."""


def find_binaries(chosen: str | None = None) -> Path:
    """The directory of ``initdb`` and ``pg_ctl``.

    ``chosen`` (else ``$DEERMEM_POSTGRES_BINDIR``) if set — one installation
    among several — else ``PATH``, else Debian's
    ``/usr/lib/postgresql/<version>/bin``, newest version.

    Raises:
        PostgresUnavailable: none is installed (or not where it was said to be).
    """
    if chosen is None:
        chosen = os.environ.get("DEERMEM_POSTGRES_BINDIR", "").strip()
    if chosen:
        if not (Path(chosen) / "initdb").is_file():
            raise PostgresUnavailable(f"no initdb in DEERMEM_POSTGRES_BINDIR ({chosen})")
        return Path(chosen)
    on_path = shutil.which("initdb")
    if on_path is not None and shutil.which("pg_ctl") is not None:
        return Path(on_path).parent
    candidates = sorted(
        (path for path in Path("/usr/lib/postgresql").glob("*/bin") if (path / "initdb").is_file()),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
    )
    if not candidates:
        raise PostgresUnavailable(
            "no PostgreSQL server binaries (initdb, pg_ctl) on PATH or in /usr/lib/postgresql; "
            "install Debian's postgresql package"
        )
    return candidates[-1]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class TemporaryPostgres:
    """A PostgreSQL cluster of its own, started on construction; see the module docstring.

    Args:
        fsync: make the server flush to disk (off: faster, for tests).
        settings: more ``-c name=value`` server settings.
        bindir: where ``initdb`` and ``pg_ctl`` are (see :func:`find_binaries`).

    Raises:
        PostgresUnavailable: no binaries, or run as root without a ``postgres`` user.
        subprocess.CalledProcessError: ``initdb`` or ``pg_ctl`` failed (its output is in
            the error, and the server log in :attr:`log`).
    """

    def __init__(
        self,
        *,
        fsync: bool = False,
        settings: dict[str, str] | None = None,
        bindir: str | None = None,
    ) -> None:
        self.bindir = find_binaries(bindir)
        self._user: str | None = None
        if os.geteuid() == 0:
            try:
                pwd.getpwnam(_SERVER_USER)
            except KeyError:
                raise PostgresUnavailable(
                    "PostgreSQL refuses to run as root and there is no 'postgres' user to run it as"
                ) from None
            self._user = _SERVER_USER
        self.base = Path(tempfile.mkdtemp(prefix="deermem-postgres-"))
        self.data = self.base / "data"
        self.log = self.base / "server.log"
        self.port = _free_port()
        self._settings = {
            "listen_addresses": "127.0.0.1",
            "port": str(self.port),
            "unix_socket_directories": "''",
            "fsync": "on" if fsync else "off",
            "max_connections": "200",
            **(settings or {}),
        }
        self._running = False
        try:
            if self._user is not None:
                shutil.chown(self.base, self._user, self._user)
            self._run(
                "initdb",
                "-D",
                str(self.data),
                "-U",
                _SUPERUSER,
                "--auth=trust",
                "--encoding=UTF8",
                "--no-sync",
            )
            self.start()
        except BaseException:
            self.stop()
            raise

    def url(self, database: str = "postgres", *, user: str = _SUPERUSER) -> str:
        """The address of a database of this server."""
        return f"postgresql://{user}@127.0.0.1:{self.port}/{database}"

    def start(self) -> None:
        """Start the server (again) and wait until it takes connections."""
        options = " ".join(f"-c {name}={value}" for name, value in self._settings.items())
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options, "-w", "start")
        self._running = True

    def require_password(self, role: str) -> None:
        """Make ``role`` log in with its password (``scram-sha-256``); other roles are trusted."""
        hba = self.data / "pg_hba.conf"
        line = f"host all {role} 127.0.0.1/32 scram-sha-256\n"
        text = hba.read_text("utf-8")
        if line not in text:
            hba.write_text(line + text, "utf-8")
            self._run("pg_ctl", "-D", str(self.data), "reload")

    def restart(self) -> None:
        """Stop the server (closing every connection) and start it again on the same port."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")
        self._running = False
        self.start()

    def _admin(self) -> psycopg.Connection[TupleRow]:
        """A connection to the server's own database, to create and drop databases."""
        import psycopg  # the postgres extra: only a test that creates databases needs it

        return psycopg.connect(self.url(), autocommit=True)

    def create_database(self, name: str, *, migrated: bool = False, template: str = "") -> str:
        """Create a database; return its address.

        Args:
            name: the new database (letters, digits, ``_``).
            migrated: apply deermem's migrations to it (needs the ``postgres`` extra).
            template: copy this database instead of starting empty.
        """
        with self._admin() as admin:
            copy = f" TEMPLATE {template}" if template else ""
            admin.execute(f"CREATE DATABASE {name}{copy}".encode())
        url = self.url(name)
        if migrated:  # the postgres extra, as above
            from deermem.store.postgres.database import connect, upgrade

            with connect(url, url, timeout=10) as connection:
                upgrade(connection, url)
        return url

    def drop_database(self, name: str) -> None:
        """Drop a database, closing the connections to it."""
        with self._admin() as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)".encode())

    def stop(self) -> None:
        """Stop the server and remove its directory (safe to call twice)."""
        if self._running:
            self._running = False
            with contextlib.suppress(subprocess.CalledProcessError):
                self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.base, ignore_errors=True)

    def __enter__(self) -> TemporaryPostgres:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()

    def _run(self, program: str, *arguments: str) -> None:
        subprocess.run(
            [str(self.bindir / program), *arguments],
            check=True,
            capture_output=True,
            text=True,
            user=self._user,
            group=self._user,
            extra_groups=[] if self._user is not None else None,
            cwd=self.base,
        )
