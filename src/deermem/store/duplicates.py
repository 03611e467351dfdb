"""The duplicate rule: when two facts say the same thing.

Two facts are duplicates when their texts are equal once stripped and
case-folded. One rule for every place that asks — a manual create against the
library, extraction's de-duplication, and the capacity gate's look-up of an
archived fact that a proposal says again (a *relearned* fact, see
:class:`deermem.library.gate.RegretLedger`) — so they cannot drift apart.
"""

from __future__ import annotations

import hashlib

__all__ = ["duplicate_digest", "duplicate_key"]


def duplicate_key(text: str) -> str:
    """What two facts must share to be duplicates: the text stripped and case-folded."""
    return text.strip().casefold()


def duplicate_digest(text: str) -> str:
    """A short digest of :func:`duplicate_key`, for indexes that must not hold the text.

    Sixteen hex digits: a match is always confirmed against the text itself,
    so a collision costs one extra read, never a wrong answer.
    """
    key = duplicate_key(text).encode("utf-8", "surrogatepass")
    return hashlib.sha256(key).hexdigest()[:16]
