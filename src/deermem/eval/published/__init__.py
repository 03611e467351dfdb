"""Published QA results that ship with deermem, so anyone can verify them anywhere.

A results folder someone published is only checkable if the checker can find
it. The original project's run (DeerFlow PR #4810) is copied here as package
data, with a note on its origin and DeerFlow's licence, so ``deermem eval
verify`` needs no checkout of anything else: ``--published NAME`` (or no
directory at all) names a set from :data:`PUBLISHED`.

Each set also carries the SHA-256 its files were published with. Verification
re-derives every figure from the rows, but only a hash pins the fields no figure
depends on (usage, attempts, the rank order of kept ids), so a shipped set is
always verified against its hashes too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Final

__all__ = ["DEFAULT_PUBLISHED", "PUBLISHED", "PublishedResults"]

_HERE: Final = Path(__file__).parent


@dataclass(frozen=True, slots=True)
class PublishedResults:
    """One published results folder shipped with the package.

    Attributes:
        name: what ``--published`` calls it.
        directory: the folder holding the result files (inside the package).
        sha256: file name → the SHA-256 (lowercase hex) it was published with.
        description: one line saying whose results they are.
    """

    name: str
    directory: Path
    sha256: Mapping[str, str]
    description: str


DEFAULT_PUBLISHED: Final = "deerflow-pr4810"
"""The set ``deermem eval verify`` checks when given no directory."""

PUBLISHED: Final[Mapping[str, PublishedResults]] = MappingProxyType(
    {
        DEFAULT_PUBLISHED: PublishedResults(
            name=DEFAULT_PUBLISHED,
            directory=_HERE / DEFAULT_PUBLISHED,
            # The hashes the original project published (its commit e481a2e73).
            sha256=MappingProxyType(
                {
                    "qa.rows.jsonl": (
                        "d14dcd1e57bbba393b552d61eec30a530c1157c145947d3a48f615d9c8d6fc20"
                    ),
                    "qa.summary.json": (
                        "a581861ae1233dd4a86878fa1aa61f861b1b54a416f7ac0047a8d2d30deab999"
                    ),
                    "qa.stats.json": (
                        "5e14d7d8eabd988411af157a3f30e0adfdc67444c632c4387b25b34b139ea05d"
                    ),
                    "qa_run.json": (
                        "ab487c2fd05dec6c9f0fcd38e0a52fc1249bac27a9e798d0625dd5eea6b041c6"
                    ),
                }
            ),
            description="the original DeerMem's QA run, published with DeerFlow PR #4810",
        )
    }
)
"""Every shipped set by name; each folder's PROVENANCE.md says where it comes from."""
