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
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Final, NamedTuple, Protocol

from pydantic import BaseModel

from deermem.errors import CorruptMemoryFile, SearchIndexError
from deermem.model import NO_ENTRIES, RESULT_CONFIG, Fact, FactJson, category_key, parse_timestamp
from deermem.policy import coerce_confidence
from deermem.recall.embedding import (
    NOISE_FLOOR,
    Embedder,
    ModelsUnavailable,
    QueryVector,
    embedder,
    loaded_embedder,
)
from deermem.recall.index import (
    ALL_MATCHES,
    CONFIDENCE_WEIGHT,
    MEMORY,
    ArchiveRows,
    FactFields,
    FactLike,
    MatchType,
    SearchHit,
    SearchIndex,
    SearchIndexHandle,
    content_version,
    decay,
    fts_groups,
    library_rows,
    micros,
    normalise,
)
from deermem.store.protocol import ArchiveChange, CommitResult, ShadowMarksRead
from deermem.store.records import content_key

if TYPE_CHECKING:
    from deermem.model import Scope
    from deermem.store import ArchiveEntry, Store

__all__ = [
    "EMBED_AT_SEARCH",
    "MEANING_WEIGHT",
    "ArchiveSource",
    "Candidate",
    "Meaning",
    "MissedHit",
    "ReindexReport",
    "SearchFindings",
    "SearchOutcome",
    "SearchResult",
    "VectorSource",
    "embed_missing",
    "fuse",
    "hybrid_search",
    "index_commit",
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
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)  # fusion reads raw BM25 only, not the decay
"""The archive version of a scope whose archive is not indexed (detection off)."""


def search_score(bm25: float, created_at: object, confidence: object, now: datetime) -> float:
    """The search score of one fact's match, as the index ranks it.

    ``|bm25| × decay + 0.2 × confidence`` (:func:`~deermem.recall.index.decay`;
    an unreadable ``createdAt`` does not decay). The confidence is read as the
    capacity policy reads it.
    """
    created = parse_timestamp(created_at)
    factor = decay(micros(now), None if created is None else micros(created))
    return abs(bm25) * factor + CONFIDENCE_WEIGHT * coerce_confidence(confidence)


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
    meaning: Meaning | None = None,
) -> list[SearchHit]:
    """Search one scope the way ``Memory.search`` does: index first, substring after.

    Brings the scope's index up to ``version`` (loading the facts only if it
    is behind), runs the FTS5 search — fused with the search by meaning
    when ``meaning`` is given (:func:`hybrid_search`) — and falls back to
    :func:`substring_search` over the loaded facts when it finds nothing,
    when there is no index (``index=None``) or when the index cannot be used
    (logged as a warning; search never fails because of its index).
    """
    if not query.strip() or top_k <= 0:
        return []
    facts = _once(load)
    if index is not None:
        try:
            hits: list[SearchHit] = []
            for _ in range(_QUERY_ATTEMPTS):
                if not index.is_current(user, agent, version):
                    index.sync_scope(user, agent, facts(), version=version)
                found = _ranked(
                    index,
                    meaning,
                    user,
                    agent,
                    query,
                    facts=facts,
                    archived=_no_archive,
                    now=now,
                    top_k=top_k,
                    category=category,
                    with_archive=False,
                )
                if _read_in_step(index, user, agent, facts, version=version):
                    hits = found
                    break
        except SearchIndexError as error:
            _log.warning("search index unavailable (%s); using substring search", error)
        else:
            if hits:
                return hits
    return substring_search(facts(), query, top_k=top_k, category=category)


# --- search by meaning ----------------------------------------------------------------

MEANING_WEIGHT: Final = 0.6
"""The fused score's weight on meaning (min-max scaled similarity); keyword gets the rest.

Measured on bench/data/recall_set.json (docs/search.md): the largest weight
that keeps keyword recall@1 at 100 %. Plain reciprocal rank fusion loses a
third of the paraphrases, because every paraphrase still matches stop words.
"""
EMBED_AT_SEARCH: Final = 64
"""At most this many texts are embedded by one search. When more lack a vector, the search
embeds this many and ranks by keyword, so a scope's vectors come back over a few searches
(after its index was deleted, say), or at once with ``deermem reindex``."""


class VectorSource(Protocol):
    """Where vectors made elsewhere are kept beside the facts (a store's, by content key)."""

    def stored_vectors(self, scope: Scope, model: str, keys: Sequence[str]) -> Mapping[str, bytes]:
        """The vectors of model ``model`` the store holds for these content keys."""
        ...

    def store_vectors(
        self, scope: Scope, model: str, vectors: Mapping[str, bytes], *, strict: bool = False
    ) -> None:
        """Keep these vectors (text → vector) for the scope, where it still holds the texts
        (with ``strict``, raise rather than leave them to the next search)."""
        ...


class Meaning:
    """What a search by meaning needs: the embedder, and the store's own vectors.

    Attributes:
        embedder: the process's models (:func:`deermem.recall.embedding.embedder`).
        scope: the scope searched (the store keeps vectors per scope).
        source: the store's vectors, so a process whose index is in memory
            (PostgreSQL) does not embed every fact again.
        strict: the store must keep the vectors made (a reindex): one it cannot
            write is an error, not left to the next search.
    """

    __slots__ = ("_queries", "embedder", "scope", "source", "strict")

    def __init__(
        self, embedder: Embedder, scope: Scope, source: VectorSource, *, strict: bool = False
    ) -> None:
        self.embedder = embedder
        self.scope = scope
        self.source = source
        self.strict = strict
        self._queries: dict[str, QueryVector] = {}

    def query(self, text: str) -> QueryVector:
        """The query's vectors, embedded once per search (library and archive share them)."""
        vector = self._queries.get(text)
        if vector is None:
            vector = self._queries[text] = self.embedder.query(text)
        return vector


class Candidate(NamedTuple):
    """One fact as fusion sees it.

    Attributes:
        fact_id: the fact's id.
        archived: the fact is in the archive (ids are unique per side only).
        similarity: its similarity to the query, ``None`` without a vector.
        bm25: ``|bm25|`` of its keyword match, ``None`` when no keyword matched.
    """

    fact_id: str
    archived: bool
    similarity: float | None
    bm25: float | None


def fuse(
    candidates: Iterable[Candidate], idf_mass: float, *, weight: float = MEANING_WEIGHT
) -> list[tuple[Candidate, float]]:
    """Rank candidates by ``weight · minmax(similarity) + (1 − weight) · min(1, |bm25| / mass)``.

    The similarity is scaled over the candidates that have one (a candidate
    without a vector gets 0 for meaning). The keyword part divides by the
    query's IDF mass (:meth:`SearchIndex.idf_mass`), not by the best match,
    so matching only the query's common words stays small. Ties break by the
    raw similarity, then the raw BM25, then the fact id (library before
    archive): the order never depends on the input's.
    """
    pool = list(candidates)
    known = [c.similarity for c in pool if c.similarity is not None]
    low, high = (min(known), max(known)) if known else (0.0, 0.0)
    span = high - low

    def scaled(similarity: float | None) -> float:
        if similarity is None:
            return 0.0
        return (similarity - low) / span if span > 0 else 1.0

    def keyword(bm25: float | None) -> float:
        if bm25 is None or idf_mass <= 0:
            return 0.0
        return min(1.0, bm25 / idf_mass)

    scored = [(c, weight * scaled(c.similarity) + (1 - weight) * keyword(c.bm25)) for c in pool]
    scored.sort(
        key=lambda item: (
            -item[1],
            -(item[0].similarity if item[0].similarity is not None else -math.inf),
            -(item[0].bm25 or 0.0),
            item[0].fact_id,
            item[0].archived,
        )
    )
    return scored


def hybrid_search(
    index: SearchIndex,
    meaning: Meaning,
    user: str | None,
    agent: str,
    query: str,
    *,
    facts: Callable[[], Sequence[FactLike]],
    archived: Callable[[Sequence[str]], Iterable[FactLike]],
    top_k: int,
    category: str | None,
    with_archive: bool,
) -> list[SearchHit] | None:
    """The ``top_k`` best facts by keyword and meaning together, best first.

    The index must be in step with the library (and, ``with_archive``, the
    archive). Texts without a vector are embedded first — taken from the
    store or the embedder's memory when they are there — unless there are
    more than :data:`EMBED_AT_SEARCH`: then that many are embedded and the
    answer is ``None`` (the caller searches by keyword), with a warning
    naming ``deermem reindex``. A kept vector found damaged (another length,
    or a float that is not finite) is dropped and its text embedded again
    first. A fact found only by meaning is kept if its e5 cosine reaches the
    noise floor; a keyword match always is.
    """
    embedder = meaning.embedder
    if index.use_model(embedder.tag):
        _memory_log.warning(
            "the search index held vectors of another embedding model; "
            "embedding again as searched (or run `deermem reindex`)"
        )

    def embedded() -> bool:
        return embed_missing(
            index,
            meaning,
            user,
            agent,
            facts,
            archived,
            with_archive=with_archive,
            limit=EMBED_AT_SEARCH,
        )

    if not embedded():
        return None
    rows = index.vectors(user, agent, with_archive=with_archive, category=category)
    damaged = embedder.not_finite([row.vector for row in rows])
    if damaged:
        index.forget_vectors({rows[place].key for place in damaged})
        if not embedded():
            return None
        rows = index.vectors(user, agent, with_archive=with_archive, category=category)
    similarity: dict[tuple[str, bool], tuple[float, float]] = {}
    if rows:
        mixed, cosine = embedder.similarities(meaning.query(query), [row.vector for row in rows])
        for row, m, c in zip(rows, mixed, cosine, strict=True):
            similarity[(row.fact_id, row.archived)] = (float(m), float(c))
    keyword: dict[tuple[str, bool], float] = {}
    for hit in index.search(
        user,
        agent,
        query,
        now=_EPOCH,
        top_k=ALL_MATCHES,
        category=category,
        with_archive=with_archive,
    ):
        keyword[(hit.fact_id, hit.archived)] = abs(hit.bm25 or 0.0)
    mass = index.idf_mass(user, agent, query, with_archive=with_archive) if keyword else 0.0
    candidates = [
        Candidate(
            key[0],
            key[1],
            similarity[key][0] if key in similarity else None,
            keyword.get(key),
        )
        for key in similarity.keys() | keyword.keys()
    ]
    hits = []
    for candidate, score in fuse(candidates, mass):
        key = (candidate.fact_id, candidate.archived)
        if candidate.bm25 is None and similarity[key][1] < NOISE_FLOOR:
            continue
        bm25 = None if candidate.bm25 is None else -candidate.bm25
        hits.append(SearchHit(candidate.fact_id, score, "hybrid", bm25, candidate.archived))
        if len(hits) == top_k:
            break
    return hits


def embed_missing(
    index: SearchIndex,
    meaning: Meaning,
    user: str | None,
    agent: str,
    facts: Callable[[], Sequence[FactLike]],
    archived: Callable[[Sequence[str]], Iterable[FactLike]],
    *,
    with_archive: bool,
    limit: int | None = None,
    say: bool = True,
) -> bool:
    """Give every text of the scope's rows a vector; ``False`` when more than ``limit`` lack one
    (said once per scope and index in a warning naming ``deermem reindex``, unless ``say`` is
    false): then ``limit`` of them are embedded, the first by content key, so that searches
    that keep finding too many still bring every vector back in the end.

    Vectors the store keeps, or the embedder made lately (a fact embedded
    during its commit), are taken as they are; the rest are embedded here,
    one text at a time, and handed to the store too.
    """
    missing = index.unembedded(user, agent, with_archive=with_archive)
    if not missing:
        return True
    embedder = meaning.embedder
    vectors = dict(meaning.source.stored_vectors(meaning.scope, embedder.tag, sorted(missing)))
    wanted = {key: ids for key, ids in missing.items() if key not in vectors}
    texts = _texts(wanted, facts, archived)
    made = {}
    fresh = {}  # the vectors the store does not hold yet
    for key, text in texts.items():
        known = embedder.remembered(text)
        if known is not None:
            fresh[key] = known
        else:
            made[key] = text
    if limit is not None and len(made) > limit:
        if say and index.first_notice(user, agent):
            _memory_log.warning(
                "%d facts of this scope have no vectors for the embedding model; searching by "
                "keyword while searches embed them, %d at a time (`deermem reindex` embeds "
                "them at once)",
                len(made),
                limit,
            )
        now = sorted(made)[:limit]
        fresh.update((key, embedder.passage(made[key])) for key in now)
        index.put_vectors({**vectors, **fresh})
        _hand_over(meaning, fresh, texts)
        return False
    fresh.update((key, embedder.passage(text)) for key, text in made.items())
    index.put_vectors({**vectors, **fresh})
    _hand_over(meaning, fresh, texts)
    return True


def _hand_over(meaning: Meaning, fresh: Mapping[str, bytes], texts: Mapping[str, str]) -> None:
    """Give the store the vectors it does not hold yet, by text (it checks them under its lock)."""
    if fresh:
        by_text = {texts[key]: vector for key, vector in fresh.items()}
        meaning.source.store_vectors(
            meaning.scope, meaning.embedder.tag, by_text, strict=meaning.strict
        )


def _texts(
    wanted: Mapping[str, list[tuple[str, bool]]],
    facts: Callable[[], Sequence[FactLike]],
    archived: Callable[[Sequence[str]], Iterable[FactLike]],
) -> dict[str, str]:
    """The text of each content key, read from the library or the archive."""
    rows = [row for ids in wanted.values() for row in ids]
    library = any(not is_archived for _, is_archived in rows)
    from_archive = sorted({fact_id for fact_id, is_archived in rows if is_archived})
    texts: dict[str, str] = {}
    sources = (
        [f for f in facts() if FactFields.of(f) is not None] if library else [],
        list(archived(from_archive)) if from_archive else [],
    )
    for source in sources:
        for fact in source:
            fields = FactFields.of(fact)
            if fields is not None:
                key = content_key(fields.content)
                if key in wanted:
                    texts[key] = fields.content
    return texts


def _no_archive(_: Sequence[str]) -> list[FactLike]:
    return []


class ArchiveSource(NamedTuple):
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


class MissedHit(NamedTuple):
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
    meaning: Meaning | None = None,
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
                meaning=meaning,
            )
        )
    facts = _once(load)

    def ranked(with_archive: bool) -> list[SearchHit]:
        # The same ranking for both questions: by meaning too when it can.
        return _ranked(
            index,
            meaning,
            user,
            agent,
            query,
            facts=facts,
            archived=archive.load,
            now=now,
            top_k=top_k,
            category=category,
            with_archive=with_archive,
        )

    try:
        for _ in range(_QUERY_ATTEMPTS):
            indexed = _bring_up(
                index,
                user,
                agent,
                facts,
                version=version,
                archive=archive,
                archive_version=archive_version,
            )
            ranked_at = None
            if meaning is None:
                hits, matched, ranked_at = index.search_library(
                    user, agent, query, now=now, top_k=top_k, category=category
                )
            else:
                hits, matched = ranked(False), True
            missed = []
            # By keyword alone, an archive without a match for the query cannot
            # place a fact among the results: the ranking of both is not run.
            if indexed and matched:
                together = enumerate(ranked(True), 1)
                missed = [MissedHit(hit, rank) for rank, hit in together if hit.archived]
            archived_at = archive_version if indexed else None
            if _read_in_step(
                index, user, agent, facts, version=version, archive=archived_at, synced=ranked_at
            ):
                break
        else:
            return SearchOutcome(substring_search(facts(), query, top_k=top_k, category=category))
    except SearchIndexError as error:
        _log.warning("search index unavailable (%s); using substring search", error)
        return SearchOutcome(substring_search(facts(), query, top_k=top_k, category=category))
    if hits:
        return SearchOutcome(hits, missed)
    return SearchOutcome(substring_search(facts(), query, top_k=top_k, category=category), missed)


def _bring_up(
    index: SearchIndex,
    user: str | None,
    agent: str,
    facts: Callable[[], Iterable[FactLike]],
    *,
    version: str,
    archive: ArchiveSource | None,
    archive_version: str,
    change: ArchiveChange | None = None,
) -> bool:
    """Bring a scope's rows to ``version`` and, given its ``archive``, its archive
    rows to ``archive_version``: what a search and a committer do first.

    Only what is behind is prepared — ``facts`` is called only when the
    library's rows are — and all of it is written in one index transaction
    (:meth:`SearchIndex.write`), so a fact moving to the archive keeps its
    vector and no failure part-way leaves a vector that no row holds. The
    archive's rows follow ``change``, one commit's account of the archive,
    when they are at the version it was made on, and the archive's listing
    otherwise. Returns whether the archive's rows are current: ``False``
    without an archive, or when it cannot be listed.
    """
    synced = index.versions(user, agent)  # the library's and the archive's, one read
    library = None
    if not version or synced is None or synced[0] != version:
        library = library_rows(facts(), version)
    current = bool(archive_version) and synced is not None and synced[1] == archive_version
    if archive is None or current:
        if library is not None:
            index.write(user, agent, library=library)
        return archive is not None

    def listed() -> ArchiveRows | None:
        listing = archive.listing()
        if listing is None:
            return None
        return index.archive_rows(user, agent, listing, archive.load, version=archive_version)

    rows = None
    if change is not None:
        rows = index.archive_change(
            user,
            agent,
            after=change.previous_version,
            added=change.added,
            removed=change.removed,
            load=archive.load,
            version=archive_version,
        )
    if rows is None:
        rows = listed()
    if library is None and rows is None:
        return False
    if index.write(user, agent, library=library, archive=rows) is None:
        # Another process moved the archive's rows on since the change was
        # prepared: a listing applies whatever they are at.
        rows = listed()
        index.write(user, agent, library=library, archive=rows)
    return rows is not None


def _ranked(
    index: SearchIndex,
    meaning: Meaning | None,
    user: str | None,
    agent: str,
    query: str,
    *,
    facts: Callable[[], Sequence[FactLike]],
    archived: Callable[[Sequence[str]], Iterable[FactLike]],
    now: datetime,
    top_k: int,
    category: str | None,
    with_archive: bool,
) -> list[SearchHit]:
    """The scope's best matches: by keyword and meaning when ``meaning`` can rank them
    (:func:`hybrid_search`), else by keyword alone.

    A query with nothing searchable in it ("?", "...", an emoji) is not ranked by
    meaning either: e5 puts such a text near every fact (cosines above the noise
    floor), so it would return arbitrary facts, count them as recalls and record
    missed recalls. It finds what keyword search finds — nothing, then substrings.
    """
    if meaning is not None and fts_groups(query):
        try:
            found = hybrid_search(
                index,
                meaning,
                user,
                agent,
                query,
                facts=facts,
                archived=archived,
                top_k=top_k,
                category=category,
                with_archive=with_archive,
            )
        except ModelsUnavailable:  # said once; the process searches by keyword from now on
            found = None
        if found is not None:
            return found
    return index.search(
        user, agent, query, now=now, top_k=top_k, category=category, with_archive=with_archive
    )


# Bringing a scope's rows up and querying them are two index transactions; how often a
# search tries both before it searches its facts by substring (see _read_in_step).
_QUERY_ATTEMPTS: Final = 2


def _read_in_step(
    index: SearchIndex,
    user: str | None,
    agent: str,
    facts: Callable[[], list[FactLike]],
    *,
    version: str,
    archive: str | None = None,
    synced: tuple[str, str] | None = None,
) -> bool:
    """Whether the scope's rows are still at the versions a search brought them to.

    Another process searching an older or a newer snapshot of the scope may
    bring the rows to its own between a search's two steps, and the query
    would read them: a fact of this snapshot missed, or ranked by another's
    text. So a search checks once it has queried, and asks again; after
    :data:`_QUERY_ATTEMPTS` it searches its own facts by substring, which is
    never out of step. ``archive``: the archive's version too, when the
    search read the archive's rows. ``synced``: the versions the query itself
    read with its rows (:meth:`SearchIndex.search_library`), else read now.
    """
    if synced is None:
        synced = index.versions(user, agent)
    if synced is None:
        return not facts()  # an empty scope keeps no row: there was nothing to read
    return synced[0] == version and (archive is None or synced[1] == archive)


def _once(load: Callable[[], Iterable[FactLike]]) -> Callable[[], list[FactLike]]:
    """``load``'s facts, read by the first call only (a search that the index answers
    never reads them)."""
    read: list[list[FactLike]] = []

    def facts() -> list[FactLike]:
        if not read:
            read.append(list(load()))
        return read[0]

    return facts


def substring_search(
    facts: Iterable[FactLike], query: str, *, top_k: int = 5, category: str | None = None
) -> list[SearchHit]:
    """Case-insensitive substring search, best confidence first.

    Query and text are normalised as the index normalises them (NFKC, case
    folding: :func:`~deermem.recall.index.normalise`), so the fallback finds
    what the words would: ``fé`` typed with a combining accent finds ``café``
    written with a composed one, ``ｔｍ`` finds ``HTML``. Facts whose content
    is not text are skipped; the category filter is applied before the
    ``top_k`` cut; a missing confidence counts as 0.5; ties break by fact id.
    """
    needle = normalise(query.strip())
    if not needle.strip() or top_k <= 0:
        return []
    wanted = category_key(category) if category else ""
    found: list[tuple[float, str]] = []
    for fact in facts:
        content = fact.content if isinstance(fact, Fact) else fact.get("content")
        # The text first: most facts do not match, and reading the rest costs more.
        if not isinstance(content, str) or needle not in normalise(content):
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
            the fused score in [0, 1] for ``hybrid`` ones (:func:`fuse`), the
            confidence for ``substring`` matches; higher is better.
        match_type: ``hybrid`` (keyword and meaning), ``fts5`` (keyword
            search) or ``substring`` (the fallback).
        bm25: FTS5's raw BM25 (negative; more negative is better), ``None``
            for substring matches and for facts found by meaning alone.
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
        """The score as a fraction in [0, 1], in the order of ``score``.

        For hosts whose contract wants a fraction (a LangGraph ``SearchItem``,
        a mem0 result and its ``threshold``). A ``hybrid`` score is one
        already — the fused score, ≈ 1 for an exact match — and is given as
        it is; an unbounded ``fts5`` score (and a ``substring`` match's
        confidence) is mapped by ``score / (1 + score)``, so the same fact
        has another relevance in another search mode. Across scopes it
        orders results only roughly: BM25 counts each scope's own statistics,
        and hybrid's meaning part is scaled within the scope searched (each
        scope's nearest fact gets its full 0.6).
        """
        if self.match_type == "hybrid":
            return self.score
        return self.score / (1.0 + self.score) if self.score > 0 else 0.0


class SearchFindings(NamedTuple):
    """A search's results, and the archived facts it missed.

    Attributes:
        results: the library's results, best first.
        missed: archived facts that would have been among the results had
            they still been in the library, each with its archive entry and
            its rank among library and archive ranked together (1 = first).
        marks: the scope's shadow marks, read with the facts searched
            (``with_marks``), or the error reading them raised; else none.
    """

    results: tuple[SearchResult, ...]
    missed: tuple[tuple[ArchiveEntry, int], ...] = ()
    marks: ShadowMarksRead = NO_ENTRIES


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
    archive_indexed: bool = False,
    with_marks: bool = False,
    hybrid: bool = False,
) -> SearchFindings:
    """Search one scope: bring its index to the snapshot's content, then search it, then substrings.

    The index is synchronised with exactly the snapshot it is then read
    against, so every hit names a fact of that snapshot. ``with_archive``
    also indexes the scope's archive and reports what the search missed in
    it. ``archive_indexed`` says the memory keeps the archive indexed (it
    detects missed recalls) even when this search does not ask: a search
    that only looks (an operator's, a prompt's) then leaves the archive's
    rows as they are, for the next search that asks. Without either, the
    archive's rows are dropped, so an index never keeps archived text nobody
    searches. ``hybrid`` searches by
    meaning too when the embedding models can run here (else by keyword, said
    once per process). ``with_marks`` reads the scope's shadow marks with its
    facts (one read of the scope; recording the search needs them).
    """
    marks: ShadowMarksRead = NO_ENTRIES
    if with_marks:
        snapshot, marks = store.load_with_marks(scope)
    else:
        snapshot = store.load(scope)
    index = handle.get(store)
    version = handle.version_of(snapshot)
    models = embedder() if hybrid else None
    meaning = None if models is None else Meaning(models, scope, store)
    if not with_archive:
        if not archive_indexed:
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
            meaning=meaning,
        )
        return SearchFindings(_results(snapshot.by_id, hits), marks=marks)
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
        archive=_archive_source(store, scope, lambda: now),
        now=now,
        top_k=top_k,
        category=category,
        meaning=meaning,
    )
    missed = []
    for item in outcome.missed:
        entry = _archived(store, scope, item.hit.fact_id)
        if entry is not None:
            missed.append((entry, item.rank))
    return SearchFindings(_results(snapshot.by_id, outcome.hits), tuple(missed), marks)


def index_commit(
    store: Store,
    scope: Scope,
    handle: SearchIndexHandle,
    *,
    commit: CommitResult | None,
    clock: Callable[[], datetime],
    hybrid: bool,
    with_archive: bool,
    embed: bool = False,
) -> None:
    """Bring a scope's index rows in step right after this process committed to it.

    What a search would do first, done by the committer: only the rows of
    changed facts are written (their documents are remembered by identity,
    so unchanged facts are not digested again) and, ``with_archive``
    (missed-recall detection), the archive's rows that changed. When
    ``commit`` archived something (so it applied the archive's bounds), no
    other commit came between and the rows were current before it, they
    follow what it says it did to the archive, which is then not listed;
    otherwise they follow the archive's listing, as a search's do. Under
    ``hybrid``, vectors this process embedded during the commit are filed;
    nothing is embedded here unless ``embed`` asks for the library's texts
    that lack a vector to be embedded now, as a search would (at most
    :data:`EMBED_AT_SEARCH`) — for a committer off the user's path, such as
    the learner's queue, so the next search does not wait for them. Only an
    index a search of this memory opened is kept up: a process that never
    searches never creates one. A failure is logged, never raised: the next
    search catches up.
    """
    index = handle.opened()
    if index is None:
        return
    try:
        snapshot = store.load(scope)
        # The commit's own account of the archive, used only when it is the latest
        # commit and applied the archive's bounds: only then does it account for the
        # entries that aged out, which a listing leaves out.
        change = None
        if commit is not None and commit.version == snapshot.version:
            change = commit.archive
        _bring_up(
            index,
            scope.user_id,
            scope.agent,
            lambda: snapshot.facts,
            version=handle.version_of(snapshot),
            archive=_archive_source(store, scope, clock) if with_archive else None,
            archive_version=snapshot.version,
            change=change if change is not None and change.bounded else None,
        )
        models = loaded_embedder() if hybrid else None
        if models is not None:
            index.use_model(models.tag)
            embed_missing(
                index,
                Meaning(models, scope, store),
                scope.user_id,
                scope.agent,
                lambda: snapshot.facts,
                _no_archive,
                with_archive=False,
                limit=EMBED_AT_SEARCH if embed else 0,
                say=False,
            )
    except (SearchIndexError, CorruptMemoryFile, OSError) as error:
        _memory_log.warning("search index not brought up to date after a commit (%s)", error)


def _results(facts: Mapping[str, Fact], hits: Sequence[SearchHit]) -> tuple[SearchResult, ...]:
    """The hits whose facts the snapshot holds, as results.

    Built without validation: every field comes typed from the snapshot and
    the index (a ``Fact``, floats, a ``MatchType``), so pydantic would only
    check what the types already say.
    """
    results = []
    for hit in hits:
        fact = facts.get(hit.fact_id)
        if fact is not None:
            results.append(
                SearchResult.model_construct(
                    fact=fact, score=hit.score, match_type=hit.match_type, bm25=hit.bm25
                )
            )
    return tuple(results)


def _archive_source(store: Store, scope: Scope, clock: Callable[[], datetime]) -> ArchiveSource:
    """The scope's archive as the index follows it; the clock is read only to list it.

    A damaged archive never fails a search: it is searched without its
    archive, and the damage is logged (listing or restoring names the file).
    """

    def listing() -> Mapping[str, str] | None:
        try:
            return store.archive_listing(scope, clock())
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
    models: Embedder | None = None,
) -> ReindexReport:
    """Rebuild the store's search index from every scope's facts (and vectors, given ``models``).

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
        models: embed every fact's text (the library's, and with
            ``with_archive`` the archive's) with these models; the vectors the
            store keeps are reused. For a store whose index lives in memory
            only the vectors are made, and the store must keep them. Models
            that cannot load here leave the rebuild to the words, as a search
            does (said once, in one line).

    Raises:
        OSError: the index cannot be written where the store keeps it.
        SearchIndexError: the index file cannot be opened.
        DatabaseReadOnly, StoreLockTimeout: a store whose index lives in
            memory cannot keep the vectors made (the scopes done before
            keep theirs).
    """
    location = store.search_index_location()
    in_memory = str(location) == MEMORY
    if in_memory and models is None:
        return ReindexReport(scopes=0, facts=0, location=None)
    scopes = store.scopes()
    facts = 0
    with SearchIndex(location, holds_user=None if in_memory else store.holds_user) as index:
        index.clear()
        # Nothing of the rows cleared stays in the file: not the words of a fact
        # deleted for good whose scrub a killed process never ran.
        index.scrub()
        if models is not None:
            index.use_model(models.tag)
        for done, scope in enumerate(scopes, start=1):
            snapshot = store.load(scope)
            known = functools.partial(lambda facts: facts, snapshot.facts)
            source = _archive_source(store, scope, lambda: now)
            archived = _bring_up(
                index,
                scope.user_id,
                scope.agent,
                known,
                version=content_version(snapshot.facts),
                archive=source if with_archive else None,
                archive_version=snapshot.version,
            )
            if models is not None:
                try:
                    embed_missing(
                        index,
                        Meaning(models, scope, store, strict=in_memory),
                        scope.user_id,
                        scope.agent,
                        known,
                        source.load,
                        with_archive=archived,
                    )
                except ModelsUnavailable:
                    # Said once (deermem.recall.embedding); the words are indexed,
                    # and this process searches by keyword as a search would.
                    models = None
            facts += len(snapshot.facts)
            if progress is not None:
                progress(done, len(scopes))
    return ReindexReport(
        scopes=len(scopes), facts=facts, location=None if in_memory else str(location)
    )
