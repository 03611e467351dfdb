"""deermem as LangChain agent middleware: :class:`DeerMemMiddleware` for ``create_agent``.

Importing this package imports LangChain (the ``deermem[langchain]`` extra);
nothing else in deermem does. See docs/integrations.md.
"""

from __future__ import annotations

from deermem.integrations.langchain.middleware import (
    DEFAULT_THREAD_KEY,
    DeerMemMiddleware,
    MissingThreadIdError,
    ThreadIdRule,
)

__all__ = ["DEFAULT_THREAD_KEY", "DeerMemMiddleware", "MissingThreadIdError", "ThreadIdRule"]
