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
  version token (the store decides where the index lives), searches it, and
  returns each hit with its fact. It writes nothing to the store either;
  counting hits as recalls is :meth:`Memory.record_access
  <deermem.memory.Memory.record_access>`' job, and it touches only the usage
  sidecar.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import weakref
from dataclasses import dataclass
from datetime import datetime

from deermem._exceptions import SearchIndexError
from deermem.config import MemoryConfig
from deermem.context import (
    Injection,
    InjectionSettings,
    SearchIndex,
    Summaries,
    build_injection,
    search_facts,
)
from deermem.context.search import MatchType
from deermem.context.search_index import MEMORY
from deermem.model.fact import Fact
from deermem.policy import POLICY_HYBRID_V1
from deermem.store import Scope, Store

__all__ = ["SearchIndexHandle", "SearchResult", "memory_injection", "search_scope"]

_log = logging.getLogger("deermem.memory")


@dataclass(frozen=True, slots=True)
class SearchResult:
    """One search hit with its fact.

    Attributes:
        fact: the fact as stored.
        score: ``|bm25| × decay + 0.2 × confidence`` for ``fts5`` matches,
            the confidence for ``substring`` matches; higher is better.
        match_type: ``fts5`` or ``substring`` (the fallback).
        bm25: FTS5's raw BM25 (negative; more negative is better), ``None``
            for substring matches.
    """

    fact: Fact
    score: float
    match_type: MatchType
    bm25: float | None = None

    @property
    def fact_id(self) -> str:
        return self.fact.id

    @property
    def content(self) -> str:
        return self.fact.content

    @property
    def category(self) -> str:
        """The category as shown to people: an ``other`` fact's own label."""
        return self.fact.categoryExtension or self.fact.category

    @property
    def confidence(self) -> float:
        return self.fact.confidence

    def to_dict(self) -> dict[str, object]:
        return {
            "fact": self.fact.to_dict(),
            "score": self.score,
            "matchType": self.match_type,
            "bm25": self.bm25,
        }


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
    index: SearchIndex | None,
    query: str,
    *,
    now: datetime,
    top_k: int,
    category: str | None,
) -> tuple[SearchResult, ...]:
    """Search one scope: bring its index to the snapshot's version, then FTS5, then substrings.

    The index is synchronised with exactly the snapshot it is then read
    against, so every hit names a fact of that snapshot.
    """
    snapshot = store.load(scope)
    hits = search_facts(
        index,
        scope.user_id,
        scope.agent,
        query,
        version=snapshot.version,
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


class SearchIndexHandle:
    """The store's search index, opened on first use and shared by a memory's views.

    Opening never fails a search: when the store cannot provide a location (a
    read-only store) or the index cannot be opened there, :meth:`get` says so
    once, in a warning, and keeps an index in memory instead — rebuilt from
    the facts, so searches rank exactly as with the file.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._index: SearchIndex | None = None
        self._closer: weakref.finalize[[], SearchIndexHandle] | None = None

    def get(self, store: Store) -> SearchIndex:
        with self._lock:
            if self._index is None:
                try:
                    self._index = SearchIndex(store.search_index_location())
                except (OSError, SearchIndexError) as error:
                    _log.warning(
                        "the search index cannot be kept on disk (%s); searching with an "
                        "index in memory, rebuilt for this process",
                        error,
                    )
                    self._index = SearchIndex(MEMORY)
                # Closed with the last memory that shares it, if nobody calls close().
                self._closer = weakref.finalize(self, self._index.close)
            return self._index

    def mark_stale(self, store: Store, scope: Scope) -> None:
        """Make one scope's rows re-checked at the next search (after a reload)."""
        index = self.get(store)
        try:
            index.mark_stale(scope.user_id, scope.agent)
        except SearchIndexError as error:
            _log.warning("search index unavailable (%s); not marked stale", error)

    def close(self) -> None:
        """Close the index connection; the next search opens it again."""
        with self._lock:
            if self._closer is not None:
                self._closer()  # closes the index, once
            self._index = None
            self._closer = None
