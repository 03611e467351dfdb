"""The root ``deermem`` command and the entry point that runs it."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

import typer

from deermem import __version__
from deermem.cli._context import CliContext
from deermem.cli._output import print_error
from deermem.cli._typer import CONTEXT_SETTINGS, Group, use_command_classes
from deermem.cli.archive_cmd import app as archive_app
from deermem.cli.audit_cmd import audit, why
from deermem.cli.config_cmd import app as config_app
from deermem.cli.context_cmd import context
from deermem.cli.db_cmd import app as db_app
from deermem.cli.demo import demo
from deermem.cli.eval import app as eval_app
from deermem.cli.facts_cmd import app as facts_app
from deermem.cli.ingest_cmd import ingest
from deermem.cli.init_cmd import init
from deermem.cli.mcp_cmd import mcp
from deermem.cli.migrate_cmd import migrate_command
from deermem.cli.model_cmd import app as model_app
from deermem.cli.regret_cmd import regret
from deermem.cli.search_cmd import search
from deermem.cli.serve_cmd import serve
from deermem.cli.store_cmd import reindex, scopes
from deermem.cli.token_cmd import app as token_app
from deermem.cli.transfer_cmd import export, import_
from deermem.errors import DeerMemError

__all__ = ["app", "main", "run"]

app = typer.Typer(
    name="deermem",
    help=(
        "Long-term memory for LLM agents that forgets the right things and can say why.\n\n"
        "Start with `deermem demo` to see the capacity policies at work."
    ),
    cls=Group,
    context_settings=CONTEXT_SETTINGS,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",
)
app.command(name="init")(init)
app.add_typer(facts_app, name="facts")
app.command(name="ingest")(ingest)
app.command(name="audit")(audit)
app.command(name="why")(why)
app.add_typer(archive_app, name="archive")
app.command(name="regret")(regret)
app.command(name="context")(context)
app.command(name="search")(search)
app.command(name="export")(export)
app.command(name="import")(import_)
app.command(name="scopes")(scopes)
app.command(name="reindex")(reindex)
app.add_typer(config_app, name="config")
app.add_typer(model_app, name="model")
app.command(name="demo")(demo)
app.command(name="serve")(serve)
app.command(name="mcp")(mcp)
app.add_typer(token_app, name="token")
app.add_typer(db_app, name="db")
app.command(name="migrate")(migrate_command)
app.add_typer(eval_app, name="eval")
use_command_classes(app)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"deermem {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    root: Path | None = typer.Option(
        None,
        "--root",
        file_okay=False,
        help="Store directory [default: storage_path, else $DEERMEM_DATA_DIR, else ~/.deermem].",
    ),
    config: Path | None = typer.Option(
        None,
        "--config",
        exists=True,
        dir_okay=False,
        envvar="DEERMEM_CONFIG",
        help="A .toml or .yaml configuration file.",
    ),
    user: str | None = typer.Option(
        None, "--user", envvar="DEERMEM_USER", help="User id [default: the single-user layout]."
    ),
    agent: str | None = typer.Option(
        None,
        "--agent",
        envvar="DEERMEM_AGENT",
        help="Agent name [default: `__default__`, the agent-independent bucket].",
    ),
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Long-term memory for LLM agents that forgets the right things and can say why."""
    ctx.obj = CliContext(root=root, config_file=config, user=user, agent=agent)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line and return its exit status.

    deermem's own errors (bad configuration, invalid facts, corrupt data, an
    evaluation that refuses ...) and errors of the file system (permissions, a
    full disk) are printed as one line on stderr with exit status 1 instead of
    a traceback; usage errors keep the status 2 that typer gives them.
    """
    try:
        app(args=list(argv) if argv is not None else None, prog_name="deermem")
    except SystemExit as stop:
        return stop.code if isinstance(stop.code, int) else 0 if stop.code is None else 1
    except DeerMemError as error:
        print_error(str(error))
        return 1
    except BrokenPipeError:
        # `deermem ... | head` closed the pipe: stop quietly, as other tools do,
        # and keep the interpreter from failing again as it flushes stdout.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except OSError as error:
        # The file system refused (permissions, a full disk ...): name the file.
        named = error.filename is not None and error.strerror is not None
        print_error(f"{error.filename}: {error.strerror}" if named else str(error))
        return 1
    return 0


def run() -> NoReturn:
    """The ``deermem`` program: the console script and ``python -m deermem``."""
    sys.exit(main())
