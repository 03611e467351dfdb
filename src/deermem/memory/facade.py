"""``Memory``: the one object every interface (CLI, server, agent tools) uses.

A ``Memory`` is a store, a configuration, a scope (user + agent) and a
clock. Every operation that adds facts — :meth:`Memory.create_fact`,
:meth:`Memory.import_document`, :meth:`Memory.restore` and extraction from a
conversation (:meth:`Memory.update_now`, :meth:`Memory.add_conversation`,
whose machinery is in :mod:`deermem.memory._update`) — goes through the
:class:`~deermem.store.CapacityGate`, inside the user's lock; nothing else
trims a library. Every decision reads the injected clock, never the wall
clock directly, so tests and demos are reproducible.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from deermem._exceptions import (
    FactNotFoundError,
    FactRevisionConflict,
    UnsafeIdentifierError,
)
from deermem.config import MemoryConfig, load_config
from deermem.memory._checks import check_confidence, check_not_duplicate, checked_content
from deermem.memory._prompt_and_search import PromptAndSearch
from deermem.memory._sentinel import UNSET
from deermem.memory._update import ConversationMethods, UpdateService
from deermem.memory.documents import export_document, plan_import
from deermem.memory.explain import standing_of
from deermem.memory.recall import SearchIndexHandle
from deermem.memory.results import CreateResult, Explanation, ImportResult, RestoreResult
from deermem.model.categories import category_key
from deermem.model.fact import Fact
from deermem.model.timestamps import format_timestamp
from deermem.store import (
    REASON_DELETED,
    ArchiveEntry,
    CapacityGate,
    ChangeSet,
    EvictionReceipt,
    FactWrite,
    MarkdownStore,
    Proposal,
    Removal,
    Scope,
    ScopeSnapshot,
    Store,
    SummaryDocument,
)

if TYPE_CHECKING:
    from deermem.llm import ChatModel
    from deermem.update import FlushReport

__all__ = ["Clock", "Memory", "random_fact_id", "wall_clock"]

Clock = Callable[[], datetime]
"""Returns the current time as an aware UTC datetime."""

_UNSET = UNSET
_ID_ATTEMPTS = 20


def wall_clock() -> datetime:
    return datetime.now(UTC)


def random_fact_id() -> str:
    """``fact_`` + 8 lowercase hex digits, as the original's updater makes them."""
    return f"fact_{uuid.uuid4().hex[:8]}"


class Memory(ConversationMethods, PromptAndSearch):
    """Long-term memory of one user for one agent.

    Build it with :meth:`open`; :meth:`scoped` gives a view of another user
    or agent over the same store. The prompt block and search
    (:meth:`context`, :meth:`injection`, :meth:`search`) are in
    :class:`~deermem.memory._prompt_and_search.PromptAndSearch`.
    """

    def __init__(
        self,
        store: Store,
        config: MemoryConfig,
        scope: Scope,
        *,
        clock: Clock | None = None,
        id_factory: Callable[[], str] | None = None,
        model: ChatModel | None = None,
    ) -> None:
        if scope.user_id is None and config.strict_user_scope:
            raise UnsafeIdentifierError(
                "user id", None, "a user id is required (strict_user_scope is on)"
            )
        self.store = store
        self.config = config
        self.scope = scope
        self.gate = CapacityGate.from_config(config)
        self._clock = clock or wall_clock
        self._new_id = id_factory or random_fact_id
        self._updates = UpdateService(
            store, config, clock=self.now, new_id=self._new_id, model=model
        )
        self._search_index = SearchIndexHandle()

    @classmethod
    def open(
        cls,
        root: str | os.PathLike[str] | None = None,
        config: MemoryConfig | None = None,
        *,
        user: str | None = None,
        agent: str | None = None,
        clock: Clock | None = None,
        id_factory: Callable[[], str] | None = None,
        model: ChatModel | None = None,
    ) -> Memory:
        """Open the Markdown store at ``root``.

        Args:
            root: the store directory; default: ``config.storage_path``, else
                ``$DEERMEM_DATA_DIR``, else ``~/.deermem``.
            config: the configuration; default: defaults plus ``DEERMEM_*``
                environment variables.
            user: the user id (``None``: the single-user layout).
            agent: the agent name (``None``: the ``__default__`` bucket).
            clock: the time source of every decision (aware UTC datetimes).
            id_factory: makes new fact ids (for reproducible runs).
            model: the chat model extraction uses; by default the one
                ``config.model`` describes, built on first use.
        """
        config = config if config is not None else load_config()
        store = MarkdownStore.from_config(config, Path(root) if root is not None else None)
        return cls(
            store,
            config,
            Scope.of(user, agent),
            clock=clock,
            id_factory=id_factory,
            model=model,
        )

    def scoped(self, *, user: object = _UNSET, agent: object = _UNSET) -> Memory:
        """The same store and settings for another user and/or agent.

        Views share the update machinery (model, queue, watermark): closing
        any of them flushes the conversations queued through all of them.
        """
        view = Memory(
            self.store,
            self.config,
            self._scope_of(user, agent),
            clock=self._clock,
            id_factory=self._new_id,
        )
        view._updates = self._updates
        view._search_index = self._search_index  # one index connection per store
        return view

    def _scope_of(self, user: object, agent: object) -> Scope:
        """This memory's scope with ``user`` and/or ``agent`` replaced (``_UNSET``: kept)."""
        user_id = self.scope.user_id if user is _UNSET else user
        agent_name = self.scope.agent if agent is _UNSET else agent
        if user_id is not None and not isinstance(user_id, str):
            raise UnsafeIdentifierError("user id", user_id, "expected a string")
        if agent_name is not None and not isinstance(agent_name, str):
            raise UnsafeIdentifierError("agent name", agent_name, "expected a string")
        return Scope.of(user_id, agent_name)

    def close(self, timeout: float | None = None) -> FlushReport:
        """Flush queued conversations (see :meth:`ConversationMethods.close`) and
        close the search index connection; a later search reopens it."""
        try:
            return ConversationMethods.close(self, timeout)
        finally:
            self._close_search_index()

    def __repr__(self) -> str:
        return f"Memory({self.store!r}, {self.scope})"

    def now(self) -> datetime:
        """The injected clock's current time."""
        return self._clock()

    # --- reading ------------------------------------------------------------------

    def snapshot(self) -> ScopeSnapshot:
        return self.store.load(self.scope)

    def list_facts(self, *, category: str | None = None) -> tuple[Fact, ...]:
        """Active facts, oldest first; optionally only one category (case-insensitive)."""
        facts = self.snapshot().facts
        if category is None:
            return facts
        wanted = category_key(category)
        return tuple(f for f in facts if wanted in (f.category, category_key(f.categoryExtension)))

    def get_fact(self, fact_id: str) -> Fact:
        """One active fact.

        Raises:
            FactNotFoundError: no active fact has this id.
        """
        fact = self.snapshot().get(fact_id)
        if fact is None:
            raise FactNotFoundError(fact_id)
        return fact

    def summaries(self) -> SummaryDocument:
        return self.snapshot().summaries

    def version(self) -> str:
        """A token that changes whenever this memory may have changed (for derived indexes)."""
        return self.store.version(self.scope)

    def reload(self) -> ScopeSnapshot:
        """Re-read the scope from disk (after editing fact files by hand).

        The scope's search index is re-checked at the next search too: hand
        edits do not change the version token it is kept in step with.
        """
        snapshot = self.store.reload(self.scope)
        self._search_index.mark_stale(self.store, self.scope)
        return snapshot

    def export_document(self) -> dict[str, object]:
        """Summaries and every fact with every field (see :mod:`deermem.memory.documents`)."""
        return export_document(self.snapshot())

    def audit(self) -> tuple[EvictionReceipt, ...]:
        """Eviction receipts, oldest first."""
        return self.store.audit(self.scope)

    def archive(self) -> tuple[ArchiveEntry, ...]:
        """Archived facts, newest first."""
        return self.store.archive(self.scope, self.now())

    def archived(self, fact_id: str) -> ArchiveEntry:
        """One archived fact.

        Raises:
            FactNotFoundError: the archive holds no (unexpired) entry for the id.
        """
        entry = self.store.archived(self.scope, fact_id)
        if entry is None or entry.expired(self.now(), self.config.archive_max_age_days):
            raise FactNotFoundError(fact_id, where="archive")
        return entry

    # --- adding facts: always through the gate -----------------------------------

    def create_fact(
        self,
        content: str,
        *,
        category: str = "context",
        confidence: float = 0.5,
        topics: Iterable[str] = (),
        source_error: str | None = None,
        expected_valid_days: int | None = None,
    ) -> CreateResult:
        """Add a fact by hand (or from a tool) through the capacity gate.

        The content is trimmed; an equal fact (compared case-insensitively)
        already stored is an error. When the library is full the gate decides
        — possibly against the new fact itself, which then goes to the
        archive and :attr:`CreateResult.fact_id` is ``None``.

        Raises:
            FactValidationError: empty content, a confidence outside [0, 1] ...
            DuplicateFactError: an equal fact is already stored.
        """
        text = checked_content(content)
        check_confidence(confidence)
        now = self.now()
        with self.store.transaction(self.scope) as transaction:
            snapshot = transaction.snapshot
            check_not_duplicate(snapshot, text)
            data: dict[str, object] = {
                "id": self._fresh_id(snapshot, transaction.archived),
                "content": text,
                "category": category,
                "confidence": confidence,
                "source": "manual",
                "topics": list(topics),
                "createdAt": format_timestamp(now),
            }
            if source_error:
                data["sourceError"] = source_error
            if expected_valid_days is not None:
                data["expected_valid_days"] = expected_valid_days
            fact = Fact.from_dict(data)
            outcome = self.gate.apply(
                transaction, Proposal(new_facts=(fact,)), trigger="manual", now=now
            )
        kept = fact.id in outcome.kept_new
        stored = next((f for f in outcome.commit.written if f.id == fact.id), fact)
        return CreateResult(
            fact_id=fact.id if kept else None,
            fact=stored,
            evicted=outcome.evicted,
            receipts=outcome.receipts,
        )

    def import_document(self, document: Mapping[str, object]) -> ImportResult:
        """Replace this scope's facts and summaries with a document's, through the gate.

        Raises:
            FactValidationError: the document or one of its facts is invalid.
            FactRevisionConflict: a fact states a revision other than the stored one.
        """
        now = self.now()
        with self.store.transaction(self.scope) as transaction:
            snapshot = transaction.snapshot
            plan = plan_import(
                document, snapshot, now, lambda: self._fresh_id(snapshot, transaction.archived)
            )
            outcome = self.gate.apply(transaction, plan.proposal, trigger="import", now=now)
        evicted = set(outcome.evicted)
        return ImportResult(
            kept=tuple(i for i in plan.fact_ids if i not in evicted),
            evicted=outcome.evicted,
            replaced=outcome.removed,
            receipts=outcome.receipts,
        )

    def restore(self, fact_id: str) -> RestoreResult:
        """Send an archived fact back through the capacity gate.

        The gate may evict it again (or evict another fact to make room); the
        result says which, and the receipts record it.

        Raises:
            FactNotFoundError: the archive holds no (unexpired) entry for the id.
            FactRevisionConflict: an active fact already has this id.
            DuplicateFactError: an equal fact is active again.
        """
        now = self.now()
        with self.store.transaction(self.scope) as transaction:
            entry = transaction.archived(fact_id)
            if entry is None or entry.expired(now, self.config.archive_max_age_days):
                raise FactNotFoundError(fact_id, where="archive")
            snapshot = transaction.snapshot
            if fact_id in snapshot:
                raise FactRevisionConflict(
                    fact_id, expected=None, actual=snapshot.by_id[fact_id].revision
                )
            check_not_duplicate(snapshot, entry.fact.content)
            outcome = self.gate.apply(
                transaction, Proposal(restored=(entry,)), trigger="restore", now=now
            )
        return RestoreResult(
            fact_id=fact_id,
            restored=fact_id in outcome.kept_new,
            evicted=outcome.evicted,
            receipts=outcome.receipts,
        )

    # --- changing and removing ------------------------------------------------------

    def update_fact(
        self,
        fact_id: str,
        *,
        content: str | None = None,
        category: str | None = None,
        confidence: float | None = None,
        expected_revision: int | None = None,
    ) -> Fact:
        """Change fields of a fact; omitted fields are kept. Never trims the library.

        Raises:
            FactNotFoundError: no active fact has this id.
            FactRevisionConflict: ``expected_revision`` is not the stored revision.
            FactValidationError: a new value is invalid.
        """
        changes: dict[str, object] = {}
        if content is not None:
            changes["content"] = checked_content(content)
        if category is not None:
            changes["category"] = category
        if confidence is not None:
            check_confidence(confidence)
            changes["confidence"] = confidence
        with self.store.transaction(self.scope) as transaction:
            stored = transaction.snapshot.get(fact_id)
            if stored is None:
                raise FactNotFoundError(fact_id)
            if expected_revision is not None and expected_revision != stored.revision:
                raise FactRevisionConflict(
                    fact_id, expected=expected_revision, actual=stored.revision
                )
            if "category" in changes:
                changes["categoryExtension"] = None
            updated = stored.replace(**changes)
            result = transaction.commit(
                ChangeSet(now=self.now(), writes=(FactWrite(updated, create=False),))
            )
        return result.written[0] if result.written else stored

    def delete_fact(self, fact_id: str, *, expected_revision: int | None = None) -> None:
        """Remove a fact: to the archive (default), or for good with ``eviction_mode: delete``.

        Raises:
            FactNotFoundError: no active fact has this id.
            FactRevisionConflict: ``expected_revision`` is not the stored revision.
        """
        now = self.now()
        with self.store.transaction(self.scope) as transaction:
            if fact_id not in transaction.snapshot:
                raise FactNotFoundError(fact_id)
            removal = Removal(fact_id, REASON_DELETED, expected_revision=expected_revision)
            self.gate.remove(transaction, (removal,), trigger="manual", now=now)

    def purge(self, fact_id: str) -> None:
        """Delete an archived fact for good; its content-free receipts stay.

        Raises:
            FactNotFoundError: the archive holds no entry for the id.
        """
        self.store.purge(self.scope, fact_id)

    def record_access(self, fact_ids: Iterable[str]) -> bool:
        """Count a recall (e.g. a search hit) of each fact, if the policy uses it.

        Only ``hybrid-v1`` and shadow mode read recall heat, so only they pay
        for recording it; returns whether anything was recorded.
        """
        if not self.gate.policy.uses_usage:
            return False
        self.store.record_access(self.scope, list(fact_ids), self.now())
        return True

    # --- explaining ---------------------------------------------------------------

    def why(self, fact_id: str) -> Explanation:
        """Why a fact is in the library, in the archive, or gone.

        Raises:
            FactNotFoundError: the id is unknown: no fact, archive entry or receipt.
        """
        snapshot = self.snapshot()
        receipts = tuple(r for r in self.audit() if fact_id in r.fact_ids)
        fact = snapshot.get(fact_id)
        if fact is not None:
            usage = self.store.usage(self.scope) if self.gate.policy.uses_usage else {}
            standing = standing_of(self.gate, snapshot.facts, fact_id, usage, self.now())
            return Explanation(fact_id, "active", fact, receipts, None, standing)
        entry = self.store.archived(self.scope, fact_id)
        if entry is not None and not entry.expired(self.now(), self.config.archive_max_age_days):
            return Explanation(fact_id, "archived", entry.fact, receipts, entry, None)
        if receipts:
            return Explanation(fact_id, "gone", None, receipts, None, None)
        raise FactNotFoundError(fact_id)

    # --- helpers --------------------------------------------------------------

    def _fresh_id(
        self, snapshot: ScopeSnapshot, archived: Callable[[str], ArchiveEntry | None]
    ) -> str:
        for _ in range(_ID_ATTEMPTS):
            candidate = self._new_id()
            if candidate not in snapshot and archived(candidate) is None:
                return candidate
        raise RuntimeError("the fact id factory keeps returning ids that are in use")
