"""Reading a scope from disk: the user's document and every fact file.

Reads are strict (see :mod:`deermem.store.markdown.codec`): a file that is not what it
must be stops the load with an error naming it. Stray temporary files from an
interrupted writer are skipped; they are never facts.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from types import MappingProxyType

from deermem.errors import CorruptMemoryFile
from deermem.model import FACT_ID_PATTERN, Fact, Scope, parse_timestamp
from deermem.store.cache import ABSENT, ManifestToken
from deermem.store.markdown.codec import decode_fact, decode_summaries
from deermem.store.markdown.paths import ScopePaths, UserPaths, fact_shard
from deermem.store.protocol import ScopeSnapshot, SummaryDocument

__all__ = [
    "check_layout",
    "manifest_token",
    "patched_snapshot",
    "read_fact",
    "read_manifest",
    "scan_facts",
    "sort_facts",
]

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
    """Read every fact file of a scope (a cold load)."""
    try:
        shards = sorted(paths.facts_dir.iterdir())
    except FileNotFoundError:
        return {}
    facts: dict[str, Fact] = {}
    for shard in shards:
        if shard.name.startswith("."):
            continue
        if not shard.is_dir():
            if shard.suffix == ".md":
                raise CorruptMemoryFile(shard, "a fact file outside its shard directory")
            continue
        for path in sorted(shard.iterdir()):
            if path.name.startswith(".") or path.suffix != ".md":
                continue
            fact_id = path.stem
            _check_name(fact_id, shard.name, path)
            facts[fact_id] = decode_fact(path.read_bytes(), path, scope, fact_id)
    return facts


def read_fact(paths: ScopePaths, scope: Scope, fact_id: str) -> Fact | None:
    """One fact by id, read from its file alone (``None`` if it does not exist)."""
    path = paths.fact(fact_id)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    return decode_fact(data, path, scope, fact_id)


def _check_name(fact_id: str, shard: str, path: Path) -> None:
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


def patched_snapshot(
    snapshot: ScopeSnapshot,
    written: Iterable[Fact],
    removed: Iterable[Fact],
    summaries: SummaryDocument,
    version: str,
) -> ScopeSnapshot:
    """The snapshot after a commit, without re-reading or re-sorting the library.

    ``removed`` are the stored facts that left or were replaced (the very
    objects of ``snapshot``); each change costs a binary search, so refreshing
    the cache after adding one fact to ten thousand is a list copy, not a sort.
    """
    facts = list(snapshot.facts)
    index = snapshot.by_id.copy() if "by_id" in snapshot.__dict__ else None
    for fact in removed:
        _remove(facts, fact)
        if index is not None:
            index.pop(fact.id, None)
    for fact in written:
        bisect.insort(facts, fact, key=_creation_key)
        if index is not None:
            index[fact.id] = fact
    patched = ScopeSnapshot(snapshot.scope, summaries, tuple(facts), version)
    if index is not None:
        # Carry the id index over (it is a cached_property): rebuilding it
        # would cost a pass over the whole library on the next lookup.
        patched.__dict__["by_id"] = MappingProxyType(index)
    return patched


def _remove(facts: list[Fact], fact: Fact) -> None:
    """Remove the object ``fact`` from the sorted list (found by binary search)."""
    index = bisect.bisect_left(facts, _creation_key(fact), key=_creation_key)
    while index < len(facts) and facts[index] is not fact:
        index += 1
    if index < len(facts):
        del facts[index]
