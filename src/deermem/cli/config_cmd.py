"""``deermem config``: check a configuration file before anything runs with it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import typer
from pydantic import BaseModel
from rich.markup import escape
from rich.table import Table

from deermem.cli._output import JSON_OPTION, out_console, print_json
from deermem.config import ENV_PREFIX, MemoryConfig, load_config
from deermem.config.database import redact_database_url

__all__ = ["app"]

app = typer.Typer(help="Inspect and validate configuration.", no_args_is_help=True)


@app.command("check")
def check(
    file: Path = typer.Argument(
        ..., exists=True, dir_okay=False, readable=True, help="A .toml, .yaml or .yml file."
    ),
    ignore_env: bool = typer.Option(
        False, "--ignore-env", help=f"Do not apply {ENV_PREFIX}* environment variables."
    ),
    as_json: bool = JSON_OPTION,
) -> None:
    """Validate FILE and print the effective configuration.

    The effective configuration is the defaults, overridden by FILE, overridden
    by `DEERMEM_*` environment variables (unless `--ignore-env`). Every invalid
    key is reported at once, with its value and what is allowed.

    Example: `deermem config check deermem.toml`
    """
    config = load_config(file, environ={} if ignore_env else None)
    defaults = MemoryConfig()
    if as_json:
        print_json(config.model_dump(mode="json"))
        return
    table = Table(title=f"Effective configuration ({file})", title_justify="left")
    table.add_column("setting")
    table.add_column("value")
    table.add_column("default", style="dim")
    for key, value, default in _rows(config, defaults):
        marker = "" if value == default else " *"
        table.add_row(key, escape(f"{_show(value)}{marker}"), escape(_show(default)))
    out_console.print(table)
    out_console.print("[green]valid[/]  (* differs from the default)")


def _rows(
    config: BaseModel, defaults: BaseModel, prefix: str = ""
) -> Iterator[tuple[str, object, object]]:
    """One row per setting; a section (``model``) gives one row per key, ``model.base_url``."""
    for key in type(config).model_fields:
        value, default = getattr(config, key), getattr(defaults, key)
        if isinstance(value, BaseModel) and isinstance(default, BaseModel):
            yield from _rows(value, default, f"{prefix}{key}.")
        elif key == "store" and isinstance(value, str):
            yield f"{prefix}{key}", redact_database_url(value) if value else value, default
        else:
            yield f"{prefix}{key}", value, default


def _show(value: object) -> str:
    if isinstance(value, tuple):
        return "[" + ", ".join(str(item) for item in value) + "]"
    return str(value)
