"""``deermem db``: the PostgreSQL store's schema — where it stands, and upgrading it."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer
from rich.markup import escape

from deermem.cli._context import CliContext
from deermem.cli._output import JSON_OPTION, out_console, print_json
from deermem.errors import ConfigError

if TYPE_CHECKING:
    from deermem.config import MemoryConfig

__all__ = ["app", "config_of"]

app = typer.Typer(help="The PostgreSQL store's schema: status and upgrade.", no_args_is_help=True)

_DATABASE_OPTION = typer.Option(
    None,
    "--database",
    metavar="URL",
    help="postgresql://… [default: the configuration's store, or $DEERMEM_DATABASE_URL].",
)


def config_of(ctx: typer.Context) -> MemoryConfig:
    """The configuration the global options (``--config``, the environment) name."""
    from deermem.config import load_config

    state = ctx.find_root().obj
    return load_config(state.config_file if isinstance(state, CliContext) else None)


def _database(ctx: typer.Context, database: str | None) -> str:
    url = database or config_of(ctx).store
    if not url:
        raise ConfigError(
            ["no database: pass --database, or set store (or $DEERMEM_DATABASE_URL) to a URL"]
        )
    return url


@app.command("upgrade")
def upgrade(
    ctx: typer.Context,
    database: str | None = _DATABASE_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Apply the migrations the database lacks, in one transaction.

    Run it once before the first start, and after upgrading deermem; every
    replica refuses a database that is behind. Safe to run from several
    places at once, and again: what is applied is not applied twice.

    Example: `deermem db upgrade --database postgresql://deermem@db/deermem`
    """
    from deermem.store.postgres.database import upgrade_database

    status = upgrade_database(_database(ctx, database))
    if as_json:
        print_json(status.to_dict())
        return
    applied = ", ".join(str(version) for version in status.applied)
    done = f"applied {applied}" if applied else "nothing to apply"
    out_console.print(f"{escape(status.database)}: schema version {status.found} ({done})")


@app.command("status")
def status(
    ctx: typer.Context,
    database: str | None = _DATABASE_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Show the database's schema version and the one this deermem needs.

    Exits with status 1 when they differ.

    Example: `deermem db status --json`
    """
    from deermem.store.postgres.database import database_status

    found = database_status(_database(ctx, database))
    if as_json:
        print_json(found.to_dict())
    else:
        version = "not migrated" if found.found is None else f"schema version {found.found}"
        note = "current" if found.found == found.expected else "run `deermem db upgrade`"
        if found.found is not None and found.found > found.expected:
            note = "newer than this deermem: upgrade deermem"
        out_console.print(
            f"{escape(found.database)}: {version}; this deermem needs {found.expected} ({note})"
        )
    if found.found != found.expected:
        raise typer.Exit(1)
