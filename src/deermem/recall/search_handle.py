"""The store's search index as a memory holds it: opened by the first search.

A :class:`~deermem.memory.Memory` and every view
:meth:`~deermem.memory.Memory.scoped` makes of it share one
:class:`SearchIndexHandle`. The search stack (:mod:`deermem.recall`, SQLite)
is imported when the index is first opened, not with this module: a memory
that never searches never loads it.
"""

from __future__ import annotations

import logging
import threading
import weakref
from typing import TYPE_CHECKING

from deermem.errors import SearchIndexError

if TYPE_CHECKING:
    from deermem.model import Scope
    from deermem.recall import SearchIndex
    from deermem.store import ScopeSnapshot, Store

__all__ = ["SearchIndexHandle"]

_log = logging.getLogger("deermem.memory")
_VERSIONS_KEPT = 1024


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
        # The content token of the snapshot last searched, per scope: a store
        # hands out the same snapshot object until the scope changes, so the
        # digest over every fact is computed once per change, not per search.
        self._versions: dict[tuple[str | None, str], tuple[weakref.ref[ScopeSnapshot], str]] = {}

    def get(self, store: Store) -> SearchIndex:
        from deermem.recall.search_index import MEMORY, SearchIndex

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

    def mark_archive_stale(self, store: Store, scope: Scope) -> None:
        """Make one scope's archive rows re-listed at the next search (after a purge)."""
        try:
            self.get(store).mark_archive_stale(scope.user_id, scope.agent)
        except SearchIndexError as error:
            _log.warning("search index unavailable (%s); not marked stale", error)

    def version_of(self, snapshot: ScopeSnapshot) -> str:
        """The index version token of a snapshot's facts (see ``content_version``)."""
        from deermem.recall.search_index import content_version

        key = (snapshot.scope.user_id, snapshot.scope.agent)
        with self._lock:
            memo = self._versions.get(key)
            if memo is not None and memo[0]() is snapshot:
                return memo[1]
        token = content_version(snapshot.facts)
        with self._lock:
            if len(self._versions) >= _VERSIONS_KEPT:
                self._versions.clear()
            self._versions[key] = (weakref.ref(snapshot), token)
        return token

    def close(self) -> None:
        """Close the index connection; the next search opens it again."""
        with self._lock:
            if self._closer is not None:
                self._closer()  # closes the index, once
            self._index = None
            self._closer = None
