"""The one ``deermem`` command: the root application, its commands, and the entry point.

Each command module holds the commands of one area (:mod:`~deermem.cli.facts`,
:mod:`~deermem.cli.store`, :mod:`~deermem.cli.learning`, :mod:`~deermem.cli.recall`,
:mod:`~deermem.cli.service`, :mod:`~deermem.cli.config`,
:mod:`~deermem.cli.regret`, :mod:`~deermem.cli.demo`, and ``deermem eval``);
this module puts them under one typer application and runs it.

**A command loads its own module only.** :data:`COMMANDS` names every
command, the module that implements it and the line ``deermem --help``
shows for it; :class:`RootGroup` lists the names from there and imports a
command's module when the command is looked up. ``deermem --help`` so
imports no command module and ``deermem facts list`` only
:mod:`~deermem.cli.facts` (before, every command started by importing all
nine: ``deermem --help`` took twice its time). A test keeps each line of the
table equal to its command's own help.

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

import importlib
import os
import sys
from collections.abc import Iterable, Iterator, Mapping, MutableMapping, Sequence
from pathlib import Path
from typing import Any, Final, NamedTuple, NoReturn, cast

import click
import typer
from typer.core import TyperCommand, TyperGroup
from typer.models import CommandInfo, TyperInfo

from deermem import __version__
from deermem.cli.output import (
    CliContext,
    print_error,
    quiet_driver_logs,
    stand_in_for_closed_streams,
    stdout_named,
)
from deermem.errors import DeerMemError, UnsafeIdentifierError
from deermem.model import normalise_agent

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


class Entry(NamedTuple):
    """One command of ``deermem``: the module that implements it, and its line in the help.

    ``help`` is the first paragraph of the command's own help, as the
    listing of ``deermem --help`` shows it; tests/test_cli_conventions.py
    keeps the two equal.
    """

    module: str  # under deermem.cli
    attribute: str  # a function (one command) or a typer.Typer (a group of commands)
    help: str


COMMANDS: Final[Mapping[str, Entry]] = {
    # The order of the help listing: the single commands, then the groups.
    "init": Entry(
        "store",
        "init",
        "Create a store, or give an existing one its settings (`<root>/deermem.yaml`).",
    ),
    "ingest": Entry(
        "learning",
        "ingest",
        "Turn a conversation into facts, confirmations and removals (one model call).",
    ),
    "audit": Entry(
        "facts",
        "audit",
        "Show the eviction receipts: what left the library, when, under which policy.",
    ),
    "why": Entry(
        "facts", "why", "Explain where a fact is: its rank if active, its receipt if it left."
    ),
    "regret": Entry(
        "regret",
        "regret",
        "Per policy: evictions, regret events by kind, regret rate, the most regretted facts.",
    ),
    "context": Entry(
        "recall", "context", "Print the `<memory>` block deermem puts into the agent's prompt."
    ),
    "search": Entry(
        "recall", "search", "Search the facts of one user and agent, best match first."
    ),
    "export": Entry("store", "export", "Write one user's and agent's memory as a JSON document."),
    "import": Entry(
        "store",
        "import_",
        "Replace one user's and agent's memory with a document's, through the capacity gate.",
    ),
    "scopes": Entry(
        "store",
        "scopes",
        "List every user and agent in the store, with their fact and archive counts.",
    ),
    "reindex": Entry(
        "store",
        "reindex",
        "Rebuild the search index from the facts of every user and agent, and embed them.",
    ),
    "demo": Entry(
        "demo",
        "demo",
        "Show what each capacity policy forgets in the seed's two situations, and why.",
    ),
    "serve": Entry(
        "service",
        "serve",
        "Serve the memory over HTTP (FastAPI + uvicorn; `uv sync --extra server`).",
    ),
    "mcp": Entry(
        "service",
        "mcp",
        "Serve the memory to MCP clients (Claude Desktop, Cursor, Claude Code ...).",
    ),
    "migrate": Entry(
        "store",
        "migrate_command",
        "Copy every user's memory from SRC to DST and verify each copy.",
    ),
    "redact": Entry(
        "store",
        "redact_command",
        "Find secrets already stored and replace them by `[redacted: KIND]`, store-wide.",
    ),
    "facts": Entry(
        "facts",
        "facts_app",
        "Add, list, show, edit and remove the facts of one user and agent.",
    ),
    "archive": Entry(
        "facts", "archive_app", "Facts that were evicted or removed: list, restore, purge."
    ),
    "config": Entry("config", "config_app", "Inspect and validate configuration."),
    "model": Entry("learning", "model_app", "Check the language model used for extraction."),
    "token": Entry(
        "service",
        "token_app",
        "Bearer tokens for `deermem serve` and `deermem mcp --transport http`: add, list, revoke.",
    ),
    "db": Entry("store", "db_app", "The PostgreSQL store's schema: status and upgrade."),
    "users": Entry(
        "store", "users_app", "One user everywhere: erase them, or export all they hold."
    ),
    "eval": Entry(
        "eval",
        "app",
        "Reproduce the capacity-eviction evaluation: the LongMemEval pools of the original "
        "DeerMem study, the production capacity gate, confidence vs hybrid-v1.",
    ),
}
"""Every command of ``deermem`` by name, in the order ``deermem --help`` lists them."""


def build_command(name: str) -> Any:
    """The click command (or group) ``name`` of :data:`COMMANDS`, its module imported now.

    Built as ``app.command`` and ``app.add_typer`` would have built it, with
    the application's markup and exception settings and :class:`Command` /
    :class:`Group` as the classes.
    """
    entry = COMMANDS[name]
    target = getattr(importlib.import_module(f"deermem.cli.{entry.module}"), entry.attribute)
    if isinstance(target, typer.Typer):
        use_command_classes(target)
        return typer.main.get_group_from_info(
            TyperInfo(target, name=name, cls=Group),
            pretty_exceptions_short=app.pretty_exceptions_short,
            suggest_commands=app.suggest_commands,
            rich_markup_mode=app.rich_markup_mode,
        )
    return typer.main.get_command_from_info(
        CommandInfo(name=name, cls=Command, callback=target),
        pretty_exceptions_short=app.pretty_exceptions_short,
        rich_markup_mode=app.rich_markup_mode,
    )


class CommandTable(MutableMapping[str, Any]):
    """The root's commands by name, each built (its module imported) when first looked up.

    Iterating gives every name of :data:`COMMANDS` without importing
    anything; looking one up (``table[name]``, ``table.get(name)``) imports
    that command's module only. ``deermem facts list`` so loads
    :mod:`deermem.cli.facts` and none of the other command modules.
    """

    def __init__(self, built: Mapping[str, Any]) -> None:
        self._built: dict[str, Any] = dict(built)

    def is_built(self, name: str) -> bool:
        return name in self._built

    def __getitem__(self, name: str) -> Any:
        if name not in self._built:
            if name not in COMMANDS:
                raise KeyError(name)
            self._built[name] = build_command(name)
        return self._built[name]

    def __setitem__(self, name: str, command: Any) -> None:
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        del self._built[name]

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys([*COMMANDS, *self._built]))

    def __len__(self) -> int:
        return len(set(COMMANDS) | set(self._built))


class RootGroup(Group):
    """``deermem`` itself: its commands come from :class:`CommandTable`, loaded on first use.

    Its help lists every command from the table's one-line help, so
    ``deermem --help`` imports no command module.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commands = CommandTable(self.commands)
        self._listing = False

    def list_commands(self, ctx: Any) -> list[str]:
        return list(self.commands)  # the names only: typer's own reads every command

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        table = self.commands
        if self._listing and isinstance(table, CommandTable) and not table.is_built(cmd_name):
            entry = COMMANDS.get(cmd_name)
            if entry is not None:  # a stand-in carrying the line the listing shows
                return Command(name=cmd_name, help=entry.help)
        return super().get_command(ctx, cmd_name)


app = typer.Typer(
    name="deermem",
    help=(
        "Long-term memory for LLM agents that forgets the right things and can say why.\n\n"
        "Start with `deermem demo` to see the capacity policies at work."
    ),
    cls=RootGroup,
    context_settings=CONTEXT_SETTINGS,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"deermem {__version__}")
        raise typer.Exit()


def _store_directory(value: Path | None) -> Path | None:
    """``--root`` as given, unless it exists as something other than a directory: a
    device such as ``/dev/null`` or a pipe (a regular file ``file_okay`` refuses)."""
    if value is None:
        return None
    if value.exists() and not value.is_dir():
        raise typer.BadParameter(f"{value} exists and is not a directory")
    return value


@app.callback()
def _root(
    ctx: typer.Context,
    root: Path | None = typer.Option(
        None,
        "--root",
        file_okay=False,
        callback=_store_directory,
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


def global_options_first(group: Any, args: Sequence[str]) -> list[str]:
    """``args`` with the root's options moved before the command, wherever they were given.

    ``deermem facts list --user alice`` reads as ``deermem --user alice facts
    list``: a user should not have to know which options belong to the root.
    An option the sub-command has itself (``token add --user``, ``init
    --config``) stays the sub-command's, and nothing after ``--`` moves.
    ``group`` is the root command that then runs ``args``: the commands
    looked up here are built once, for both.

    Raises:
        click.UsageError: an option given both before and after the command
            with two values (``deermem --user alice facts add ... --user
            bob``). Moved in front, the later copy would lose to the earlier
            one, against click's last-wins rule and against what the user
            most likely meant; which of the two was meant cannot be told, so
            neither is guessed. The same value twice is accepted.
    """
    front: list[str] = []
    given: dict[str, str] = {}  # the value of each root option before the command (the last)
    rest = list(args)
    index = 0
    while index < len(rest):  # the root's own options, where they belong already
        token = rest[index]
        name, equals, value = token.partition("=")
        if token in GLOBAL_OPTIONS:
            if index + 1 < len(rest):
                given[token] = rest[index + 1]
            index += 2
        elif token.startswith("-"):
            if equals and name in GLOBAL_OPTIONS:
                given[name] = value
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
        name, equals, value = token.partition("=")
        if name in GLOBAL_OPTIONS and name not in own:
            taken = 1 if equals else 2
            if not equals and index + 1 < len(rest):
                value, equals = rest[index + 1], "="
            if equals and name in given:  # a value to compare (a missing one is click's error)
                _same_or_refuse(name, given[name], value)
            front.extend(rest[index : index + taken])
            index += taken
            continue
        moved.append(token)
        index += 1
    return front + moved


def _same_or_refuse(option: str, before: str, after: str) -> None:
    """Refuse ``option`` given before and after the command with different values.

    Paths (``--root``, ``--config``) are compared as paths: ``store`` and
    ``store/`` name one directory; agents as the agent rule names them:
    ``Coder`` and ``coder`` are one agent.
    """
    if option in ("--root", "--config"):
        same = Path(before) == Path(after)
    elif option == "--agent":
        try:
            same = normalise_agent(before) == normalise_agent(after)
        except UnsafeIdentifierError:  # the command refuses the bad name, once it is agreed
            same = before == after
    else:
        same = before == after
    if not same:
        raise click.UsageError(
            f"{option} given twice with different values: {before!r} before the command, "
            f"{after!r} after it; give it once"
        )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line and return its exit status.

    deermem's own errors (bad configuration, invalid facts, corrupt data, an
    evaluation that refuses ...) and errors of the file system (permissions, a
    full disk) are printed as one line on stderr with exit status 1 instead of
    a traceback, and so is running out of memory; usage errors keep the status 2
    that typer gives them.
    """
    args = list(argv) if argv is not None else sys.argv[1:]
    stand_in_for_closed_streams()
    quiet_driver_logs()
    try:
        # What `app(...)` runs, built once: through `app` typer would build the root and
        # the command a second time after `global_options_first` looked them up.
        group: Any = typer.main.get_command(app)
        with stdout_named():  # a write it refuses names it (no file name of its own)
            group(args=global_options_first(group, args), prog_name="deermem")
    except click.UsageError as error:  # found before click parsed anything: nothing ran
        print_error(error.format_message())
        return error.exit_code
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
    except MemoryError:
        # An input too large to hold (a file of many gigabytes): one line, like the rest.
        print_error("out of memory: the command needed more memory than this process may use")
        return 1
    return 0


def run() -> NoReturn:
    """The ``deermem`` program: the console script and ``python -m deermem``."""
    sys.exit(main())
