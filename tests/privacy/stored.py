"""Everything a store holds, read past deermem: every file under a root, every row of a database.

The privacy tests ask "is this text anywhere?" of the store as a whole, not
of what deermem chooses to read back: a secret or an erased user's words in
a temporary file, a journal, a search index page or a table nobody queries
would be missed by any API.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from deermem.testing.postgres import find_binaries


def files_text(root: Path) -> str:
    """Every file under ``root`` (index pages, journals, temporary files included), decoded."""
    parts = []
    for path in sorted(root.rglob("*")):
        if path.is_file():
            parts.append(f"\n=== {path.relative_to(root)}\n")
            parts.append(path.read_bytes().decode("utf-8", "replace"))
    return "".join(parts)


def database_text(url: str) -> str:
    """Every row of every table of the database's public schema as text, then its ``pg_dump``."""
    import psycopg

    parts = []
    with psycopg.connect(url, autocommit=True) as connection:
        tables = [
            row[0]
            for row in connection.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename"
            )
        ]
        for table in tables:
            parts.append(f"\n=== {table}\n")
            rows = connection.execute(f'SELECT t::text FROM "{table}" AS t').fetchall()
            parts.extend(row[0] + "\n" for row in rows)
    dump = subprocess.run(
        [str(_pg_dump()), "--data-only", "--inserts", url],
        check=True,
        capture_output=True,
        text=True,
    )
    parts.append("\n=== pg_dump\n" + dump.stdout)
    return "".join(parts)


def _pg_dump() -> Path:
    found = find_binaries() / "pg_dump"
    return found if found.is_file() else Path("pg_dump")


def store_text(kind: str, root: Path, url: str | None) -> str:
    """All a store of ``kind`` holds (see :func:`files_text` and :func:`database_text`)."""
    if kind == "markdown":
        return files_text(root)
    assert url is not None
    return database_text(url)
