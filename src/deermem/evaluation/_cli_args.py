"""Arguments and output helpers shared by the ``deermem eval`` commands."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Final

from deermem.evaluation.protocol import ProtocolFiles, bundled_protocol_files

__all__ = [
    "DATASET_ENV",
    "dataset_argument",
    "json_argument",
    "print_json",
    "protocol_arguments",
    "protocol_files",
]

DATASET_ENV: Final = "LONGMEMEVAL_ORACLE_PATH"


def protocol_arguments(parser: argparse.ArgumentParser) -> None:
    """``--config``, ``--official-manifest`` and ``--synthetic-manifest``."""
    bundled = bundled_protocol_files()
    group = parser.add_argument_group(
        "protocol", "the protocol bundle (default: deermem's own, shipped with the package)"
    )
    group.add_argument(
        "--config",
        type=Path,
        metavar="YAML",
        help=f"protocol config (default: {bundled.config.name})",
    )
    group.add_argument(
        "--official-manifest",
        type=Path,
        metavar="JSON",
        help=f"the 40 pinned LongMemEval ids (default: {bundled.official_manifest.name})",
    )
    group.add_argument(
        "--synthetic-manifest",
        type=Path,
        metavar="JSON",
        help=f"the 5 correction cases (default: {bundled.synthetic_manifest.name})",
    )


def dataset_argument(parser: argparse.ArgumentParser) -> None:
    """``--dataset``, defaulting to ``$LONGMEMEVAL_ORACLE_PATH``."""
    parser.add_argument(
        "--dataset",
        type=Path,
        metavar="FILE",
        default=os.environ.get(DATASET_ENV) or None,
        help=f"the LongMemEval oracle file (default: ${DATASET_ENV}); checked by SHA-256",
    )


def json_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON")


def protocol_files(args: argparse.Namespace) -> ProtocolFiles:
    """The protocol files the command line names, deermem's own for the rest."""
    bundled = bundled_protocol_files()
    return ProtocolFiles(
        config=args.config or bundled.config,
        official_manifest=args.official_manifest or bundled.official_manifest,
        synthetic_manifest=args.synthetic_manifest or bundled.synthetic_manifest,
    )


def print_json(data: object) -> None:
    print(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False))
