"""What a memory gives back: the prompt block, and search results.

The glue between the store and the pure :mod:`deermem.context` engine, for
:meth:`Memory.injection <deermem.memory.Memory.injection>`,
:meth:`Memory.context <deermem.memory.Memory.context>` and
:meth:`Memory.search <deermem.memory.Memory.search>`:

* **injection** reads one snapshot (summaries and facts) and, only under
  ``hybrid-v1`` — the one ranking that reads recall heat — the usage
  sidecar. It writes nothing: building a prompt is not a recall and not a
  confirmation.
* **search** keeps the store's derived FTS5 index in step with the scope's
  facts — by content (:func:`~deermem.context.search_index.content_version`),
  so a fact edited by hand is found by its new words — searches it, and
  returns each hit with its fact. The store decides where the index lives.
  It writes nothing to the store either; counting hits as recalls is :meth:`Memory.record_access
  <deermem.memory.Memory.record_access>`' job, and it touches only the usage
  sidecar.

``Memory`` imports this module with its first prompt or search.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

from deermem.context import (
    Injection,
    InjectionSettings,
    SearchIndex,
    Summaries,
    build_injection,
    search_facts,
)
from deermem.context.search_index import MEMORY, content_version
from deermem.memory.results import ReindexReport, SearchResult
from deermem.policy import POLICY_HYBRID_V1

if TYPE_CHECKING:
    from deermem.config import MemoryConfig
    from deermem.memory.search_handle import SearchIndexHandle
    from deermem.store import Scope, Store

__all__ = ["memory_injection", "rebuild_search_index", "search_scope"]


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


def search_scope(
    store: Store,
    scope: Scope,
    handle: SearchIndexHandle,
    query: str,
    *,
    now: datetime,
    top_k: int,
    category: str | None,
) -> tuple[SearchResult, ...]:
    """Search one scope: bring its index to the snapshot's content, then FTS5, then substrings.

    The index is synchronised with exactly the snapshot it is then read
    against, so every hit names a fact of that snapshot.
    """
    snapshot = store.load(scope)
    hits = search_facts(
        handle.get(store),
        scope.user_id,
        scope.agent,
        query,
        version=handle.version_of(snapshot),
        load=lambda: snapshot.facts,
        now=now,
        top_k=top_k,
        category=category,
    )
    results = []
    for hit in hits:
        fact = snapshot.get(hit.fact_id)
        if fact is not None:
            results.append(SearchResult(fact, hit.score, hit.match_type, hit.bm25))
    return tuple(results)


def rebuild_search_index(
    store: Store, *, progress: Callable[[int, int], None] | None = None
) -> ReindexReport:
    """Rebuild the store's search index from every scope's facts.

    Searches keep it in step by themselves; this is for an index that was
    deleted, copied from elsewhere, or should be compacted. Other processes
    may search meanwhile: a scope not rebuilt yet is rebuilt by their search.

    Args:
        store: the store whose index to rebuild.
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
            facts += len(snapshot.facts)
            if progress is not None:
                progress(done, len(scopes))
    return ReindexReport(scopes=len(scopes), facts=facts, location=str(location))
