# Type stub for the part of DeerFlow's memory contract deermem binds to, as read
# from DeerFlow commit f1f4af99 (see docs/deerflow.md). It lets mypy check the
# DeerMemManager binding's overrides against the contract without DeerFlow
# installed; scripts/check-deerflow.sh runs the binding against the real thing.
from typing import Any, ClassVar, Literal

from pydantic import BaseModel

class MemoryCallbacks:
    def on_memory_llm_call(
        self,
        invoke_config: dict[str, Any],
        *,
        thread_id: str | None,
        user_id: str | None,
        trace_id: str | None,
        model_name: str | None,
    ) -> None: ...
    def on_memory_llm_result(
        self,
        invoke_config: dict[str, Any],
        *,
        prompt: Any,
        response: Any,
        error: BaseException | None,
        duration_ms: float,
        model_name: str | None,
    ) -> None: ...

class MemoryManagerError(RuntimeError): ...
class MemoryConflictError(MemoryManagerError): ...
class MemoryCorruptionError(MemoryManagerError): ...

class MemoryManager(BaseModel):
    backend_config: dict[str, Any]
    mode: Literal["middleware", "tool"]
    callbacks: MemoryCallbacks | None
    supports_search: ClassVar[bool]
    requires_passive_writes_in_tool_mode: ClassVar[bool]
    def add(
        self,
        thread_id: str,
        messages: list[Any],
        *,
        agent_name: str | None = None,
        user_id: str | None = None,
        trace_id: str | None = None,
    ) -> None: ...
    def get_context(
        self, user_id: str | None, *, agent_name: str | None = None, thread_id: str | None = None
    ) -> str: ...
    def add_nowait(
        self,
        thread_id: str,
        messages: list[Any],
        *,
        agent_name: str | None = None,
        user_id: str | None = None,
    ) -> None: ...
    def search(
        self,
        query: str,
        top_k: int = 5,
        *,
        user_id: str | None = None,
        agent_name: str | None = None,
        category: str | None = None,
    ) -> list[dict[str, Any]]: ...
    def get_memory(
        self, *, user_id: str | None = None, agent_name: str | None = None
    ) -> dict[str, Any]: ...
    def delete_memory(
        self, *, user_id: str | None = None, agent_name: str | None = None
    ) -> None: ...
    def clear_memory(
        self, *, user_id: str | None = None, agent_name: str | None = None
    ) -> dict[str, Any]: ...
    def import_memory(
        self,
        memory_data: dict[str, Any],
        *,
        user_id: str | None = None,
        agent_name: str | None = None,
    ) -> dict[str, Any]: ...
    def export_memory(
        self, *, user_id: str | None = None, agent_name: str | None = None
    ) -> dict[str, Any]: ...
    def shutdown_flush(self, timeout: float) -> bool: ...
    def warm(self) -> bool | None: ...
    def reload_memory(
        self, *, user_id: str | None = None, agent_name: str | None = None
    ) -> dict[str, Any]: ...
    def create_fact(
        self,
        content: str,
        category: str = "context",
        confidence: float = 0.5,
        *,
        agent_name: str | None = None,
        user_id: str | None = None,
    ) -> tuple[dict[str, Any], str | None]: ...
    def delete_fact(
        self, fact_id: str, *, agent_name: str | None = None, user_id: str | None = None
    ) -> dict[str, Any]: ...
    def update_fact(
        self,
        fact_id: str,
        content: str | None = None,
        category: str | None = None,
        confidence: float | None = None,
        *,
        agent_name: str | None = None,
        user_id: str | None = None,
    ) -> dict[str, Any]: ...
    def on_pre_compress(self, messages: list[Any]) -> str: ...
    def on_turn_start(self, turn_number: int, message: Any, **kwargs: Any) -> None: ...
    async def aadd(
        self,
        thread_id: str,
        messages: list[Any],
        *,
        agent_name: str | None = None,
        user_id: str | None = None,
        trace_id: str | None = None,
    ) -> None: ...
    async def aget_context(
        self, user_id: str | None, *, agent_name: str | None = None, thread_id: str | None = None
    ) -> str: ...
    async def asearch(
        self,
        query: str,
        top_k: int = 5,
        *,
        user_id: str | None = None,
        agent_name: str | None = None,
        category: str | None = None,
    ) -> list[dict[str, Any]]: ...
    @classmethod
    def from_config(
        cls,
        backend_config: dict[str, Any],
        *,
        mode: Literal["middleware", "tool"] = "middleware",
        **host_hooks: Any,
    ) -> MemoryManager: ...
    def close(self) -> None: ...
