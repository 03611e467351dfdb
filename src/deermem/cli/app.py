"""The one ``deermem`` command: the root application, its commands, and the entry point.

Each command module holds the commands of one area (:mod:`~deermem.cli.facts`,
:mod:`~deermem.cli.store`, :mod:`~deermem.cli.learning`, :mod:`~deermem.cli.recall`,
:mod:`~deermem.cli.service`, :mod:`~deermem.cli.config`,
:mod:`~deermem.cli.regret`, :mod:`~deermem.cli.demo`, and ``deermem eval``);
this module puts them under one typer application and runs it.

**Help that reads right.** typer's help panels print a value type beside each
option, and for a flag (``--json``, ``--yes``, ``--help`` itself) that type is
``<bool>``, which reads as if the flag took a value. A flag's metavar set to
``""`` leaves the column empty; :class:`Command` and :class:`Group` do that for
their own flags and for the help option they create, through click's public
``metavar`` attribute and ``get_help_option`` method, and
:func:`use_command_classes` makes every command of the application — the
sub-applications' too, ``deermem eval``'s included — one of them, through
typer's public ``cls`` of each registered command and group. ``-h`` works
beside ``--help`` everywhere: :data:`CONTEXT_SETTINGS` on the root command,
which every sub-command's context inherits.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Final, NoReturn, cast

import typer
from typer.core import TyperCommand, TyperGroup

from deermem import __version__
from deermem.cli.config import config_app
from deermem.cli.demo import demo
from deermem.cli.eval import app as eval_app
from deermem.cli.facts import archive_app, audit, facts_app, why
from deermem.cli.learning import ingest, model_app
from deermem.cli.output import CliContext, print_error
from deermem.cli.recall import context, search
from deermem.cli.regret import regret
from deermem.cli.service import mcp, serve, token_app
from deermem.cli.store import (
    db_app,
    export,
    import_,
    init,
    migrate_command,
    redact_command,
    reindex,
    scopes,
    users_app,
)
from deermem.errors import DeerMemError

__all__ = ["Command", "app", "main", "run"]

CONTEXT_SETTINGS: Final[dict[str, Any]] = {"help_option_names": ["-h", "--help"]}


def _flags_without_type(params: Iterable[Any]) -> None:
    for param in params:
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""


class _FlagsAsFlags:
    """Shows the flags of a click command, and the help option it creates, as flags.

    A mixin before typer's command or group class: ``super()`` is that class.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _flags_without_type(cast(Any, self).params)

    def get_help_option(self, ctx: Any) -> Any:
        option = cast(Any, super()).get_help_option(ctx)
        if option is not None:
            _flags_without_type([option])
        return option


class Command(_FlagsAsFlags, TyperCommand):
    """A typer command whose help shows flags as flags."""


class Group(_FlagsAsFlags, TyperGroup):
    """A typer group (``deermem``, ``deermem facts`` ...) whose help shows flags as flags."""


def use_command_classes(app: typer.Typer) -> None:
    """Build every command and group of ``app``, at any depth, as :class:`Command` / :class:`Group`.

    Commands and groups that chose a class of their own (not typer's
    default) keep it.
    """
    for command in app.registered_commands:
        if command.cls is None or command.cls is TyperCommand:
            command.cls = Command
    for group in app.registered_groups:
        chosen = group.cls
        if (
            not (isinstance(chosen, type) and issubclass(chosen, TyperGroup))
            or chosen is TyperGroup
        ):
            group.cls = Group
        if group.typer_instance is not None:
            use_command_classes(group.typer_instance)


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
app.add_typer(users_app, name="users")
app.command(name="redact")(redact_command)
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


GLOBAL_OPTIONS: Final = ("--root", "--config", "--user", "--agent")
"""The root command's options that take a value, accepted after the sub-command too."""


def global_options_first(args: Sequence[str]) -> list[str]:
    """``args`` with the root's options moved before the command, wherever they were given.

    ``deermem facts list --user alice`` reads as ``deermem --user alice facts
    list``: a user should not have to know which options belong to the root.
    An option the sub-command has itself (``token add --user``, ``init
    --config``) stays the sub-command's, and nothing after ``--`` moves.
    """
    group: Any = typer.main.get_command(app)
    front: list[str] = []
    rest = list(args)
    index = 0
    while index < len(rest):  # the root's own options, where they belong already
        token = rest[index]
        if token in GLOBAL_OPTIONS:
            index += 2
        elif token.startswith("-"):
            index += 1
        else:
            break
    command: Any = group
    while index < len(rest) and hasattr(command, "commands"):  # down to the command
        found = command.commands.get(rest[index])
        if found is None:
            return rest
        command, index = found, index + 1
    own = {name for param in command.params for name in getattr(param, "opts", ())}
    moved = rest[:index]
    while index < len(rest):
        token = rest[index]
        if token == "--":
            moved.extend(rest[index:])
            break
        name = token.split("=", 1)[0]
        if name in GLOBAL_OPTIONS and name not in own:
            taken = 1 if "=" in token else 2
            front.extend(rest[index : index + taken])
            index += taken
            continue
        moved.append(token)
        index += 1
    return front + moved


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line and return its exit status.

    deermem's own errors (bad configuration, invalid facts, corrupt data, an
    evaluation that refuses ...) and errors of the file system (permissions, a
    full disk) are printed as one line on stderr with exit status 1 instead of
    a traceback; usage errors keep the status 2 that typer gives them.
    """
    args = list(argv) if argv is not None else sys.argv[1:]
    try:
        app(args=global_options_first(args), prog_name="deermem")
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
