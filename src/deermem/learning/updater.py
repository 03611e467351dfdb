"""One memory update, end to end: conversation → model → plan → the capacity gate → commit.

:class:`Updater` wires the pure parts of this package to a
:class:`~deermem.llm.ChatModel` and a :class:`~deermem.store.Store`:

1. :meth:`Updater.prepare` reads the messages (OpenAI or LangChain/DeerFlow
   shape), filters them (hidden turns, tool traffic, upload blocks, trivial
   acknowledgements) and detects signals; ``None`` when nothing is left to
   learn from;
2. :meth:`Updater.run` is given the messages to feed (the caller cuts what
   an earlier update already extracted, see :class:`~deermem.learning.Watermark`),
   keeps the newest of them that fit ``max_conversation_chars`` (the older
   ones are left out and counted), detects the signals *on what is sent* —
   hints and the confirmation gate see only what the model sees — renders
   the prompt from the current memory, and makes **one** model call,
   JSON-schema constrained where the backend supports it;
3. the answer is parsed and normalised; an answer without an update, or one
   refused whole, changes nothing;
4. inside one store transaction, :func:`~deermem.learning.apply.apply_response`
   plans, runs the capacity gate and commits. If the store reports a
   revision conflict (a writer that bypassed the lock), the memory is
   reloaded and the *same* answer applied again, up to three attempts —
   the model is never asked twice.

The model call happens outside the store's lock: a slow endpoint never
blocks other writers. A dry run uses a
:class:`~deermem.learning.apply.PreviewTransaction` and writes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Final

from deermem.errors import RevisionConflict
from deermem.learning.apply import AppliedUpdate, PreviewTransaction, apply_response
from deermem.learning.conversation import ConversationTurn, ConversationWindow, fit_conversation
from deermem.learning.normalize import normalize_response
from deermem.learning.parse import NoUpdate, parse_update_response
from deermem.learning.prompt import SIGNAL_ORDER, build_update_prompt
from deermem.learning.report import ModelCall, UpdateOutcome, UpdateReport, UpdateResult
from deermem.learning.responses import NormalizedResponse, RejectedResponse
from deermem.learning.schema import response_json_schema
from deermem.learning.settings import UpdateSettings
from deermem.learning.signals import (
    KeepHidden,
    Message,
    PatternSet,
    PreparedConversation,
    detect_signals,
    load_patterns,
    parse_messages,
    prepare_conversation,
)
from deermem.learning.state import MemoryState
from deermem.learning.templates import MEMORY_UPDATE, PromptLoader
from deermem.library.gate import CapacityGate
from deermem.llm.types import ChatMessage, ChatModel, ChatResponse
from deermem.model import Scope
from deermem.store.protocol import ScopeSnapshot, Store, StoreTransaction

if TYPE_CHECKING:
    from deermem.config import MemoryConfig

__all__ = ["MAX_COMMIT_ATTEMPTS", "Updater"]

MAX_COMMIT_ATTEMPTS: Final = 3
_log = logging.getLogger(__name__)


class Updater:
    """Extraction from conversations into one store, through one capacity gate.

    Args:
        model: the chat model to ask.
        settings: the gates' and the staleness review's settings.
        gate: the store's capacity gate (the only trimming path).
        patterns: signal and trivial-turn patterns.
        prompts: where the ``memory_update`` template is loaded from.
        keep_hidden: a host's rule for hidden human messages.
    """

    def __init__(
        self,
        model: ChatModel,
        *,
        settings: UpdateSettings,
        gate: CapacityGate,
        patterns: PatternSet,
        prompts: PromptLoader,
        keep_hidden: KeepHidden | None = None,
    ) -> None:
        self.model = model
        self.settings = settings
        self.gate = gate
        self.patterns = patterns
        self.prompts = prompts
        self.keep_hidden = keep_hidden

    @classmethod
    def from_config(
        cls, config: MemoryConfig, model: ChatModel, *, keep_hidden: KeepHidden | None = None
    ) -> Updater:
        """An updater with the configuration's gate, settings, patterns and prompts.

        ``keep_hidden`` is the host's rule for hidden human messages (default:
        only a clarification answer is kept).

        Raises:
            PatternError: a pattern file under ``patterns_dir`` is invalid.
            PromptTemplateError: a prompt override under ``prompts_dir`` is invalid.
        """
        return cls(
            model,
            settings=UpdateSettings.from_config(config),
            gate=CapacityGate.from_config(config),
            patterns=load_patterns(config.patterns_dir),
            prompts=PromptLoader(config.prompts_dir),
            keep_hidden=keep_hidden,
        )

    def prepare(self, messages: Iterable[object]) -> PreparedConversation | None:
        """Read, filter and scan a conversation; ``None`` when nothing is left to learn.

        Raises:
            MessageFormatError: a message has an unusable shape.
        """
        return prepare_conversation(
            parse_messages(messages), self.patterns, keep_hidden=self.keep_hidden
        )

    def run(
        self,
        store: Store,
        scope: Scope,
        feed: Sequence[Message],
        *,
        thread_id: str,
        now: datetime,
        new_id: Callable[[], str],
        dry_run: bool = False,
        mark: str | None = None,
    ) -> UpdateResult:
        """Extract from ``feed`` (filtered messages, oldest first) and apply the answer.

        ``mark`` is the conversation's new watermark: the commit that applies
        the answer stores it (a dry run stores nothing).

        Raises:
            LLMError: the model call failed (after the client's retries).
            RevisionConflict: the store kept changing under three attempts.
            PromptTemplateError: the agent's prompt override is invalid.
        """
        spoken = [
            (m, ConversationTurn(m.role, m.text, m.id)) for m in feed if m.role in ("human", "ai")
        ]
        window = fit_conversation(
            [turn for _, turn in spoken], self.settings.max_conversation_chars
        )
        signals = detect_signals([m for m, _ in spoken[window.start :]], self.patterns)
        signal_names = tuple(name for name in SIGNAL_ORDER if name in signals)
        snapshot = store.load(scope)
        prompt = build_update_prompt(
            MemoryState.from_summaries(snapshot.summaries, snapshot.facts),
            window,
            signals=signals,
            settings=self.settings,
            now=now,
            template=self.prompts.load(MEMORY_UPDATE.name, agent=scope.agent),
        )
        base = UpdateReport(
            thread_id,
            "no-conversation",
            dry_run=dry_run,
            signals=signal_names,
            messages_sent=window.sent,
            messages_left_out=window.left_out,
        )
        if prompt is None:
            return UpdateResult(base)
        _log_left_out(thread_id, window, self.settings.max_conversation_chars)
        answer = self.model.complete(
            [ChatMessage.system(prompt.system), ChatMessage.user(prompt.user)],
            json_schema=response_json_schema(),
        )
        base = _with_call(base, self.model, answer)
        parsed = parse_update_response(answer.text)
        if isinstance(parsed, NoUpdate):
            _log.info("memory update for thread %r: no update (%s)", thread_id, parsed.reason)
            return UpdateResult(_no_update(base, parsed.reason))
        response = normalize_response(parsed.data)
        base = replace(base, over_limits=response.over_limits)
        if response.over_limits.total:
            _log.warning(
                "memory update for thread %r: entries of the answer dropped over its limits: %s",
                thread_id,
                ", ".join(f"{name} {count}" for name, count, *_ in response.over_limits.items()),
            )
        if isinstance(response, RejectedResponse):
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
            return UpdateResult(_no_update(base, response.reason, outcome="rejected"))
        return self._commit(
            store, scope, response, base, now=now, new_id=new_id, signals=signals, mark=mark
        )

    def _commit(
        self,
        store: Store,
        scope: Scope,
        response: NormalizedResponse,
        base: UpdateReport,
        *,
        now: datetime,
        new_id: Callable[[], str],
        signals: frozenset[str],
        mark: str | None,
    ) -> UpdateResult:
        """Apply the answer in one transaction; on a revision conflict, reload and retry."""

        def apply(transaction: StoreTransaction) -> AppliedUpdate:
            return apply_response(
                transaction,
                response,
                gate=self.gate,
                settings=self.settings,
                signals=signals,
                now=now,
                thread_id=base.thread_id,
                new_id=new_id,
                mark=None if base.dry_run else mark,
            )

        if base.dry_run:
            preview = PreviewTransaction(store, scope)
            return _result(base, apply(preview), 1, preview.snapshot)
        for attempt in range(1, MAX_COMMIT_ATTEMPTS + 1):
            try:
                with store.transaction(scope) as transaction:
                    before = transaction.snapshot
                    applied = apply(transaction)
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


def _with_call(report: UpdateReport, model: ChatModel, answer: ChatResponse) -> UpdateReport:
    call = ModelCall(
        model=answer.model or model.name,
        attempts=answer.attempts,
        prompt_tokens=answer.usage.prompt_tokens,
        completion_tokens=answer.usage.completion_tokens,
        truncated=answer.truncated,
    )
    return replace(report, model_call=call)


def _no_update(
    report: UpdateReport, detail: str, *, outcome: UpdateOutcome = "no-update"
) -> UpdateReport:
    return replace(report, outcome=outcome, detail=detail)


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
    )
    return UpdateResult(report, applied.facts(before))
