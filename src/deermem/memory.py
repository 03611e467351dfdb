"""``Memory``: the one object every interface (CLI, server, agent tools) uses.

A ``Memory`` is a store, a configuration, a scope (user + agent) and a
clock. Every operation that adds facts — :meth:`Memory.create_fact`,
:meth:`Memory.import_document`, :meth:`Memory.restore` and extraction from a
conversation (:meth:`Memory.learn`, :meth:`Memory.queue_conversation`) —
goes through the :class:`~deermem.library.CapacityGate`, inside the user's
lock; nothing else trims a library. Every decision reads the injected clock,
never the wall clock directly, so tests and demos are reproducible.

What a caller may write is checked by the input models of
:mod:`deermem.results` (:class:`~deermem.results.NewFact`,
:class:`~deermem.results.FactPatch`), and what the methods return is
described there, once for every interface.

The work is done by collaborators with one job each: the store, the gate,
:class:`~deermem.learning.Learner` (model, queue, watermark),
:class:`~deermem.recall.index.SearchIndexHandle` and the pure functions of
:mod:`deermem.recall.injection`, :mod:`deermem.recall.search` and
:func:`deermem.library.gate.standing_of`; ``Memory`` holds them and binds them
to one scope (the learner is made on first use: see :class:`_LearnerSlot`). The
memory document — what ``export`` writes and ``import`` reads — is this
module's own (:func:`export_document`, :func:`plan_import`).
"""

from __future__ import annotations

import contextlib
import copy
import errno
import logging
import os
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Final, NamedTuple, Self

from deermem.config import MemoryConfig, load_config
from deermem.errors import (
    ArchivedFactError,
    CorruptMemoryFile,
    DatabaseReadOnly,
    DuplicateFactError,
    FactNotFoundError,
    FactRevisionConflict,
    FactValidationError,
    SearchIndexError,
    UnsafeIdentifierError,
    Withheld,
)
from deermem.library import CapacityGate, Proposal, Removal
from deermem.library.gate import Ranking, WhatIf, rank_library, standing_of, what_if
from deermem.library.regret import (
    Found,
    RegretReport,
    build_report,
    build_user_report,
    search_regret,
)
from deermem.model import (
    MAX_KEPT_SIZE,
    Fact,
    FlushReport,
    Scope,
    category_key,
    check_fact_id,
    check_storable,
    check_thread_id,
    check_user_id,
    duplicate_key,
    format_timestamp,
    new_fact_id,
    random_fact_id,
    redact,
    redact_fact,
)
from deermem.policy import coerce_confidence
from deermem.recall import Injection, warm_tokenizer
from deermem.recall.embedding import ModelsUnavailable, embedder, loaded_embedder
from deermem.recall.index import SearchIndexHandle
from deermem.recall.injection import memory_injection
from deermem.recall.search import (
    SearchFindings,
    index_commit,
    rebuild_search_index,
    search_scope,
)
from deermem.results import (
    CreateResult,
    ErasureResult,
    Explanation,
    FactPatch,
    ImportResult,
    NewFact,
    RedactedItem,
    RedactionReport,
    ReindexReport,
    RestoreResult,
    ScopeSummary,
    SearchResult,
    UserImportResult,
)
from deermem.store import (
    REASON_DELETED,
    ArchiveEntry,
    ChangeSet,
    CommitResult,
    EvictionReceipt,
    FactWrite,
    ScopeSnapshot,
    Section,
    Store,
    SummaryDocument,
    open_configured,
)
from deermem.store.migrate import read_user_export, transfer_of, user_export
from deermem.store.plan import (
    newest_first_ids,
    redact_dump,
    redact_record,
    redact_records,
    redact_section,
)
from deermem.store.protocol import UserDump
from deermem.store.records import REASON_REPLACED, SUMMARY_GROUPS, SummaryKey, UsageEntry

if TYPE_CHECKING:
    from deermem.learning import Learner, UpdateResult
    from deermem.learning.messages import KeepHidden
    from deermem.llm import ChatModel
    from deermem.store.records import RegretEvent

__all__ = ["Clock", "Memory"]

Clock = Callable[[], datetime]
"""Returns the current time as an aware UTC datetime."""

# A store that cannot be written now: read-only (a mount, another user's files) or full.
_CANNOT_WRITE = frozenset(
    {errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)}
)
_log = logging.getLogger("deermem.memory")


def wall_clock() -> datetime:
    """The default clock: now, as an aware UTC datetime."""
    return datetime.now(UTC)


def _checked_scope(scope: Scope, config: MemoryConfig) -> Scope:
    if scope.user_id is None and config.strict_user_scope:
        raise UnsafeIdentifierError(
            "user id", None, "strict_user_scope is on, and every memory names its user"
        )
    return scope


class Memory:
    """Long-term memory of one user for one agent.

    Build it with :meth:`open` (or from any :class:`~deermem.store.Store`);
    :meth:`scoped` gives the same memory bound to another user and agent —
    the one way to choose a scope, so every method acts on ``self.scope``.
    A server of many users holds one memory without a scope of its own
    (:meth:`open_unscoped`) and works on its scoped views.

    Conversations reach memory through two entry points:

    * :meth:`learn` — synchronous: one model call and one commit now; it
      returns the :class:`~deermem.learning.UpdateResult` (the report and the
      facts it names), and can run as a dry run.
    * :meth:`queue_conversation` — queued: returns at once, and the
      conversation is learned from once the user pauses (debounced, merged
      per thread); :meth:`flush_queue` processes the queue now and
      :meth:`close` (or leaving a ``with`` block) flushes it.

    Attributes:
        store: where the facts live.
        config: the validated configuration.
        gate: the capacity gate every added fact goes through.
    """

    def __init__(
        self,
        store: Store,
        config: MemoryConfig,
        scope: Scope | None,
        *,
        clock: Clock | None = None,
        id_factory: Callable[[], str] | None = None,
        model: ChatModel | None = None,
        keep_hidden: KeepHidden | None = None,
    ) -> None:
        self.store = store
        self.config = config
        self._scope = None if scope is None else _checked_scope(scope, config)
        self.gate = CapacityGate.from_config(config)
        self._clock = clock or wall_clock
        self._new_id = id_factory or random_fact_id

        def new_learner() -> Learner:
            from deermem.learning import Learner

            return Learner(
                store, config, clock=self.now, new_id=self._new_id, model=model,
                keep_hidden=keep_hidden, committed=self._index_learned,
            )  # fmt: skip

        self._learner = _LearnerSlot(new_learner, store.identity)
        self._search_index = SearchIndexHandle()
        self._unrecorded_said = False

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
        keep_hidden: KeepHidden | None = None,
    ) -> Memory:
        """Open the store the configuration names, or the Markdown store at ``root``.

        A Markdown store keeps its settings in ``<root>/deermem.yaml``
        (``deermem init``; see :mod:`deermem.config`), a database in its
        ``deermem_settings`` table (``deermem db upgrade``), so a store
        built at a cap of 10 is opened at a cap of 10 whoever opens it. What
        ``config`` was given (by its file, the environment or keyword
        arguments) wins over that record; the record supplies the rest.

        Args:
            root: a Markdown store directory; default: the configuration's
                ``store`` (a PostgreSQL database), else ``config.storage_path``,
                else ``$DEERMEM_DATA_DIR``, else ``~/.deermem``.
            config: the configuration; default: defaults plus ``DEERMEM_*``
                environment variables. ``Memory.config`` is it laid over the
                store's own settings.
            user: the user id (``None``: the single-user layout).
            agent: the agent name (``None``: the ``__default__`` bucket).
            clock: the time source of every decision (a naive time is taken to be UTC).
            id_factory: makes new fact ids (for reproducible runs).
            model: the chat model extraction uses; by default the one
                ``config.model`` describes, built on first use.
            keep_hidden: the host's rule for human messages it hid from the
                user (``True``: learn from it); by default only a well-formed
                clarification answer is kept (see docs/signals.md).

        Raises:
            UnsafeIdentifierError: an unusable user id or agent name, or no
                user id while ``strict_user_scope`` is on.
            ConfigError: ``root`` and a ``store`` database are both given, or
                the store's settings file is unreadable or invalid.
            DatabaseError: the configured database cannot be used.
        """
        Scope.of(user, agent)  # an unusable id is refused before a store is opened
        memory = cls.open_unscoped(
            root, config, clock=clock, id_factory=id_factory, model=model, keep_hidden=keep_hidden
        )
        return memory.scoped(user=user, agent=agent)

    @classmethod
    def open_unscoped(
        cls,
        root: str | os.PathLike[str] | None = None,
        config: MemoryConfig | None = None,
        *,
        clock: Clock | None = None,
        id_factory: Callable[[], str] | None = None,
        model: ChatModel | None = None,
        keep_hidden: KeepHidden | None = None,
    ) -> Memory:
        """Open a store as :meth:`open` does, for many users: a memory without a scope.

        For a server whose every request names its user (the HTTP API, the
        MCP server over HTTP): it works on :meth:`scoped` views, which share
        this memory's store, model, queue and search index. The memory itself
        reads and writes nothing — every method that needs a scope raises —
        so a request that forgot to choose one fails instead of reaching the
        single-user layout, and it opens under ``strict_user_scope`` too.
        The arguments are those of :meth:`open`.
        """
        config = config if config is not None else load_config()
        store, config = open_configured(config, root)  # the settings the store keeps apply
        return cls(
            store,
            config,
            None,
            clock=clock,
            id_factory=id_factory,
            model=model,
            keep_hidden=keep_hidden,
        )

    def scoped(self, *, user: str | None, agent: str | None) -> Memory:
        """This memory bound to the scope of ``user`` and ``agent``.

        Both are required, with the meanings they have in :meth:`open`
        (``user=None``: the single-user layout; ``agent=None``: the
        ``__default__`` bucket), so a request handler that forgets one gets
        an error, not another user's memory. The view shares everything
        else — store, configuration, clock, the update queue and model, the
        search index connection — so making one is cheap, and closing any
        view flushes the conversations queued through all of them.

        Raises:
            UnsafeIdentifierError: an unusable user id or agent name, or no
                user id while ``strict_user_scope`` is on.
        """
        scope = _checked_scope(Scope.of(user, agent), self.config)
        view = copy.copy(self)  # every part is shared; only the scope differs
        view._scope = scope
        return view

    @property
    def _updates(self) -> Learner:
        return self._learner.get()

    @property
    def scope(self) -> Scope:
        """The user and agent this memory is bound to.

        Raises:
            UnsafeIdentifierError: the memory has no scope of its own
                (:meth:`open_unscoped`): only its :meth:`scoped` views have one.
        """
        if self._scope is None:
            raise UnsafeIdentifierError(
                "user id", None, "this memory serves many users: choose one with scoped()"
            )
        return self._scope

    def close(self, timeout: float | None = None) -> FlushReport:
        """Stop taking conversations, process what is queued, release connections.

        Nothing admitted is dropped silently: the report lists every
        conversation that failed or could not be processed within
        ``timeout`` (default ``shutdown_flush_timeout_seconds``), and they
        are logged (ids only). Once that time is spent no queued
        conversation is started any more, and an update already under way
        commits nothing (it is listed as not processed in time, and stays
        unlearned: its mark does not move) — unless its commit had begun,
        which is waited for and counted as processed. So nothing is applied
        after this returns. Then the model's connections are released — when
        that update's model call ends, if one was under way (a model passed
        to :meth:`open` is left to its owner) — and the search index
        connection is closed. :meth:`learn` and search still work
        afterwards (they reopen what they need); :meth:`queue_conversation`
        does not. Also called on leaving a ``with`` block.
        """
        try:
            return self._learner.close(timeout)
        finally:
            self._search_index.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Memory({self.store!r}, {self._scope or 'no scope of its own'})"

    def now(self) -> datetime:
        """The injected clock's current time, in UTC (a naive time is taken to be UTC, as the
        policies take it: every time a decision compares must be aware)."""
        moment = self._clock()
        return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)

    def warm(self, *, models: bool = False) -> bool:
        """Load now what the first prompt block and the first search would wait for.

        The ``cl100k_base`` vocabulary (under ``token_counting: tiktoken``)
        and the search index connection, ≈ 0.15 s: a host calls this at
        start-up, so its first request is not the one that pays. With
        ``models``, also the embedding models of search by meaning (under
        ``search_mode: hybrid``), ≈ 1.5 s more: a server calls that in a
        thread once it answers (:class:`deermem.service.warmup.WarmUp`), so
        that neither its first search waits for them nor the facts created
        before it go unembedded (a fact is embedded during its commit only
        once the models are loaded). None of it is required — without them
        counting falls back to the estimate and search to keywords, with a
        logged warning — so this reports instead of raising.

        Returns:
            Whether everything asked for is ready; models this machine
            cannot run (search is by keyword, and was said so) count as ready.
        """
        tokens = self.config.token_counting != "tiktoken" or warm_tokenizer()
        index = self._search_index.get(self.store) is not None
        if models and self.config.search_mode == "hybrid":
            loaded = embedder()
            if loaded is not None:
                try:
                    loaded.warm()
                except ModelsUnavailable:  # cannot run here: keyword search from now on, said
                    pass
                except Exception as error:  # the first search meets it again, and says so
                    _log.warning(
                        "the embedding models could not be loaded (%s: %s)",
                        type(error).__name__,
                        error,
                    )
                    return False
        return tokens and index

    # --- reading ------------------------------------------------------------------

    def snapshot(self) -> ScopeSnapshot:
        """This scope's facts and summaries, read as one consistent whole."""
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
        """The user's summaries (shared by all of the user's agents)."""
        return self.snapshot().summaries

    def version(self) -> str:
        """A token that changes whenever this memory may have changed (for derived indexes)."""
        return self.store.version(self.scope)

    def reload(self) -> ScopeSnapshot:
        """Re-read the scope from disk (after editing fact files by hand).

        A process keeps a scope cached while the user's ``memory.json`` is
        unchanged, which a hand edit does not change. Search needs nothing
        more for the facts: its index follows the content of the facts it is
        given. The archive's rows follow this process's commits by what
        each did, so an index this process opened lists the archive again
        at its next search, in case an entry was added or removed by hand.
        """
        index = self._search_index.opened()
        if index is not None:
            try:
                index.mark_archive_stale(self.scope.user_id, self.scope.agent)
            except SearchIndexError as error:
                _log.warning("search index unavailable (%s); not marked stale", error)
        return self.store.reload(self.scope)

    def export_document(self) -> dict[str, object]:
        """Summaries and every fact with every field (see :func:`export_document`)."""
        return export_document(self.snapshot())

    def audit(self) -> tuple[EvictionReceipt, ...]:
        """Eviction receipts, oldest first."""
        return self.store.audit(self.scope)

    def list_archived(self) -> tuple[ArchiveEntry, ...]:
        """Archived facts (unexpired), newest first, each with why it left."""
        return self.store.archive(self.scope, self.now())

    def archive_page(self, start: int, count: int) -> tuple[tuple[ArchiveEntry, ...], int]:
        """``count`` archived facts from position ``start`` of :meth:`list_archived`'s order.

        Only those entries are read: the order comes from the store's listing
        (ids and times), so a page of a large archive costs a page, not the
        archive.

        Returns:
            The entries (an entry restored or purged since the listing is
            left out), and how many the archive holds.
        """
        now = self.now()
        listing = self.store.archive_listing(self.scope, now)
        ids = newest_first_ids(listing)[max(0, start) : max(0, start) + max(0, count)]
        entries = (self.store.archived(self.scope, fact_id) for fact_id in ids)
        return tuple(entry for entry in entries if entry is not None), len(listing)

    def get_archived(self, fact_id: str) -> ArchiveEntry:
        """One archived fact, with why it left.

        Raises:
            FactNotFoundError: the archive holds no (unexpired) entry for the id.
        """
        entry = self.store.archived(self.scope, fact_id)
        if entry is None or entry.expired(self.now(), self.config.archive_max_age_days):
            raise FactNotFoundError(fact_id, where="archive")
        return entry

    def scopes(self) -> tuple[ScopeSummary, ...]:
        """Every user and agent in the store, with its fact and archive counts.

        Store-wide: the same whatever scope this memory is bound to. What the
        store cannot list is in :meth:`store_problems`.
        """
        return tuple(self.scope_summary(scope) for scope in self.store.scopes())

    def scope_summary(self, scope: Scope) -> ScopeSummary:
        """One scope's fact and archive counts (a row of :meth:`scopes`): for a reader
        that may see only some scopes, and reads only those.

        Raises:
            CorruptMemoryFile: a file of that scope cannot be read.
        """
        return ScopeSummary(
            scope=scope,
            facts=len(self.store.load(scope).facts),
            archived=len(self.store.archive_listing(scope, self.now())),
        )

    def store_problems(self) -> tuple[str, ...]:
        """Each place in the store that holds memory no scope can be read from, and why.

        A collision already on disk (two user ids' facts in one directory, a
        directory whose owner record is another id's) or a directory whose
        owner cannot be told: one line each, naming the place. Store-wide.
        """
        return self.store.problems()

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
        fact_id: str | None = None,
    ) -> CreateResult:
        """Add a fact by hand (or from a tool) through the capacity gate.

        The content is trimmed; an equal fact (compared case-insensitively)
        already stored is an error. An equal fact in the archive comes back
        instead of a new one (*relearned*, with its history, the higher of
        the two confidences, a confirmation now and ``category`` when it is a
        protected one; a regret event records it):
        :attr:`CreateResult.fact_id` is then the archived id.
        When the library is full the gate decides — possibly against the new
        fact itself, which then goes to the archive and
        :attr:`CreateResult.fact_id` is ``None``.

        The text keeps to the limits of a fact a model extracts
        (:mod:`deermem.model`): content of at most 4,000 characters, a
        category and up to 32 topics of one line and 64 characters each, a
        ``source_error`` of at most 2,000.

        ``fact_id`` gives the new fact its id instead of a fresh one (a host
        whose keys are its own, such as a LangGraph store): the fact-id rule
        applies, and an id in use — active or archived — is refused, never
        reused. Such a fact is stored under that id or not at all: content an
        archived fact already says (compared as it would be stored, secrets
        redacted) is refused, naming the archived fact, because relearning it
        would bring it back under its own id and leave the caller's id empty.

        Raises:
            InvalidTextError: text that is not valid Unicode (an undecodable
                byte), or a control character where it does not belong.
            FactValidationError: empty content, text over its limit, a
                confidence outside [0, 1], a ``fact_id`` outside the fact-id rule ...
            DuplicateFactError: an equal fact is already stored.
            FactRevisionConflict: an active fact has the id ``fact_id``.
            ArchivedFactError: an archived fact has the id ``fact_id``, or, with
                a ``fact_id``, says what the new fact says (its ``fact_id`` is then
                the archived fact's). Nothing is written.
        """
        keyed = fact_id is not None
        if fact_id is not None:
            check_fact_id(fact_id)
        checked = NewFact.checked(
            content=content,
            category=category,
            confidence=confidence,
            topics=list(topics),
            source_error=source_error,
            expected_valid_days=expected_valid_days,
        )
        now = self.now()
        # The text is embedded while the commit runs, and the vector taken after the lock is let go.
        with self._embedding(checked.content), self.store.transaction(self.scope) as transaction:
            snapshot = transaction.snapshot
            if fact_id is None:
                fact_id = self._fresh_id(snapshot, transaction.archived)
            elif fact_id in snapshot:
                raise FactRevisionConflict(
                    fact_id, expected=None, actual=snapshot.by_id[fact_id].revision
                )
            elif transaction.archived(fact_id) is not None:
                raise ArchivedFactError(fact_id)
            # The original's order of a new fact's keys (its file is the original's).
            data: dict[str, object] = {
                "id": fact_id,
                "content": checked.content,
                "category": checked.category,
                "confidence": checked.confidence,
                "createdAt": format_timestamp(now),
                "source": "manual",
            }
            if checked.source_error:
                data["sourceError"] = checked.source_error
            if checked.expected_valid_days is not None:
                data["expected_valid_days"] = checked.expected_valid_days
            if checked.topics:
                data["topics"] = checked.topics
            fact = Fact.from_dict(data)
            # Redacted before the duplicate rule, so a secret pasted twice is one fact;
            # the limits were checked on the text as written and as redacted (NewFact).
            redacted: tuple[str, ...] = ()
            if self.config.redact_secrets:
                fact, redacted = redact_fact(fact)
            _check_not_duplicate(snapshot, fact.content)
            if keyed:
                # Checked under the lock, on the text as stored, before the gate commits: the
                # gate would relearn the twin under its archived id, not the one asked for.
                matches = transaction.archived_matches((fact.content,), now)
                twin = matches.get(duplicate_key(fact.content))
                if twin is not None:
                    raise ArchivedFactError(twin.fact_id)
            outcome = self.gate.apply(
                transaction, Proposal(new_facts=(fact,)), trigger="manual", now=now
            )
            stored_id = outcome.relearned.get(fact.id, fact.id)
            kept = stored_id in outcome.kept_new
            stored = next((f for f in outcome.commit.written if f.id == stored_id), None)
            if stored is None:  # evicted at once: it is in the archive
                entry = transaction.archived(stored_id)
                stored = fact if entry is None else entry.fact
        self._index_commit(outcome.commit)
        return CreateResult(
            fact_id=stored_id if kept else None,
            fact=stored,
            evicted=outcome.evicted,
            receipts=outcome.receipts,
            relearned=stored_id if fact.id in outcome.relearned else None,
            redacted=redacted,
        )

    def import_document(
        self, document: Mapping[str, object], *, allow_duplicates: bool = False
    ) -> ImportResult:
        """Replace this scope's facts and summaries with a document's, through the gate.

        The document's facts become the library, so two of them that say the
        same (the duplicate rule of :meth:`create_fact`) are refused.
        ``allow_duplicates`` imports them as they are, for a host whose
        contract does (the original DeerMem's import, and so DeerFlow's
        backend, has no duplicate check).

        Raises:
            FactValidationError: the document or one of its facts is invalid.
            DuplicateFactError: two facts of the document say the same;
                nothing is imported.
            FactRevisionConflict: a fact states a revision other than the stored one.
            ArchivedFactError: a fact of the document has the id of an
                archived fact but another text: restore or purge it first.
                Nothing is imported. (A fact that says what an archived fact
                says — an export imported after its facts were evicted —
                brings the archived fact back, relearned.)
        """
        now = self.now()
        with self.store.transaction(self.scope) as transaction:
            snapshot = transaction.snapshot
            plan = plan_import(
                document, snapshot, now, lambda: self._fresh_id(snapshot, transaction.archived)
            )
            if not allow_duplicates:
                _check_import_not_duplicate(plan, redact=self.config.redact_secrets)
            outcome = self.gate.apply(transaction, plan.proposal, trigger="import", now=now)
        self._index_commit(outcome.commit)
        evicted = set(outcome.evicted)
        stored_ids = (outcome.relearned.get(i, i) for i in plan.fact_ids)
        return ImportResult(
            kept=tuple(i for i in stored_ids if i not in evicted),
            evicted=outcome.evicted,
            replaced=outcome.removed,
            receipts=outcome.receipts,
            redacted=outcome.commit.redacted,
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
            _check_not_duplicate(snapshot, entry.fact.content)
            outcome = self.gate.apply(
                transaction, Proposal(restored=(entry,)), trigger="restore", now=now
            )
        self._index_commit(outcome.commit)
        return RestoreResult(
            fact_id=fact_id,
            restored=fact_id in outcome.kept_new,
            evicted=outcome.evicted,
            receipts=outcome.receipts,
            redacted=outcome.commit.redacted,
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
        allow_duplicates: bool = False,
    ) -> Fact:
        """Change fields of a fact; omitted fields are kept. Never trims the library.

        New content that says what another active fact says (the duplicate
        rule of :meth:`create_fact`) is refused, as a create of it would be:
        otherwise an edit could leave two facts saying one thing. A change of
        a fact's own text that the rule cannot tell apart from it (its case,
        spaces around it) is no duplicate. ``allow_duplicates`` skips the
        check, for a host whose contract lets an update repeat a fact (the
        original DeerMem's update, and so DeerFlow's backend, has no
        duplicate check).

        Raises:
            FactNotFoundError: no active fact has this id.
            FactRevisionConflict: ``expected_revision`` is not the stored revision.
            FactValidationError: a new value is invalid or over the limits of
                :meth:`create_fact` (:class:`~deermem.errors.InvalidTextError` for text
                that is not valid Unicode or holds a misplaced control character).
            DuplicateFactError: another active fact says what the new content says.
        """
        given = {"content": content, "category": category, "confidence": confidence}
        changes: dict[str, object] = {}
        if any(value is not None for value in given.values()):  # else: nothing to change
            changes = FactPatch.checked(**given).changes()
        text = changes.get("content")
        with (
            self._embedding(text if isinstance(text, str) else None),
            self.store.transaction(self.scope) as transaction,
        ):
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
            if "content" in changes and not allow_duplicates:
                # Compared as the commit will store it (redacted), as create compares.
                said = redact_fact(updated)[0] if self.config.redact_secrets else updated
                if duplicate_key(said.content) != duplicate_key(stored.content):
                    _check_not_duplicate(transaction.snapshot, said.content, besides=fact_id)
            result = transaction.commit(
                ChangeSet(now=self.now(), writes=(FactWrite(updated, create=False),))
            )
        self._index_commit(result)
        return result.written[0] if result.written else stored

    def delete_fact(self, fact_id: str, *, expected_revision: int | None = None) -> EvictionReceipt:
        """Remove a fact: to the archive (default), or for good with ``eviction_mode: delete``.

        Either way the removal leaves a content-free receipt (reason
        ``deleted``, trigger ``manual``), so :meth:`why` can say what became of it.

        Returns:
            That receipt.

        Raises:
            FactNotFoundError: no active fact has this id.
            FactRevisionConflict: ``expected_revision`` is not the stored revision.
        """
        now = self.now()
        with self.store.transaction(self.scope) as transaction:
            if fact_id not in transaction.snapshot:
                raise FactNotFoundError(fact_id)
            removal = Removal(fact_id, REASON_DELETED, expected_revision=expected_revision)
            commit, (receipt,) = self.gate.remove(
                transaction, (removal,), trigger="manual", now=now
            )
        self._index_commit(commit)
        return receipt

    def clear(self) -> tuple[str, ...]:
        """Remove every fact of this scope, as :meth:`delete_fact` removes one.

        The facts go to the archive (or for good, with ``eviction_mode:
        delete``) in one commit, with receipts (reason ``deleted``). The
        user's summaries are shared with the user's other agents and stay;
        :meth:`clear_user` removes them too.

        Returns:
            The ids of the facts removed.
        """
        now = self.now()
        with self.store.transaction(self.scope) as transaction:
            removals = tuple(
                Removal(fact.id, REASON_DELETED, expected_revision=fact.revision)
                for fact in transaction.snapshot.facts
            )
            commit = None
            if removals:
                commit, _ = self.gate.remove(transaction, removals, trigger="manual", now=now)
        if commit is not None:
            self._index_commit(commit)
        return tuple(removal.fact_id for removal in removals)

    def clear_user(self) -> tuple[str, ...]:
        """Remove everything the user owns: every agent's facts and the summaries.

        Each agent is cleared as by :meth:`clear` (one commit per agent, so
        each agent's facts leave together), then the summary sections are
        emptied. The archive and the receipts stay.

        Returns:
            The ids of the facts removed, agent by agent in name order.
        """
        user = self.scope.user_id
        removed: list[str] = []
        for agent in self.store.agents(user):
            removed.extend(self.scoped(user=user, agent=agent).clear())
        keys = [(group, name) for group, names in SUMMARY_GROUPS.items() for name in names]
        summaries = self.summaries()
        if any(summaries.section(key) != Section() for key in keys):
            empty: dict[SummaryKey, str | Section] = dict.fromkeys(keys, Section())
            self.store.commit(self.scope, ChangeSet(now=self.now(), summaries=empty))
        return tuple(removed)

    def erase_user(self, user_id: str) -> ErasureResult:
        """Erase a user everywhere, for good: every agent, the summaries, the archive,
        receipts, usage, regret events, shadow marks, conversation marks, queued
        conversations, journals and temporary files, and the user's search index rows.

        Works on any memory of the store (an :meth:`open_unscoped` one too): it
        addresses ``user_id``, not this memory's scope, and drops the user's
        conversations queued by every memory of this process on the store (by
        :attr:`~deermem.store.Store.identity`), waiting for an update of the
        user under way there to end first. Crash-safe (a kill
        leaves the user intact or erased at the next open, never half; see
        :meth:`deermem.store.Store.erase_user`). Afterwards no file under a
        Markdown root and no live row of the database holds the user's id or
        anything they said; the index file is vacuumed with ``secure_delete``.
        A user the store does not hold is erased of nothing (counts 0).

        Raises:
            UnsafeIdentifierError: ``user_id`` is not a usable user id.
        """
        user_id = check_user_id(user_id)
        index = self._search_index.get(self.store)
        # The index first and again last: a search between the two may have
        # brought rows back; the store erases between, atomically.
        rows = index.forget_user(user_id)
        # Always, not only when rows went now (the text of facts deleted or purged before
        # stays in the file's free pages and log until a scrub), and before the store's
        # erase: a process killed after that leaves no text in the index.
        index.scrub()
        # Every memory of this process on the store, not only this one: the app's own
        # memory may hold the user's conversations while an admin memory erases.
        queued = _forget_queued(self.store, user_id)
        counts = self.store.erase_user(user_id)
        # Always again: another process may have written the user's rows, or deleted them
        # (their text stays until a scrub), since the first. A write after this sweep
        # sees the erase and sweeps itself (SearchIndex's holds_user).
        rows += index.forget_user(user_id)
        index.scrub()
        # The store's own search rows (PostgreSQL's vectors) and this process's index's.
        rows += counts.pop("searchRows", 0)
        return ErasureResult(
            user_id=user_id, counts={**counts, "searchRows": rows, "queued": queued}
        )

    def export_user(self, user_id: str) -> dict[str, object]:
        """Everything held for a user, as one versioned JSON document (docs/privacy.md).

        Every agent's facts, the summaries, the archive with its receipts,
        usage, regret events, shadow marks and conversation marks — what a
        person may ask for under a right of access. Works on any memory of
        the store (it addresses ``user_id``). A user the store does not hold
        exports as an empty document.

        Raises:
            UnsafeIdentifierError: ``user_id`` is not a usable user id.
        """
        user_id = check_user_id(user_id)
        dump = transfer_of(self.store).dump_user(user_id)
        if dump is None:
            dump = UserDump(user_id, SummaryDocument(), ())
        return user_export(dump, format_timestamp(self.now()))

    def import_user(self, document: Mapping[str, object]) -> UserImportResult:
        """Restore a user from :meth:`export_user`'s document, whole, in one atomic write.

        The store must not hold the user yet (erase it first): the document
        is the user's whole memory, as ``deermem migrate`` copies one. Every
        part is checked as the store checks its own files, and secrets are
        replaced as on every write (``redact_secrets``).

        Raises:
            FactValidationError: the document is not an export, a part of it
                is invalid (named), or the store already holds the user.
        """
        dump = read_user_export(document)
        redacted: tuple[str, ...] = ()
        if self.config.redact_secrets:
            dump, redacted = redact_dump(dump)
        try:
            transfer_of(self.store).load_user(dump)
        except FileExistsError:
            raise FactValidationError(
                "userId",
                dump.user_id,
                "the store already holds this user; erase it first (deermem users erase)",
            ) from None
        return UserImportResult(user_id=str(dump.user_id), counts=dump.counts(), redacted=redacted)

    def purge(self, fact_id: str) -> None:
        """Delete an archived fact for good; its content-free receipts stay.

        Its rows of the search index go too, and the index file is scrubbed
        (:meth:`deermem.recall.index.SearchIndex.scrub`) — or, when that fails
        (a full disk), deleted, to be rebuilt at the next search: no page or
        log of it keeps the fact's words. As for an erase, before the store's
        purge commits and again after it: a process killed after the commit
        leaves no word in the index (and the file marked as owing a scrub,
        which the next process to open it pays).

        Raises:
            FactNotFoundError: the archive holds no entry for the id.
        """
        # The search index may hold the archived text (missed-recall detection). Its
        # rows go and the file is scrubbed before the commit, which nothing after it
        # could be trusted to do, and again after it, for rows a search wrote between.
        self._search_index.forget_for_good(self.store, self.scope, (fact_id,), before=True)
        try:
            self.store.purge(self.scope, fact_id)
        finally:
            # Also when the purge failed: the second call pays the scrub the first marked.
            self._search_index.forget_for_good(self.store, self.scope, (fact_id,))

    def record_access(self, fact_ids: Iterable[str]) -> bool:
        """Count a recall (e.g. a search hit) of each fact, if the policy uses it.

        Only ``hybrid-v1`` and shadow mode read recall heat, so only they pay
        for recording it; returns whether anything was recorded. For a host
        that searches with ``record=False`` and shows only some of the hits
        (a page, a filter): it counts those it shows. A store this process may
        not write counts nothing, as :meth:`search` (said once, in a warning).
        """
        if not self.gate.policy.uses_usage:
            return False
        ids = list(fact_ids)
        return self._count_recalls(lambda: self.store.record_access(self.scope, ids, self.now()))

    def _count_recalls(self, write: Callable[[], None]) -> bool:
        """Run ``write``, which counts recalls; ``False`` when the store may not be written.

        A read-only store (a read-only mount; a database connection that may
        only read), or a full one, can be searched; its recall counts cannot
        grow, which is said once, in a warning.
        """
        try:
            write()
        except (OSError, DatabaseReadOnly) as error:
            if isinstance(error, OSError) and error.errno not in _CANNOT_WRITE:
                raise
            if not self._unrecorded_said:
                self._unrecorded_said = True
                _log.warning("search hits are not counted as recalls: %s", error)
            return False
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
            return Explanation(
                fact_id=fact_id,
                status="active",
                fact=fact,
                receipts=receipts,
                archive_entry=None,
                standing=standing,
            )
        entry = self.store.archived(self.scope, fact_id)
        if entry is not None and not entry.expired(self.now(), self.config.archive_max_age_days):
            return Explanation(
                fact_id=fact_id,
                status="archived",
                fact=entry.fact,
                receipts=receipts,
                archive_entry=entry,
                standing=None,
            )
        if receipts:
            return Explanation(
                fact_id=fact_id,
                status="gone",
                fact=None,
                receipts=receipts,
                archive_entry=None,
                standing=None,
            )
        raise FactNotFoundError(fact_id)

    def ranking(self) -> Ranking:
        """The library ranked as the capacity policy ranks it now, with the cap's cut.

        Every active fact with its rank, score and the signals it sums, the
        corrections holding reserved slots, and the fact the gate lets go
        next (:func:`~deermem.library.gate.rank_library`). Reads only: a look
        at the library is not a recall.
        """
        usage = self.store.usage(self.scope) if self.gate.policy.uses_usage else {}
        return rank_library(self.gate, self.snapshot().facts, usage, self.now())

    def what_if(self) -> WhatIf:
        """What the other capacity policy would keep instead, beside the active one's choice.

        Both decide over the library and the facts the cap sent to the
        archive, at the cap, now (:func:`~deermem.library.gate.what_if`).
        Reads only.
        """
        return what_if(
            self.gate,
            self.snapshot().facts,
            self.list_archived(),
            self.store.usage(self.scope),
            self.now(),
        )

    def regret(self, *, since: datetime | None = None, whole_user: bool = False) -> RegretReport:
        """How often each policy's evictions turned out to be mistakes (docs/regret.md).

        Per policy — the active one and, in shadow mode, the other one — the
        facts it evicted (or would have) since ``since``, the regret events
        against it by kind, its regret rate and its most regretted facts (ids
        and categories only). Read from the receipts and the regret events;
        nothing is written. With ``whole_user`` the records of every agent of
        the user count, as one report.

        Raises:
            CorruptMemoryFile: the audit or the regret events cannot be read.
        """
        policy = self.gate.policy
        if whole_user:
            # Each agent's records kept apart: fact ids are unique within a scope only.
            user = self.scope.user_id
            by_agent = {}
            for agent in self.store.agents(user):
                scope = Scope.of(user, agent)
                by_agent[agent] = (self.store.audit(scope), self.store.regret_events(scope))
            return build_user_report(
                by_agent,
                active=policy.name,
                shadow=policy.shadow_policy,
                until=self.now(),
                since=since,
            )
        return build_report(
            list(self.audit()),
            list(self.store.regret_events(self.scope)),
            active=policy.name,
            shadow=policy.shadow_policy,
            until=self.now(),
            since=since,
        )

    # --- the prompt block and search -------------------------------------------

    def injection(
        self, *, max_tokens: int | None = None, facts: bool = True, query: str | None = None
    ) -> Injection:
        """The prompt text of this memory and its manifest.

        Summaries and facts within ``max_injection_tokens``; the
        ``protected_categories`` first, within ``guaranteed_token_budget``;
        the rest in the order of the configured capacity policy (by the
        ``hybrid-v1`` score under ``hybrid-v1``); empty when
        ``injection_enabled`` is off. ``Injection.block`` is the text in its
        ``<memory>`` block, ``Injection.manifest`` says which facts went in,
        at what token cost, and which were left out and why. It only reads:
        being injected is neither a recall nor a confirmation.

        Args:
            max_tokens: a budget for this prompt instead of
                ``max_injection_tokens`` (an agent with a small context
                window). It bounds the whole block (``Injection.block``,
                the text in its ``<memory>`` lines) as the token counter
                counts it: the guaranteed lines and their ``Facts:`` header
                fit in it (the guaranteed budget shrinks to that when
                smaller), and the summaries get what the facts leave.
            facts: ``False`` leaves the facts out — the summaries only, for
                an agent that reaches facts through :meth:`search` instead
                (they would appear twice otherwise).
            query: the question the prompt is for. When the facts exceed the
                budget, those a search for it finds (by keyword and meaning,
                not counted as recalls) come first within each pool — the
                guaranteed pool first, as always. Without it, or when every
                fact fits, the text is exactly the one without a query (and
                no search runs: its order could change nothing).

        Raises:
            ValueError: ``max_tokens`` is negative.
            FactValidationError: a ``max_tokens`` that is not an ``int`` (a bool,
                a float, a text), a ``query`` that is neither a text nor ``None``.
        """

        def relevant() -> tuple[str, ...]:
            # Asked only when not every fact fits: a search the layout cannot use never runs.
            found = self.search(query or "", top_k=self.config.max_facts, record=False)
            return tuple(result.fact_id for result in found)

        # As search's top_k: a float or a text would reach the budget's arithmetic, a bool
        # is an int to Python (True a budget of one token).
        budget: object = max_tokens  # callers outside mypy pass anything
        if budget is not None and (not isinstance(budget, int) or isinstance(budget, bool)):
            raise FactValidationError("max_tokens", budget, "expected a whole number of tokens")
        if query is not None and not isinstance(query, str):  # callers outside mypy pass anything
            raise FactValidationError("query", Withheld(type(query).__name__), "expected a text")
        asked = query is not None and bool(query.strip()) and facts
        return memory_injection(
            self.store,
            self.scope,
            self.config,
            self.now(),
            max_tokens=max_tokens,
            facts=facts,
            relevant=relevant if asked else None,
        )

    def context(self, *, max_tokens: int | None = None, query: str | None = None) -> str:
        """The ``<memory>`` block for an agent's prompt (``""`` when there is nothing).

        :meth:`injection`'s text, wrapped. Stored text is escaped, so it can
        neither close the block nor start a line of its own. With ``query``
        (the agent's question), facts relevant to it are preferred within
        each section when not every fact fits (see :meth:`injection`).
        """
        return self.injection(max_tokens=max_tokens, query=query).block

    def search(
        self,
        query: str,
        *,
        top_k: int = 5,
        category: str | None = None,
        record: bool = True,
    ) -> tuple[SearchResult, ...]:
        """The facts that best match a query, best first.

        By keyword and by meaning (``search_mode: hybrid``, the default: the
        FTS5 ranking fused with the embedding models' similarity, docs/search.md),
        or by keyword alone (``|bm25| × decay + 0.2 × confidence``) under
        ``search_mode: keyword`` or where the models cannot run. The store's
        SQLite FTS5 index is brought up to date first (a missing, damaged or
        stale index is rebuilt, never an error); when neither finds anything,
        a case-insensitive substring match. The category filter
        applies before the cut. Under ``hybrid-v1`` or shadow mode the hits
        count as recalls in the usage sidecar; a search never changes a fact
        and never counts as a confirmation. With ``regret_missed_recall`` the
        archive is ranked with the library, and archived facts that would
        have been among the results are recorded as regret events (missed
        recalls), as are results the shadow policy would have evicted.

        Args:
            query: what to look for, as typed (operators and quotes are safe).
            top_k: at most this many results (``≤ 0``: none).
            category: only facts of this category (an ``other`` fact's own
                label counts too).
            record: count the hits as recalls when the policy uses recalls,
                and record regret; ``False`` looks without counting (an
                operator's inspection). A store this process may not write is
                searched all the same, without counting (said once, in a
                warning).

        Raises:
            FactValidationError: a ``top_k`` that is not an ``int`` (a bool, a
                float, a text, ``None``), a ``query`` that is not a text, or a
                ``category`` that is neither a text nor ``None``, or blank (which
                would filter nothing).
        """
        # A float would never equal a count of hits and cut nothing; a bool is an int to Python.
        given: object = top_k  # callers outside mypy pass anything
        if not isinstance(given, int) or isinstance(given, bool):
            raise FactValidationError("top_k", given, "expected a whole number (an int)")
        if not isinstance(query, str):  # as top_k: callers outside mypy pass anything
            raise FactValidationError("query", Withheld(type(query).__name__), "expected a text")
        if category is not None and not isinstance(category, str):
            raise FactValidationError(
                "category", Withheld(type(category).__name__), "expected a text or None"
            )
        if category is not None and not category.strip():
            raise FactValidationError(
                "category", category, "expected a category to filter by, not blank"
            )
        now = self.now()
        findings = search_scope(
            self.store,
            self.scope,
            self._search_index,
            query,
            now=now,
            top_k=top_k,
            category=category,
            with_archive=record and self._detects_missed_recalls,
            archive_indexed=self._detects_missed_recalls,
            with_marks=record,
            hybrid=self.config.search_mode == "hybrid",
        )
        results = findings.results
        if record:
            self._count_recalls(lambda: self._record_search(query, findings, now))
        return results

    def redact_stored(self, *, dry_run: bool = False) -> RedactionReport:
        """Find the secrets already stored (before redaction, or with it off) and replace them.

        Store-wide: every scope's facts and archive entries and every user's
        summaries are read; each one holding a secret is rewritten with
        ``[redacted: KIND]`` in its place (a new fact revision), whatever
        ``redact_secrets`` says, and the search index forgets the scope's rows
        and is scrubbed (:meth:`SearchIndex.scrub`). With ``dry_run`` nothing
        changes. The report names kinds and ids only, never a value, and the
        places of the store it could not read (:meth:`store_problems`): those
        were not checked.
        """
        now = self.now()
        items: list[RedactedItem] = []
        changed: list[Scope] = []
        users: set[str | None] = set()
        for scope in self.store.scopes():
            summaries = scope.user_id not in users  # a user's summaries: with its first agent
            users.add(scope.user_id)
            found = self._redact_scope(scope, now, items, summaries=summaries, dry_run=dry_run)
            if found and not dry_run:
                changed.append(scope)
        if changed:
            index = self._search_index.get(self.store)
            for scope in changed:
                index.remove_scope(scope.user_id, scope.agent)
            index.scrub()
        return RedactionReport(dry_run=dry_run, items=tuple(items), problems=self.store_problems())

    def _redact_scope(
        self,
        scope: Scope,
        now: datetime,
        items: list[RedactedItem],
        *,
        summaries: bool,
        dry_run: bool,
    ) -> bool:
        """Redact one scope's facts, archive, usage, receipts, regret events and shadow
        marks (and, with ``summaries``, the user's): every part an import redacts."""
        with self.store.transaction(scope) as transaction:
            writes: list[FactWrite] = []
            for fact in transaction.snapshot.facts:
                redacted, kinds = redact_fact(fact)
                if kinds:
                    writes.append(FactWrite(redacted, create=False))
                    items.append(_redacted_item(scope, "fact", fact.id, kinds))
            puts: list[ArchiveEntry] = []
            for entry in transaction.archive(now):
                redacted_entry, kinds = redact_record(entry)  # the fact and its receipt line
                if kinds:
                    puts.append(redacted_entry)
                    items.append(_redacted_item(scope, "archive", entry.fact_id, kinds))
            usage: dict[str, UsageEntry] = {}
            for fact_id, used in transaction.usage().items():
                redacted_usage, kinds = redact_record(used)
                if kinds:
                    usage[fact_id] = redacted_usage
                    items.append(_redacted_item(scope, "usage", fact_id, kinds))
            stored = transaction.records()
            records, in_records = redact_records(stored)
            if in_records:
                parts = zip(_RECORD_PARTS, stored, records, strict=True)
                changed = "+".join(name for name, before, after in parts if after is not before)
                items.append(_redacted_item(scope, "records", changed, in_records))
            sections: dict[SummaryKey, str | Section] = {}
            for group, names in SUMMARY_GROUPS.items() if summaries else ():
                for name in names:
                    section = transaction.snapshot.summaries.section((group, name))
                    redacted_section, kinds = redact_section(section)
                    if kinds:
                        sections[(group, name)] = redacted_section
                        items.append(_redacted_item(scope, "summary", f"{group}.{name}", kinds))
            if not (writes or puts or sections or usage or in_records):
                return False
            if not dry_run:
                transaction.commit(
                    ChangeSet(
                        now=now,
                        writes=tuple(writes),
                        archive_puts=tuple(puts),
                        summaries=sections,
                        usage_restores=usage,
                        records=records if in_records else None,
                    )
                )
            return True

    def _index_learned(self, commit: CommitResult, scope: Scope) -> None:
        """:meth:`_index_commit` for an update the learner committed to ``scope``.

        Its new facts were not embedded during the commit (a create's are), so
        a process that searches by meaning embeds them now — off the user's
        path when the update came from the queue — rather than at the next
        search, which would wait for them.
        """
        self._index_commit(commit, scope, embed=True)

    def _index_commit(
        self, commit: CommitResult, scope: Scope | None = None, *, embed: bool = False
    ) -> None:
        """Bring the search index in step with this process's ``commit`` to ``scope``
        (this memory's by default), after it; ``embed``: see :func:`index_commit`.

        Only the rows of the facts that changed are written (and a vector
        embedded during the commit is filed), and only the archive's rows the
        commit changed, so the next search — the agent's next turn — finds the
        index current (issue 23). Every commit this memory makes is followed so:
        a create, an update, a delete, a restore, an import, a clear and an
        update learned from a conversation. Facts it deleted for good
        (``eviction_mode: delete``) are removed from the index file, which is
        then scrubbed. Never fails the commit: a search brings the index in
        step by itself.
        """
        scope = self.scope if scope is None else scope
        index_commit(
            self.store,
            scope,
            self._search_index,
            commit=commit,
            clock=self.now,
            hybrid=self.config.search_mode == "hybrid",
            with_archive=self._detects_missed_recalls,
            embed=embed,
        )
        if commit.deleted and not self.gate.archiving:
            # Deleted for good (eviction_mode: delete): the index file keeps no word of them.
            self._search_index.forget_for_good(self.store, scope, commit.deleted)

    @contextlib.contextmanager
    def _embedding(self, text: str | None) -> Iterator[None]:
        """Embed a fact's new text while the block — the commit — runs, for the next search.

        Only in a process that already searches by meaning (its models are
        loaded): one that never searches never loads them. e5's part runs in
        a worker thread from the block's start; the rest is done when the
        block ends, after the user's lock is let go, so no embedding is ever
        inside the commit nor lengthens the lock. The vector is kept in the
        embedder's memory, where the index rows filed right after the commit
        (:meth:`_index_commit`) take it. It is derived data: if the process
        dies first, the next search embeds the fact's text (until then it is
        found by keyword), and a failed embedding never fails the write.
        """
        models = loaded_embedder() if self.config.search_mode == "hybrid" else None
        if models is None or text is None:
            yield
            return
        # The text the store will hold: a secret is never embedded, not even in memory.
        finish = models.passage_ahead(
            redact(text).text if self.config.redact_secrets else text, behind=True
        )
        try:
            yield
        finally:
            try:
                finish()
            except Exception as error:  # derived data: the write stands, the next search embeds
                _log.warning("a fact's text was not embedded ahead (%s)", type(error).__name__)

    def reindex(self, *, progress: Callable[[int, int], None] | None = None) -> ReindexReport:
        """Rebuild the store's search index from every scope's facts (store-wide).

        Under ``search_mode: hybrid`` every fact's text is embedded again
        with the current model (vectors of another model are dropped), so a
        store searched by keyword until now — or written with another model —
        is searched by meaning from here on. With missed-recall detection
        on (``regret_missed_recall``, on a store that records regret) every
        scope's archive is indexed again too, as a search would index it.

        Args:
            progress: called with (scopes done, scopes in all) after each scope.

        Raises:
            OSError: the index cannot be written where the store keeps it.
            SearchIndexError: the index file cannot be opened.
            DatabaseReadOnly, StoreLockTimeout: a database store cannot keep the
                vectors made (a read-only connection, a user's lock not had in time).
        """
        self._search_index.close()  # this memory's next search reopens it
        models = embedder() if self.config.search_mode == "hybrid" else None
        return rebuild_search_index(
            self.store,
            now=self.now(),
            with_archive=self._detects_missed_recalls,
            progress=progress,
            models=models,
        )

    # --- learning from conversations --------------------------------------------

    def learn(
        self, thread_id: str, messages: Iterable[object], *, dry_run: bool = False
    ) -> UpdateResult:
        """Extract facts, confirmations and removals from a conversation, now.

        The messages (OpenAI chat format or the LangChain/DeerFlow shape,
        oldest first) are filtered, the part not yet learned from for this
        thread is sent to the model in one call (its newest messages within
        ``max_conversation_chars``; the report counts those left out), and
        its answer goes through the gates and the capacity gate into one
        commit (see docs/update.md).
        With ``dry_run`` the plan and the capacity gate's decision are
        computed and nothing is written — not the facts, not the receipts,
        not the watermark.

        Args:
            thread_id: the conversation; recorded as the new facts' source.
            messages: the whole conversation so far.
            dry_run: compute and report, write nothing.

        Returns:
            ``report`` (ids and counters only: safe to log) and ``facts``,
            the facts the report names (content: for display only).

        Raises:
            LLMNotConfigured: no model is configured: extraction is off.
            LLMError: the model call failed (after the client's retries).
            MessageFormatError: a message has an unusable shape.
            FactValidationError: the thread id is not one line of 1 to 256
                characters of valid Unicode, not only spaces (it is stored as the
                facts' source; ``deermem.model.check_thread_id``, the rule of every
                interface), or ``messages`` is not a sequence of messages (field
                ``messages``).
        """
        thread_id = check_thread_id(thread_id)  # before the model is asked
        return self._updates.learn(self.scope, thread_id, messages, dry_run=dry_run)

    def queue_conversation(
        self, thread_id: str, messages: Iterable[object], *, immediate: bool = False
    ) -> bool:
        """Queue a conversation, to be learned from once the user pauses.

        Every call restarts the debounce timer (``debounce_seconds``); a newer
        conversation for the same thread replaces the queued one and keeps
        its signals. Call this after every agent turn with the whole
        conversation: only what was not learned from before is sent to the
        model. Nothing is reported back per conversation; :meth:`flush_queue`
        and :meth:`close` report what failed.

        With ``immediate`` — for a host about to drop these messages from its
        context (before summarising them away) — the queue is processed now,
        without waiting for the pause; the conversation is kept apart from the
        thread's ordinary entry and always admitted, and, like any other, only
        what was not learned from before is sent (and the mark moves with it).

        Returns:
            Whether it was queued (``False``: after filtering nothing is left
            to learn from — no user turn with an assistant reply).

        Raises:
            LLMNotConfigured: no model is configured: extraction is off.
            QueueFullError: ``queue_max_depth`` is reached and the conversation
                carries no signal (conversations with a signal, and immediate
                ones, are always taken).
            QueueClosedError: :meth:`close` was called.
            MessageFormatError: a message has an unusable shape.
            FactValidationError: the thread id or ``messages`` is unusable (see :meth:`learn`).
        """
        thread_id = check_thread_id(thread_id)  # before the model is asked
        return self._updates.queue_conversation(
            self.scope, thread_id, messages, immediate=immediate
        )

    def flush_queue(self, timeout: float | None = None) -> FlushReport:
        """Process the queued conversations now, within ``timeout``.

        The default budget is ``shutdown_flush_timeout_seconds``; the report
        lists what failed or did not finish in time. Unlike :meth:`close`,
        the queue keeps taking conversations.
        """
        return self._updates.flush(timeout)

    # --- helpers --------------------------------------------------------------

    @property
    def _detects_missed_recalls(self) -> bool:
        return self.config.regret_missed_recall

    def _record_search(self, query: str, findings: SearchFindings, now: datetime) -> None:
        """Count the hits as recalls (if the policy reads them) and record the search's regret.

        One atomic change. Damaged regret sidecars never fail a search: the
        search is not recorded, and the damage is logged (``deermem regret``
        names the file).
        """
        recalled = (
            [result.fact_id for result in findings.results] if self.gate.policy.uses_usage else []
        )
        events: tuple[RegretEvent, ...] = ()
        try:
            marks = findings.marks
            if isinstance(marks, Exception):
                if findings.results:
                    raise marks  # read with the facts; it stops the recording here
                marks = {}
            events = search_regret(
                query,
                now=now,
                missed=findings.missed,
                results=(Found(r.fact_id, n) for n, r in enumerate(findings.results, 1)),
                marks=marks,
            )
            if recalled or events:
                self.store.record_access(self.scope, recalled, now, regret=events)
        except CorruptMemoryFile as error:
            _log.warning("this search is not recorded: %s", error)

    def _fresh_id(
        self, snapshot: ScopeSnapshot, archived: Callable[[str], ArchiveEntry | None]
    ) -> str:
        """A new fact id in use neither in the library nor in the archive (a restore brings
        an archived id back)."""
        return new_fact_id(lambda i: i in snapshot or archived(i) is not None, self._new_id)


def _check_not_duplicate(snapshot: ScopeSnapshot, text: str, *, besides: str | None = None) -> None:
    """No active fact may say the same (the duplicate rule, :func:`deermem.model.duplicate_key`).

    ``besides``: the fact whose text this is to become (an update), which
    may say it.
    """
    key = duplicate_key(text)
    for fact in snapshot.facts:
        if fact.id != besides and duplicate_key(fact.content) == key:
            raise DuplicateFactError(fact.id)


def _check_import_not_duplicate(plan: ImportPlan, *, redact: bool) -> None:
    """No two facts of an imported document may say the same: they become the library.

    Compared as the commit stores them (redacted when ``redact``), as create
    compares. Before the gate, so a refused document changes nothing.
    """
    seen: dict[str, str] = {}
    facts = {fact.id: fact for fact in (*plan.proposal.new_facts, *plan.proposal.updates)}
    for position, fact_id in sorted(zip(plan.positions, plan.fact_ids, strict=True)):
        fact = facts[fact_id]
        said = redact_fact(fact)[0] if redact else fact
        key = duplicate_key(said.content)
        earlier = seen.setdefault(key, fact_id)
        if earlier != fact_id:
            raise DuplicateFactError(earlier, where=f"facts[{position}]")


# --- the memory document: what ``export`` writes and ``import`` reads -----------------------
#
# The shape is the original DeerMem's compatibility document
# (``{version, revision, lastUpdated, user: {...}, history: {...}, facts: [...]}``),
# but every fact is exported with *all* its fields (``lastConfirmedAt``,
# ``confirmationCount``, ``expected_valid_days``, ``title`` and unknown keys
# included), so an export imported again loses nothing — the original's API
# drops those. Summary sections keep their own ``updatedAt``.


def export_document(snapshot: ScopeSnapshot) -> dict[str, object]:
    """The scope as a document: summaries and every fact with every field."""
    document = snapshot.summaries.to_dict()
    document["facts"] = [fact.to_dict() for fact in snapshot.facts]
    return document


class ImportPlan(NamedTuple):
    """An import as a gate proposal, and the ids of the document's facts.

    ``fact_ids`` lists new facts first, then updates; ``positions`` gives
    each of them its index in the document's ``facts`` (for errors).
    """

    proposal: Proposal
    fact_ids: tuple[str, ...]
    positions: tuple[int, ...] = ()


def plan_import(
    document: object,
    snapshot: ScopeSnapshot,
    now: datetime,
    new_id: Callable[[], str],
) -> ImportPlan:
    """Turn a document into a proposal that replaces the scope's facts and summaries.

    The document is what ``export`` writes, so it is held to what the store
    accepts — valid Unicode text, the field types of a fact — not to the
    length limits of facts written by hand (a fact read from the original's
    files may exceed them, and must survive an export and an import).
    Facts without an id get one; a confidence that cannot be read becomes 0.5;
    the document's facts replace the library in the document's order, which
    breaks the capacity policy's ties (stored facts it does not hold are
    removed with reason ``replaced``) and its sections replace the
    summaries (missing ones become empty). A fact that states a ``revision``
    must match the stored one.

    Raises:
        InvalidTextError: a string in a fact or a summary is not valid Unicode.
        FactValidationError: the document is not an object, ``facts`` is
            missing or not a list of objects, two facts share an id, a fact
            is invalid, or a summary section is not an object.
    """
    if not isinstance(document, Mapping):
        raise FactValidationError("document", document, "expected a JSON object")
    if "facts" not in document:
        # An import replaces the library: a document without the key would
        # silently archive every fact, so an empty library must be explicit.
        raise FactValidationError(
            "facts", Withheld("missing"), "expected a list of fact objects (may be [])"
        )
    raw_facts = document["facts"]
    if not isinstance(raw_facts, list):
        raise FactValidationError("facts", raw_facts, "expected a list of fact objects")
    new_facts: list[Fact] = []
    updates: list[Fact] = []
    new_positions: list[int] = []
    update_positions: list[int] = []
    seen: dict[str, None] = {}  # the document's ids, in its order
    for position, raw in enumerate(raw_facts):
        fact = _imported_fact(raw, position, snapshot, now, new_id)
        if fact.id in seen:
            raise FactValidationError(
                f"facts[{position}].id", fact.id, "each fact id may appear only once"
            )
        seen[fact.id] = None
        stored = fact.id in snapshot
        (updates if stored else new_facts).append(fact)
        (update_positions if stored else new_positions).append(position)
    removals = tuple(
        Removal(fact.id, REASON_REPLACED, expected_revision=fact.revision)
        for fact in snapshot.facts
        if fact.id not in seen
    )
    proposal = Proposal(
        new_facts=tuple(new_facts),
        updates=tuple(updates),
        removals=removals,
        summaries=_summaries(document),
        # The document is the library: its order breaks the policy's ties, as the
        # original's import ranks the facts it was given.
        order=tuple(seen),
    )
    return ImportPlan(
        proposal=proposal,
        fact_ids=tuple(f.id for f in new_facts + updates),
        positions=(*new_positions, *update_positions),
    )


def _imported_fact(
    raw: object,
    position: int,
    snapshot: ScopeSnapshot,
    now: datetime,
    new_id: Callable[[], str],
) -> Fact:
    if not isinstance(raw, Mapping):
        raise FactValidationError(f"facts[{position}]", raw, "expected a fact object")
    data = dict(raw)
    given_id = bool(data.get("id"))
    if not given_id:
        data["id"] = new_id()
    data["confidence"] = coerce_confidence(data.get("confidence"))
    data.setdefault("source", "import")
    data.pop("scope", None)
    stored = snapshot.get(data["id"]) if isinstance(data["id"], str) else None
    if stored is not None and "revision" not in data:
        data["revision"] = stored.revision  # no precondition stated: update what is stored
    try:
        return Fact.from_dict(data, now=now)
    except FactValidationError as error:
        raise error if given_id else error.in_list("facts", position) from None


def _summaries(document: Mapping[str, object]) -> dict[SummaryKey, str | Section]:
    sections: dict[SummaryKey, str | Section] = {}
    for group, names in SUMMARY_GROUPS.items():
        raw_group = document.get(group)
        values = raw_group if isinstance(raw_group, Mapping) else {}
        for name in names:
            raw = values.get(name)
            if raw is None:
                sections[(group, name)] = Section()
                continue
            if not isinstance(raw, Mapping):
                raise FactValidationError(
                    f"{group}.{name}", raw, "expected an object {'summary': ..., 'updatedAt': ...}"
                )
            # Any values, as the store reads them (a summary need not be a string),
            # but text that can be written, nested as deep as a fact's values may be;
            # what the section keeps besides its text is bounded as a fact's unknown
            # fields are.
            check_storable(f"{group}.{name}", dict(raw))
            section = Section.from_value(raw)
            check_storable(f"{group}.{name}", dict(section.extra), max_size=MAX_KEPT_SIZE)
            sections[(group, name)] = section
    return sections


# How a report names the parts of a scope's records (deermem.store.ScopeRecords's order).
_RECORD_PARTS: Final = ("receipts", "regret-events", "shadow-marks")


def _redacted_item(scope: Scope, where: str, item_id: str, kinds: tuple[str, ...]) -> RedactedItem:
    return RedactedItem.model_validate(
        {"user": scope.user_id, "agent": scope.agent, "where": where, "id": item_id, "kinds": kinds}
    )


# Every learner of this process, by the identity of the store it writes to (held weakly:
# a learner lives as long as a memory or its queue's timer holds it). An erase reaches the
# conversations queued by every memory on the store through it.
_LEARNERS: Final[dict[str, weakref.WeakSet[Learner]]] = {}
_LEARNERS_LOCK: Final = threading.Lock()


def _forget_queued(store: Store, user_id: str) -> int:
    """Drop a user's conversations queued by any memory of this process on ``store``, and
    wait for an update of the user under way there to end; return how many were dropped."""
    with _LEARNERS_LOCK:
        learners = list(_LEARNERS.get(store.identity, ()))
    return sum(learner.forget_user(user_id) for learner in learners)


class _LearnerSlot:
    """A memory's :class:`~deermem.learning.Learner`, made on first use and shared by
    every view of the memory (:meth:`Memory.scoped` copies the slot, not the learner).
    Once made it is registered under its store's identity, for :func:`_forget_queued`.

    Made late because the learning pipeline's imports (the model answer's pydantic
    models, the prompt, the signals) were ≈ a quarter of deermem's own start-up
    in ``deermem mcp``, which learns nothing until a conversation arrives.
    """

    __slots__ = ("_learner", "_lock", "_make", "_store")

    def __init__(self, make: Callable[[], Learner], store: str) -> None:
        self._make = make
        self._store = store
        self._learner: Learner | None = None
        self._lock = threading.Lock()

    def get(self) -> Learner:
        with self._lock:
            if self._learner is None:
                self._learner = self._make()
                with _LEARNERS_LOCK:
                    _LEARNERS.setdefault(self._store, weakref.WeakSet()).add(self._learner)
            return self._learner

    def close(self, timeout: float | None) -> FlushReport:
        """Close the learner if one was made.

        One never made has nothing queued and no model to release, so its
        close is an empty flush: making it only to close it would load the
        learning pipeline as ``deermem mcp`` exits (≈ 40 ms of CPU).
        """
        with self._lock:
            learner = self._learner
        return FlushReport(completed=True) if learner is None else learner.close(timeout)
