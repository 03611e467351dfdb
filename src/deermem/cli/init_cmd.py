"""``deermem init``: create a store, or give one its settings, so it remembers them."""

from __future__ import annotations

from pathlib import Path

import typer
import yaml
from rich.markup import escape

from deermem.cli._context import cli_context
from deermem.cli._output import JSON_OPTION, fail, out_console, print_json

__all__ = ["init"]


def init(
    ctx: typer.Context,
    config: Path | None = typer.Option(
        None,
        "--config",
        exists=True,
        dir_okay=False,
        help="The settings to keep [default: the global --config, if any].",
    ),
    force: bool = typer.Option(False, "--force", help="Replace settings the store already keeps."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Create a store, or give an existing one its settings (`<root>/deermem.yaml`).

    The settings of `--config` and of `DEERMEM_*` environment variables —
    the ones they set, not the defaults — are written into the store's root,
    so every later command and `Memory.open` on it uses them: a store built
    at a cap of 10 stays at 10 for whoever opens it. A `--config` file or
    environment variable given later still wins over them (`deermem config
    show` says where each value came from). Nothing else in the directory is
    touched: on an existing store, its facts, archive and receipts stay as
    they are. Settings the store already keeps are replaced only with
    `--force` (adding settings beside them needs none). A new store records
    its capacity policy, `hybrid-v1` with `confidence` in its shadow, unless
    the settings name one (docs/policies.md); an existing store that
    recorded none keeps `confidence`. `storage_path` is not written (the file is found at the root);
    no secret is (the model's key stays an environment variable).

    Examples: `deermem --root ./memory init --config deermem.yaml`,
    `DEERMEM_MAX_FACTS=10 deermem --root ./memory init`
    """
    from deermem.config import (
        STORE_SETTINGS_FILENAME,
        read_store_settings,
        render_store_settings,
        resolve_config,
        settings_to_keep,
        store_settings_path,
    )
    from deermem.store import resolve_root
    from deermem.store.markdown.files import holds_store, write_store_settings

    state = cli_context(ctx)
    resolved = resolve_config(config or state.config_file)
    if resolved.config.store and state.root is None:
        fail(
            "the configuration names a database (store); a database keeps no settings file — "
            "`deermem init` is for a Markdown store directory (--root)"
        )
    root = state.root if state.root is not None else resolve_root(resolved.config.storage_path)
    if root.exists() and not root.is_dir():
        fail(f"{root}: not a directory")
    manifest = resolved.config.manifest_filename
    if (
        root.is_dir()
        and any(root.iterdir())
        and not holds_store(root, manifest, settings_filename=STORE_SETTINGS_FILENAME)
    ):
        fail(
            f"{root} is neither empty nor a deermem store; choose an empty or new directory, "
            "or the root of an existing store"
        )
    text = render_store_settings(settings_to_keep(resolved.config, root))
    current = read_store_settings(root)
    new: dict[str, object] = yaml.safe_load(text) or {}
    extends = current is not None and current.items() <= new.items()
    outcome = write_store_settings(root, text, force=force or extends)
    kept = read_store_settings(root) or {}  # what was written reads back
    resolve_config(root=root, environ={})  # ... and is a valid configuration
    path = store_settings_path(root)
    if as_json:
        print_json({"root": str(root), "file": str(path), "outcome": outcome, "settings": kept})
        return
    what = ", ".join(sorted(kept)) if kept else "none: the defaults apply"
    done = {
        "created": "created",
        "replaced": "replaced the settings in",
        "unchanged": "already up to date:",
    }[outcome]
    out_console.print(f"{done} {escape(str(path))} (settings: {escape(what)})")
