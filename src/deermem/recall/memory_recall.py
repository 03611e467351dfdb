"""What a memory gives back: the prompt block, and search results.

The glue between the store and the pure :mod:`deermem.recall` engine, for
:meth:`Memory.injection <deermem.memory.Memory.injection>`,
:meth:`Memory.context <deermem.memory.Memory.context>` and
:meth:`Memory.search <deermem.memory.Memory.search>`:

* **injection** reads one snapshot (summaries and facts) and, only under
  ``hybrid-v1`` — the one ranking that reads recall heat — the usage
  sidecar. It writes nothing: building a prompt is not a recall and not a
  confirmation.
* **search** keeps the store's derived FTS5 index in step with the scope's
  facts — by content (:func:`~deermem.recall.search_index.content_version`),
  so a fact edited by hand is found by its new words — searches it, and
  returns each hit with its fact. The store decides where the index lives.
  With missed-recall detection on it keeps the scope's archive indexed too,
  and reports the archived facts that would have been among the results
  (:func:`~deermem.recall.search_with_archive`). It writes nothing to the
  store either; counting hits as recalls, and recording regret, is
  :meth:`Memory.search <deermem.memory.Memory.search>`' job, and it touches
  only the sidecars.

``Memory`` imports this module with its first prompt or search.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from deermem.errors import CorruptMemoryFile, SearchIndexError
from deermem.policy import POLICY_HYBRID_V1
from deermem.recall import (
    ArchiveSource,
    Injection,
    InjectionSettings,
    SearchIndex,
    Summaries,
    build_injection,
    search_facts,
    search_with_archive,
)
from deermem.recall.search_index import MEMORY, content_version
from deermem.results import ReindexReport, SearchResult

if TYPE_CHECKING:
    from deermem.config import MemoryConfig
    from deermem.model.fact import Fact
    from deermem.recall.search import SearchHit
    from deermem.recall.search_handle import SearchIndexHandle
    from deermem.store import ArchiveEntry, Scope, Store

__all__ = ["SearchFindings", "memory_injection", "rebuild_search_index", "search_scope"]

_NO_ARCHIVE = "off"
"""The archive version of a scope whose archive is not indexed (detection off)."""

_log = logging.getLogger("deermem.memory")


def memory_injection(
    store: Store,
    scope: Scope,
    config: MemoryConfig,
    now: datetime,
    *,
    max_tokens: int | None = None,
    facts: bool = True,
) -> Injection:
    """Lay out one scope's summaries and (unless ``facts`` is off) facts for the prompt
    (see ``build_injection``).

    ``max_tokens`` replaces ``max_injection_tokens`` for this one prompt; the
    guaranteed budget shrinks with it when it is smaller, so a caller's
    budget is never exceeded by the guaranteed lines.
    """
    settings = InjectionSettings.from_config(config)
    if max_tokens is not None:
        settings = dataclasses.replace(
            settings,
            max_tokens=max_tokens,
            guaranteed_token_budget=min(settings.guaranteed_token_budget, max_tokens),
        )
    if not settings.enabled:
        return build_injection((), settings=settings, now=now)
    snapshot = store.load(scope)
    usage = None
    if facts and settings.ranking.name == POLICY_HYBRID_V1:
        usage = {key: entry.to_dict() for key, entry in store.usage(scope).items()}
    return build_injection(
        snapshot.facts if facts else (),
        settings=settings,
        now=now,
        summaries=Summaries.from_document(snapshot.summaries.to_dict()),
        usage=usage,
    )


@dataclass(frozen=True, slots=True)
class SearchFindings:
    """A search's results, and the archived facts it missed.

    Attributes:
        results: the library's results, best first.
        missed: archived facts that would have been among the results had
            they still been in the library, each with its archive entry and
            its rank among library and archive ranked together (1 = first).
    """

    results: tuple[SearchResult, ...]
    missed: tuple[tuple[ArchiveEntry, int], ...] = ()


def search_scope(
    store: Store,
    scope: Scope,
    handle: SearchIndexHandle,
    query: str,
    *,
    now: datetime,
    top_k: int,
    category: str | None,
    with_archive: bool = False,
) -> SearchFindings:
    """Search one scope: bring its index to the snapshot's content, then FTS5, then substrings.

    The index is synchronised with exactly the snapshot it is then read
    against, so every hit names a fact of that snapshot. ``with_archive``
    also indexes the scope's archive and reports what the search missed in
    it; without it the archive's rows are dropped from the index, so an
    index never keeps archived text nobody searches.
    """
    snapshot = store.load(scope)
    index = handle.get(store)
    version = handle.version_of(snapshot)
    if not with_archive:
        _drop_archive(index, scope)
        hits = search_facts(
            index,
            scope.user_id,
            scope.agent,
            query,
            version=version,
            load=lambda: snapshot.facts,
            now=now,
            top_k=top_k,
            category=category,
        )
        return SearchFindings(_results(snapshot.by_id, hits))
    outcome = search_with_archive(
        index,
        scope.user_id,
        scope.agent,
        query,
        version=version,
        # The archive changes only by a commit, which changes the store's
        # version token (also when the library's content stays the same: a
        # new fact evicted at once), or by a purge, after which Memory.purge
        # marks the archive rows stale.
        archive_version=snapshot.version,
        load=lambda: snapshot.facts,
        archive=_archive_source(store, scope, now),
        now=now,
        top_k=top_k,
        category=category,
    )
    missed = []
    for item in outcome.missed:
        entry = _archived(store, scope, item.hit.fact_id)
        if entry is not None:
            missed.append((entry, item.rank))
    return SearchFindings(_results(snapshot.by_id, outcome.hits), tuple(missed))


def _results(facts: Mapping[str, Fact], hits: Sequence[SearchHit]) -> tuple[SearchResult, ...]:
    results = []
    for hit in hits:
        fact = facts.get(hit.fact_id)
        if fact is not None:
            results.append(
                SearchResult(fact=fact, score=hit.score, match_type=hit.match_type, bm25=hit.bm25)
            )
    return tuple(results)


def _archive_source(store: Store, scope: Scope, now: datetime) -> ArchiveSource:
    """The scope's archive as the index follows it.

    A damaged archive never fails a search: it is searched without its
    archive, and the damage is logged (listing or restoring names the file).
    """

    def listing() -> Mapping[str, str] | None:
        try:
            return store.archive_listing(scope, now)
        except (CorruptMemoryFile, OSError) as error:
            _log.warning("not looking for missed recalls in the archive: %s", error)
            return None

    def load(fact_ids: Sequence[str]) -> list[Fact]:
        facts = []
        for fact_id in fact_ids:
            entry = _archived(store, scope, fact_id)
            if entry is not None:
                facts.append(entry.fact)
        return facts

    return ArchiveSource(listing, load)


def _archived(store: Store, scope: Scope, fact_id: str) -> ArchiveEntry | None:
    try:
        return store.archived(scope, fact_id)
    except (CorruptMemoryFile, OSError) as error:
        _log.warning("skipping an unreadable archive entry: %s", error)
        return None


def _drop_archive(index: SearchIndex, scope: Scope) -> None:
    """Remove the scope's archive rows, if an earlier search with detection indexed them."""
    try:
        if not index.is_archive_current(scope.user_id, scope.agent, _NO_ARCHIVE):
            index.sync_archive(scope.user_id, scope.agent, {}, lambda _: (), version=_NO_ARCHIVE)
    except SearchIndexError as error:
        _log.warning("search index unavailable (%s)", error)


def rebuild_search_index(
    store: Store,
    *,
    now: datetime,
    with_archive: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> ReindexReport:
    """Rebuild the store's search index from every scope's facts.

    Searches keep it in step by themselves; this is for an index that was
    deleted, copied from elsewhere, or should be compacted. Other processes
    may search meanwhile: a scope not rebuilt yet is rebuilt by their search.

    Args:
        store: the store whose index to rebuild.
        now: the clock the archive's age limit is read at.
        with_archive: index every scope's archive too, at the token a search
            with missed-recall detection compares (without it the archive
            rows are gone, as a search without detection leaves them).
        progress: called with (scopes done, scopes in all) after each scope.

    Raises:
        OSError: the index cannot be written where the store keeps it.
        SearchIndexError: the index file cannot be opened.
    """
    location = store.search_index_location()
    if str(location) == MEMORY:
        return ReindexReport(scopes=0, facts=0, location=None)
    scopes = store.scopes()
    facts = 0
    with SearchIndex(location) as index:
        index.clear()
        for done, scope in enumerate(scopes, start=1):
            snapshot = store.load(scope)
            index.sync_scope(
                scope.user_id, scope.agent, snapshot.facts, version=content_version(snapshot.facts)
            )
            if with_archive:
                source = _archive_source(store, scope, now)
                listing = source.listing()
                if listing is not None:
                    index.sync_archive(
                        scope.user_id, scope.agent, listing, source.load, version=snapshot.version
                    )
            facts += len(snapshot.facts)
            if progress is not None:
                progress(done, len(scopes))
    return ReindexReport(scopes=len(scopes), facts=facts, location=str(location))
