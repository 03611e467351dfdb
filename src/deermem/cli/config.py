"""``deermem config``: check a configuration file, and show where each setting came from."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import typer
from pydantic import BaseModel
from rich import box
from rich.table import Table

from deermem.cli.output import JSON_OPTION, cli_context, escape, out_console, print_json
from deermem.config import MemoryConfig, load_config, read_api_key, redact_url, resolve_config
from deermem.learning import check_override_files
from deermem.store import database_settings

__all__ = ["config_app"]

config_app = typer.Typer(help="Inspect and validate configuration.", no_args_is_help=True)

IGNORE_ENV_OPTION = typer.Option(
    False, "--ignore-env", help="Do not apply DEERMEM_* environment variables."
)


@config_app.command("check")
def check(
    file: Path = typer.Argument(
        ..., exists=True, dir_okay=False, readable=True, help="A .toml, .yaml or .yml file."
    ),
    ignore_env: bool = IGNORE_ENV_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Validate FILE and print the effective configuration.

    The effective configuration is the defaults, overridden by FILE, overridden
    by `DEERMEM_*` environment variables (unless `--ignore-env`). Every invalid
    key is reported at once, with its value and what is allowed. The files of
    `patterns_dir` and `prompts_dir` are loaded and checked too, and so is the
    API key when its variable (`model.api_key_env`) is set, without showing it.

    Example: `deermem config check deermem.toml`
    """
    config = load_config(file, environ={} if ignore_env else None)
    check_override_files(config)  # a bad pattern or template would fail every extraction
    if not ignore_env:
        _check_api_key(config)
    defaults = MemoryConfig()
    if as_json:
        print_json(config.model_dump(mode="json"))
        return
    table = Table(title=f"Effective configuration ({file})", title_justify="left")
    table.add_column("setting", no_wrap=True)
    table.add_column("value", overflow="fold")
    table.add_column("default", style="dim")
    for key, value, default in _rows(config, defaults):
        marker = "" if value == default else " *"
        table.add_row(key, escape(f"{_show(value)}{marker}"), escape(_show(default)))
    out_console.print(table)
    out_console.print("[green]valid[/]  (* differs from the default)")


@config_app.command("show")
def show(
    ctx: typer.Context, ignore_env: bool = IGNORE_ENV_OPTION, as_json: bool = JSON_OPTION
) -> None:
    """Show the configuration commands use on this store, and where each value came from.

    Sources, later ones winning: the defaults; the store's own settings
    (`<root>/deermem.yaml`, written by `deermem init`; a database's
    `deermem_settings`, written by `deermem db upgrade`); the `--config`
    file; `DEERMEM_*` environment variables (unless `--ignore-env`).

    Examples: `deermem --root ./memory config show`,
    `deermem --root ./memory --config team.yaml config show --json`
    """
    state = cli_context(ctx)
    state.require_root()  # a mistyped --root would show the defaults as its settings
    root = None if state.uses_database() else state.store_root()
    environ: dict[str, str] | None = {} if ignore_env else None
    recorded = None
    if root is None:  # a database: its own record is the store's settings
        recorded = database_settings(resolve_config(state.config_file, environ=environ).config)
    resolved = resolve_config(state.config_file, root=root, recorded=recorded, environ=environ)
    rows = list(_rows(resolved.config, MemoryConfig()))
    store_file = None if resolved.store_file is None else str(resolved.store_file)
    if as_json:
        settings = {
            key: {"value": _json_value(value), "source": resolved.source(key)}
            for key, value, _ in rows
        }
        where = None if root is None else str(root)
        print_json({"root": where, "storeFile": store_file, "settings": settings})
        return
    shown = "the database of `store`" if root is None else f"the store at {root}"
    table = Table(
        title=escape(f"Configuration of {shown}"),
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    table.add_column("setting", no_wrap=True)
    table.add_column("value", overflow="fold")
    table.add_column("from", overflow="fold")
    for key, value, _ in rows:
        source = resolved.source(key)
        table.add_row(
            key, escape(_show(value)), escape(source), style="dim" if source == "default" else None
        )
    out_console.print(table)
    if store_file is None and root is not None:
        out_console.print(
            f"no settings file in {escape(str(root))}: `deermem init` writes one, so every "
            "later command on this store uses the same settings"
        )


def _check_api_key(config: MemoryConfig) -> None:
    """Refuse a set API key that no request could carry, as the model's client would.

    An unset variable is left alone: a file is often checked where its key is not
    (`deermem model check` needs it, and says so).
    """
    section = config.model
    variable = section.api_key_env
    is_set = variable is not None and bool(os.environ.get(variable, "").strip())
    if section.configured and section.provider == "openai" and is_set:
        read_api_key(variable, os.environ)


def _json_value(value: object) -> object:
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, Path):
        return str(value)
    return value


def _rows(
    config: BaseModel, defaults: BaseModel, prefix: str = ""
) -> Iterator[tuple[str, object, object]]:
    """One row per setting; a section (``model``) gives one row per key, ``model.base_url``."""
    for key in type(config).model_fields:
        value, default = getattr(config, key), getattr(defaults, key)
        if isinstance(value, BaseModel) and isinstance(default, BaseModel):
            yield from _rows(value, default, f"{prefix}{key}.")
        elif key in ("store", "base_url") and isinstance(value, str):
            yield f"{prefix}{key}", redact_url(value) if value else value, default
        else:
            yield f"{prefix}{key}", value, default


def _show(value: object) -> str:
    if isinstance(value, tuple):
        return "[" + ", ".join(str(item) for item in value) + "]"
    return str(value)
