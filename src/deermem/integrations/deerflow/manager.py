"""``DeerMemManager``: the class DeerFlow's ``memory.manager_class`` names.

DeerFlow accepts only subclasses of its own ``MemoryManager`` (a pydantic
model), so this module imports DeerFlow and exists only inside it. It is a
binding and nothing more: construction builds a
:class:`~deermem.integrations.deerflow.DeerFlowBackend` (a ``PrivateAttr``,
outside validation and serialisation) and every method hands the call to it,
with the contract's signature — callers pass several parameters by keyword.
DeerFlow's conflict and corruption errors are the ones the backend raises.
"""

from __future__ import annotations

from typing import Any, ClassVar, Final, Literal

from pydantic import PrivateAttr

from deermem.integrations.deerflow.backend import DeerFlowBackend
from deermem.integrations.deerflow.errors import ErrorTypes
from deermem.memory import Memory

try:
    from deerflow.agents.memory.manager import (
        MemoryConflictError,
        MemoryCorruptionError,
        MemoryManager,
    )
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError(
        "DeerMemManager is DeerFlow's memory backend and needs DeerFlow installed; "
        "outside DeerFlow use deermem.integrations.deerflow.DeerFlowBackend"
    ) from error

__all__ = ["DeerMemManager"]

_HOOKS: Final = "deermem_host_hooks"  # the validation-context key that carries the hooks


class DeerMemManager(MemoryManager):
    """deermem as a DeerFlow memory backend (``manager_class:
    deermem.integrations.deerflow.DeerMemManager``); see docs/deerflow.md."""

    supports_search: ClassVar[bool] = True
    requires_passive_writes_in_tool_mode: ClassVar[bool] = False

    _backend: DeerFlowBackend = PrivateAttr()

    def model_post_init(self, context: Any, /) -> None:
        """Build the backend, with the host hooks :meth:`from_config` passed in ``context``.

        Constructed directly (``DeerMemManager(backend_config={...})``) it has no hooks.
        """
        hooks = context.get(_HOOKS, {}) if isinstance(context, dict) else {}
        self._backend = DeerFlowBackend.from_config(
            self.backend_config,
            mode=self.mode,
            error_types=ErrorTypes(MemoryConflictError, MemoryCorruptionError),
            **{**hooks, "callbacks": self.callbacks},
        )

    @classmethod
    def from_config(
        cls,
        backend_config: dict[str, Any] | None = None,
        *,
        mode: Literal["middleware", "tool"] = "middleware",
        **host_hooks: Any,
    ) -> DeerMemManager:
        hooks = dict(host_hooks)
        callbacks = hooks.pop("callbacks", None)
        return cls.model_validate(
            {"backend_config": dict(backend_config or {}), "mode": mode, "callbacks": callbacks},
            context={_HOOKS: hooks},
        )

    def add(
        self,
        thread_id: str,
        messages: list[Any],
        *,
        agent_name: str | None = None,
        user_id: str | None = None,
        trace_id: str | None = None,
    ) -> None:
        self._backend.add(
            thread_id, messages, agent_name=agent_name, user_id=user_id, trace_id=trace_id
        )

    async def aadd(
        self,
        thread_id: str,
        messages: list[Any],
        *,
        agent_name: str | None = None,
        user_id: str | None = None,
        trace_id: str | None = None,
    ) -> None:
        await self._backend.aadd(
            thread_id, messages, agent_name=agent_name, user_id=user_id, trace_id=trace_id
        )

    def add_nowait(
        self,
        thread_id: str,
        messages: list[Any],
        *,
        agent_name: str | None = None,
        user_id: str | None = None,
    ) -> None:
        self._backend.add_nowait(thread_id, messages, agent_name=agent_name, user_id=user_id)

    def get_context(
        self,
        user_id: str | None,
        *,
        agent_name: str | None = None,
        thread_id: str | None = None,
    ) -> str:
        return self._backend.get_context(user_id, agent_name=agent_name, thread_id=thread_id)

    async def aget_context(
        self,
        user_id: str | None,
        *,
        agent_name: str | None = None,
        thread_id: str | None = None,
    ) -> str:
        return await self._backend.aget_context(user_id, agent_name=agent_name, thread_id=thread_id)

    def search(
        self,
        query: str,
        top_k: int = 5,
        *,
        user_id: str | None = None,
        agent_name: str | None = None,
        category: str | None = None,
    ) -> list[dict[str, Any]]:
        return self._backend.search(
            query, top_k, user_id=user_id, agent_name=agent_name, category=category
        )

    async def asearch(
        self,
        query: str,
        top_k: int = 5,
        *,
        user_id: str | None = None,
        agent_name: str | None = None,
        category: str | None = None,
    ) -> list[dict[str, Any]]:
        return await self._backend.asearch(
            query, top_k, user_id=user_id, agent_name=agent_name, category=category
        )

    def get_memory(
        self, *, user_id: str | None = None, agent_name: str | None = None
    ) -> dict[str, Any]:
        return self._backend.get_memory(user_id=user_id, agent_name=agent_name)

    def reload_memory(
        self, *, user_id: str | None = None, agent_name: str | None = None
    ) -> dict[str, Any]:
        return self._backend.reload_memory(user_id=user_id, agent_name=agent_name)

    def export_memory(
        self, *, user_id: str | None = None, agent_name: str | None = None
    ) -> dict[str, Any]:
        return self._backend.export_memory(user_id=user_id, agent_name=agent_name)

    def import_memory(
        self,
        memory_data: dict[str, Any],
        *,
        user_id: str | None = None,
        agent_name: str | None = None,
    ) -> dict[str, Any]:
        return self._backend.import_memory(memory_data, user_id=user_id, agent_name=agent_name)

    def clear_memory(
        self, *, user_id: str | None = None, agent_name: str | None = None
    ) -> dict[str, Any]:
        return self._backend.clear_memory(user_id=user_id, agent_name=agent_name)

    def delete_memory(self, *, user_id: str | None = None, agent_name: str | None = None) -> None:
        self._backend.delete_memory(user_id=user_id, agent_name=agent_name)

    def create_fact(
        self,
        content: str,
        category: str = "context",
        confidence: float = 0.5,
        *,
        agent_name: str | None = None,
        user_id: str | None = None,
    ) -> tuple[dict[str, Any], str | None]:
        return self._backend.create_fact(
            content, category, confidence, agent_name=agent_name, user_id=user_id
        )

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
        return self._backend.update_fact(
            fact_id, content, category, confidence, agent_name=agent_name, user_id=user_id
        )

    def delete_fact(
        self, fact_id: str, *, agent_name: str | None = None, user_id: str | None = None
    ) -> dict[str, Any]:
        return self._backend.delete_fact(fact_id, agent_name=agent_name, user_id=user_id)

    def memory(self, *, user_id: str | None = None, agent_name: str | None = None) -> Memory:
        """The deermem :class:`~deermem.Memory` of a bucket: ``why``, receipts, the archive."""
        return self._backend.memory(user_id=user_id, agent_name=agent_name)

    def warm(self) -> bool | None:
        return self._backend.warm()

    def shutdown_flush(self, timeout: float) -> bool:
        return self._backend.shutdown_flush(timeout)

    def close(self) -> None:
        self._backend.close()
