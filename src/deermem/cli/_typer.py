"""The command classes every ``deermem`` command is built with, so help reads right.

typer's help panels print a value type beside each option, and for a flag
(``--json``, ``--yes``, ``--help`` itself) that type is ``<bool>``, which
reads as if the flag took a value. A flag's metavar set to ``""`` leaves the
column empty; :class:`Command` and :class:`Group` do that for their own
flags and for the help option they create, through click's public
``metavar`` attribute and ``get_help_option`` method.

``-h`` works beside ``--help`` everywhere: :data:`CONTEXT_SETTINGS` on the
root command, which every sub-command's context inherits.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

import typer
from typer.core import TyperCommand, TyperGroup

__all__ = ["CONTEXT_SETTINGS", "Command", "Group", "sub_app"]

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


def sub_app(help: str) -> typer.Typer:
    """A command group such as ``deermem facts``; its commands pass ``cls=Command``."""
    return typer.Typer(help=help, cls=Group, no_args_is_help=True, rich_markup_mode="markdown")
