"""The "argument not given" marker shared by :class:`~deermem.memory.Memory`'s parts.

``None`` cannot play this role: ``user_id=None`` is a real scope (the root's
own single-user document), so "not given" needs a value of its own.
"""

from __future__ import annotations

from typing import Final

__all__ = ["UNSET"]

UNSET: Final = object()
