"""``DeerMemManager``: the class DeerFlow's ``memory.manager_class`` names.

DeerFlow accepts only subclasses of its own ``MemoryManager`` (a pydantic
model), so this module imports DeerFlow and exists only inside it.
:class:`DeerMemManager` *is* :class:`~deermem.integrations.deerflow.DeerFlowBackend`
— every method of the contract is the backend's own, inherited — with
DeerFlow's base class beside it: pydantic builds it from DeerFlow's fields
(``backend_config``, ``mode``, ``callbacks``) and then opens the memory as the
backend's constructor would (the memory, its model and its error types are
private attributes, outside validation and serialisation). DeerFlow's
conflict and corruption errors are the ones it raises.
"""

from __future__ import annotations

import threading
from typing import Any, Final, Literal

from pydantic import BaseModel, PrivateAttr

from deermem.integrations.deerflow.backend import DeerFlowBackend, ErrorTypes
from deermem.integrations.deerflow.models import ObservedModel
from deermem.integrations.deerflow.settings import BackendSettings, log_unused, read_backend_config
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


class DeerMemManager(DeerFlowBackend, MemoryManager):
    """deermem as a DeerFlow memory backend (``manager_class:
    deermem.integrations.deerflow.DeerMemManager``); see docs/deerflow.md."""

    # Built as a pydantic model, as DeerFlow builds every backend (the backend's own
    # constructor takes read settings; this one takes DeerFlow's fields).
    __init__ = BaseModel.__init__

    _settings: BackendSettings = PrivateAttr()
    _errors: ErrorTypes = PrivateAttr()
    _model: ObservedModel | None = PrivateAttr()
    _memory: Memory = PrivateAttr()
    _warned_no_model: threading.Event = PrivateAttr()

    def model_post_init(self, context: Any, /) -> None:
        """Open the memory, with the host hooks :meth:`from_config` passed in ``context``.

        Constructed directly (``DeerMemManager(backend_config={...})``) it has no hooks.
        """
        hooks = context.get(_HOOKS, {}) if isinstance(context, dict) else {}
        settings = read_backend_config(self.backend_config)
        log_unused(settings)
        self._open(
            settings,
            callbacks=self.callbacks,
            host_llm_factory=hooks.get("host_llm_factory"),
            should_keep_hidden_message=hooks.get("should_keep_hidden_message"),
            error_types=ErrorTypes(MemoryConflictError, MemoryCorruptionError),
        )

    @classmethod
    def from_config(  # type: ignore[override]  # DeerFlow's classmethod, not the backend's
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
