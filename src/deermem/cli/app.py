"""The root ``deermem`` command and the entry point that runs it."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

import typer

from deermem import __version__
from deermem._exceptions import DeerMemError
from deermem.cli import (
    archive_cmd,
    audit_cmd,
    config_cmd,
    context_cmd,
    db_cmd,
    demo,
    facts_cmd,
    ingest_cmd,
    init_cmd,
    mcp_cmd,
    migrate_cmd,
    model_cmd,
    regret_cmd,
    replay_cmd,
    search_cmd,
    serve_cmd,
    store_cmd,
    token_cmd,
    transfer_cmd,
)
from deermem.cli._context import CliContext
from deermem.cli._output import print_error
from deermem.cli._typer import CONTEXT_SETTINGS, Group, use_command_classes
from deermem.evaluation.cli.app import app as eval_app

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
app.command(name="init")(init_cmd.init)
app.add_typer(facts_cmd.app, name="facts")
app.command(name="ingest")(ingest_cmd.ingest)
app.command(name="audit")(audit_cmd.audit)
app.command(name="why")(audit_cmd.why)
app.add_typer(archive_cmd.app, name="archive")
app.command(name="regret")(regret_cmd.regret)
app.command(name="context")(context_cmd.context)
app.command(name="search")(search_cmd.search)
app.command(name="export")(transfer_cmd.export)
app.command(name="import")(transfer_cmd.import_)
app.command(name="scopes")(store_cmd.scopes)
app.command(name="reindex")(store_cmd.reindex)
app.add_typer(config_cmd.app, name="config")
app.add_typer(model_cmd.app, name="model")
app.command(name="demo")(demo.demo)
app.command(name="serve")(serve_cmd.serve)
app.command(name="mcp")(mcp_cmd.mcp)
app.add_typer(token_cmd.app, name="token")
app.add_typer(db_cmd.app, name="db")
app.command(name="migrate")(migrate_cmd.migrate_command)
eval_app.command(name="replay")(replay_cmd.replay)  # needs Memory: it lives at this level
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
