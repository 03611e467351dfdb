"""Shared output helpers: one console for results, one for errors, JSON dumps."""

from __future__ import annotations

import json

import typer
from rich.console import Console

__all__ = ["JSON_OPTION", "err_console", "out_console", "print_json"]

out_console = Console(highlight=False, soft_wrap=True)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)

JSON_OPTION = typer.Option(False, "--json", help="Print machine-readable JSON instead of tables.")


def print_json(data: object) -> None:
    """Print JSON with sorted keys, so scripts and diffs see a stable order."""
    typer.echo(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False))
