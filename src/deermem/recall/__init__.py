"""Recall: what the agent reads of its memory.

* :mod:`~deermem.recall.tokens` — ``cl100k_base`` token counts (offline) or
  a CJK-aware character estimate;
* :mod:`~deermem.recall.injection` — summaries and facts laid out under
  token budgets, with a guaranteed budget for the protected categories and a
  manifest of what went in and what was left out;
* :mod:`~deermem.recall.index` — a rebuildable SQLite FTS5 index with BM25,
  time decay and confidence, and the handle a memory holds on it;
* :mod:`~deermem.recall.search` — searching a memory: the index first, a
  substring match after, and the archived facts a search missed.

Everything here except the index is pure: no files, no clock.
"""

from deermem.recall.injection import (
    OMISSION_REASONS,
    Injection,
    InjectionManifest,
    InjectionSettings,
    build_injection,
)
from deermem.recall.tokens import count_tokens, token_counter, warm_tokenizer

__all__ = [
    "OMISSION_REASONS",
    "Injection",
    "InjectionManifest",
    "InjectionSettings",
    "build_injection",
    "count_tokens",
    "token_counter",
    "warm_tokenizer",
]
