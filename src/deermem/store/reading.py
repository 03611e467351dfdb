"""Reading a scope from disk: the user's document and every fact file.

Reads are strict (see :mod:`deermem.store.codec`): a file that is not what it
must be stops the load with an error naming it. Stray temporary files from an
interrupted writer are skipped; they are never facts.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from datetime import UTC, datetime

from deermem._exceptions import CorruptMemoryFile
from deermem.model.fact import FACT_ID_PATTERN, Fact
from deermem.model.timestamps import parse_timestamp
from deermem.store.cache import ABSENT, ManifestToken
from deermem.store.codec import decode_fact, decode_summaries
from deermem.store.paths import ScopePaths, UserPaths, fact_shard
from deermem.store.protocol import SummaryDocument
from deermem.store.scope import Scope

__all__ = ["check_layout", "manifest_token", "read_manifest", "scan_facts", "sort_facts"]

_EARLIEST = datetime.min.replace(tzinfo=UTC)
_SHARD_NAME_LENGTH = 2


def read_manifest(user: UserPaths) -> tuple[SummaryDocument, ManifestToken]:
    """The user's summary document and its signature (defaults when absent)."""
    try:
        with user.manifest.open("rb") as handle:
            status = os.fstat(handle.fileno())
            data = handle.read()
    except FileNotFoundError:
        return SummaryDocument(), ABSENT
    document = decode_summaries(data, user.manifest)
    token = ManifestToken(status.st_mtime_ns, status.st_size, status.st_ino, document.revision)
    return document, token


def manifest_token(user: UserPaths, revision: int) -> ManifestToken:
    """The signature of a manifest this process has just written at ``revision``."""
    status = user.manifest.stat()
    return ManifestToken(status.st_mtime_ns, status.st_size, status.st_ino, revision)


def check_layout(paths: ScopePaths) -> None:
    """Refuse layouts deermem cannot read without losing facts.

    A per-agent ``memory.json`` is the original's first layout; its facts
    would be invisible, and the next write would make the loss permanent.
    """
    if paths.legacy_manifest.is_file():
        raise CorruptMemoryFile(
            paths.legacy_manifest,
            "a per-agent memory.json from the original's version-1 layout; migrate it with "
            "the original DeerMem's migration tool first",
        )


def scan_facts(paths: ScopePaths, scope: Scope) -> dict[str, Fact]:
    """Read every fact file of a scope."""
    facts: dict[str, Fact] = {}
    try:
        shards = list(os.scandir(paths.facts_dir))
    except FileNotFoundError:
        return facts
    for shard in shards:
        if shard.name.startswith("."):
            continue
        if not shard.is_dir():
            if shard.name.endswith(".md"):
                raise CorruptMemoryFile(shard.path, "a fact file outside its shard directory")
            continue
        for entry in os.scandir(shard.path):
            name = entry.name
            if name.startswith(".") or not name.endswith(".md"):
                continue
            fact_id = name[:-3]
            path = paths.facts_dir / shard.name / name
            _check_name(fact_id, shard.name, path)
            data = path.read_bytes()
            facts[fact_id] = decode_fact(data, path, scope, fact_id)
    return facts


def _check_name(fact_id: str, shard: str, path: os.PathLike[str]) -> None:
    if not FACT_ID_PATTERN.fullmatch(fact_id):
        raise CorruptMemoryFile(path, "the file name is not a valid fact id")
    if len(shard) != _SHARD_NAME_LENGTH or fact_shard(fact_id) != shard:
        raise CorruptMemoryFile(
            path, f"the fact belongs in shard directory {fact_shard(fact_id)!r}, not {shard!r}"
        )


def sort_facts(facts: Iterable[Fact]) -> tuple[Fact, ...]:
    """Facts by creation time, then id: the order every reader and the gate see."""
    return tuple(sorted(facts, key=_creation_key))


def _creation_key(fact: Fact) -> tuple[datetime, str]:
    return (parse_timestamp(fact.createdAt) or _EARLIEST, fact.id)
