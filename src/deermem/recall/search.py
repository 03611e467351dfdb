"""Searching one scope: the FTS5 index first, a substring match after.

:func:`search_facts` is what ``Memory.search`` calls: it brings the scope's
:class:`~deermem.recall.search_index.SearchIndex` up to the caller's version
token, runs the FTS5 search and falls back to :func:`substring_search` when
FTS5 finds nothing (emoji, fragments inside words) or the index cannot be
used at all. Search reads facts and never changes them; recording hits as
usage is the caller's business.

:func:`search_with_archive` is the same search, asked one more question: which
archived facts of the scope would have been among the results had they still
been in the library. The archive is indexed beside the library
(:meth:`SearchIndex.sync_archive`) and ranked with it by one statement over a
full-text table that holds both, so the answer uses exactly the ranking of the
search itself, with the statistics the library would have had; the library's
results are those of :func:`search_facts`, found by a second statement over
the library's own table.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from deermem.errors import SearchIndexError
from deermem.model import Fact, category_key
from deermem.policy import coerce_confidence
from deermem.recall.search_hits import (
    CONFIDENCE_WEIGHT,
    DECAY_GRACE_DAYS,
    DECAY_RATE,
    FactFields,
    FactLike,
    MatchType,
    SearchHit,
    SyncReport,
    search_score,
)
from deermem.recall.search_index import INDEX_SCHEMA_VERSION, MEMORY, SearchIndex

__all__ = [
    "CONFIDENCE_WEIGHT",
    "DECAY_GRACE_DAYS",
    "DECAY_RATE",
    "INDEX_SCHEMA_VERSION",
    "MEMORY",
    "ArchiveSource",
    "MatchType",
    "MissedHit",
    "SearchHit",
    "SearchIndex",
    "SearchOutcome",
    "SyncReport",
    "search_facts",
    "search_score",
    "search_with_archive",
    "substring_search",
]

_log = logging.getLogger(__name__)


def search_facts(
    index: SearchIndex | None,
    user: str | None,
    agent: str,
    query: str,
    *,
    version: str,
    load: Callable[[], Iterable[FactLike]],
    now: datetime,
    top_k: int = 5,
    category: str | None = None,
) -> list[SearchHit]:
    """Search one scope the way ``Memory.search`` does: index first, substring after.

    Brings the scope's index up to ``version`` (loading the facts only if it
    is behind), runs the FTS5 search, and falls back to
    :func:`substring_search` over the loaded facts when FTS5 finds nothing,
    when there is no index (``index=None``) or when the index cannot be used
    (logged as a warning; search never fails because of its index).
    """
    if not query.strip() or top_k <= 0:
        return []
    loaded: list[FactLike] | None = None

    def facts() -> list[FactLike]:
        nonlocal loaded
        if loaded is None:
            loaded = list(load())
        return loaded

    if index is not None:
        try:
            if not index.is_current(user, agent, version):
                index.sync_scope(user, agent, facts(), version=version)
            hits = index.search(user, agent, query, now=now, top_k=top_k, category=category)
        except SearchIndexError as error:
            _log.warning("search index unavailable (%s); using substring search", error)
        else:
            if hits:
                return hits
    return substring_search(facts(), query, top_k=top_k, category=category)


@dataclass(frozen=True, slots=True)
class ArchiveSource:
    """A scope's archive, as the index follows it.

    Attributes:
        listing: gives each archived fact's id and a token that changes when
            it is archived anew (its ``archivedAt``), or ``None`` when the
            archive cannot be listed now; asked only when the archive's version
            changed.
        load: the archived facts with the given ids (only those whose index
            rows are missing or older are asked for).
    """

    listing: Callable[[], Mapping[str, str] | None]
    load: Callable[[Sequence[str]], Iterable[FactLike]]


@dataclass(frozen=True, slots=True)
class MissedHit:
    """An archived fact that would have been among a search's results.

    Attributes:
        hit: the archived fact's match, ranked as the library's matches are.
        rank: its place among the top ``k`` of the library and archive together (1 = first).
    """

    hit: SearchHit
    rank: int


@dataclass(frozen=True, slots=True)
class SearchOutcome:
    """What :func:`search_with_archive` found.

    Attributes:
        hits: the library's results, exactly those of :func:`search_facts`.
        missed: the archived facts among the top ``k`` of library and
            archive ranked together, best first.
    """

    hits: list[SearchHit]
    missed: list[MissedHit] = field(default_factory=list)


def search_with_archive(
    index: SearchIndex | None,
    user: str | None,
    agent: str,
    query: str,
    *,
    version: str,
    archive_version: str,
    load: Callable[[], Iterable[FactLike]],
    archive: ArchiveSource,
    now: datetime,
    top_k: int = 5,
    category: str | None = None,
) -> SearchOutcome:
    """Search the library like :func:`search_facts`, and name the archived facts it missed.

    ``version`` is the library's token (as for :func:`search_facts`),
    ``archive_version`` the archive's: one that changes whenever the archive
    may have changed, so the archive is listed again only then. Missed facts
    are found among FTS5 matches only; without a usable index, or when the
    archive cannot be listed, the library is searched as :func:`search_facts`
    does and nothing is reported missed.
    """
    if index is None or not query.strip() or top_k <= 0:
        return SearchOutcome(
            search_facts(
                None,
                user,
                agent,
                query,
                version=version,
                load=load,
                now=now,
                top_k=top_k,
                category=category,
            )
        )
    loaded: list[FactLike] | None = None

    def facts() -> list[FactLike]:
        nonlocal loaded
        if loaded is None:
            loaded = list(load())
        return loaded

    try:
        if not index.is_current(user, agent, version):
            index.sync_scope(user, agent, facts(), version=version)
        current = index.is_archive_current(user, agent, archive_version)
        listing = None if current else archive.listing()
        if listing is not None:
            index.sync_archive(user, agent, listing, archive.load, version=archive_version)
        missed = []
        if current or listing is not None:
            ranked = index.search(
                user, agent, query, now=now, top_k=top_k, category=category, with_archive=True
            )
            missed = [MissedHit(hit, rank) for rank, hit in enumerate(ranked, 1) if hit.archived]
        hits = index.search(user, agent, query, now=now, top_k=top_k, category=category)
    except SearchIndexError as error:
        _log.warning("search index unavailable (%s); using substring search", error)
        return SearchOutcome(substring_search(facts(), query, top_k=top_k, category=category))
    if hits:
        return SearchOutcome(hits, missed)
    return SearchOutcome(substring_search(facts(), query, top_k=top_k, category=category), missed)


def substring_search(
    facts: Iterable[FactLike], query: str, *, top_k: int = 5, category: str | None = None
) -> list[SearchHit]:
    """Case-insensitive substring search, best confidence first.

    Facts whose content is not text are skipped; the category filter is
    applied before the ``top_k`` cut; a missing confidence counts as 0.5;
    ties break by fact id.
    """
    needle = query.strip().casefold()
    if not needle or top_k <= 0:
        return []
    wanted = category_key(category) if category else ""
    found: list[tuple[float, str]] = []
    for fact in facts:
        content = fact.content if isinstance(fact, Fact) else fact.get("content")
        # The text first: most facts do not match, and reading the rest costs more.
        if not isinstance(content, str) or needle not in content.casefold():
            continue
        document = FactFields.of(fact)
        if document is None or (wanted and wanted not in document.category_keys()):
            continue
        found.append((coerce_confidence(document.confidence), document.fact_id))
    found.sort(key=lambda item: (-item[0], item[1]))
    return [SearchHit(fact_id, score, "substring") for score, fact_id in found[:top_k]]
