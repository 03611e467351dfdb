"""deermem behind Anthropic's client-side memory tool (``memory_20250818``).

Importing this package imports the ``anthropic`` SDK (the ``deermem[anthropic]``
extra); nothing else in deermem does. See docs/integrations.md.
"""

from __future__ import annotations

from deermem.integrations.anthropic.tool import (
    ROOT,
    DeerMemAsyncMemoryTool,
    DeerMemMemoryTool,
    MemoryFiles,
)

__all__ = ["ROOT", "DeerMemAsyncMemoryTool", "DeerMemMemoryTool", "MemoryFiles"]
