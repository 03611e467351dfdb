"""The root ``deermem`` command and the entry point that runs it."""

from __future__ import annotations

from collections.abc import Sequence

import typer
from rich.markup import escape

from deermem import __version__
from deermem._exceptions import DeerMemError
from deermem.cli import config_cmd, demo, model_cmd
from deermem.cli._output import err_console

__all__ = ["app", "main"]

app = typer.Typer(
    name="deermem",
    help=(
        "Long-term memory for LLM agents that forgets the right things and can say why.\n\n"
        "Start with `deermem demo` to see the capacity policies at work."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",
)
app.add_typer(config_cmd.app, name="config")
app.add_typer(model_cmd.app, name="model")
app.command(name="demo")(demo.demo)


@app.command(
    name="eval",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    add_help_option=False,
)
def _eval(ctx: typer.Context) -> None:
    """Reproduce the capacity-eviction evaluation (see `deermem eval --help`).

    `deermem eval validate-contracts | validate | run-policy | report`. The
    `deermem` entry point routes `eval` to its own light command line before
    this application is even imported; this entry lists it in `--help`.
    """
    from deermem.evaluation.cli import main as eval_main

    raise typer.Exit(eval_main(ctx.args))


def _version(value: bool) -> None:
    if value:
        typer.echo(f"deermem {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Long-term memory for LLM agents that forgets the right things and can say why."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line and return its exit status.

    deermem's own errors (bad configuration, invalid facts, corrupt data ...)
    are printed as one line on stderr with exit status 1 instead of a
    traceback; usage errors keep the status 2 that typer gives them.
    """
    try:
        app(args=list(argv) if argv is not None else None, prog_name="deermem")
    except SystemExit as stop:
        return stop.code if isinstance(stop.code, int) else 0 if stop.code is None else 1
    except DeerMemError as error:
        err_console.print(f"[bold red]error:[/] {escape(str(error))}")
        return 1
    return 0
