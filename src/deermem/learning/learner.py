"""The Learner: conversation → prompt → the model's answer → plan → capacity gate → commit.

One :class:`Learner` is shared by a :class:`~deermem.memory.Memory` and every
view :meth:`~deermem.memory.Memory.scoped` makes of it, so one queue and one
model serve all users and agents of a store, and ``close()`` on any of them
flushes everything. Each call names its scope. One update, in order (see
docs/update.md):

1. the messages (OpenAI or LangChain/DeerFlow shape) are read, filtered
   (hidden turns, tool traffic, upload blocks, trivial acknowledgements) and
   cut to what the store's watermark says is new (read under the update
   lock); nothing left, no call;
2. the newest of them that fit ``max_conversation_chars`` are kept (the older
   ones are left out and counted), and the signals are detected *on what is
   sent* — once, so the hints and the confirmation gate see only what the
   model sees;
3. the prompt is rendered from the current memory and the model is asked
   **once**, JSON-schema constrained where the backend supports it;
4. the answer is found and read (:mod:`deermem.learning.answer`); an answer
   without an update, or one refused whole, changes nothing;
5. inside one store transaction, :func:`apply_response` plans, runs the
   capacity gate and commits, the conversation's new watermark with it —
   only if the stored mark is still the one step 1 read (else the answer
   is dropped and the update starts over). If the store reports a revision
   conflict (a writer that bypassed the lock), the memory is reloaded and
   the *same* answer applied again, up to three attempts — the model is
   never asked twice for one answer.

The model call happens outside the store's lock: a slow endpoint never
blocks other writers. A dry run uses a :class:`PreviewTransaction` and
writes nothing. Updates run one at a time (``ChatModel`` backends serve one
thread at a time, and a thread's watermark must not race with itself).

The model, the pattern files and the prompt templates are loaded by the
first call that needs them: with no model configured, every extraction
raises :class:`~deermem.LLMNotConfigured` at once — at ``queue_conversation``
time, not later in a worker thread where nobody would see it.

**Around the capacity gate** (:func:`apply_response`). Removals that do not
depend on the gate's decision — the staleness review's, the upload
clean-up's and contradiction removals **without** a replacement — are taken
out *before* the gate decides: a fact the update removes anyway never
occupies a slot, so it can never cost another fact its place. (The original
DeerMem removes a contradicted fact without a replacement only after the
trim, so at the cap it could evict one good fact too many.) A contradiction
removal **with** a replacement depends on the decision — the contradicted
fact goes only if the fact holding the replacement's text was kept — so it is
a conditional removal (``Removal(..., needs_kept=<replacement id>)``) that
the gate settles after deciding. A removal whose replacement is gone, or
names no other fact at all, is *blocked*: never applied, only counted.

**The watermark** lives in the store (:class:`StoredMarks`): each update
reads its conversation's mark there and commits the new one with the facts
it changes, so another process, a new ``Memory`` or ``deermem ingest`` run
twice never extracts — and never confirms — an applied conversation again
(see :mod:`deermem.learning.queue`). Updates running at the same time are
ordered too: the mark is read under the update lock (this process) and read
again inside the committing transaction (every process); an answer given
about turns another update applied meanwhile is dropped, and the update
starts over from the moved mark (:meth:`Learner._run`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Final

from deermem.errors import QueueClosedError, RevisionConflict
from deermem.learning.answer import (
    NormalizedResponse,
    NoUpdate,
    RejectedResponse,
    normalize_response,
    parse_update_response,
    response_json_schema,
)
from deermem.learning.messages import KeepHidden, Message, parse_messages
from deermem.learning.plan import (
    REASON_CONTRADICTION,
    MemoryState,
    UpdatePlan,
    UpdateSettings,
    plan_update,
)
from deermem.learning.prompt import (
    MEMORY_UPDATE,
    SIGNAL_ORDER,
    ConversationTurn,
    ConversationWindow,
    PromptLoader,
    build_update_prompt,
    fit_conversation,
    sent_text,
)
from deermem.learning.queue import (
    FlushReport,
    M,
    QueueItem,
    UpdateQueue,
    WatermarkKey,
    conversation_mark,
    messages_after,
)
from deermem.learning.report import (
    FactChange,
    ModelCall,
    RemovalRejections,
    UpdateMetrics,
    UpdateOutcome,
    UpdateReport,
    UpdateResult,
)
from deermem.learning.signals import PatternSet, detect_signals, learnable, load_patterns
from deermem.library.gate import CapacityGate, GateOutcome, Proposal, Removal
from deermem.model import Fact, Scope, redact
from deermem.store.protocol import (
    ChangeSet,
    CommitResult,
    ScopeRecords,
    ScopeSnapshot,
    Store,
    StoreTransaction,
)
from deermem.store.records import (
    REASON_CAPACITY,
    ArchiveEntry,
    Section,
    ShadowMark,
    SummaryKey,
    UsageEntry,
)

if TYPE_CHECKING:
    from deermem.config import MemoryConfig
    from deermem.llm import ChatModel, ChatResponse

__all__ = [
    "MAX_COMMIT_ATTEMPTS",
    "AppliedUpdate",
    "GateRequest",
    "Learner",
    "PreviewTransaction",
    "StoredMarks",
    "apply_response",
    "check_override_files",
    "gate_request",
]

MAX_COMMIT_ATTEMPTS: Final = 3
TRIGGER: Final = "extraction"
_log = logging.getLogger("deermem.memory")

# What an update's commits are made under: nothing for `learn`, the queue's commit permit
# for a queued update (a closed queue lets no commit begin).
Permit = Callable[[], AbstractContextManager[None]]


class StoredMarks:
    """The watermark as the store keeps it (see :mod:`deermem.learning.queue`).

    Read afresh for every update — another process may have moved it — and
    written only by the commit that applies an update.
    """

    def __init__(self, store: Store) -> None:
        self._store = store

    def unseen(self, key: WatermarkKey, messages: Sequence[M]) -> tuple[M, ...]:
        thread_id, user_id, agent = key
        return messages_after(messages, self._store.watermark(Scope.of(user_id, agent), thread_id))


class _MarkMoved(Exception):
    """Another update moved a conversation's mark while this one asked the model.

    Raised inside the committing transaction, so nothing is written; the
    update starts over from the mark as it is now.
    """


@dataclass(frozen=True, slots=True)
class _Mark:
    """The marks of one update: the one its feed was cut at, and the one it commits.

    Attributes:
        thread_id: the conversation.
        prior: the stored mark when the feed was cut (``None``: there was none).
        new: the mark of the conversation's end, committed with the update.
    """

    thread_id: str
    prior: str | None
    new: str

    def check(self, transaction: StoreTransaction) -> None:
        """Raise :class:`_MarkMoved` unless the stored mark is still ``prior``.

        Raises:
            _MarkMoved: another update applied (part of) the conversation meanwhile.
        """
        if transaction.watermark(self.thread_id) != self.prior:
            raise _MarkMoved(self.thread_id)


def check_override_files(config: MemoryConfig) -> tuple[PatternSet, PromptLoader]:
    """Load ``config``'s ``patterns_dir`` and ``prompts_dir`` as the first extraction will.

    ``deermem config check`` and a server's start-up call it, so that a
    missing directory or a bad pattern or template stops them with the error
    that names the file, instead of failing every later extraction.

    Raises:
        PatternError: ``patterns_dir`` is not a directory, or a file in it is invalid.
        PromptTemplateError: ``prompts_dir`` is not a directory, or a global override
            in it is invalid.
    """
    return load_patterns(config.patterns_dir), PromptLoader(config.prompts_dir)


@dataclass(frozen=True, slots=True)
class _Parts:
    """What the first extraction loads: the model, the patterns, the prompt templates."""

    model: ChatModel
    patterns: PatternSet
    prompts: PromptLoader


class Learner:
    """Extraction from conversations into one store, through one capacity gate.

    Args:
        store: the store updates commit to.
        config: the configuration (model, gates, queue settings).
        clock: the time of every decision.
        new_id: makes fact ids.
        model: the chat model; built from ``config.model`` on first use when ``None``.
        keep_hidden: the host's rule for hidden human messages (default: only a
            clarification answer is kept).
        committed: called with the commit and its scope after each update that
            committed, once the user's lock is let go (the memory keeps its
            search index in step with it); never for a dry run.
    """

    def __init__(
        self,
        store: Store,
        config: MemoryConfig,
        *,
        clock: Callable[[], datetime],
        new_id: Callable[[], str],
        model: ChatModel | None = None,
        keep_hidden: KeepHidden | None = None,
        committed: Callable[[CommitResult, Scope], None] | None = None,
    ) -> None:
        self._store = store
        self._committed = committed
        self._config = config
        self._clock = clock
        self._new_id = new_id
        self._model = model
        self._keep_hidden = keep_hidden
        self.settings = UpdateSettings.from_config(config)
        self.gate = CapacityGate.from_config(config)
        self.watermark = StoredMarks(store)
        self._parts: _Parts | None = None
        self._queue: UpdateQueue[Message] | None = None
        self._closed = False  # by close(): the queue takes nothing more, made or not
        self._setup = threading.Lock()
        self._running = threading.Lock()  # one update at a time

    def parts(self) -> _Parts:
        """The model, patterns and prompts, loaded on first use.

        Raises:
            LLMNotConfigured: no model is given or configured.
            LLMUnavailable / ConfigError: the configured model cannot be built.
            PatternError / PromptTemplateError: an override file is invalid.
        """
        # The HTTP client stack loads with the first extraction: importing it with this
        # module costs `import deermem; deermem.Memory` +30 % (bench_startup, 226 -> 295 ms).
        from deermem.llm import require_chat_model

        with self._setup:
            if self._parts is None:
                config = self._config
                model = self._model if self._model is not None else require_chat_model(config)
                self._parts = _Parts(model, *check_override_files(config))
            return self._parts

    def _learnable(self, messages: Iterable[object]) -> tuple[Message, ...] | None:
        """Read and filter a conversation; ``None`` when nothing is left to learn from.

        Raises:
            MessageFormatError: a message has an unusable shape.
        """
        patterns = self.parts().patterns
        return learnable(parse_messages(messages), patterns, keep_hidden=self._keep_hidden)

    # --- synchronous -------------------------------------------------------------

    def learn(
        self, scope: Scope, thread_id: str, messages: Iterable[object], *, dry_run: bool
    ) -> UpdateResult:
        """Extract from a conversation now (see ``Memory.learn``)."""
        kept = self._learnable(messages)
        if kept is None:
            return UpdateResult(UpdateReport(thread_id, "no-conversation", dry_run=dry_run))
        return self._run(scope, thread_id, kept, dry_run=dry_run)

    def _run(
        self,
        scope: Scope,
        thread_id: str,
        conversation: Sequence[Message],
        *,
        dry_run: bool,
        permit: Permit = nullcontext,
    ) -> UpdateResult:
        """One update over the part of ``conversation`` after its mark; the mark moves to its end.

        The mark is read under ``_running`` (so two updates of this process
        never ask the model about the same turns), and read again inside the
        transaction that commits (:class:`_MarkMoved`): an update of another
        process that applied the conversation meanwhile makes this one start
        over from the moved mark — usually to find nothing new — instead of
        applying the same turns twice. Concurrent updates thus end as if run
        one after the other; the price of the race is a wasted model call.
        The user's store lock is never held during the model call.

        The mark goes into the update's own commit. An update that succeeds
        without a commit (nothing left to ask the model after filtering)
        commits the mark alone; one that fails moves nothing. Every commit is
        made under ``permit`` (the queue's :meth:`~UpdateQueue.commit_permit`
        for a queued update: a closed queue lets none begin).

        Raises:
            QueueStopped: ``permit`` refused the commit; nothing was written.
            RevisionConflict: the mark moved under every one of
                ``MAX_COMMIT_ATTEMPTS`` attempts; nothing was written.
        """
        parts = self.parts()
        with self._running:
            for attempt in range(1, MAX_COMMIT_ATTEMPTS + 1):
                prior = self._store.watermark(scope, thread_id)
                feed = messages_after(conversation, prior)
                if not feed:
                    return UpdateResult(UpdateReport(thread_id, "nothing-new", dry_run=dry_run))
                mark = None if dry_run else _Mark(thread_id, prior, conversation_mark(conversation))
                now = self._clock()
                try:
                    result = self._extract(
                        parts,
                        scope,
                        thread_id,
                        feed,
                        now=now,
                        dry_run=dry_run,
                        mark=mark,
                        permit=permit,
                    )
                    if mark is not None and result.report.outcome == "no-conversation":
                        with permit():
                            self._commit_mark(scope, mark, now)
                    break
                except _MarkMoved:
                    if attempt == MAX_COMMIT_ATTEMPTS:
                        raise RevisionConflict(
                            f"the mark of thread {thread_id!r} kept moving under "
                            f"{MAX_COMMIT_ATTEMPTS} updates; nothing was written",
                            expected=None,
                            actual=None,
                        ) from None
                    _log.warning(
                        "memory update for thread %r: another update applied the conversation "
                        "meanwhile; starting over from its mark (attempt %d of %d)",
                        thread_id,
                        attempt,
                        MAX_COMMIT_ATTEMPTS,
                    )
            else:  # pragma: no cover - every pass breaks, returns or raises
                raise AssertionError("unreachable")
        report = result.report
        # The agent, never the user: a user id (often an e-mail address) stays out of
        # logs, which outlive an erased user (docs/privacy.md).
        _log.info(
            "memory update for thread %r (agent %r): %s; %s",
            thread_id,
            scope.agent,
            report.outcome,
            ", ".join(f"{name} {count}" for name, count in report.counts().items()),
        )
        return result

    def _commit_mark(self, scope: Scope, mark: _Mark, now: datetime) -> None:
        """Commit the mark alone (an update with nothing to ask), if it has not moved."""
        with self._store.transaction(scope) as transaction:
            mark.check(transaction)
            transaction.commit(ChangeSet(now=now, watermarks={mark.thread_id: mark.new}))

    def _extract(
        self,
        parts: _Parts,
        scope: Scope,
        thread_id: str,
        feed: Sequence[Message],
        *,
        now: datetime,
        dry_run: bool,
        mark: _Mark | None,
        permit: Permit,
    ) -> UpdateResult:
        """Ask the model about ``feed`` (filtered messages, oldest first) and apply its
        answer, committing under ``permit``.

        Raises:
            LLMError: the model call failed (after the client's retries).
            RevisionConflict: the store kept changing under three attempts.
            PromptTemplateError: the agent's prompt override is invalid.
        """
        # The model never sees a secret: each turn is redacted before the prompt is built.
        redacted: set[str] = set()
        spoken: list[tuple[Message, ConversationTurn]] = []
        for m in feed:
            if m.role in ("human", "ai"):
                text = m.text
                if self._config.redact_secrets:
                    redaction = redact(text)
                    text = redaction.text
                    redacted.update(redaction.kinds)
                spoken.append((m, ConversationTurn(m.role, text, m.id)))
        window = fit_conversation(
            [turn for _, turn in spoken], self.settings.max_conversation_chars
        )
        # The signals see what the model sees: the turns sent, each as shortened and redacted.
        sent = [m.with_text(sent_text(turn)) for m, turn in spoken[window.start :]]
        signals = detect_signals(sent, parts.patterns)
        snapshot = self._store.load(scope)
        prompt = build_update_prompt(
            MemoryState.from_summaries(snapshot.summaries, snapshot.facts),
            window,
            signals=signals,
            settings=self.settings,
            now=now,
            template=parts.prompts.load(MEMORY_UPDATE.name, agent=scope.agent),
        )
        base = UpdateReport(
            thread_id,
            "no-conversation",
            dry_run=dry_run,
            signals=tuple(name for name in SIGNAL_ORDER if name in signals),
            messages_sent=window.sent,
            messages_left_out=window.left_out,
            redacted=tuple(sorted(redacted)),
        )
        if prompt is None:
            return UpdateResult(base)
        _log_left_out(thread_id, window, self.settings.max_conversation_chars)
        from deermem.llm import ChatMessage  # not at the top, as in parts(); loaded by now

        answer = parts.model.complete(
            [ChatMessage.system(prompt.system), ChatMessage.user(prompt.user)],
            json_schema=response_json_schema(),
        )
        base = replace(base, model_call=_model_call(parts.model, answer))
        parsed = parse_update_response(answer.text)
        if isinstance(parsed, NoUpdate):
            _log.info("memory update for thread %r: no update (%s)", thread_id, parsed.reason)
            return UpdateResult(replace(base, outcome="no-update", detail=parsed.reason))
        response = normalize_response(parsed.data)
        base = replace(base, over_limits=response.over_limits)
        if response.over_limits.total:
            _log.warning(
                "memory update for thread %r: entries of the answer dropped over its limits: %s",
                thread_id,
                ", ".join(f"{name} {count}" for name, count, *_ in response.over_limits.items()),
            )
        if isinstance(response, RejectedResponse):
            _log_rejected(thread_id, response)
            rejected: UpdateOutcome = "rejected"
            return UpdateResult(replace(base, outcome=rejected, detail=response.reason))
        with permit():
            return self._commit(scope, response, base, now=now, signals=signals, mark=mark)

    def _commit(
        self,
        scope: Scope,
        response: NormalizedResponse,
        base: UpdateReport,
        *,
        now: datetime,
        signals: frozenset[str],
        mark: _Mark | None,
    ) -> UpdateResult:
        """Apply the answer in one transaction; on a revision conflict, reload and retry.

        Raises:
            _MarkMoved: another update moved the conversation's mark since it
                was read; nothing was committed.
        """

        def apply(transaction: StoreTransaction) -> AppliedUpdate:
            if mark is not None:
                mark.check(transaction)  # under the user's lock, before anything is written
            return apply_response(
                transaction,
                response,
                gate=self.gate,
                settings=self.settings,
                signals=signals,
                now=now,
                thread_id=base.thread_id,
                new_id=self._new_id,
                mark=None if base.dry_run or mark is None else mark.new,
            )

        store = self._store
        if base.dry_run:
            preview = PreviewTransaction(store, scope)
            return _result(base, apply(preview), 1, preview.snapshot)
        for attempt in range(1, MAX_COMMIT_ATTEMPTS + 1):
            try:
                with store.transaction(scope) as transaction:
                    before = transaction.snapshot
                    applied = apply(transaction)
                if self._committed is not None:
                    self._committed(applied.gate.commit, scope)
                return _result(base, applied, attempt, before)
            except RevisionConflict:
                if attempt == MAX_COMMIT_ATTEMPTS:
                    raise
                _log.warning(
                    "memory update for thread %r met a revision conflict; reloading "
                    "(attempt %d of %d)",
                    base.thread_id,
                    attempt,
                    MAX_COMMIT_ATTEMPTS,
                )
                store.reload(scope)
        raise AssertionError("unreachable")  # pragma: no cover

    # --- queued ------------------------------------------------------------------

    def queue_conversation(
        self, scope: Scope, thread_id: str, messages: Iterable[object], *, immediate: bool
    ) -> bool:
        """Queue a conversation (see ``Memory.queue_conversation``).

        The queue is told the conversation's signals: one that carries a
        signal is taken even when the queue is full. (The update itself
        detects them again, on the part it sends.)
        """
        with self._setup:
            closed = self._closed
        if closed:  # before the model's parts are read: closing released them for good
            raise QueueClosedError(thread_id)
        kept = self._learnable(messages)
        if kept is None:
            return False
        queue = self.queue()
        add = queue.add_nowait if immediate else queue.add
        signals = detect_signals(kept, self.parts().patterns)
        add(thread_id, kept, user_id=scope.user_id, agent=scope.agent, signals=signals)
        return True

    def queue(self) -> UpdateQueue[Message]:
        with self._setup:
            if self._queue is None:
                self._queue = UpdateQueue(
                    self._process,
                    debounce_seconds=self._config.debounce_seconds,
                    max_depth=self._config.queue_max_depth,
                    watermark=self.watermark,  # shared with learn
                )
            return self._queue

    def forget_user(self, user_id: str) -> int:
        """Drop a user's queued conversations and wait for a running update to end.

        Called when the user is erased, so that nothing queued before writes
        their memory again afterwards. Returns the conversations dropped.
        """
        with self._setup:
            queue = self._queue
        dropped = 0 if queue is None else queue.drop_user(user_id)
        with self._running:  # an update under way commits (or fails) before the erase
            pass
        return dropped

    def _process(self, item: QueueItem[Message]) -> bool:
        """The queue's processing function: one update over the item's new messages."""
        key = item.key
        scope = Scope.of(key.user_id, key.agent)
        # The whole conversation: the mark names a position in it, and is read again under
        # the lock (the queue's cut was made without it). Emergency items alike.
        conversation = item.conversation or item.messages
        return self._run(
            scope, key.thread_id, conversation, dry_run=False, permit=self.queue().commit_permit
        ).report.succeeded

    def flush(self, timeout: float | None) -> FlushReport:
        """Process what is queued now, within ``timeout`` (default: the shutdown budget)."""
        with self._setup:
            queue = self._queue
        if queue is None:
            return FlushReport(completed=True)
        return queue.flush(self._timeout(timeout))

    def close(self, timeout: float | None) -> FlushReport:
        """Stop taking conversations, flush the queue (logging what could not be
        flushed), and release the model if this learner built it.

        The queue stops when the budget is spent (:meth:`UpdateQueue.shutdown`):
        nothing it has not started is processed afterwards. An update still
        running then keeps the model until it ends — releasing the model
        under it would cut its call — and the model is released when it
        does; otherwise before this returns.
        """
        with self._setup:
            queue = self._queue
            self._closed = True
        if queue is None:
            self._release_model()
            return FlushReport(completed=True)
        report = queue.shutdown(self._timeout(timeout), then=self._release_model)
        _log_unflushed(report)
        return report

    def _release_model(self) -> None:
        """Drop the parts and close the model's connections, if this learner built the model."""
        with self._setup:
            parts, self._parts = self._parts, None
        if parts is not None and self._model is None:
            close = getattr(parts.model, "close", None)  # the HTTP client's connections
            if callable(close):
                close()

    def _timeout(self, timeout: float | None) -> float:
        return self._config.shutdown_flush_timeout_seconds if timeout is None else timeout


def _log_left_out(thread_id: str, window: ConversationWindow, max_chars: int) -> None:
    if window.left_out:
        _log.warning(
            "memory update for thread %r: sending the newest %d message(s); the %d older "
            "one(s) are left out (max_conversation_chars = %d)",
            thread_id,
            window.sent,
            window.left_out,
            max_chars,
        )


def _log_rejected(thread_id: str, response: RejectedResponse) -> None:
    if response.reason == "wrong-field-types":
        _log.warning(
            "memory update for thread %r refused whole: no field of the answer has "
            "the type of the reply schema",
            thread_id,
        )
    else:
        _log.warning(
            "memory update for thread %r refused whole: %d removal(s) with %d "
            "malformed new fact(s)",
            thread_id,
            response.removals,
            response.malformed_new_facts,
        )


def _log_unflushed(report: FlushReport) -> None:
    if not report.ok:
        _log.error(
            "memory queue closed with %d conversation(s) failed and %d not processed in time: %s",
            len(report.failed),
            len(report.unflushed),
            ", ".join(
                f"thread {key.thread_id!r} (agent {key.agent!r})"  # no user id: logs outlive one
                for key in (*report.failed, *report.unflushed)
            ),
        )


def _model_call(model: ChatModel, answer: ChatResponse) -> ModelCall:
    return ModelCall(
        model=answer.model or model.name,
        attempts=answer.attempts,
        prompt_tokens=answer.usage.prompt_tokens,
        completion_tokens=answer.usage.completion_tokens,
        truncated=answer.truncated,
    )


def _result(
    base: UpdateReport, applied: AppliedUpdate, attempts: int, before: ScopeSnapshot
) -> UpdateResult:
    commit = applied.commit
    plan = applied.plan
    report = replace(
        base,
        outcome="applied" if commit.changed else "unchanged",
        added=applied.added,
        relearned=applied.relearned,
        confirmed=applied.confirmed,
        extended=applied.extended,
        summaries=tuple(f"{group}.{name}" for group, name in sorted(plan.summaries)),
        removed=applied.removed,
        evicted=applied.evicted,
        blocked_removals=applied.blocked,
        revision=commit.revision if commit.changed and not base.dry_run else None,
        commit_attempts=attempts,
        metrics=applied.metrics,
        redacted=tuple(sorted({*base.redacted, *commit.redacted})),
    )
    return UpdateResult(report, applied.facts(before))


# --- applying an answer: the plan, the one capacity gate, one commit ---------------------


@dataclass(frozen=True, slots=True)
class GateRequest:
    """A plan, as the capacity gate takes it.

    Attributes:
        proposal: new facts, changed facts, removals and summaries.
        blocked: contradiction removals refused before the gate: their
            replacement's text is held by no fact but the contradicted one.
    """

    proposal: Proposal
    blocked: tuple[str, ...]


def gate_request(plan: UpdatePlan) -> GateRequest:
    """Turn a plan into the gate's proposal (the removal order is the module docstring's)."""
    removals = [Removal(r.fact_id, r.reason) for r in plan.removals]
    blocked: list[str] = []
    for pending in plan.pending_removals:
        if pending.replacement_key is None:
            removals.append(Removal(pending.fact_id, REASON_CONTRADICTION))
        elif pending.replacement_fact_id is None:
            blocked.append(pending.fact_id)
        else:
            removals.append(
                Removal(
                    pending.fact_id,
                    REASON_CONTRADICTION,
                    needs_kept=pending.replacement_fact_id,
                )
            )
    summaries: dict[SummaryKey, str | Section] = dict(plan.summaries)
    proposal = Proposal(
        new_facts=plan.new_facts,
        updates=plan.updated_facts,
        removals=tuple(removals),
        summaries=summaries,
        confirmed=plan.confirmed,
        repeated=plan.repeated,
        corrected=tuple(p.fact_id for p in plan.pending_removals),
    )
    return GateRequest(proposal, tuple(blocked))


@dataclass(frozen=True, slots=True)
class AppliedUpdate:
    """What :func:`apply_response` did, in the terms of an :class:`UpdateReport`.

    Attributes:
        plan: the plan the gate was given.
        gate: the gate's outcome (decision, receipts, commit).
        added: new facts stored (relearned ones under their archived ids).
        relearned: archived facts that came back because a new fact said them again.
        confirmed / extended: stored facts confirmed / extended (and not gone).
        removed / evicted: the facts the update removed / the gate evicted.
        blocked: contradiction removals not applied.
        metrics: the plan's counters completed with the gate's outcome.
    """

    plan: UpdatePlan
    gate: GateOutcome
    added: tuple[str, ...]
    relearned: tuple[str, ...]
    confirmed: tuple[str, ...]
    extended: tuple[str, ...]
    removed: tuple[FactChange, ...]
    evicted: tuple[FactChange, ...]
    blocked: tuple[str, ...]
    metrics: UpdateMetrics

    @property
    def commit(self) -> CommitResult:
        return self.gate.commit

    def facts(self, before: ScopeSnapshot) -> dict[str, Fact]:
        """Every fact this update names, as planned (new, changed) or as it was."""
        named = {*self.added, *self.relearned, *self.confirmed, *self.extended, *self.blocked}
        named.update(change.fact_id for change in (*self.removed, *self.evicted))
        planned = {fact.id: fact for fact in (*self.plan.new_facts, *self.plan.updated_facts)}
        planned.update((fact.id, fact) for fact in self.gate.commit.written)
        out: dict[str, Fact] = {}
        for fact_id in sorted(named):
            fact = planned.get(fact_id) or before.get(fact_id)
            if fact is not None:
                out[fact_id] = fact
        return out


def apply_response(
    transaction: StoreTransaction,
    response: NormalizedResponse,
    *,
    gate: CapacityGate,
    settings: UpdateSettings,
    signals: Collection[str],
    now: datetime,
    thread_id: str | None,
    new_id: Callable[[], str],
    mark: str | None = None,
) -> AppliedUpdate:
    """Plan ``response`` against the transaction's library and commit it through the gate.

    In order: :func:`~deermem.learning.plan.plan_update` over the
    transaction's snapshot; the store's capacity gate — the only place a
    library is ever trimmed — over that library, with trigger ``extraction``;
    the contradiction removals with a replacement, which the gate settles
    after its decision; one journaled commit: new and changed facts,
    deletions, summaries, one receipt per reason (``capacity``,
    ``staleness``, ``contradiction``, ``upload``) and, with ``eviction_mode:
    archive``, an archive entry per fact that left.

    Args:
        transaction: an open store transaction (or a :class:`PreviewTransaction`).
        response: the read answer.
        gate: the store's capacity gate.
        settings: the update settings.
        signals: the signals detected in the conversation fed to the model.
        now: the clock of every decision and timestamp.
        thread_id: the conversation, recorded as the new facts' source.
        new_id: makes fact ids; ids in use or in the archive are skipped.
        mark: the conversation's new watermark, committed with the update;
            ``None`` moves none.

    Raises:
        RevisionConflict: the store changed under the commit (the caller
            reloads and applies the same response again).
    """
    snapshot = transaction.snapshot
    plan = plan_update(
        MemoryState.from_summaries(snapshot.summaries, snapshot.facts),
        response,
        signals=signals,
        settings=settings,
        now=now,
        thread_id=thread_id,
        new_id=new_id,
        archived=lambda fact_id: transaction.archived(fact_id) is not None,
    )
    request = gate_request(plan)
    proposal = request.proposal
    if mark is not None and thread_id is not None:
        proposal = proposal._replace(watermarks={thread_id: mark})
    outcome = gate.apply(transaction, proposal, trigger=TRIGGER, now=now)
    return _applied(plan, request, outcome, snapshot)


def _applied(
    plan: UpdatePlan, request: GateRequest, outcome: GateOutcome, before: ScopeSnapshot
) -> AppliedUpdate:
    reasons = {removal.fact_id: removal.reason for removal in request.proposal.removals}
    receipts: dict[tuple[str, str], str | None] = {}
    for receipt in outcome.receipts:
        for line in receipt.evicted:
            receipts[(line.fact_id, receipt.reason)] = receipt.receipt_id
    categories = {fact.id: fact.category for fact in (*before.facts, *plan.new_facts)}
    # A relearned fact was in neither; it is written when kept, in the decision when evicted.
    categories.update((fact.id, fact.category) for fact in outcome.commit.written)
    categories.update((item.fact_id, item.category) for item in outcome.decision.evicted)

    def change(fact_id: str, reason: str) -> FactChange:
        return FactChange(fact_id, categories[fact_id], reason, receipts.get((fact_id, reason)))

    removed = tuple(change(i, reasons[i]) for i in outcome.removed)
    evicted = tuple(change(i, REASON_CAPACITY) for i in outcome.evicted)
    blocked = request.blocked + tuple(r.fact_id for r in outcome.skipped_removals)
    gone = set(outcome.removed) | set(outcome.evicted)
    rejections = plan.metrics.removal_rejections
    metrics = replace(
        plan.metrics,
        contradiction_removals=sum(
            1 for i in outcome.removed if reasons[i] == REASON_CONTRADICTION
        ),
        removal_rejections=RemovalRejections(
            missing=rejections.missing,
            scope=rejections.scope,
            replacement=rejections.replacement + len(blocked),
        ),
    )
    return AppliedUpdate(
        plan=plan,
        gate=outcome,
        added=outcome.kept_new,
        relearned=tuple(outcome.relearned.values()),
        confirmed=tuple(i for i in plan.confirmed if i not in gone),
        extended=tuple(i for i in plan.extended if i not in gone),
        removed=removed,
        evicted=evicted,
        blocked=blocked,
        metrics=metrics,
    )


class PreviewTransaction:
    """A read-only stand-in for a store transaction, for dry runs.

    It reads what a transaction reads (snapshot, usage, archive) without
    taking the user's lock, and :meth:`commit` records the change set
    instead of writing it: the capacity gate decides and builds receipts
    exactly as it would, and nothing on disk changes.
    """

    def __init__(self, store: Store, scope: Scope) -> None:
        self._store = store
        self._scope = scope
        self._snapshot = store.load(scope)
        self.changes: ChangeSet | None = None

    @property
    def snapshot(self) -> ScopeSnapshot:
        return self._snapshot

    def usage(self) -> Mapping[str, UsageEntry]:
        return self._store.usage(self._scope)

    def archived(self, fact_id: str) -> ArchiveEntry | None:
        return self._store.archived(self._scope, fact_id)

    def archive(self, now: datetime) -> tuple[ArchiveEntry, ...]:
        return self._store.archive(self._scope, now)

    def records(self) -> ScopeRecords:
        return self._store.records(self._scope)

    def archived_matches(
        self, contents: Sequence[str], now: datetime
    ) -> Mapping[str, ArchiveEntry]:
        return self._store.archived_matches(self._scope, contents, now)

    def shadow_marks(self) -> Mapping[str, ShadowMark]:
        return self._store.shadow_marks(self._scope)

    def watermark(self, thread_id: str) -> str | None:
        return self._store.watermark(self._scope, thread_id)

    def commit(self, changes: ChangeSet) -> CommitResult:
        """Record ``changes``; report what a commit would have done."""
        self.changes = changes
        snapshot = self._snapshot
        return CommitResult(
            revision=snapshot.revision if changes.empty else snapshot.revision + 1,
            written=tuple(write.fact for write in changes.writes),
            deleted=tuple(delete.fact_id for delete in changes.deletes),
            changed=not changes.empty,
            version=snapshot.version,
        )
