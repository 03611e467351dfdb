"""Searching a memory: the FTS5 index first, a substring match after; and what a search missed.

:func:`search_facts` brings the scope's :class:`~deermem.recall.index.SearchIndex`
up to the caller's version token, runs the FTS5 search and falls back to
:func:`substring_search` when FTS5 finds nothing (emoji, fragments inside
words) or the index cannot be used at all. Search reads facts and never
changes them; recording hits as usage is the caller's business.

:func:`search_with_archive` is the same search, asked one more question: which
archived facts of the scope would have been among the results had they still
been in the library. The archive is indexed beside the library
(:meth:`SearchIndex.sync_archive`) and ranked with it by one statement over a
full-text table that holds both, so the answer uses exactly the ranking of the
search itself, with the statistics the library would have had; the library's
results are those of :func:`search_facts`, found by a second statement over
the library's own table.

:func:`search_scope` is what :meth:`Memory.search <deermem.memory.Memory.search>`
calls: it keeps the store's derived index in step with the scope's facts — by
content (:func:`~deermem.recall.index.content_version`), so a fact edited by
hand is found by its new words — searches it, and returns each hit with its
fact. The store decides where the index lives. With missed-recall detection on
it keeps the scope's archive indexed too, and reports the archived facts that
would have been among the results. It writes nothing to the store; counting
hits as recalls, and recording regret, is the memory's job, and it touches
only the sidecars. :func:`rebuild_search_index` rebuilds the whole index.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from pydantic import BaseModel

from deermem.errors import CorruptMemoryFile, SearchIndexError
from deermem.model import RESULT_CONFIG, Fact, FactJson, category_key, parse_timestamp
from deermem.policy import coerce_confidence
from deermem.recall.index import (
    CONFIDENCE_WEIGHT,
    DECAY_GRACE_DAYS,
    DECAY_RATE,
    MEMORY,
    FactFields,
    FactLike,
    MatchType,
    SearchHit,
    SearchIndex,
    SearchIndexHandle,
    content_version,
    micros,
)

if TYPE_CHECKING:
    from deermem.model import Scope
    from deermem.store import ArchiveEntry, Store

__all__ = [
    "ArchiveSource",
    "MissedHit",
    "ReindexReport",
    "SearchFindings",
    "SearchOutcome",
    "SearchResult",
    "rebuild_search_index",
    "search_facts",
    "search_scope",
    "search_score",
    "search_with_archive",
    "substring_search",
]

_log = logging.getLogger(__name__)
_memory_log = logging.getLogger("deermem.memory")  # what a memory's search says
_NO_ARCHIVE = "off"
"""The archive version of a scope whose archive is not indexed (detection off)."""


def search_score(bm25: float, created_at: object, confidence: object, now: datetime) -> float:
    """The search score of one match, in Python (the SQL computes the same float).

    ``|bm25| × decay + 0.2 × confidence``; the decay is 1 below 30 days of
    age (and for an unreadable ``createdAt``), ``e^(−0.01 (age − 30))`` from
    there. The confidence is read as the capacity policy reads it.
    """
    decay = 1.0
    created = parse_timestamp(created_at)
    if created is not None:
        age = micros(now) - micros(created)
        days = age / 1_000_000 / 86400  # as the statement divides, to the same float
        if days >= DECAY_GRACE_DAYS:
            decay = math.exp(-DECAY_RATE * (days - DECAY_GRACE_DAYS))
    return abs(bm25) * decay + CONFIDENCE_WEIGHT * coerce_confidence(confidence)


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
    facts = _once(load)
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
    facts = _once(load)
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


def _once(load: Callable[[], Iterable[FactLike]]) -> Callable[[], list[FactLike]]:
    """``load``'s facts, read by the first call only (a search that the index answers
    never reads them)."""
    return functools.cache(lambda: list(load()))


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


# --- the memory's search ------------------------------------------------------------------


class SearchResult(BaseModel):
    """One search hit with its fact (its JSON form: :func:`deermem.model.to_json`).

    Attributes:
        fact: the fact as stored.
        score: ``|bm25| × decay + 0.2 × confidence`` for ``fts5`` matches,
            the confidence for ``substring`` matches; higher is better.
        match_type: ``fts5`` or ``substring`` (the fallback).
        bm25: FTS5's raw BM25 (negative; more negative is better), ``None``
            for substring matches.
    """

    model_config = RESULT_CONFIG

    fact: FactJson
    score: float
    match_type: MatchType
    bm25: float | None = None

    @property
    def fact_id(self) -> str:
        return self.fact.id

    @property
    def content(self) -> str:
        return self.fact.content

    @property
    def category(self) -> str:
        """The category as shown to people: an ``other`` fact's own label."""
        return self.fact.categoryExtension or self.fact.category

    @property
    def confidence(self) -> float:
        return self.fact.confidence

    @property
    def relevance(self) -> float:
        """The score on a scale of [0, 1): ``score / (1 + score)``.

        For hosts whose contract wants a fraction (a LangGraph ``SearchItem``,
        a mem0 result): the same order as ``score``, comparable across scopes
        (unlike a score divided by the best of its own results).
        """
        return self.score / (1.0 + self.score) if self.score > 0 else 0.0


@dataclass(frozen=True, slots=True)
class SearchFindings:
    """A search's results, and the archived facts it missed.

    Attributes:
        results: the library's results, best first.
        missed: archived facts that would have been among the results had
            they still been in the library, each with its archive entry and
            its rank among library and archive ranked together (1 = first).
    """

    results: tuple[SearchResult, ...]
    missed: tuple[tuple[ArchiveEntry, int], ...] = ()


def search_scope(
    store: Store,
    scope: Scope,
    handle: SearchIndexHandle,
    query: str,
    *,
    now: datetime,
    top_k: int,
    category: str | None,
    with_archive: bool = False,
) -> SearchFindings:
    """Search one scope: bring its index to the snapshot's content, then FTS5, then substrings.

    The index is synchronised with exactly the snapshot it is then read
    against, so every hit names a fact of that snapshot. ``with_archive``
    also indexes the scope's archive and reports what the search missed in
    it; without it the archive's rows are dropped from the index, so an
    index never keeps archived text nobody searches.
    """
    snapshot = store.load(scope)
    index = handle.get(store)
    version = handle.version_of(snapshot)
    if not with_archive:
        _drop_archive(index, scope)
        hits = search_facts(
            index,
            scope.user_id,
            scope.agent,
            query,
            version=version,
            load=lambda: snapshot.facts,
            now=now,
            top_k=top_k,
            category=category,
        )
        return SearchFindings(_results(snapshot.by_id, hits))
    outcome = search_with_archive(
        index,
        scope.user_id,
        scope.agent,
        query,
        version=version,
        # The archive changes only by a commit, which changes the store's
        # version token (also when the library's content stays the same: a
        # new fact evicted at once), or by a purge, after which Memory.purge
        # marks the archive rows stale.
        archive_version=snapshot.version,
        load=lambda: snapshot.facts,
        archive=_archive_source(store, scope, now),
        now=now,
        top_k=top_k,
        category=category,
    )
    missed = []
    for item in outcome.missed:
        entry = _archived(store, scope, item.hit.fact_id)
        if entry is not None:
            missed.append((entry, item.rank))
    return SearchFindings(_results(snapshot.by_id, outcome.hits), tuple(missed))


def _results(facts: Mapping[str, Fact], hits: Sequence[SearchHit]) -> tuple[SearchResult, ...]:
    results = []
    for hit in hits:
        fact = facts.get(hit.fact_id)
        if fact is not None:
            results.append(
                SearchResult(fact=fact, score=hit.score, match_type=hit.match_type, bm25=hit.bm25)
            )
    return tuple(results)


def _archive_source(store: Store, scope: Scope, now: datetime) -> ArchiveSource:
    """The scope's archive as the index follows it.

    A damaged archive never fails a search: it is searched without its
    archive, and the damage is logged (listing or restoring names the file).
    """

    def listing() -> Mapping[str, str] | None:
        try:
            return store.archive_listing(scope, now)
        except (CorruptMemoryFile, OSError) as error:
            _memory_log.warning("not looking for missed recalls in the archive: %s", error)
            return None

    def load(fact_ids: Sequence[str]) -> list[Fact]:
        facts = []
        for fact_id in fact_ids:
            entry = _archived(store, scope, fact_id)
            if entry is not None:
                facts.append(entry.fact)
        return facts

    return ArchiveSource(listing, load)


def _archived(store: Store, scope: Scope, fact_id: str) -> ArchiveEntry | None:
    try:
        return store.archived(scope, fact_id)
    except (CorruptMemoryFile, OSError) as error:
        _memory_log.warning("skipping an unreadable archive entry: %s", error)
        return None


def _drop_archive(index: SearchIndex, scope: Scope) -> None:
    """Remove the scope's archive rows, if an earlier search with detection indexed them."""
    try:
        if not index.is_archive_current(scope.user_id, scope.agent, _NO_ARCHIVE):
            index.sync_archive(scope.user_id, scope.agent, {}, lambda _: (), version=_NO_ARCHIVE)
    except SearchIndexError as error:
        _memory_log.warning("search index unavailable (%s)", error)


class ReindexReport(BaseModel):
    """What :meth:`Memory.reindex` rebuilt.

    Attributes:
        scopes: the scopes indexed.
        facts: the facts indexed.
        location: the index file, or ``None`` for a store whose index lives in memory.
    """

    model_config = RESULT_CONFIG

    scopes: int
    facts: int
    location: str | None


def rebuild_search_index(
    store: Store,
    *,
    now: datetime,
    with_archive: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> ReindexReport:
    """Rebuild the store's search index from every scope's facts.

    Searches keep it in step by themselves; this is for an index that was
    deleted, copied from elsewhere, or should be compacted. Other processes
    may search meanwhile: a scope not rebuilt yet is rebuilt by their search.

    Args:
        store: the store whose index to rebuild.
        now: the clock the archive's age limit is read at.
        with_archive: index every scope's archive too, at the token a search
            with missed-recall detection compares (without it the archive
            rows are gone, as a search without detection leaves them).
        progress: called with (scopes done, scopes in all) after each scope.

    Raises:
        OSError: the index cannot be written where the store keeps it.
        SearchIndexError: the index file cannot be opened.
    """
    location = store.search_index_location()
    if str(location) == MEMORY:
        return ReindexReport(scopes=0, facts=0, location=None)
    scopes = store.scopes()
    facts = 0
    with SearchIndex(location) as index:
        index.clear()
        for done, scope in enumerate(scopes, start=1):
            snapshot = store.load(scope)
            index.sync_scope(
                scope.user_id, scope.agent, snapshot.facts, version=content_version(snapshot.facts)
            )
            if with_archive:
                source = _archive_source(store, scope, now)
                listing = source.listing()
                if listing is not None:
                    index.sync_archive(
                        scope.user_id, scope.agent, listing, source.load, version=snapshot.version
                    )
            facts += len(snapshot.facts)
            if progress is not None:
                progress(done, len(scopes))
    return ReindexReport(scopes=len(scopes), facts=facts, location=str(location))
