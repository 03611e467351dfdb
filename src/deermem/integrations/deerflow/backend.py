"""DeerFlow's memory-backend contract over :class:`~deermem.Memory`, without DeerFlow.

:class:`DeerFlowBackend` has every method of DeerFlow's ``MemoryManager``
that deermem can support, with the contract's parameter names and kinds, its
return shapes and its error mapping. It is the one class: DeerFlow's
``memory.manager_class`` names ``DeerMemManager``
(``deermem.integrations.deerflow.manager``), which is this class bound to
DeerFlow's own ``MemoryManager`` base (DeerFlow accepts nothing else) — the
same methods, no second copy. Without DeerFlow installed, this class runs and
is tested on its own.

What the contract asks, and how it is met:

* **One instance, many threads.** One :class:`~deermem.Memory` without a
  scope of its own (:meth:`~deermem.Memory.open_unscoped`) is opened at
  construction; each call works on a view bound to the call's user and agent
  (``agent_name=None`` is the ``__default__`` bucket, as for DeerMem). The
  store serialises writers per user, so concurrent calls lose nothing.
* **Writes that must never break an agent run.** :meth:`add` and
  :meth:`add_nowait` filter and queue, and log instead of raising — no model
  configured, a full queue, an unreadable message. Messages the host hid
  from the user are dropped unless the host's ``should_keep_hidden_message``
  keeps them, and the host's own injected memory and date reminders are
  dropped whatever it says: memory must not learn from its own echo.
* **Documents** are DeerFlow's shape (:func:`deerflow_document`): DeerFlow's
  gateway validates every document a backend returns against its
  ``MemoryResponse`` model, and its settings page checks imports against a
  stricter type guard — ``version``, ``revision``, ``lastUpdated``, the six
  summary sections as ``{summary, updatedAt}`` strings, and facts whose
  ``source`` is a *string*. deermem stores a source as ``{type, threadId}``;
  DeerFlow shows the thread id of a fact learned from a conversation and the
  type (``manual``, ``import``) otherwise, which is what
  :meth:`~deermem.model.FactSource.legacy_string` gives. Everything else a
  deermem fact carries is passed along: the gateway drops what its model does
  not know, and tools and the embedded client keep it.
* **Errors** are DeerFlow's (:func:`contract_errors`). Its gateway, tools and
  embedded client turn a backend's exceptions into HTTP statuses and tool
  errors by their class and, for ``ValueError``, by their *first argument*,
  compared exactly: a lost optimistic-concurrency race → the host's
  ``MemoryConflictError`` (409); stored data that cannot be read →
  ``MemoryCorruptionError`` (500, and under ``failure_policy.read:
  fail_closed`` it fails the agent turn); ``ValueError("confidence")`` (400),
  ``ValueError("Duplicate fact")`` (409), ``ValueError("content")`` (400,
  "content cannot be empty"); ``KeyError`` for an unknown fact id (404) —
  deermem's :class:`~deermem.FactNotFoundError` already is one; ``OSError``
  for storage failures (500) — a lock timeout already is one. The two host
  classes exist only inside DeerFlow, so the backend takes them as
  :class:`ErrorTypes`; outside DeerFlow it raises :class:`MemoryConflict` and
  :class:`MemoryCorruption`, runtime errors like the host's.
* **Bounded shutdown.** :meth:`shutdown_flush` drains the queue within its
  timeout and says whether everything was processed; :meth:`close` releases
  connections without waiting again.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar, Final, Literal, Self

from deermem.errors import (
    ArchivedFactError,
    ConfigError,
    CorruptMemoryFile,
    DuplicateFactError,
    FactValidationError,
    LLMError,
    QueueClosedError,
    QueueFullError,
    RevisionConflict,
)
from deermem.integrations.deerflow.models import HostChatModel, ObservedModel
from deermem.integrations.deerflow.settings import (
    BackendSettings,
    HiddenMessageRule,
    log_unused,
    read_backend_config,
)
from deermem.learning.messages import KeepHidden, Message, is_clarification_answer
from deermem.llm import build_chat_model
from deermem.memory import Memory
from deermem.model import Fact
from deermem.store import ScopeSnapshot

__all__ = [
    "DeerFlowBackend",
    "ErrorTypes",
    "MemoryConflict",
    "MemoryCorruption",
    "hidden_message_rule",
]

Mode = Literal["middleware", "tool"]

_log = logging.getLogger("deermem.integrations.deerflow")

# DeerFlow marks the reminders it injects (the memory block, the date) with this flag.
_HOST_REMINDER: Final = "dynamic_context_reminder"
# The variable name under which a literal model.api_key reaches deermem's client.
_KEY_VARIABLE: Final = "DEERMEM_DEERFLOW_API_KEY"
# The fields whose errors DeerFlow's callers tell apart by ValueError's first argument.
_KEYED_FIELDS: Final = frozenset({"confidence", "content"})


class MemoryConflict(RuntimeError):
    """The memory changed under a write (DeerFlow's ``MemoryConflictError`` outside DeerFlow)."""


class MemoryCorruption(RuntimeError):
    """Stored memory cannot be read safely (DeerFlow's ``MemoryCorruptionError`` outside it)."""


@dataclass(frozen=True)
class ErrorTypes:
    """The exception classes a conflict and a corruption are raised as."""

    conflict: type[Exception] = MemoryConflict
    corruption: type[Exception] = MemoryCorruption


@contextmanager
def contract_errors(types: ErrorTypes) -> Iterator[None]:
    """Re-raise deermem's errors as DeerFlow's callers expect them (see the module docstring)."""
    try:
        yield
    except RevisionConflict as error:
        raise types.conflict(str(error)) from error
    except CorruptMemoryFile as error:
        raise types.corruption(str(error)) from error
    except DuplicateFactError as error:
        raise ValueError("Duplicate fact") from error
    except FactValidationError as error:
        if error.field in _KEYED_FIELDS:
            raise ValueError(error.field) from error
        raise


def deerflow_fact(fact: Fact) -> dict[str, Any]:
    """One fact as DeerFlow shows it: every field, the source as a string."""
    data = fact.to_dict()
    data["source"] = fact.source.legacy_string()
    return data


def deerflow_document(snapshot: ScopeSnapshot) -> dict[str, Any]:
    """A scope as DeerFlow's memory document: summaries, then the facts oldest first."""
    document: dict[str, Any] = snapshot.summaries.to_dict()
    document["facts"] = [deerflow_fact(fact) for fact in snapshot.facts]
    return document


def hidden_message_rule(host_rule: HiddenMessageRule | None) -> KeepHidden:
    """deermem's rule for hidden human messages, from DeerFlow's ``should_keep_hidden_message``.

    The host's injected reminders are never kept. Other hidden messages are
    kept when the host's rule says so (it receives ``additional_kwargs``);
    without one, only a well-formed clarification answer is. A rule that
    raises keeps nothing (logged with the error's type only).
    """

    def keep(message: Message) -> bool:
        if message.metadata.get(_HOST_REMINDER):
            return False
        if host_rule is None:
            return is_clarification_answer(message)
        try:
            return bool(host_rule(dict(message.metadata)))
        except Exception as error:
            _log.warning(
                "should_keep_hidden_message failed (%s); the message is dropped",
                type(error).__name__,
            )
            return False

    return keep


class DeerFlowBackend:
    """DeerFlow's ``MemoryManager`` contract, over one :class:`~deermem.Memory`.

    Build it with :meth:`from_config`, as DeerFlow's factory builds a backend.

    Args:
        settings: the read ``backend_config``.
        mode: DeerFlow's ``memory.mode``; in ``tool`` mode the injected block
            holds the summaries only (facts are reached through search).
        callbacks: the host's ``MemoryCallbacks`` (observes model calls).
        host_llm_factory: builds the host's default chat model; used only
            when ``backend_config`` names no model of its own.
        should_keep_hidden_message: the host's rule for hidden messages.
        error_types: the classes conflicts and corruptions are raised as.
        clock: the time of every decision (default: the wall clock).
    """

    supports_search: ClassVar[bool] = True
    requires_passive_writes_in_tool_mode: ClassVar[bool] = False

    def __init__(
        self,
        settings: BackendSettings,
        *,
        mode: Mode = "middleware",
        callbacks: object | None = None,
        host_llm_factory: Callable[[], object] | None = None,
        should_keep_hidden_message: HiddenMessageRule | None = None,
        error_types: ErrorTypes | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.mode: Mode = mode
        self._open(
            settings,
            callbacks=callbacks,
            host_llm_factory=host_llm_factory,
            should_keep_hidden_message=should_keep_hidden_message,
            error_types=error_types,
            clock=clock,
        )

    def _open(
        self,
        settings: BackendSettings,
        *,
        callbacks: object | None,
        host_llm_factory: Callable[[], object] | None,
        should_keep_hidden_message: HiddenMessageRule | None,
        error_types: ErrorTypes | None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        """Open the memory the settings name, with the model extraction uses.

        The constructor's work, apart so that ``DeerMemManager`` — built by
        pydantic, as DeerFlow builds every backend — does the same once its
        fields are set.
        """
        self._settings = settings
        self._errors = error_types or ErrorTypes()
        self._model = _extraction_model(settings, host_llm_factory, callbacks)
        rule = settings.keep_hidden or should_keep_hidden_message
        # Every call names its user, so the memory has no scope of its own: a call
        # that forgot to choose one fails instead of reaching some default user.
        self._memory = Memory.open_unscoped(
            None,
            settings.config,
            clock=clock,
            model=self._model,
            keep_hidden=hidden_message_rule(rule),
        )
        self._warned_no_model = threading.Event()

    @property
    def settings(self) -> BackendSettings:
        """The ``backend_config`` this backend was built from, as read."""
        return self._settings

    @classmethod
    def from_config(
        cls,
        backend_config: Mapping[str, Any] | None = None,
        *,
        mode: Mode = "middleware",
        error_types: ErrorTypes | None = None,
        **host_hooks: Any,
    ) -> Self:
        """Read ``backend_config`` and take the host hooks deermem uses.

        Of DeerFlow's hooks, ``callbacks``, ``host_llm_factory`` and
        ``should_keep_hidden_message`` are used; the others, and any the host
        adds later, are ignored.

        Raises:
            ConfigError: ``backend_config`` is invalid (every problem listed).
        """
        settings = read_backend_config(backend_config)
        log_unused(settings)
        return cls(
            settings,
            mode=mode,
            callbacks=host_hooks.get("callbacks"),
            host_llm_factory=host_hooks.get("host_llm_factory"),
            should_keep_hidden_message=host_hooks.get("should_keep_hidden_message"),
            error_types=error_types,
        )

    def memory(self, *, user_id: str | None = None, agent_name: str | None = None) -> Memory:
        """The deermem :class:`~deermem.Memory` behind one user's agent bucket.

        What DeerFlow's contract has no method for — ``why`` a fact left, the
        receipts, the archive and ``restore`` — is one call away on it.
        """
        return self._memory.scoped(user=user_id, agent=agent_name)

    def _scope(self, user_id: str | None, agent_name: str | None) -> Memory:
        return self.memory(user_id=user_id, agent_name=agent_name)

    def _document(self, memory: Memory) -> dict[str, Any]:
        return deerflow_document(memory.snapshot())

    # --- conversations -------------------------------------------------------------

    def add(
        self,
        thread_id: str,
        messages: list[Any],
        *,
        agent_name: str | None = None,
        user_id: str | None = None,
        trace_id: str | None = None,
    ) -> None:
        """Queue a conversation; it is learned from once the user pauses. Never raises."""
        self._queue(thread_id, messages, agent_name, user_id, immediate=False)

    async def aadd(
        self,
        thread_id: str,
        messages: list[Any],
        *,
        agent_name: str | None = None,
        user_id: str | None = None,
        trace_id: str | None = None,
    ) -> None:
        """:meth:`add` on a worker thread: the event loop never waits for files or locks."""
        await asyncio.to_thread(
            self.add, thread_id, messages, agent_name=agent_name, user_id=user_id
        )

    def add_nowait(
        self,
        thread_id: str,
        messages: list[Any],
        *,
        agent_name: str | None = None,
        user_id: str | None = None,
    ) -> None:
        """Queue these messages for extraction now: the host is about to summarise them away."""
        self._queue(thread_id, messages, agent_name, user_id, immediate=True)

    def _queue(
        self,
        thread_id: str,
        messages: list[Any],
        agent_name: str | None,
        user_id: str | None,
        *,
        immediate: bool,
    ) -> None:
        # The host calls this at the end of every agent run: whatever goes
        # wrong is logged (ids and error types only, never text) and the run goes on.
        if self._model is None:
            if not self._warned_no_model.is_set():
                self._warned_no_model.set()
                _log.warning(
                    "no model for memory extraction (neither backend_config.model nor the "
                    "host's default model); conversations are not learned from"
                )
            return
        try:
            self._scope(user_id, agent_name).queue_conversation(
                thread_id, messages, immediate=immediate
            )
        except QueueFullError:
            _log.warning("memory queue full; conversation of thread %r not queued", thread_id)
        except QueueClosedError:
            _log.warning("memory is closed; conversation of thread %r not queued", thread_id)
        except Exception as error:
            _log.error(
                "conversation of thread %r not queued for memory: %s",
                thread_id,
                type(error).__name__,
            )

    # --- reading ---------------------------------------------------------------------

    def get_context(
        self,
        user_id: str | None,
        *,
        agent_name: str | None = None,
        thread_id: str | None = None,
    ) -> str:
        """The memory block's body (DeerFlow adds the ``<memory>`` tags).

        Summaries and facts within the token budgets, corrections first; in
        tool mode the summaries only.
        """
        with contract_errors(self._errors):
            injection = self._scope(user_id, agent_name).injection(facts=self.mode != "tool")
        return injection.text

    async def aget_context(
        self,
        user_id: str | None,
        *,
        agent_name: str | None = None,
        thread_id: str | None = None,
    ) -> str:
        return await asyncio.to_thread(
            self.get_context, user_id, agent_name=agent_name, thread_id=thread_id
        )

    def search(
        self,
        query: str,
        top_k: int = 5,
        *,
        user_id: str | None = None,
        agent_name: str | None = None,
        category: str | None = None,
    ) -> list[dict[str, Any]]:
        """The facts that best match ``query``, best first, as fact documents.

        The category filter applies before the cut; under ``hybrid-v1`` (or
        shadow mode) the hits count as recalls.
        """
        if not query.strip() or top_k <= 0:
            return []
        with contract_errors(self._errors):
            hits = self._scope(user_id, agent_name).search(query, top_k=top_k, category=category)
        return [deerflow_fact(hit.fact) for hit in hits]

    async def asearch(
        self,
        query: str,
        top_k: int = 5,
        *,
        user_id: str | None = None,
        agent_name: str | None = None,
        category: str | None = None,
    ) -> list[dict[str, Any]]:
        return await asyncio.to_thread(
            self.search, query, top_k, user_id=user_id, agent_name=agent_name, category=category
        )

    def get_memory(
        self, *, user_id: str | None = None, agent_name: str | None = None
    ) -> dict[str, Any]:
        """The scope's document: the user's summaries and the agent's facts."""
        with contract_errors(self._errors):
            return self._document(self._scope(user_id, agent_name))

    def reload_memory(
        self, *, user_id: str | None = None, agent_name: str | None = None
    ) -> dict[str, Any]:
        """Re-read the scope from disk (after hand edits) and return its document."""
        with contract_errors(self._errors):
            memory = self._scope(user_id, agent_name)
            memory.reload()
            return self._document(memory)

    def export_memory(
        self, *, user_id: str | None = None, agent_name: str | None = None
    ) -> dict[str, Any]:
        """Every field of every fact, sources structured: an export that re-imports losslessly."""
        with contract_errors(self._errors):
            return self._scope(user_id, agent_name).export_document()

    # --- writing ---------------------------------------------------------------------

    def import_memory(
        self,
        memory_data: dict[str, Any],
        *,
        user_id: str | None = None,
        agent_name: str | None = None,
    ) -> dict[str, Any]:
        """Replace the scope's facts and the summaries with the document's, through the gate.

        Facts the document does not hold are archived (reason ``replaced``);
        over the cap the gate decides, with receipts. A fact of the document
        that is in the archive — an export imported after a clear, or after
        the fact was evicted — is restored first and then takes the
        document's fields: DeerFlow's import overwrites, and a fact never
        lives in the library and the archive at once. An invalid document
        changes nothing. Two facts of the document that say the same are
        imported both, as the original does (DeerFlow's import has no
        duplicate check; deermem's own import refuses them).
        """
        with contract_errors(self._errors):
            memory = self._scope(user_id, agent_name)
            facts = memory_data.get("facts")
            for _ in range(len(facts) if isinstance(facts, list) else 0):
                try:
                    memory.import_document(memory_data, allow_duplicates=True)
                    break
                except ArchivedFactError as archived:  # raised before anything is written
                    memory.restore(archived.fact_id)
            else:
                memory.import_document(memory_data, allow_duplicates=True)
            return self._document(memory)

    def clear_memory(
        self, *, user_id: str | None = None, agent_name: str | None = None
    ) -> dict[str, Any]:
        """Clear one agent's facts, or (``agent_name=None``) everything the user owns.

        Cleared facts go to the archive with receipts (unless ``eviction_mode:
        delete``); returns the now-empty document.
        """
        with contract_errors(self._errors):
            memory = self._scope(user_id, agent_name)
            if agent_name is None:
                memory.clear_user()
            else:
                memory.clear()
            return self._document(memory)

    def delete_memory(self, *, user_id: str | None = None, agent_name: str | None = None) -> None:
        """:meth:`clear_memory` without the document."""
        self.clear_memory(user_id=user_id, agent_name=agent_name)

    def create_fact(
        self,
        content: str,
        category: str = "context",
        confidence: float = 0.5,
        *,
        agent_name: str | None = None,
        user_id: str | None = None,
    ) -> tuple[dict[str, Any], str | None]:
        """Add a fact through the capacity gate.

        Returns:
            The document and the new fact's id — ``None`` when the gate
            evicted the new fact itself (it is in the archive, with a receipt).
        """
        with contract_errors(self._errors):
            memory = self._scope(user_id, agent_name)
            result = memory.create_fact(
                content, category=category.strip() or "context", confidence=confidence
            )
            if not result.kept:  # DeerFlow's contract has only the None to say it: say it here
                _log.warning("deermem: %s", result.message)
            return self._document(memory), result.fact_id

    def update_fact(
        self,
        fact_id: str,
        content: str | None = None,
        category: str | None = None,
        confidence: float | None = None,
        *,
        agent_name: str | None = None,
        user_id: str | None = None,
    ) -> dict[str, Any]:
        """Change the given fields of a fact; omitted ones are kept.

        New content that another fact already says is stored as the original
        stores it: DeerFlow's update has no duplicate check (only its create
        answers ``ValueError("Duplicate fact")``), so neither has this one.
        """
        if category is not None:
            category = category.strip() or "context"
        with contract_errors(self._errors):
            memory = self._scope(user_id, agent_name)
            memory.update_fact(
                fact_id,
                content=content,
                category=category,
                confidence=confidence,
                allow_duplicates=True,
            )
            return self._document(memory)

    def delete_fact(
        self, fact_id: str, *, agent_name: str | None = None, user_id: str | None = None
    ) -> dict[str, Any]:
        """Remove a fact: to the archive with a receipt (``eviction_mode: delete``: for good)."""
        with contract_errors(self._errors):
            memory = self._scope(user_id, agent_name)
            memory.delete_fact(fact_id)
            return self._document(memory)

    # --- life cycle --------------------------------------------------------------------

    def warm(self) -> bool:
        """Load the token vocabulary and open the search index (see ``Memory.warm``)."""
        return self._memory.warm()

    def warm_retrieval(self) -> bool:
        """Load the embedding models too, so that the first ``memory_search`` does not wait.

        DeerFlow's gateway calls this at start-up in a thread of its own, when
        memory is enabled, and answers meanwhile: loading the models takes
        ≈ 1.5 s, beyond what it grants ``warm`` for the first prompt.
        """
        return self._memory.warm(models=True)

    def shutdown_flush(self, timeout: float) -> bool:
        """Process the queued conversations within ``timeout`` seconds, a hard bound.

        Returns:
            ``True`` only if every queued conversation was processed, without
            failure, in time. What was not is logged by :meth:`close`.
        """
        return self._memory.flush_queue(max(timeout, 0.0)).ok

    def close(self) -> None:
        """Stop taking conversations and release connections, without waiting.

        The host calls this after :meth:`shutdown_flush`; conversations still
        queued are logged (ids only), not processed.
        """
        try:
            self._memory.close(timeout=0.0)
        finally:
            close = getattr(self._model, "close", None)
            if callable(close):
                close()


def _extraction_model(
    settings: BackendSettings,
    host_llm_factory: Callable[[], object] | None,
    callbacks: object | None,
) -> ObservedModel | None:
    """deermem's own model when ``backend_config`` names one, else the host's, else none.

    A model that cannot be built leaves extraction off, with the reason
    logged: memory can still be read, searched and edited.
    """
    config = settings.config
    if config.model.configured:
        environ = None
        if settings.api_key is not None:
            section = config.model.model_copy(update={"api_key_env": _KEY_VARIABLE})
            config = config.model_copy(update={"model": section})
            environ = {_KEY_VARIABLE: settings.api_key}
        try:
            own = build_chat_model(config, environ=environ)
        except (ConfigError, LLMError) as error:
            _log.error("memory extraction is off: %s", error)
            return None
        return ObservedModel(own, callbacks) if own is not None else None
    host = settings.host_llm
    if host is None and host_llm_factory is not None:
        try:
            host = host_llm_factory()
        except Exception as error:  # the host's code: its failure must not stop memory
            _log.error(
                "memory extraction is off: host_llm_factory failed (%s)", type(error).__name__
            )
            return None
    return ObservedModel(HostChatModel(host), callbacks) if host is not None else None
