"""The command classes every ``deermem`` command is built with, so help reads right.

typer's help panels print a value type beside each option, and for a flag
(``--json``, ``--yes``, ``--help`` itself) that type is ``<bool>``, which
reads as if the flag took a value. A flag's metavar set to ``""`` leaves the
column empty; :class:`Command` and :class:`Group` do that for their own
flags and for the help option they create, through click's public
``metavar`` attribute and ``get_help_option`` method.
:func:`use_command_classes` makes every command of the application — the
sub-applications' too, ``deermem eval``'s included — one of them, in one
place, through typer's public ``cls`` of each registered command and group.

``-h`` works beside ``--help`` everywhere: :data:`CONTEXT_SETTINGS` on the
root command, which every sub-command's context inherits.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

import typer
from typer.core import TyperCommand, TyperGroup

__all__ = ["CONTEXT_SETTINGS", "Command", "Group", "use_command_classes"]

CONTEXT_SETTINGS: Final[dict[str, Any]] = {"help_option_names": ["-h", "--help"]}


def _flags_without_type(params: Iterable[Any]) -> None:
    for param in params:
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""


class Command(TyperCommand):
    """A typer command whose help shows flags as flags."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _flags_without_type(self.params)

    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)
        if option is not None:
            _flags_without_type([option])
        return option


class Group(TyperGroup):
    """A typer group (``deermem``, ``deermem facts`` ...) whose help shows flags as flags."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _flags_without_type(self.params)

    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)
        if option is not None:
            _flags_without_type([option])
        return option


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
