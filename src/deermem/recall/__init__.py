"""Memory in the prompt: token counting, budgeted injection, and search.

* :mod:`deermem.recall.tokens` — ``cl100k_base`` token counts (offline) or
  a CJK-aware character estimate;
* :func:`build_injection` — summaries and facts laid out under token budgets,
  with a guaranteed budget for the protected categories and a manifest of
  what went in and what was left out;
* :class:`SearchIndex` — a rebuildable SQLite FTS5 index with BM25, time
  decay and confidence; :func:`substring_search` as the fallback and
  :func:`search_facts` tying them together.

Everything here except :class:`SearchIndex` is pure: no files, no clock.
"""

from deermem.recall.injection import Injection, InjectionSettings, build_injection
from deermem.recall.manifest import (
    OMISSION_REASONS,
    InjectedFact,
    InjectionManifest,
    OmittedFact,
)
from deermem.recall.render import Summaries, wrap_memory_block
from deermem.recall.search import (
    ArchiveSource,
    MissedHit,
    SearchHit,
    SearchIndex,
    SearchOutcome,
    SyncReport,
    search_facts,
    search_score,
    search_with_archive,
    substring_search,
)
from deermem.recall.tokens import (
    TokenCounter,
    count_tokens,
    estimate_tokens,
    token_counter,
    warm_tokenizer,
)

__all__ = [
    "OMISSION_REASONS",
    "ArchiveSource",
    "InjectedFact",
    "Injection",
    "InjectionManifest",
    "InjectionSettings",
    "MissedHit",
    "OmittedFact",
    "SearchHit",
    "SearchIndex",
    "SearchOutcome",
    "Summaries",
    "SyncReport",
    "TokenCounter",
    "build_injection",
    "count_tokens",
    "estimate_tokens",
    "search_facts",
    "search_score",
    "search_with_archive",
    "substring_search",
    "token_counter",
    "warm_tokenizer",
    "wrap_memory_block",
]
