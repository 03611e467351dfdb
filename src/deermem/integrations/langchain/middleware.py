"""The middleware: memory in each model call, the conversation to learning after the run.

Two halves, each a call to :class:`~deermem.Memory`:

* **Recall** — ``wrap_model_call``/``awrap_model_call`` add :meth:`Memory.context`
  (the ``<memory>`` block) to the system message of *this* model call only, as
  one more content block (the message's own blocks and fields are kept),
  through ``ModelRequest.override``. The block is never written to the graph's
  state, so a checkpointer never stores it and learning never reads it back:
  memory is not learned from its own echo.
* **Learning** — ``after_agent``/``aafter_agent`` hand the run's messages (the
  whole thread when a checkpointer keeps it) to :meth:`Memory.queue_conversation`
  under the run's thread id. The queue learns only what it has not learned
  before for that thread, once the user pauses.

The thread id is ``config["configurable"]["thread_id"]`` — the key LangGraph's
checkpointers use — unless the middleware is given ``thread_id=``: a fixed
string, or a callable that reads it from the run's config (a ``KeyError`` or
another ``LookupError`` it raises means none). A run with neither
is refused with :class:`MissingThreadIdError`: queuing it under a made-up
thread would mix separate conversations (their watermark is per thread), and
dropping it would forget in silence.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, SystemMessage
from langgraph.config import get_config
from langgraph.runtime import Runtime

from deermem.errors import DeerMemError
from deermem.memory import Memory
from deermem.model import check_thread_id

__all__ = ["DEFAULT_THREAD_KEY", "DeerMemMiddleware", "MissingThreadIdError", "ThreadIdRule"]

DEFAULT_THREAD_KEY = "thread_id"
"""The ``configurable`` key the thread id is read from by default (LangGraph's own)."""

ThreadIdRule = Callable[[Mapping[str, Any]], str | None]
"""Reads a run's thread id from its config (``RunnableConfig``); ``None``, or a
``LookupError`` (``KeyError``, ``IndexError``) it raises: there is none."""

_Result = ModelResponse[Any] | AIMessage


class MissingThreadIdError(DeerMemError, ValueError):
    """A run ended without a thread id, so its conversation cannot be queued for learning."""

    def __init__(self) -> None:
        super().__init__(
            "this run has no thread id to learn under: pass "
            'config={"configurable": {"thread_id": ...}} to invoke, or '
            "DeerMemMiddleware(memory, thread_id=...)"
        )


class DeerMemMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """Memory for a LangChain agent (``create_agent(..., middleware=[DeerMemMiddleware(memory)])``).

    Args:
        memory: a scoped memory (``Memory.open(root, user=...)``): the one user
            this agent serves.
        max_tokens: the memory block's budget instead of ``max_injection_tokens``.
        learn: queue each run's conversation for learning (needs a configured
            model: :class:`~deermem.errors.LLMNotConfigured` otherwise);
            ``False`` only recalls.
        thread_id: the thread every run is learned under (a string), or a rule
            reading it from the run's config; default: ``configurable.thread_id``.
    """

    def __init__(
        self,
        memory: Memory,
        *,
        max_tokens: int | None = None,
        learn: bool = True,
        thread_id: str | ThreadIdRule | None = None,
    ) -> None:
        super().__init__()
        memory.scope  # noqa: B018 (an unscoped memory is refused here, not at the first call)
        # What every run would refuse is refused here, once, not after each run's model call.
        budget: object = max_tokens  # callers outside mypy pass anything
        if budget is not None and (
            isinstance(budget, bool) or not isinstance(budget, int) or budget < 0
        ):
            raise ValueError(
                f"max_tokens: expected a whole number of tokens, 0 or more, got {max_tokens!r}"
            )
        if isinstance(thread_id, str):
            check_thread_id(thread_id)
        self.memory = memory
        self.max_tokens = max_tokens
        self.learn = learn
        self._thread_id = thread_id

    # --- recall ---------------------------------------------------------------------

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> _Result:
        return handler(self._with_memory(request, self.memory.context(max_tokens=self.max_tokens)))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> _Result:
        # Reading the store is file or database I/O: off the event loop.
        block = await asyncio.to_thread(self.memory.context, max_tokens=self.max_tokens)
        return await handler(self._with_memory(request, block))

    @staticmethod
    def _with_memory(request: ModelRequest[Any], block: str) -> ModelRequest[Any]:
        """The request with the block as a text block after its system message's (itself if empty).

        The system message is extended, not rebuilt from its text (LangChain's
        way: its ``content_blocks`` and one more), so what it carries beside the
        text stays: a block's own keys (Anthropic's ``cache_control``, which
        keeps caching the prompt before the block), ``additional_kwargs``, its id.
        """
        if not block:
            return request
        system = request.system_message
        if system is None:
            return request.override(system_message=SystemMessage(content=block))
        blocks: list[Any] = list(system.content_blocks)
        blocks.append({"type": "text", "text": f"\n\n{block}" if blocks else block})
        return request.override(system_message=system.model_copy(update={"content": blocks}))

    # --- learning -------------------------------------------------------------------

    def after_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        if self.learn:
            self.memory.queue_conversation(self._run_thread_id(), state["messages"])
        return None

    async def aafter_agent(
        self, state: AgentState[Any], runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        if self.learn:
            # The config is read here: a worker thread would not see the run's context.
            thread_id = self._run_thread_id()
            await asyncio.to_thread(
                self.memory.queue_conversation, thread_id, list(state["messages"])
            )
        return None

    def _run_thread_id(self) -> str:
        rule = self._thread_id
        if isinstance(rule, str):
            return rule
        config: Mapping[str, Any] = get_config()
        if rule is not None:
            try:
                found = rule(config)
            except LookupError as error:
                # A rule written as config["configurable"]["session"] finds no thread with a
                # KeyError: the run has no thread id, which is refused by name, not as a key.
                raise MissingThreadIdError from error
        else:
            found = (config.get("configurable") or {}).get(DEFAULT_THREAD_KEY)
        if found is None or not str(found).strip():  # a blank id names no thread either
            raise MissingThreadIdError
        return str(found)
