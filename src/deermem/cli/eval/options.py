"""Options shared by the ``deermem eval`` commands, and the protocol files they name."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Final

import typer

if TYPE_CHECKING:
    from deermem.eval.protocol.bundle import Protocol

__all__ = [
    "CONFIG_OPTION",
    "DATASET_ENV",
    "DATASET_OPTION",
    "JSON_OPTION",
    "OFFICIAL_MANIFEST_OPTION",
    "SYNTHETIC_MANIFEST_OPTION",
    "load_named_protocol",
    "require_dataset",
]

DATASET_ENV: Final = "LONGMEMEVAL_ORACLE_PATH"
_PROTOCOL_PANEL: Final = "Protocol bundle (default: deermem's own, shipped with the package)"

CONFIG_OPTION: Final = typer.Option(
    None,
    "--config",
    metavar="YAML",
    help="Protocol config [default: the bundled pr4789-reproduction-v1.yaml].",
    rich_help_panel=_PROTOCOL_PANEL,
)
OFFICIAL_MANIFEST_OPTION: Final = typer.Option(
    None,
    "--official-manifest",
    metavar="JSON",
    help="The 40 pinned LongMemEval ids [default: the bundled official-pr4789-v1.json].",
    rich_help_panel=_PROTOCOL_PANEL,
)
SYNTHETIC_MANIFEST_OPTION: Final = typer.Option(
    None,
    "--synthetic-manifest",
    metavar="JSON",
    help="The 5 correction cases [default: the bundled synthetic-corrections-v1.json].",
    rich_help_panel=_PROTOCOL_PANEL,
)
DATASET_OPTION: Final = typer.Option(
    None,
    "--dataset",
    metavar="FILE",
    envvar=DATASET_ENV,
    show_envvar=True,
    help="The LongMemEval oracle file; checked by SHA-256 before it is read.",
)
JSON_OPTION: Final = typer.Option(False, "--json", help="Print machine-readable JSON.")


def load_named_protocol(
    config: Path | None, official_manifest: Path | None, synthetic_manifest: Path | None
) -> Protocol:
    """Load the protocol the command line names; deermem's own files for the rest.

    Raises:
        ProtocolError: a file is missing, invalid, or disagrees with another.
    """
    from deermem.eval.protocol.bundle import (
        ProtocolFiles,
        bundled_protocol_files,
        load_protocol,
    )

    bundled = bundled_protocol_files()
    return load_protocol(
        ProtocolFiles(
            config=config or bundled.config,
            official_manifest=official_manifest or bundled.official_manifest,
            synthetic_manifest=synthetic_manifest or bundled.synthetic_manifest,
        )
    )


def require_dataset(ctx: typer.Context, dataset: Path | None) -> Path:
    """The dataset option's value; a usage error (status 2) when it is neither given nor set."""
    if dataset is None:
        ctx.fail(f"--dataset is required (or set {DATASET_ENV})")
    return dataset
