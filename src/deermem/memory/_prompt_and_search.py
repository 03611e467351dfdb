"""``Memory.injection``, ``Memory.context`` and ``Memory.search``: a part of :class:`Memory`.

Kept in a module of its own so the facade stays readable; the work itself
is in :mod:`deermem.memory.recall` and :mod:`deermem.context`.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING

from deermem.memory._sentinel import UNSET
from deermem.memory.recall import SearchResult, memory_injection, search_scope

if TYPE_CHECKING:
    from deermem.config import MemoryConfig
    from deermem.context import Injection
    from deermem.memory.recall import SearchIndexHandle
    from deermem.store import Scope, Store

__all__ = ["PromptAndSearch"]


class PromptAndSearch:
    """The prompt block and search of a :class:`~deermem.memory.Memory`."""

    if TYPE_CHECKING:  # provided by Memory
        store: Store
        scope: Scope
        config: MemoryConfig
        _search_index: SearchIndexHandle

        def now(self) -> datetime: ...

        def scoped(self, *, user: object = ..., agent: object = ...) -> PromptAndSearch: ...

        def record_access(self, fact_ids: Iterable[str]) -> bool: ...

    def injection(
        self, *, user: object = UNSET, user_id: object = UNSET, agent: object = UNSET
    ) -> Injection:
        """The prompt text of this memory (or of another scope) and its manifest.

        Summaries and facts within ``max_injection_tokens``; the
        ``protected_categories`` first, within ``guaranteed_token_budget``;
        the rest in the order of the configured capacity policy (by the
        ``hybrid-v1`` score under ``hybrid-v1``); empty when
        ``injection_enabled`` is off. ``Injection.block`` is the text in its
        ``<memory>`` block, ``Injection.manifest`` says which facts went in,
        at what token cost, and which were left out and why. It only reads:
        being injected is neither a recall nor a confirmation.

        Args:
            user: another user id, as for :meth:`scoped` (``user_id`` is the
                same, under the reference's name; give one of them).
            user_id: the same as ``user``.
            agent: another agent name, as for :meth:`scoped`.
        """
        view = self._view(user, user_id, agent)
        return memory_injection(view.store, view.scope, view.config, view.now())

    def context(
        self, *, user: object = UNSET, user_id: object = UNSET, agent: object = UNSET
    ) -> str:
        """The ``<memory>`` block for an agent's prompt (``""`` when there is nothing).

        :meth:`injection`'s text, wrapped. Stored text is escaped, so it can
        neither close the block nor start a line of its own.
        """
        return self.injection(user=user, user_id=user_id, agent=agent).block

    def search(
        self,
        query: str,
        *,
        top_k: int = 5,
        category: str | None = None,
        record: bool = True,
        user: object = UNSET,
        user_id: object = UNSET,
        agent: object = UNSET,
    ) -> tuple[SearchResult, ...]:
        """The facts that best match a query, best first.

        Ranked by ``|bm25| × decay + 0.2 × confidence`` over the store's
        SQLite FTS5 index, which is brought up to date first (a missing,
        damaged or stale index is rebuilt, never an error); when FTS5 finds
        nothing, by a case-insensitive substring match. The category filter
        applies before the cut. Under ``hybrid-v1`` or shadow mode the hits
        count as recalls in the usage sidecar; a search never changes a fact
        and never counts as a confirmation.

        Args:
            query: what to look for, as typed (operators and quotes are safe).
            top_k: at most this many results (``≤ 0``: none).
            category: only facts of this category (an ``other`` fact's own
                label counts too).
            record: count the hits as recalls when the policy uses recalls;
                ``False`` looks without counting (an operator's inspection).
            user: another user id, as for :meth:`scoped` (or ``user_id``).
            user_id: the same as ``user``.
            agent: another agent name, as for :meth:`scoped`.
        """
        view = self._view(user, user_id, agent)
        results = search_scope(
            view.store,
            view.scope,
            view._search_index.get(view.store),
            query,
            now=view.now(),
            top_k=top_k,
            category=category,
        )
        if record and results:
            view.record_access(result.fact_id for result in results)
        return results

    def _close_search_index(self) -> None:
        """Close the search index connection, shared with :meth:`scoped` views.

        A later search opens it again. Called by :meth:`Memory.close`.
        """
        self._search_index.close()

    def _view(self, user: object, user_id: object, agent: object) -> PromptAndSearch:
        """This memory, or the one of the scope another user and/or agent names."""
        if user is not UNSET and user_id is not UNSET:
            raise TypeError("give the user as user= or as user_id=, not both")
        chosen = user if user_id is UNSET else user_id
        scope: dict[str, object] = {}
        if chosen is not UNSET:
            scope["user"] = chosen
        if agent is not UNSET:
            scope["agent"] = agent
        return self.scoped(**scope) if scope else self
