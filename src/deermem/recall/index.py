"""The search index: SQLite FTS5, derived data, rebuilt rather than trusted.

The index is never the source of truth. It holds, per scope (user, agent),
one row per fact — id, category, confidence, creation time and the indexed
terms — plus a *version token* the caller chose when it last synchronised
the scope. A caller compares its current token with
:meth:`SearchIndex.is_current` and calls :meth:`SearchIndex.sync_scope` when
they differ; the sync compares digests and rewrites only the rows that
changed. :func:`content_version` is the token to use: a digest of what the
index holds of each fact, so a fact edited by hand — which changes no
revision and no store signature — is noticed at the next search.

The index may also hold the scope's archived facts, apart from its library
(:meth:`SearchIndex.sync_archive`, with a version token of their own), so
that a search can ask which archived facts would have been among its results
had they still been in the library (``with_archive``). They sit in a second
full-text table, beside copies of the libraries: a search of the library
alone neither returns them nor counts them in its statistics.

A missing index file is created, a damaged one or one with another schema is
deleted and rebuilt, never reported as an error: losing the index costs a
rebuild, nothing more. The index never writes fact data anywhere but into
itself.

The score is the original's: ``|bm25| × decay + 0.2 × confidence``, where
the decay is 1 for facts younger than 30 days and ``e^(−0.01 (age − 30))``
after, with the age in days from ``createdAt`` to the injected ``now``
(:func:`deermem.recall.search.search_score` states it for one fact). It is
computed over *every* match, not after a BM25 pre-cut, so the top k are
exactly the k best; ties break by fact id.

**BM25 over the scope's own statistics.** One full-text table holds every
scope, and FTS5's ``bm25()`` counts its statistics — the rows, their average
length, the rows holding each word — over the whole table. A user's scores
would then move with other users' facts: by adding facts of their own and
reading the scores, a client could tell how many facts in the whole store
hold a word ("does anyone's memory mention …"). So BM25 is computed here,
with FTS5's formula and constants, from the statistics of the rows a search
ranks (the scope's library, or its library and archive): FTS5 finds the
matches and marks each instance of each alternative (``highlight``), the
index counts the rest. In an index that holds one scope it equals FTS5's
own ``bm25()`` — except for an alternative whose instances overlap in a row
(a phrase such as ``"哈哈 哈哈"`` in ``哈哈哈``), which counts once.

**Terms.** Fact text and user queries go through the same normalisation —
NFKC, case folding, then terms: a letter or digit followed by letters, digits
and combining marks — so what is indexed and what is asked for always agree.
Two things need care:

* **CJK text has no spaces.** A Chinese sentence would be one enormous token,
  and no sub-phrase would ever match. Runs of CJK characters (Han, kana,
  Hangul) are therefore indexed as overlapping character bigrams plus the
  run's last character on its own (``机器学习`` → ``机器 器学 学习 习``). A
  query run becomes the phrase of its bigrams, which matches exactly where
  the run occurs as a substring; a one-character query becomes a prefix
  query, which finds the character at any position.
* **Users type operators without meaning them.** ``real-time``, ``c++``,
  ``"unbalanced``, ``NOT``, ``NEAR(``, ``col:`` must never raise. The query
  is never handed to FTS5 as written: it is broken into terms and rebuilt
  from quoted strings only. What survives of the syntax is deliberate: a
  ``"quoted phrase"`` stays a phrase, ``word*`` stays a prefix; everything
  else is alternatives joined by ``OR``, which BM25 ranks by how much of the
  query a fact matches.

**The handle.** A :class:`~deermem.memory.Memory` and every view
:meth:`~deermem.memory.Memory.scoped` makes of it share one
:class:`SearchIndexHandle`: the store's index, opened by the first search.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import logging
import math
import os
import re
import sqlite3
import threading
import unicodedata
import weakref
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal, NamedTuple, TypeVar

from deermem.errors import SearchIndexError
from deermem.model import DEFAULT_CATEGORY, Fact, Record, category_key, parse_timestamp
from deermem.policy import coerce_confidence
from deermem.store.records import VECTOR_BYTES, content_key

if TYPE_CHECKING:
    from deermem.model import Scope
    from deermem.store import ScopeSnapshot, Store

__all__ = [
    "ALL_MATCHES",
    "BM25_B",
    "BM25_K1",
    "CONFIDENCE_WEIGHT",
    "DECAY_GRACE_DAYS",
    "DECAY_RATE",
    "INDEX_SCHEMA_VERSION",
    "MAX_QUERY_GROUPS",
    "MEMORY",
    "ArchiveRows",
    "FactLike",
    "LibraryRows",
    "MatchType",
    "SearchHit",
    "SearchIndex",
    "SearchIndexHandle",
    "SyncReport",
    "VectorRow",
    "content_version",
    "decay",
    "fts_query",
    "idf",
    "index_terms",
    "library_rows",
    "micros",
    "normalise",
]

_log = logging.getLogger(__name__)
_memory_log = logging.getLogger("deermem.memory")  # what a memory's search says
_VERSIONS_KEPT: Final = 1024
# Beside the index file: a deletion for good committed, or about to, and not scrubbed yet.
_SCRUB_OWED: Final = ".scrub-owed"

# --- terms: what is indexed, and what a query asks -------------------------------------

# At most this many alternatives in one query: a pasted essay must not turn
# into a 5,000-way OR.
MAX_QUERY_GROUPS: Final = 64
_QUERIES_KEPT: Final = 64

_CJK: Final = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7a3"
_CJK_RUN: Final = re.compile(f"[{_CJK}]+")
_QUERY_PART: Final = re.compile(r'"([^"]*)"|([^\s"]+)')


def normalise(text: str) -> str:
    """NFKC and case folding: full-width letters, ligatures and case all fold."""
    return unicodedata.normalize("NFKC", text).casefold()


def index_terms(text: str) -> list[str]:
    """The terms a text is indexed under, in order (see the module docstring)."""
    terms: list[str] = []
    for word in _words(normalise(text)):
        if _is_cjk(word):
            terms.extend(_bigrams(word))
            terms.append(word[-1])
        else:
            terms.append(word)
    return terms


def fts_query(query: str) -> str | None:
    """Build a safe FTS5 ``MATCH`` expression from what a user typed.

    Returns ``None`` when the query has nothing searchable (blank, only
    punctuation or emoji). The result contains only double-quoted strings,
    ``*`` after a string and ``OR``, so it is valid FTS5 for any input.
    """
    groups = fts_groups(query)
    return " OR ".join(groups) if groups else None


@functools.lru_cache(maxsize=_QUERIES_KEPT)
def fts_groups(query: str) -> tuple[str, ...]:
    """The alternatives :func:`fts_query` joins with ``OR``, in query order.

    Each is a valid FTS5 expression on its own (a quoted string, a quoted
    phrase, or a prefix); duplicates are dropped and at most
    :data:`MAX_QUERY_GROUPS` are kept. A pure function of the query, kept
    for the last few: one search asks for it up to three times (the archive
    check, the ranking, the ranking with the archive).
    """
    groups: list[str] = []
    for phrase, chunk in _QUERY_PART.findall(normalise(query)):
        if phrase:
            group = _phrase_group(_words(phrase))
            if group:
                groups.append(group)
        else:
            groups.extend(_chunk_groups(chunk))
    return tuple(dict.fromkeys(groups))[:MAX_QUERY_GROUPS]


def _words(text: str) -> list[str]:
    """Terms (:func:`_term_pattern`), with CJK runs split off from their neighbours."""
    return _term_pattern().findall(_CJK_RUN.sub(lambda match: f" {match.group()} ", text))


@functools.cache
def _term_pattern() -> re.Pattern[str]:
    """A term: a letter or digit, then letters, digits and combining marks (Mn, Mc, Me).

    Python's ``\\w`` leaves the marks out, and a word would fall apart at each
    one: every Indic script's vowel signs and viramas, Thai's vowels, Arabic's
    harakat, and a letter whose case folding gives a mark (``İ`` → ``i̇``). The
    full-text tables count marks as token characters too (``categories``),
    so text and query are cut the same way. The marks are those of Python's
    Unicode database — the one NFKC and case folding use — read once per
    process: every mark is assigned in planes 0, 1 and 14, so only they are
    scanned (≈ 15 ms).
    """
    ranges: list[str] = []
    start = previous = -2
    for code in (*range(0x20000), *range(0xE0000, 0xE1000)):
        if unicodedata.category(chr(code))[0] != "M":
            continue
        if code != previous + 1:
            if start >= 0:
                ranges.append(f"\\U{start:08x}-\\U{previous:08x}")
            start = code
        previous = code
    ranges.append(f"\\U{start:08x}-\\U{previous:08x}")
    # Letter and digit runs, joined by runs of marks: the two classes are
    # disjoint, so the match never backtracks.
    return re.compile(f"[^\\W_]+(?:[{''.join(ranges)}]+[^\\W_]*)*")


def _is_cjk(word: str) -> bool:
    return _CJK_RUN.match(word) is not None


def _bigrams(run: str) -> list[str]:
    return [run[i : i + 2] for i in range(len(run) - 1)]


def _quote(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def _chunk_groups(chunk: str) -> list[str]:
    """Alternatives for one whitespace-separated chunk; ``word*`` keeps its prefix."""
    words = _words(chunk)
    groups = []
    for position, word in enumerate(words):
        if _is_cjk(word):
            groups.append(_run_group(word))
        elif position == len(words) - 1 and chunk.endswith("*"):
            groups.append(_quote(word) + "*")
        else:
            groups.append(_quote(word))
    return groups


def _run_group(run: str) -> str:
    """A standalone CJK run: the phrase of its bigrams, or a prefix for one character."""
    if len(run) == 1:
        return _quote(run) + "*"
    return _quote(" ".join(_bigrams(run)))


def _phrase_group(words: list[str]) -> str | None:
    """A quoted phrase: its words' terms as one FTS5 phrase.

    A CJK run followed by more words ends where the indexed run ended, so it
    carries its final character as the index does; a run at the end of the
    phrase may continue in the fact, so it does not (and a single character
    there becomes a prefix).
    """
    if not words:
        return None
    tokens: list[str] = []
    prefix = False
    for position, word in enumerate(words):
        last = position == len(words) - 1
        if not _is_cjk(word):
            tokens.append(word)
        elif not last:
            tokens.extend([*_bigrams(word), word[-1]])
        elif len(word) == 1:
            tokens.append(word)
            prefix = True
        else:
            tokens.extend(_bigrams(word))
    return _quote(" ".join(tokens)) + ("*" if prefix else "")


# --- facts as the index reads them, and what it returns -------------------------------

DECAY_GRACE_DAYS: Final = 30
DECAY_RATE: Final = 0.01
CONFIDENCE_WEIGHT: Final = 0.2
_MICROS: Final = 1_000_000
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)

MatchType = Literal["fts5", "hybrid", "substring"]
FactLike = Fact | Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class SearchHit(Record):
    """One search result: which fact, how well, and how it was found.

    Attributes:
        fact_id: the fact's id.
        score: ``|bm25| × decay + 0.2 × confidence`` for ``fts5`` hits, the
            fused score in [0, 1] for ``hybrid`` hits (see
            :func:`deermem.recall.search.fuse`), the confidence for
            ``substring`` hits; higher is better.
        match_type: ``fts5``, ``hybrid`` (keyword and meaning) or ``substring``.
        bm25: FTS5's raw BM25 value (negative; more negative matches better),
            ``None`` for substring hits and for hybrid hits no keyword matched.
        archived: the hit is an archived fact (only a search ``with_archive``
            returns those).
    """

    fact_id: str
    score: float
    match_type: MatchType
    bm25: float | None = None
    archived: bool = False

    json_fields = ("fact_id", "score", "match_type", "bm25")


class SyncReport(NamedTuple):
    """What a write changed in a scope's library rows or in its archive rows
    (:meth:`SearchIndex.write`).

    Attributes:
        indexed: rows written (new or changed facts).
        removed: rows deleted (facts no longer in the scope).
        unchanged: rows left as they were.
        skipped: facts not indexable (no string id, no text content).
    """

    indexed: int = 0
    removed: int = 0
    unchanged: int = 0
    skipped: int = 0


class FactFields(NamedTuple):
    """The fields search reads from a fact or a fact mapping.

    ``None`` from :meth:`of` means the fact cannot be searched at all (a
    mapping without a string id or without text content).
    """

    fact_id: str
    content: str
    category: object
    confidence: object
    created_at: object
    category_extension: object = None

    @classmethod
    def of(cls, fact: FactLike) -> FactFields | None:
        if isinstance(fact, Fact):
            return cls(
                fact.id,
                fact.content,
                fact.category,
                fact.confidence,
                fact.createdAt,
                fact.categoryExtension,
            )
        fact_id, content = fact.get("id"), fact.get("content")
        if not isinstance(fact_id, str) or not fact_id or not isinstance(content, str):
            return None
        return cls(
            fact_id,
            content,
            fact.get("category"),
            fact.get("confidence"),
            fact.get("createdAt"),
            fact.get("categoryExtension"),
        )

    def category_keys(self) -> tuple[str, str]:
        """``(category, label)`` as a category filter compares them.

        The category (``context`` when missing) and, for a fact stored as
        ``other``, its own label (``categoryExtension``; ``""`` if none), both
        stripped and lower-cased: ``--category tooling`` finds a fact filed
        as ``other``/``tooling``, as listing facts by category does.
        """
        return category_key(self.category) or DEFAULT_CATEGORY, category_key(
            self.category_extension
        )


def micros(moment: datetime) -> int:
    """A moment as integer microseconds since the epoch; a naive one is taken as UTC."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    delta = moment - _EPOCH
    return (delta.days * 86400 + delta.seconds) * _MICROS + delta.microseconds


# --- the schema and its statements ----------------------------------------------------

INDEX_SCHEMA_VERSION: Final = "7"
"""Any other is rebuilt from the facts; 6: terms run through combining marks."""

# Row ids are allocated per scope in disjoint ranges (scope id × 2**32 + n),
# so "this scope only" is a row-id range that FTS5 applies inside the
# full-text index, before any scoring, whatever else the index holds. The
# lower half of a scope's range holds its library, the upper half its
# archive.
#
# Three full-text tables share those row ids. ``doc_fts`` holds the libraries
# only, so a search's BM25 statistics never count an archived fact.
# ``cf_fts`` — the counterfactual — holds the libraries and the archives, so
# ranking one scope's whole range there ranks its archive exactly as if it
# were still in the library; ``doc.archived`` marks the rows ``doc_fts``
# lacks. ``arc_fts`` holds the archives only: whether an archived fact matches
# a query at all is asked there, over the archive's own short posting lists,
# not over the libraries' in ``cf_fts``. A fact id is unique within a scope's
# library and within its archive, not across them: a fact restored or
# relearned is in the library's rows before the archive's rows are brought in
# step and lose it.
SCOPE_SHIFT: Final = 32
_HALF: Final = 1 << (SCOPE_SHIFT - 1)
LIBRARY_FTS: Final = "doc_fts"
COUNTERFACTUAL_FTS: Final = "cf_fts"
ARCHIVE_FTS: Final = "arc_fts"
# Combining marks are token characters (the default is letters, digits and
# private use), as they are in :func:`_term_pattern`; Latin diacritics are
# still removed, so ``café`` and ``cafe`` are one term.
_TOKENIZER: Final = "unicode61 remove_diacritics 2 categories 'L* N* Co M*'"
# One statement each: created one by one inside a single write transaction.
SCHEMA: Final[tuple[str, ...]] = (
    "CREATE TABLE index_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """
CREATE TABLE scope (
    id INTEGER PRIMARY KEY,
    user_key TEXT NOT NULL,
    agent TEXT NOT NULL,
    version TEXT NOT NULL,
    archive_version TEXT NOT NULL DEFAULT '',
    library_rows INTEGER NOT NULL DEFAULT 0,
    library_terms INTEGER NOT NULL DEFAULT 0,
    archive_rows INTEGER NOT NULL DEFAULT 0,
    archive_terms INTEGER NOT NULL DEFAULT 0,
    UNIQUE (user_key, agent)
)
""",
    """
CREATE TABLE doc (
    id INTEGER PRIMARY KEY,
    scope_id INTEGER NOT NULL REFERENCES scope (id),
    fact_id TEXT NOT NULL,
    category TEXT NOT NULL,
    label TEXT NOT NULL,
    confidence REAL NOT NULL,
    created_us INTEGER,
    digest TEXT NOT NULL,
    archived INTEGER NOT NULL DEFAULT 0,
    content_key TEXT NOT NULL DEFAULT '',
    terms INTEGER NOT NULL DEFAULT 0,
    UNIQUE (scope_id, archived, fact_id)
)
""",
    "CREATE INDEX doc_archived ON doc (id) WHERE archived = 1",
    # A scope's rows and terms, library and archive apart: BM25's statistics (_ranked).
    """
CREATE TRIGGER doc_added AFTER INSERT ON doc BEGIN
    UPDATE scope SET
        library_rows = library_rows + (NEW.archived = 0),
        library_terms = library_terms + (NEW.archived = 0) * NEW.terms,
        archive_rows = archive_rows + (NEW.archived != 0),
        archive_terms = archive_terms + (NEW.archived != 0) * NEW.terms
    WHERE id = NEW.scope_id;
END
""",
    """
CREATE TRIGGER doc_removed AFTER DELETE ON doc BEGIN
    UPDATE scope SET
        library_rows = library_rows - (OLD.archived = 0),
        library_terms = library_terms - (OLD.archived = 0) * OLD.terms,
        archive_rows = archive_rows - (OLD.archived != 0),
        archive_terms = archive_terms - (OLD.archived != 0) * OLD.terms
    WHERE id = OLD.scope_id;
END
""",
    "CREATE INDEX doc_content ON doc (content_key)",
    # Vectors by content (content_key), for the model index_meta's 'embedding'
    # names: a fact archived, restored or relearned with the same words keeps
    # its vector, and a vector goes when no row holds its text any more.
    "CREATE TABLE vec (key TEXT PRIMARY KEY, vector BLOB NOT NULL)",
    f'CREATE VIRTUAL TABLE doc_fts USING fts5 (body, tokenize = "{_TOKENIZER}")',
    f'CREATE VIRTUAL TABLE cf_fts USING fts5 (body, tokenize = "{_TOKENIZER}")',
    f'CREATE VIRTUAL TABLE arc_fts USING fts5 (body, tokenize = "{_TOKENIZER}")',
    *(
        f"INSERT INTO {fts} ({fts}, rank) VALUES ('{option}', 2)"
        for fts in ("doc_fts", "cf_fts", "arc_fts")
        for option in ("automerge", "usermerge")
    ),
)
# Each write transaction adds a segment to a full-text table, and a query
# looks a term up in every segment: a library that a process keeps writing a
# fact at a time (learn, then search) would be searched through dozens of
# small segments. So every table merges as soon as two segments share a
# level (``automerge``, ``usermerge``: 2; FTS5's default is 4), and each write
# ends with a merge step of at most MERGE_PAGES pages (:func:`_rewrite`):
# a table stays within a few segments, whatever its history.
MERGE_PAGES: Final = 100

# FTS5's BM25 constants (fts5_aux.c), and the floor it puts under an IDF that is not positive.
BM25_K1: Final = 1.2
BM25_B: Final = 0.75
IDF_FLOOR: Final = 1e-6
ALL_MATCHES: Final = 1 << 31
"""A ``top_k`` that cuts nothing (no scope holds that many facts) and that SQLite can bind:
a larger ``top_k`` is taken as this, not an OverflowError."""


@functools.cache
def _ranking_statement(fts: str, alternatives: int, filtered: bool) -> str:
    """The ranking of a scope's matches, BM25 from the scope's own statistics.

    ``found`` holds each match of each alternative (``:g0``, ``:g1`` …) with
    its instances of that alternative marked by a \\x01 apiece (fact text is
    indexed as terms and spaces: it holds no control character); ``idf`` is
    each alternative's IDF over the scope's ``:rows`` rows; ``bm25`` sums a
    match's parts as FTS5 does, its length against the scope's ``:average``.
    The score adds decay and confidence, the age in days as
    ``timedelta.total_seconds() / 86400`` divides. Each part is computed once
    (the CTEs are materialised), over every match, before the cut.
    """
    found = "\n    UNION ALL\n".join(
        f"    SELECT {n} AS g, rowid AS r, highlight({fts}, 0, char(1), '') AS marked"
        f" FROM {fts} WHERE {fts} MATCH :g{n} AND rowid BETWEEN :low AND :high"
        for n in range(alternatives)
    )
    category = "WHERE :category IN (d.category, d.label)" if filtered else ""
    return f"""
WITH found AS MATERIALIZED (
{found}
), counted AS MATERIALIZED (
    SELECT g, r, length(marked) - length(replace(marked, char(1), '')) AS f FROM found
), idf AS MATERIALIZED (
    SELECT g, CASE WHEN x > 0 THEN x ELSE :floor END AS w FROM (
        SELECT g, ln((:rows - count(*) + 0.5) / (count(*) + 0.5)) AS x FROM counted GROUP BY g
    )
), bm25 AS MATERIALIZED (
    SELECT c.r AS r, -1.0 * total(
        i.w * ((c.f * (:k1 + 1.0)) / (c.f + :k1 * (1 - :b + :b * d.terms / :average)))
    ) AS raw
    FROM counted AS c CROSS JOIN idf AS i ON i.g = c.g CROSS JOIN doc AS d ON d.id = c.r
    GROUP BY c.r
)
SELECT d.fact_id, m.raw,
       abs(m.raw) * (
           CASE WHEN d.created_us IS NULL
                  OR (:now - d.created_us) / 1000000.0 / 86400.0 < :grace THEN 1.0
                ELSE exp(-:rate * ((:now - d.created_us) / 1000000.0 / 86400.0 - :grace))
           END
       ) + :weight * d.confidence AS score,
       m.r
FROM bm25 AS m CROSS JOIN doc AS d ON d.id = m.r
{category}
ORDER BY score DESC, d.fact_id ASC
LIMIT :limit
"""


class Document(NamedTuple):
    """One fact as the index stores it.

    The digest covers everything that affects a search (content, category
    and label, confidence, creation time), so an unchanged fact is recognised without
    tokenising it again; :meth:`body` tokenises only the facts written.
    """

    fact_id: str
    content: str
    category: str
    label: str
    confidence: float
    created_us: int | None
    digest: str

    @property
    def content_key(self) -> str:
        """The key of the content's vector (:func:`content_key`)."""
        return content_key(self.content)

    def body(self) -> str:
        """The indexed terms, space-separated."""
        return " ".join(index_terms(self.content))

    @classmethod
    def of(cls, fact: FactLike) -> Document | None:
        """The fact as the index stores it, ``None`` when it cannot be searched.

        A :class:`Fact` is immutable and a store hands out the same object
        until the fact changes, so its document is remembered by identity:
        after a commit, bringing the index in step digests only the facts
        that changed (issue 23: the first search after a write).
        """
        if not isinstance(fact, Fact):
            return cls._build(fact)
        known = _DOCUMENTS.get(id(fact))
        if known is not None and known[0] is fact:
            return known[1]
        document = cls._build(fact)
        if len(_DOCUMENTS) >= _DOCUMENTS_KEPT:
            _DOCUMENTS.clear()
        _DOCUMENTS[id(fact)] = (fact, document)  # the fact is held: its id is not reused
        return document

    @classmethod
    def _build(cls, fact: FactLike) -> Document | None:
        fields = FactFields.of(fact)
        if fields is None or not fields.content.strip():
            return None
        category, label = fields.category_keys()
        if not all(map(_storable, (fields.fact_id, category, label))):
            return None  # a lone surrogate cannot be stored as text in SQLite
        confidence = coerce_confidence(fields.confidence)
        created = parse_timestamp(fields.created_at)
        created_us = None if created is None else micros(created)
        # repr of a tuple of str/float/int/None is unambiguous and stable.
        signature = repr((fields.content, category, label, confidence, created_us))
        digest = hashlib.blake2b(
            signature.encode("utf-8", "surrogatepass"), digest_size=16
        ).hexdigest()
        return cls(fields.fact_id, fields.content, category, label, confidence, created_us, digest)


_DOCUMENTS_KEPT: Final = 1 << 16
_DOCUMENTS: dict[int, tuple[Fact, Document | None]] = {}
"""Documents of the facts lately indexed, by the fact object's identity (see Document.of)."""


def _storable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class LibraryRows(NamedTuple):
    """A scope's library as the index is to hold it (:func:`library_rows`).

    Attributes:
        documents: the indexable facts, by id.
        skipped: facts not indexable (no string id, no text content).
        version: the library version the rows are to be at.
    """

    documents: dict[str, Document]
    skipped: int
    version: str


def library_rows(facts: Iterable[FactLike], version: str) -> LibraryRows:
    """``facts`` as library rows: without a string id or text content a fact is
    skipped; with duplicate ids the last one wins."""
    documents: dict[str, Document] = {}
    skipped = 0
    for fact in facts:
        document = Document.of(fact)
        if document is None:
            skipped += 1
        else:
            documents[document.fact_id] = document
    return LibraryRows(documents, skipped, version)


class VectorRow(NamedTuple):
    """A row of a scope with its text's kept vector (:meth:`SearchIndex.vectors`)."""

    key: str  # the text's content key, which the vector is kept under
    fact_id: str
    archived: bool
    vector: bytes


class ArchiveRows(NamedTuple):
    """A change to a scope's archive rows (:meth:`SearchIndex.archive_rows`,
    :meth:`SearchIndex.archive_change`).

    Attributes:
        tokens: for a listing (``after`` is ``None``), every archived fact's
            id and token, and the rows become exactly these; for one commit's
            change, the entries it added.
        documents: the entries whose rows are to be written, by id, under
            their token as digest.
        skipped: entries asked for that could not be loaded or indexed.
        version: the archive version the rows are to be at.
        after: for one commit's change, the version it was made on: it
            applies only to rows synchronised at exactly that one.
        removed: the entries the commit removed (a change only).
    """

    tokens: Mapping[str, str]
    documents: dict[str, Document]
    skipped: int
    version: str
    after: str | None = None
    removed: tuple[str, ...] = ()


def write_rows(
    db: sqlite3.Connection,
    user_key: str,
    agent: str,
    library: LibraryRows | None,
    archive: ArchiveRows | None,
) -> tuple[SyncReport, SyncReport] | None:
    """:meth:`SearchIndex.write` on the connection: one transaction."""
    with transaction(db):
        scope_id = None
        if archive is not None and archive.after is not None:
            scope_id = _scope_with_archive_at(db, user_key, agent, archive.after)
            if scope_id is None:
                return None  # nothing written
        released: list[str] = []
        library_report = SyncReport()
        if library is not None:
            library_report = _library(db, user_key, agent, library, released)
        archive_report = SyncReport()
        if archive is not None:
            if scope_id is None:
                scope_id = _scope_at(db, user_key, agent, "archive_version", archive.version)
            archive_report = _archive(db, scope_id, archive, released)
        # Only now that both parts are in: a fact that moved to the archive keeps its vector.
        release_vectors(db, released)
        _drop_if_empty(db, user_key, agent, library, archive)
    return library_report, archive_report


def _nothing_to_hold(library: LibraryRows | None, archive: ArchiveRows | None) -> bool:
    """Whether rows written at these would leave the scope empty, and so without a row."""
    library_empty = library is None or not (library.documents or library.skipped)
    archive_empty = archive is None or (
        archive.after is None and not (archive.tokens or archive.skipped)
    )
    return library_empty and archive_empty


def _drop_if_empty(
    db: sqlite3.Connection,
    user_key: str,
    agent: str,
    library: LibraryRows | None,
    archive: ArchiveRows | None,
) -> None:
    """Keep no scope row for a scope with nothing in it.

    Invariant: a scope row exists only while the scope holds a row, or facts
    or entries the index had to skip (those are not read again at every
    search). A search of a user with no memory — one never seen, or one just
    erased — must leave no row naming the user: the index is not a list of
    who was asked about. Such a scope reads as never synchronised, and the
    next search synchronises its nothing again.
    """
    if any(part is not None and (part.skipped or part.documents) for part in (library, archive)):
        return  # it holds (or skipped) what it was just given
    scope_id = scope_id_of(db, user_key, agent)
    if scope_id is None:
        return
    low, high = row_range(scope_id)
    if db.execute("SELECT 1 FROM doc WHERE id BETWEEN ? AND ? LIMIT 1", (low, high)).fetchone():
        return
    db.execute("DELETE FROM scope WHERE id = ?", (scope_id,))


def _library(
    db: sqlite3.Connection, user_key: str, agent: str, rows: LibraryRows, released: list[str]
) -> SyncReport:
    """Make a scope's library rows exactly ``rows``; only rows whose digest differs change.

    The content keys of the rows deleted or replaced are added to ``released``."""
    scope_id = _scope_at(db, user_key, agent, "version", rows.version)
    low, high = library_range(scope_id)
    existing = _existing(db, low, high)
    documents = rows.documents
    gone = [row_id for fact_id, (row_id, _) in existing.items() if fact_id not in documents]
    changed = [d for d in documents.values() if existing.get(d.fact_id, (0, ""))[1] != d.digest]
    released += _rewrite(db, scope_id, (low, high), existing, changed, gone, archived=False)
    return SyncReport(
        indexed=len(changed),
        removed=len(gone),
        unchanged=len(documents) - len(changed),
        skipped=rows.skipped,
    )


def _scope_with_archive_at(
    db: sqlite3.Connection, user_key: str, agent: str, version: str
) -> int | None:
    """The scope's id if its archive rows were synchronised at exactly ``version``."""
    row = db.execute(
        "SELECT id, archive_version FROM scope WHERE user_key = ? AND agent = ?",
        (user_key, agent),
    ).fetchone()
    if not version or row is None or row[1] != version:
        return None
    return int(row[0])


def archive_tokens(db: sqlite3.Connection, user_key: str, agent: str) -> dict[str, str]:
    """The archive rows of a scope: fact id → the token they were written at."""
    scope_id = scope_id_of(db, user_key, agent)
    if scope_id is None:
        return {}
    low, high = archive_range(scope_id)
    return {fact_id: token for fact_id, (_, token) in _existing(db, low, high).items()}


def _loaded(
    load: Callable[[Sequence[str]], Iterable[FactLike]],
    fact_ids: Sequence[str],
    wanted: Mapping[str, str],
) -> dict[str, Document]:
    """The documents of the entries ``load`` gives for ``fact_ids``, those ``wanted`` names."""
    documents: dict[str, Document] = {}
    for fact in load(fact_ids) if fact_ids else ():
        document = Document.of(fact)
        if document is not None and document.fact_id in wanted:
            documents[document.fact_id] = document
    return documents


def _archive(
    db: sqlite3.Connection, scope_id: int, rows: ArchiveRows, released: list[str]
) -> SyncReport:
    """Apply ``rows`` to the scope's archive rows and record their version; the
    content keys of the rows deleted or replaced are added to ``released``.

    An archive entry does not change once written (archiving a fact again
    writes a new one, at a new time), so a row is identified by a token — the
    entry's ``archivedAt`` — instead of a digest of its content. A listing
    compares every row with it; a commit's change reads only the rows it
    touched. A row whose token is current stays; one whose entry changed is
    written anew from ``documents``, or goes when its entry could not be
    loaded (rather than stay stale); a row ``tokens`` does not name goes.
    """
    tokens, documents = rows.tokens, rows.documents
    if rows.after is None:
        existing = _existing(db, *archive_range(scope_id))
    else:
        touched = json.dumps(sorted({*rows.removed, *tokens}))
        existing = {
            fact_id: (row_id, digest)
            for row_id, fact_id, digest in db.execute(
                "SELECT id, fact_id, digest FROM doc WHERE scope_id = ? AND archived = 1"
                " AND fact_id IN (SELECT value FROM json_each(?))",
                (scope_id, touched),
            )
        }
    changed = [
        documents[fact_id]._replace(digest=token)
        for fact_id, token in tokens.items()
        if existing.get(fact_id, (0, ""))[1] != token and fact_id in documents
    ]
    gone = [
        row_id
        for fact_id, (row_id, token) in existing.items()
        if fact_id not in tokens or (tokens[fact_id] != token and fact_id not in documents)
    ]
    span = archive_range(scope_id)
    released += _rewrite(db, scope_id, span, existing, changed, gone, archived=True)
    db.execute("UPDATE scope SET archive_version = ? WHERE id = ?", (rows.version, scope_id))
    unchanged = 0 if rows.after is not None else len(tokens) - len(changed) - rows.skipped
    return SyncReport(
        indexed=len(changed), removed=len(gone), unchanged=unchanged, skipped=rows.skipped
    )


def _scope_at(db: sqlite3.Connection, user_key: str, agent: str, column: str, version: str) -> int:
    """The scope's id (created if new), with ``column`` set to ``version``."""
    scope_id = scope_id_of(db, user_key, agent)
    if scope_id is None:
        cursor = db.execute(
            "INSERT INTO scope (user_key, agent, version) VALUES (?, ?, '')", (user_key, agent)
        )
        assert cursor.lastrowid is not None
        scope_id = cursor.lastrowid
    db.execute(f"UPDATE scope SET {column} = ? WHERE id = ?", (version, scope_id))
    return scope_id


def _existing(db: sqlite3.Connection, low: int, high: int) -> dict[str, tuple[int, str]]:
    return {
        fact_id: (row_id, digest)
        for row_id, fact_id, digest in db.execute(
            "SELECT id, fact_id, digest FROM doc WHERE id BETWEEN ? AND ?", (low, high)
        )
    }


def _rewrite(
    db: sqlite3.Connection,
    scope_id: int,
    span: tuple[int, int],
    existing: Mapping[str, tuple[int, str]],
    changed: list[Document],
    gone: list[int],
    *,
    archived: bool,
) -> list[str]:
    """Delete the rows that went or changed, and write the changed documents in ``span``.

    Library rows go into the library's and the counterfactual full-text
    tables, archive rows into the archive's and the counterfactual one.
    Returns the content keys of the rows deleted; their vectors are the
    caller's (:func:`write_rows` releases them once every part of its
    transaction is in).
    """
    released = delete_rows(
        db, gone + [existing[d.fact_id][0] for d in changed if d.fact_id in existing]
    )
    low, high = span
    last = db.execute("SELECT max(id) FROM doc WHERE id BETWEEN ? AND ?", (low, high)).fetchone()[0]
    row_id = low if last is None else last + 1
    for d in sorted(changed, key=lambda item: item.fact_id):
        if row_id > high:
            raise sqlite3.DataError(f"scope {scope_id} ran out of row ids")
        body = d.body()
        db.execute(
            "INSERT INTO doc (id, scope_id, fact_id, category, label, confidence,"
            " created_us, digest, archived, content_key, terms)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                row_id,
                scope_id,
                d.fact_id,
                d.category,
                d.label,
                d.confidence,
                d.created_us,
                d.digest,
                int(archived),
                d.content_key,
                body.count(" ") + 1 if body else 0,  # the row's length, as BM25 counts it
            ),
        )
        own = ARCHIVE_FTS if archived else LIBRARY_FTS
        db.execute(f"INSERT INTO {own} (rowid, body) VALUES (?, ?)", (row_id, body))
        db.execute("INSERT INTO cf_fts (rowid, body) VALUES (?, ?)", (row_id, body))
        row_id += 1
    if changed or gone:
        for fts in (ARCHIVE_FTS if archived else LIBRARY_FTS, COUNTERFACTUAL_FTS):
            db.execute(f"INSERT INTO {fts} ({fts}, rank) VALUES ('merge', ?)", (MERGE_PAGES,))
    return released


@contextlib.contextmanager
def transaction(db: sqlite3.Connection) -> Iterator[None]:
    """One write transaction (the connection runs in autocommit mode otherwise)."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


@contextlib.contextmanager
def reading(db: sqlite3.Connection) -> Iterator[None]:
    """One read transaction: every statement in it sees the same state of the file."""
    db.execute("BEGIN")
    try:
        yield
    except BaseException:
        with contextlib.suppress(sqlite3.Error):  # the statement's error is the one to tell
            db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def delete_rows(db: sqlite3.Connection, row_ids: list[int]) -> list[str]:
    """Delete these rows from every table; returns the content keys they held."""
    if not row_ids:
        return []
    held = db.execute(
        "SELECT content_key FROM doc WHERE id IN (SELECT value FROM json_each(?))",
        (json.dumps(row_ids),),
    )
    keys = [str(key) for (key,) in held]
    pairs = [(row_id,) for row_id in row_ids]
    library = [pair for pair in pairs if not is_archive_row(pair[0])]
    archive = [pair for pair in pairs if is_archive_row(pair[0])]
    db.executemany("DELETE FROM doc_fts WHERE rowid = ?", library)
    db.executemany("DELETE FROM arc_fts WHERE rowid = ?", archive)
    db.executemany("DELETE FROM cf_fts WHERE rowid = ?", pairs)
    db.executemany("DELETE FROM doc WHERE id = ?", pairs)
    return keys


def prune_vectors(db: sqlite3.Connection) -> None:
    """Delete the vectors of texts no row holds any more: nothing of a forgotten
    fact stays in the index (called after rows went, once the new rows are in)."""
    db.execute("DELETE FROM vec WHERE key NOT IN (SELECT content_key FROM doc)")


def release_vectors(db: sqlite3.Connection, keys: Collection[str]) -> None:
    """:func:`prune_vectors` for the texts of rows just deleted or replaced, the only
    vectors a write can leave unheld: a fact deleted, purged or edited keeps nothing
    of its text here, and a write costs the rows it changed, not the whole index."""
    if keys:
        db.execute(
            "DELETE FROM vec WHERE key IN (SELECT value FROM json_each(?))"
            " AND NOT EXISTS (SELECT 1 FROM doc WHERE doc.content_key = vec.key)",
            (json.dumps(sorted(set(keys))),),
        )


def scope_id_of(db: sqlite3.Connection, user_key: str, agent: str) -> int | None:
    row = db.execute(
        "SELECT id FROM scope WHERE user_key = ? AND agent = ?", (user_key, agent)
    ).fetchone()
    return None if row is None else int(row[0])


class ScopeRow(NamedTuple):
    """A scope's row: its id, the versions of its rows, and its size (BM25's statistics)."""

    id: int
    version: str
    archive_version: str
    library_rows: int
    library_terms: int
    archive_rows: int
    archive_terms: int

    def size(self, *, with_archive: bool) -> tuple[int, int]:
        """The rows a search ranks — the library, or library and archive — and their terms."""
        if with_archive:
            return (
                self.library_rows + self.archive_rows,
                self.library_terms + self.archive_terms,
            )
        return self.library_rows, self.library_terms


def scope_row(db: sqlite3.Connection, user_key: str, agent: str) -> ScopeRow | None:
    row = db.execute(
        f"SELECT {', '.join(ScopeRow._fields)} FROM scope WHERE user_key = ? AND agent = ?",
        (user_key, agent),
    ).fetchone()
    return None if row is None else ScopeRow(*row)


def _none_between(db: sqlite3.Connection, low: int, high: int) -> bool:
    """Whether no row's id lies in ``[low, high]`` (a primary-key range: one seek)."""
    return (
        db.execute("SELECT 1 FROM doc WHERE id BETWEEN ? AND ? LIMIT 1", (low, high)).fetchone()
        is None
    )


def _ranked(
    db: sqlite3.Connection,
    scope: ScopeRow,
    groups: Sequence[str],
    wanted: str,
    now: datetime,
    top_k: int,
    *,
    with_archive: bool,
) -> list[SearchHit]:
    """The scope's ``top_k`` best matches in its library, or its library and archive."""
    if top_k <= 0:
        return []
    rows, terms = scope.size(with_archive=with_archive)
    if not rows:
        return []
    scope_id = scope.id
    low, high = row_range(scope_id) if with_archive else library_range(scope_id)
    archived_from = archive_range(scope_id)[0]
    fts = COUNTERFACTUAL_FTS if with_archive else LIBRARY_FTS
    parameters: dict[str, object] = {f"g{n}": group for n, group in enumerate(groups)}
    parameters.update(
        low=low,
        high=high,
        rows=rows,
        average=terms / rows,
        k1=BM25_K1,
        b=BM25_B,
        floor=IDF_FLOOR,
        category=wanted,
        now=micros(now),
        grace=DECAY_GRACE_DAYS,
        rate=DECAY_RATE,
        weight=CONFIDENCE_WEIGHT,
        limit=min(top_k, ALL_MATCHES),
    )
    statement = _ranking_statement(fts, len(groups), bool(wanted))
    return [
        SearchHit(str(fact_id), float(score), "fts5", float(raw), row_id >= archived_from)
        for fact_id, raw, score, row_id in db.execute(statement, parameters)
    ]


def decay(now_us: int, created_us: int | None) -> float:
    """The age factor of a match's score, as the ranking statement computes it: 1 below 30
    days of age (or without a creation time), ``e^(−0.01 (age − 30))`` from there."""
    if created_us is None:
        return 1.0
    days = (now_us - created_us) / _MICROS / 86400  # as the statement divides, to the same float
    return 1.0 if days < DECAY_GRACE_DAYS else math.exp(-DECAY_RATE * (days - DECAY_GRACE_DAYS))


def idf(rows: int, found: int) -> float:
    """FTS5's IDF of an alternative ``found`` in that many of ``rows`` rows (its floor 1e-6),
    as the ranking statement computes it."""
    value = math.log((rows - found + 0.5) / (found + 0.5))
    return value if value > 0 else IDF_FLOOR


def _archive_matches(db: sqlite3.Connection, scope_id: int, groups: Sequence[str]) -> bool:
    """Whether an archived fact of the scope matches any of ``groups`` (see search_library)."""
    low, high = archive_range(scope_id)
    if _none_between(db, low, high):
        return False
    row = db.execute(
        f"SELECT 1 FROM {ARCHIVE_FTS} WHERE {ARCHIVE_FTS} MATCH ?"
        " AND rowid BETWEEN ? AND ? LIMIT 1",
        (" OR ".join(groups), low, high),
    ).fetchone()
    return row is not None


def schema_ok(db: sqlite3.Connection) -> bool:
    """Whether the database holds our schema; creates it in an empty database.

    Processes that find the same file empty at once may all try to create
    the schema: each creates it only if the database is still empty once it
    holds the write lock, so one of them does and the others read and check
    what it wrote.
    """
    if not _tables(db):
        with transaction(db):  # BEGIN IMMEDIATE: creators take turns (busy_timeout)
            if not _tables(db):
                for statement in SCHEMA:
                    db.execute(statement)
                db.execute(
                    "INSERT INTO index_meta (key, value) VALUES ('schema', ?)",
                    (INDEX_SCHEMA_VERSION,),
                )
    tables = _tables(db)
    if "index_meta" not in tables:
        return False
    row = db.execute("SELECT value FROM index_meta WHERE key = 'schema'").fetchone()
    if row is None or row[0] != INDEX_SCHEMA_VERSION:
        return False
    # Touch every table, so a damaged page shows up now rather than mid-search.
    db.execute("SELECT count(*) FROM scope").fetchone()
    db.execute("SELECT count(*) FROM doc").fetchone()
    db.execute("SELECT count(*) FROM doc_fts").fetchone()
    db.execute("SELECT count(*) FROM cf_fts").fetchone()
    db.execute("SELECT count(*) FROM arc_fts").fetchone()
    db.execute("SELECT count(*) FROM vec").fetchone()
    return True


def _tables(db: sqlite3.Connection) -> set[str]:
    return {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def ensure_math(db: sqlite3.Connection) -> None:
    """Provide SQL ``exp()`` and ``ln()`` where SQLite was built without its math functions."""
    for name, function in (("exp", math.exp), ("ln", math.log)):
        try:
            db.execute(f"SELECT {name}(1)").fetchone()
        except sqlite3.OperationalError:
            db.create_function(name, 1, function, deterministic=True)


def row_range(scope_id: int) -> tuple[int, int]:
    """Every row of a scope: its library and its archive."""
    low = scope_id << SCOPE_SHIFT
    return low, low + (1 << SCOPE_SHIFT) - 1


def library_range(scope_id: int) -> tuple[int, int]:
    """The rows of a scope's library (the lower half of its range)."""
    low = scope_id << SCOPE_SHIFT
    return low, low + _HALF - 1


def archive_range(scope_id: int) -> tuple[int, int]:
    """The rows of a scope's archive (the upper half of its range)."""
    low = (scope_id << SCOPE_SHIFT) + _HALF
    return low, low + _HALF - 1


def is_archive_row(row_id: int) -> bool:
    """Whether a row id lies in the archive's half of its scope's range."""
    return bool(row_id & _HALF)


def user_key(user: str | None) -> str:
    # JSON keeps None ("null") and the empty string ('""') apart.
    return json.dumps(user)


# --- the index --------------------------------------------------------------------------

MEMORY: Final = ":memory:"
# SQLite primary result codes that mean "this file is damaged or not ours".
_SQLITE_CORRUPT: Final = 11
_SQLITE_NOTADB: Final = 26
_T = TypeVar("_T")


def content_version(facts: Iterable[FactLike]) -> str:
    """A version token of exactly what the index would hold for ``facts``.

    The digest of every fact's indexed fields (the row digests
    :meth:`SearchIndex.sync_scope` compares), in order: equal tokens mean
    equal rows, whatever changed the files and however.
    """
    token = hashlib.blake2b(digest_size=16)
    for fact in facts:
        document = Document.of(fact)
        entry = "-" if document is None else f"{document.fact_id}:{document.digest}"
        token.update(entry.encode("utf-8", "surrogatepass") + b"\n")
    return "c:" + token.hexdigest()


class SearchIndex:
    """A rebuildable FTS5 index of facts, keyed by scope and fact id.

    Args:
        path: the index file, or ``":memory:"``. Its directory must exist;
            the file is created when missing and replaced when damaged.

    Raises:
        SearchIndexError: the file cannot be created or opened at all (its
            directory is missing or not writable).

    Thread-safe: one connection, used under a lock. Use it as a context
    manager or call :meth:`close`.

    ``holds_user`` (the store's :meth:`~deermem.store.Store.holds_user`) is
    asked after a write that changed rows of a user. A search or a commit in
    this process reads the facts, then writes their rows; an erase in another
    process may land in between — after its own last sweep of the index — and
    the rows written, or the text of the rows deleted (which stays in
    full-text segments and free pages until a scrub), would keep the erased
    user's words in this file. When the store no longer holds the user, the
    rows go again and the file is scrubbed (:meth:`scrub`): of the two, the
    write or the erase's last sweep, the later one leaves nothing.

    A deletion for good (a purge) marks a scrub owed (:meth:`owe_scrub`) while
    its commit is under way, and holds a shared ``flock`` on the mark until it
    has scrubbed (:meth:`scrub_paid`). An index opened on a file marked by no
    live process forgets every row and is scrubbed: the process that owed the
    scrub died, perhaps after its commit, and rows another process wrote
    meanwhile may hold the words; each scope is indexed again from the store
    at its next search.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] = MEMORY,
        *,
        holds_user: Callable[[str], bool] | None = None,
    ) -> None:
        self._path = MEMORY if str(path) == MEMORY else Path(path)
        self._holds_user = holds_user
        self._lock = threading.RLock()
        self._connection = self._open()
        self._told: set[tuple[str | None, str]] = set()
        # The mark of the scrubs this process owes, while it owes any (see owe_scrub).
        self._owing: tuple[int, int] | None = None  # (descriptor, how many)
        try:
            self._pay_abandoned_scrub()
        except BaseException:
            self._connection.close()
            raise

    def first_notice(self, user: str | None, agent: str) -> bool:
        """``True`` the first time it is asked for a scope: a notice about the scope's
        index (facts waiting for ``deermem reindex``) is said once, not at every search."""
        with self._lock:
            if (user, agent) in self._told:
                return False
            self._told.add((user, agent))
            return True

    @property
    def path(self) -> Path | None:
        """The index file, ``None`` for an in-memory index."""
        return None if self._path == MEMORY else Path(self._path)

    def close(self) -> None:
        with self._lock:
            self._connection.close()
            if self._owing is not None:
                # Still owed: the mark stays, for the next index opened on the file to pay.
                self._let_go_of_mark(self._owing[0], remove=False)
                self._owing = None

    def __enter__(self) -> SearchIndex:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- versions --------------------------------------------------------------

    def version(self, user: str | None, agent: str) -> str | None:
        """The version token the scope was last synchronised at, ``None`` if never."""
        row = self._run(
            lambda db: db.execute(
                "SELECT version FROM scope WHERE user_key = ? AND agent = ?",
                (user_key(user), agent),
            ).fetchone()
        )
        return None if row is None else str(row[0])

    def versions(self, user: str | None, agent: str) -> tuple[str, str] | None:
        """The versions the scope's library and archive rows were last synchronised at
        (``""``: the archive never), in one read; ``None`` if the scope never was."""
        row = self._run(
            lambda db: db.execute(
                "SELECT version, archive_version FROM scope WHERE user_key = ? AND agent = ?",
                (user_key(user), agent),
            ).fetchone()
        )
        return None if row is None else (str(row[0]), str(row[1]))

    def is_current(self, user: str | None, agent: str, version: str) -> bool:
        """Whether the scope was synchronised at exactly ``version`` (never for ``""``)."""
        return bool(version) and self.version(user, agent) == version

    def is_archive_current(self, user: str | None, agent: str, version: str) -> bool:
        """Whether the scope's archive rows were synchronised at exactly ``version``."""
        synced = self.versions(user, agent)
        return bool(version) and synced is not None and synced[1] == version

    def mark_archive_stale(self, user: str | None, agent: str) -> None:
        """Make the scope's archive rows read as out of date, whatever token a caller holds.

        For a change to the archive alone — an entry purged — which changes
        neither the library nor, on every store, its version token. The rows
        stay; the next :meth:`sync_archive` compares them with the archive's
        listing and rewrites only what changed.
        """
        self._run(
            lambda db: db.execute(
                "UPDATE scope SET archive_version = '' WHERE user_key = ? AND agent = ?",
                (user_key(user), agent),
            )
        )

    # --- writing ---------------------------------------------------------------

    def write(
        self,
        user: str | None,
        agent: str,
        *,
        library: LibraryRows | None = None,
        archive: ArchiveRows | None = None,
    ) -> tuple[SyncReport, SyncReport] | None:
        """Write a scope's library rows, its archive rows or both, in one transaction.

        A reader sees the scope before or after, never in between. The
        vectors no row holds any more are pruned in the same transaction,
        once both parts are in: a fact that moved from the library to the
        archive keeps its vector, and a failure part-way leaves nothing,
        not even a vector of a fact that is gone. Returns what changed in
        the library and in the archive (zeros for a part not given), or
        ``None``, having written nothing, when ``archive`` is one commit's
        change and the rows are no longer at the version it was made on.
        """
        key = user_key(user)
        if _nothing_to_hold(library, archive) and self.versions(user, agent) is None:
            return SyncReport(), SyncReport()  # an empty scope keeps no row: nothing to write
        written = self._run(lambda db: write_rows(db, key, agent, library, archive))
        if (
            written is not None
            and user is not None
            and self._holds_user is not None
            and any(report.indexed or report.removed for report in written)
            and not self._holds_user(user)
        ):
            self.forget_user(user)  # erased meanwhile (see the class docstring)
            self.scrub()
        return written

    def archive_rows(
        self,
        user: str | None,
        agent: str,
        listing: Mapping[str, str],
        load: Callable[[Sequence[str]], Iterable[FactLike]],
        *,
        version: str,
    ) -> ArchiveRows:
        """The archive rows that make the scope's exactly the entries of ``listing``.

        ``listing`` maps each archived fact's id to a token that changes
        when it is archived anew (its ``archivedAt``); ``load`` is asked only
        for the facts whose rows are missing or older, so following a large
        archive costs a read of the entries that changed.
        """
        key = user_key(user)
        tokens = self._run(lambda db: archive_tokens(db, key, agent))
        wanted = [fact_id for fact_id, token in listing.items() if tokens.get(fact_id) != token]
        documents = _loaded(load, wanted, listing)
        return ArchiveRows(listing, documents, len(wanted) - len(documents), version)

    def archive_change(
        self,
        user: str | None,
        agent: str,
        *,
        after: str,
        added: Mapping[str, str],
        removed: Iterable[str],
        load: Callable[[Sequence[str]], Iterable[FactLike]],
        version: str,
    ) -> ArchiveRows | None:
        """The archive rows that bring the scope's from ``after`` to ``version`` by one
        commit's change.

        What :meth:`archive_rows` does with the archive's whole listing, done
        with only what the commit changed — ``added`` (id → token, as in a
        listing) and ``removed`` — so a commit costs the entries it touched,
        however large the archive. ``None`` when the rows are not at exactly
        ``after``: a change made on top of a state the rows never saw cannot
        be applied to them, and the caller must list the archive.
        """
        synced = self.versions(user, agent)
        if not after or synced is None or synced[1] != after:
            return None
        documents = _loaded(load, list(added), added)
        gone = tuple(removed)  # read once: the write may be retried on a rebuilt index
        skipped = len(added) - len(documents)
        return ArchiveRows(added, documents, skipped, version, after=after, removed=gone)

    def sync_scope(
        self, user: str | None, agent: str, facts: Iterable[FactLike], *, version: str
    ) -> SyncReport:
        """Make the scope's library rows exactly ``facts`` and record ``version``.

        Only rows whose fact changed (content, category, confidence or
        creation time) are rewritten; facts are skipped as by
        :func:`library_rows`. One transaction, as :meth:`write`.
        """
        written = self.write(user, agent, library=library_rows(facts, version))
        assert written is not None  # only a commit's archive change can find its base moved
        return written[0]

    def sync_archive(
        self,
        user: str | None,
        agent: str,
        listing: Mapping[str, str],
        load: Callable[[Sequence[str]], Iterable[FactLike]],
        *,
        version: str,
    ) -> SyncReport:
        """Make the scope's archive rows exactly the entries of ``listing`` (as
        :meth:`archive_rows` prepares them) and record ``version``. An empty
        listing removes every archive row."""
        rows = self.archive_rows(user, agent, listing, load, version=version)
        written = self.write(user, agent, archive=rows)
        assert written is not None  # a listing applies to rows at any version
        return written[1]

    def clear(self) -> None:
        """Forget every scope, its library and its archive: a full rebuild starts here."""

        def clear(db: sqlite3.Connection) -> None:
            with transaction(db):
                db.execute("DELETE FROM doc_fts")
                db.execute("DELETE FROM cf_fts")
                db.execute("DELETE FROM arc_fts")
                db.execute("DELETE FROM doc")
                db.execute("DELETE FROM scope")
                db.execute("DELETE FROM vec")

        self._run(clear)

    def remove_scope(self, user: str | None, agent: str) -> int:
        """Forget a scope entirely; returns the number of rows removed."""

        def remove(db: sqlite3.Connection) -> int:
            with transaction(db):
                scope_id = scope_id_of(db, user_key(user), agent)
                if scope_id is None:
                    return 0
                ids = [
                    row[0]
                    for row in db.execute("SELECT id FROM doc WHERE scope_id = ?", (scope_id,))
                ]
                delete_rows(db, ids)
                prune_vectors(db)
                db.execute("DELETE FROM scope WHERE id = ?", (scope_id,))
                return len(ids)

        return self._run(remove)

    def forget_facts(self, user: str | None, agent: str, fact_ids: Collection[str]) -> int:
        """Remove the rows of these facts from a scope, library and archive; return how many.

        For facts deleted for good (an archive entry purged, a fact deleted
        under ``eviction_mode: delete``): their rows may be there whether or
        not a search followed the deletion. The scope's versions are cleared,
        so the next search compares its rows with the store again. The rows'
        text stays in free pages and the log until :meth:`scrub`.
        """

        def remove(db: sqlite3.Connection) -> int:
            with transaction(db):
                scope_id = scope_id_of(db, user_key(user), agent)
                if scope_id is None:
                    return 0
                ids = [
                    row[0]
                    for row in db.execute(
                        "SELECT id FROM doc WHERE scope_id = ? AND fact_id IN "
                        "(SELECT value FROM json_each(?))",
                        (scope_id, json.dumps(sorted(fact_ids))),
                    )
                ]
                delete_rows(db, ids)
                prune_vectors(db)
                db.execute(
                    "UPDATE scope SET version = '', archive_version = '' WHERE id = ?",
                    (scope_id,),
                )
                return len(ids)

        return self._run(remove)

    def forget_user(self, user: str) -> int:
        """Forget every scope of a user; return the rows removed.

        Each scope goes as :meth:`remove_scope` removes one (with whatever the
        index derives from its rows). The rows' text stays in free pages and the
        log until :meth:`scrub`, which an erasure runs once it is done.
        """
        agents = self._run(
            lambda db: [
                str(row[0])
                for row in db.execute(
                    "SELECT agent FROM scope WHERE user_key = ?", (user_key(user),)
                )
            ]
        )
        return sum(self.remove_scope(user, agent) for agent in agents)

    def scrub(self) -> None:
        """Leave no trace of deleted rows in the file: no free page, segment or log keeps them.

        With ``secure_delete`` on, every full-text table is merged (a deleted
        row's terms stay in its segments until then), the file vacuumed and
        the write-ahead log truncated.
        """

        def scrub(db: sqlite3.Connection) -> None:
            db.execute("PRAGMA secure_delete = ON")
            for (table,) in db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE '%USING fts5%'"
            ).fetchall():
                db.execute(f'INSERT INTO "{table}" ("{table}") VALUES (\'optimize\')')
            db.execute("VACUUM")
            if self._path != MEMORY:
                db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

        self._run(scrub)

    def owe_scrub(self) -> None:
        """Mark the file as owing a scrub, until :meth:`scrub_paid` (or the files' deletion).

        For a deletion for good about to commit: if the process dies after
        the commit and before its scrub, the next index opened on the file
        sees the mark, held by no live process (its ``flock`` died with it),
        and forgets every row before scrubbing (see the class docstring). The
        mark is an empty file beside the index; it holds no text. An index in
        memory dies with its process and is not marked.

        Raises:
            OSError: the mark cannot be made.
        """
        owed = self._scrub_owed_path()
        if owed is None:
            return
        with self._lock:
            if self._owing is not None:
                self._owing = (self._owing[0], self._owing[1] + 1)
                return
            while True:
                descriptor = os.open(owed, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
                fcntl.flock(descriptor, fcntl.LOCK_SH)  # shared: every owing process holds it
                try:
                    if os.fstat(descriptor).st_ino == owed.stat().st_ino:
                        break
                except FileNotFoundError:
                    pass
                os.close(descriptor)  # removed by whoever paid it meanwhile: mark anew
            self._owing = (descriptor, 1)

    def scrub_paid(self) -> None:
        """The scrub :meth:`owe_scrub` marked is done: the mark goes, unless another
        process owes one too (it removes the mark once it has scrubbed)."""
        with self._lock:
            if self._owing is None:
                return
            descriptor, count = self._owing
            if count > 1:
                self._owing = (descriptor, count - 1)
                return
            self._owing = None
            self._let_go_of_mark(descriptor, remove=True)

    def _let_go_of_mark(self, descriptor: int, *, remove: bool) -> None:
        owed = self._scrub_owed_path()
        try:
            if remove and owed is not None:
                try:
                    fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    pass  # another process owes a scrub: it removes the mark
                else:
                    owed.unlink(missing_ok=True)
        finally:
            os.close(descriptor)

    def _pay_abandoned_scrub(self) -> None:
        """Forget every row and scrub if a process died owing a scrub (see the class docstring)."""
        owed = self._scrub_owed_path()
        if owed is None or not owed.exists():
            return
        try:
            descriptor = os.open(owed, os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:
            return  # paid meanwhile
        except OSError as error:
            raise SearchIndexError(self._describe(), str(error)) from error
        try:
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return  # a live process owes it and pays it
            self.clear()
            self.scrub()
            owed.unlink(missing_ok=True)
        finally:
            os.close(descriptor)

    def delete(self) -> None:
        """Close the index and delete its files: no page of them keeps a word.

        What a failed :meth:`scrub` falls back on (a full disk: deleting needs
        no room). The index is derived data: the next one opened on the path
        is made anew, and each scope's rows are written again from the store
        at its next search.

        Raises:
            OSError: a file cannot be deleted.
        """
        with self._lock:
            self._connection.close()
            self._delete_files()
            if self._owing is not None:
                self._let_go_of_mark(self._owing[0], remove=False)  # deleted with the files
                self._owing = None

    # --- reading ---------------------------------------------------------------

    def search(
        self,
        user: str | None,
        agent: str,
        query: str,
        *,
        now: datetime,
        top_k: int = 5,
        category: str | None = None,
        with_archive: bool = False,
    ) -> list[SearchHit]:
        """The ``top_k`` best FTS5 matches in one scope, best first.

        A blank or unsearchable query, ``top_k ≤ 0`` or an unknown scope give
        ``[]``. The category filter (compared stripped and lower-cased) is
        applied before the cut, so ``top_k`` results of that category come back
        when there are that many. ``with_archive`` ranks the scope's archived
        facts with its library, in one statement — the hits that are archived
        facts say so (:attr:`SearchHit.archived`).
        """
        groups = fts_groups(query)
        if not groups or top_k <= 0:
            return []
        wanted = category_key(category) if category else ""

        def run(db: sqlite3.Connection) -> list[SearchHit]:
            scope = scope_row(db, user_key(user), agent)
            if scope is None:
                return []
            return _ranked(db, scope, groups, wanted, now, top_k, with_archive=with_archive)

        return self._run(run)

    def search_library(
        self,
        user: str | None,
        agent: str,
        query: str,
        *,
        now: datetime,
        top_k: int = 5,
        category: str | None = None,
    ) -> tuple[list[SearchHit], bool, tuple[str, str] | None]:
        """:meth:`search` of the library, whether any archived fact matches ``query``,
        and the versions the scope's rows were at (as :meth:`versions`).

        What a keyword search with missed-recall detection asks first, the
        scope looked up once. An archived fact that matches nothing cannot be
        among the results of a keyword search of library and archive
        together, so when none matches that ranking need not run (issue 23:
        it is half of a search's work). An empty archive is seen from its rows
        alone; otherwise one ``MATCH`` over the archive's own table (no
        library's posting list is read) and its row range, stopped at the
        first row: no BM25 is computed. One read transaction: the versions
        are those of the rows ranked, whatever another process writes
        meanwhile (a search checks them, see ``deermem.recall.search``).
        """
        groups = fts_groups(query)
        if not groups:
            return [], False, self.versions(user, agent)
        wanted = category_key(category) if category else ""

        def run(db: sqlite3.Connection) -> tuple[list[SearchHit], bool, tuple[str, str] | None]:
            with reading(db):
                scope = scope_row(db, user_key(user), agent)
                if scope is None:
                    return [], False, None
                hits = _ranked(db, scope, groups, wanted, now, top_k, with_archive=False)
                versions = (scope.version, scope.archive_version)
                return hits, _archive_matches(db, scope.id, groups), versions

        return self._run(run)

    def idf_mass(self, user: str | None, agent: str, query: str, *, with_archive: bool) -> float:
        """Σ over the query's alternatives of their IDF, ``ln((N − n + 0.5) / (n + 0.5))``.

        The ``|bm25|`` a fact of average length would get if it held every
        alternative once, so ``|bm25| / idf_mass`` says how much of the query
        a fact matched, weighted by rarity (a match on "my" and "do" is a small
        part, one on "penicillin" a large one). N and n are counted over the
        rows a search ranks (the library, or library and archive), as the
        BM25 of :meth:`search` counts them (:func:`idf`).
        """
        groups = fts_groups(query)

        def run(db: sqlite3.Connection) -> float:
            scope = scope_row(db, user_key(user), agent)
            if scope is None or not groups:
                return 0.0
            low, high = row_range(scope.id) if with_archive else library_range(scope.id)
            fts = COUNTERFACTUAL_FTS if with_archive else LIBRARY_FTS
            total, _ = scope.size(with_archive=with_archive)
            mass = 0.0
            for group in groups:
                (found,) = db.execute(
                    f"SELECT count(*) FROM {fts} WHERE {fts} MATCH ? AND rowid BETWEEN ? AND ?",
                    (group, low, high),
                ).fetchone()
                mass += idf(total, found)
            return mass

        return self._run(run)

    # --- vectors -----------------------------------------------------------------

    def use_model(self, tag: str) -> bool:
        """Keep only vectors of the model ``tag``; ``True`` when another model's were dropped.

        Vectors of different models are never compared: when the index holds
        another model's, they are deleted here and the texts are embedded
        again as they are searched (or by ``deermem reindex``).
        """

        def run(db: sqlite3.Connection) -> bool:
            row = db.execute("SELECT value FROM index_meta WHERE key = 'embedding'").fetchone()
            if row is not None and row[0] == tag:
                return False
            with transaction(db):
                (held,) = db.execute("SELECT count(*) FROM vec").fetchone()
                db.execute("DELETE FROM vec")
                db.execute(
                    "INSERT OR REPLACE INTO index_meta (key, value) VALUES ('embedding', ?)",
                    (tag,),
                )
            return bool(held)

        return self._run(run)

    def unembedded(
        self, user: str | None, agent: str, *, with_archive: bool
    ) -> dict[str, list[tuple[str, bool]]]:
        """The scope's rows whose text has no vector: content key → [(fact id, archived)].

        A kept vector of another length than :data:`~deermem.store.records.VECTOR_BYTES`
        (torn, or written by another version) counts as none: it is deleted
        here, with a warning, so the text is embedded again before it is
        compared. The lengths are read in SQL, never the vectors: the search
        that follows reads those once, and checks that their floats are
        finite (:meth:`forget_vectors`).
        """

        def run(db: sqlite3.Connection) -> dict[str, list[tuple[str, bool]]]:
            scope_id = scope_id_of(db, user_key(user), agent)
            if scope_id is None:
                return {}
            low, high = row_range(scope_id) if with_archive else library_range(scope_id)
            missing: dict[str, list[tuple[str, bool]]] = {}
            damaged: set[str] = set()
            for key, fact_id, archived, length in db.execute(
                "SELECT d.content_key, d.fact_id, d.archived, length(v.vector) FROM doc AS d"
                " LEFT JOIN vec AS v ON v.key = d.content_key"
                " WHERE d.id BETWEEN ? AND ? ORDER BY d.id",
                (low, high),
            ):
                if length == VECTOR_BYTES:
                    continue
                if length is not None:
                    damaged.add(str(key))
                missing.setdefault(str(key), []).append((str(fact_id), bool(archived)))
            if damaged:
                self._forget_damaged(db, damaged)
            return missing

        return self._run(run)

    def forget_vectors(self, keys: Collection[str]) -> None:
        """Delete these kept vectors (content keys) as damaged, with a warning.

        A search that finds a vector whose floats are not all finite calls
        this: such a vector would make every similarity of the scope NaN, so
        its text is embedded again instead.
        """
        if keys:
            self._run(lambda db: self._forget_damaged(db, keys))

    @staticmethod
    def _forget_damaged(db: sqlite3.Connection, keys: Collection[str]) -> None:
        with transaction(db):
            db.executemany("DELETE FROM vec WHERE key = ?", [(key,) for key in keys])
        _memory_log.warning(
            "the search index held damaged vectors (%d); embedding their texts again", len(keys)
        )

    def put_vectors(self, vectors: Mapping[str, bytes]) -> None:
        """Keep these vectors (content key → vector) for the texts some row still holds."""

        def run(db: sqlite3.Connection) -> None:
            with transaction(db):
                db.executemany(
                    "INSERT OR REPLACE INTO vec (key, vector) SELECT ?, ?"
                    " WHERE EXISTS (SELECT 1 FROM doc WHERE content_key = ?)",
                    [(key, vector, key) for key, vector in vectors.items()],
                )

        if vectors:
            self._run(run)

    def vectors(
        self, user: str | None, agent: str, *, with_archive: bool, category: str | None = None
    ) -> list[VectorRow]:
        """Every row of the scope that has a vector of the kept length, library first, by fact id.

        In that order, not the rows' ids: those follow the index's history (the
        order its facts came in, a rebuild), and the similarities' means and
        spreads are summed in this order, so another order would change the
        scores in their last bits. The category filter is that of
        :meth:`search`. The floats are not checked here: the caller compares
        them with numpy, where a check for finiteness costs next to nothing.
        """
        wanted = category_key(category) if category else ""

        def run(db: sqlite3.Connection) -> list[VectorRow]:
            scope_id = scope_id_of(db, user_key(user), agent)
            if scope_id is None:
                return []
            low, high = row_range(scope_id) if with_archive else library_range(scope_id)
            filtered = " AND ? IN (d.category, d.label)" if wanted else ""
            parameters: tuple[object, ...] = (
                (VECTOR_BYTES, low, high, wanted) if wanted else (VECTOR_BYTES, low, high)
            )
            return [
                VectorRow(str(key), str(fact_id), bool(archived), bytes(vector))
                for key, fact_id, archived, vector in db.execute(
                    "SELECT d.content_key, d.fact_id, d.archived, v.vector FROM doc AS d"
                    " JOIN vec AS v ON v.key = d.content_key AND length(v.vector) = ?"
                    f" WHERE d.id BETWEEN ? AND ?{filtered} ORDER BY d.archived, d.fact_id",
                    parameters,
                )
            ]

        return self._run(run)

    # --- the connection ----------------------------------------------------------

    def _run(self, operation: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run one operation; a damaged index is rebuilt empty and the operation retried.

        After a rebuild every scope reads as never synchronised, so callers
        checking :meth:`is_current` re-sync; the retried operation sees an
        empty index rather than an error.
        """
        with self._lock:
            try:
                return operation(self._connection)
            except sqlite3.DatabaseError as error:
                if not _is_damage(error):
                    raise SearchIndexError(self._describe(), str(error)) from error
                _log.warning(
                    "search index %s is damaged (%s); rebuilding it", self._describe(), error
                )
            self._connection.close()
            self._connection = self._open(fresh=True)
            try:
                return operation(self._connection)
            except sqlite3.DatabaseError as error:
                raise SearchIndexError(self._describe(), str(error)) from error

    def _open(self, *, fresh: bool = False) -> sqlite3.Connection:
        """Connect, and replace the file once if it is damaged or not ours."""
        if fresh:
            try:
                self._delete_files()
            except OSError as error:
                raise SearchIndexError(self._describe(), str(error)) from error
        try:
            connection = self._connect()
            try:
                ours = schema_ok(connection)
            except BaseException:
                connection.close()
                raise
        except sqlite3.DatabaseError as error:
            if fresh or not _is_damage(error):
                raise SearchIndexError(self._describe(), str(error)) from error
            reason = str(error)
        else:
            if ours:
                return connection
            connection.close()
            if fresh:
                raise SearchIndexError(self._describe(), "a freshly created index is unusable")
            reason = "written by another version or another program"
        _log.warning("search index %s unusable (%s); rebuilding it", self._describe(), reason)
        return self._open(fresh=True)

    def _connect(self) -> sqlite3.Connection:
        connection = sqlite3.connect(str(self._path), check_same_thread=False, isolation_level=None)
        try:
            connection.execute("PRAGMA busy_timeout = 5000")
            if self._path != MEMORY:
                connection.execute("PRAGMA journal_mode = WAL")
                connection.execute("PRAGMA synchronous = NORMAL")
            ensure_math(connection)
        except sqlite3.DatabaseError:
            connection.close()
            raise
        return connection

    def _delete_files(self) -> None:
        if self._path == MEMORY:
            return
        base = Path(self._path)
        # The mark of a scrub owed last: deleting the index pays it.
        for suffix in ("", "-wal", "-shm", "-journal", _SCRUB_OWED):
            base.with_name(base.name + suffix).unlink(missing_ok=True)

    def _scrub_owed_path(self) -> Path | None:
        if self._path == MEMORY:
            return None
        base = Path(self._path)
        return base.with_name(base.name + _SCRUB_OWED)

    def _describe(self) -> str:
        return str(self._path)


def _is_damage(error: sqlite3.DatabaseError) -> bool:
    """Whether an error means the file is damaged or not a database at all."""
    code = getattr(error, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF in (_SQLITE_CORRUPT, _SQLITE_NOTADB)
    text = str(error).lower()
    return "malformed" in text or "not a database" in text


# --- the index a memory holds -----------------------------------------------------------


class SearchIndexHandle:
    """The store's search index, opened on first use and shared by a memory's views.

    Opening never fails a search: when the store cannot provide a location (a
    read-only store) or the index cannot be opened there, :meth:`get` says so
    once, in a warning, and keeps an index in memory instead — rebuilt from
    the facts, so searches rank exactly as with the file.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._index: SearchIndex | None = None
        self._closer: weakref.finalize[[], SearchIndexHandle] | None = None
        # The content token of the snapshot last searched, per scope: a store
        # hands out the same snapshot object until the scope changes, so the
        # digest over every fact is computed once per change, not per search.
        self._versions: dict[tuple[str | None, str], tuple[weakref.ref[ScopeSnapshot], str]] = {}

    def get(self, store: Store) -> SearchIndex:
        with self._lock:
            if self._index is None:
                try:
                    location = store.search_index_location()
                    # Only a file outlives the process: an index in memory needs no guard.
                    guard = None if str(location) == MEMORY else store.holds_user
                    self._index = SearchIndex(location, holds_user=guard)
                except (OSError, SearchIndexError) as error:
                    _memory_log.warning(
                        "the search index cannot be kept on disk (%s); searching with an "
                        "index in memory, rebuilt for this process",
                        error,
                    )
                    self._index = SearchIndex(MEMORY)
                # Closed with the last memory that shares it, if nobody calls close().
                self._closer = weakref.finalize(self, self._index.close)
            return self._index

    def opened(self) -> SearchIndex | None:
        """The index if a search of this memory opened it, else ``None`` (nothing is opened)."""
        with self._lock:
            return self._index

    def forget_for_good(
        self, store: Store, scope: Scope, fact_ids: Collection[str], *, before: bool = False
    ) -> None:
        """Leave nothing of facts deleted for good in the index file: their rows go
        and the file is scrubbed (:meth:`SearchIndex.scrub`), whether or not a search
        of this process had opened it. An index that was never made is not made now.

        With ``before`` — called before the deletion commits, to be called
        again after it — the file is then marked as owing a scrub
        (:meth:`SearchIndex.owe_scrub`): a process killed between the commit
        and the second call leaves no word in the file, and the next index
        opened on it takes the rows a search of another process wrote
        meanwhile.

        When that fails (a full disk), the index's files are deleted instead
        (:meth:`SearchIndex.delete`), as after an interrupted erase: the
        deletion has committed (or is about to), and a scrub owed would be
        forgotten — no later write scrubs the file. Only when the files cannot
        be deleted either may the words stay, and the log says so as an error.
        """
        index = self.opened()
        if index is None:
            try:
                location = store.search_index_location()
            except OSError:
                return  # a read-only store: this process cannot have written an index there
            if str(location) == MEMORY or not Path(location).exists():
                return
            index = self.get(store)
        try:
            index.forget_facts(scope.user_id, scope.agent, fact_ids)
            index.scrub()
            if before:
                index.owe_scrub()
            else:
                index.scrub_paid()
        except (SearchIndexError, OSError) as error:
            self.close()  # the next search opens the index afresh
            try:
                index.delete()
            except OSError as failure:
                _memory_log.error(
                    "search index neither scrubbed (%s) nor deleted (%s) after a deletion: "
                    "it may keep words of facts deleted for good; delete its files",
                    error,
                    failure,
                )
            else:
                _memory_log.warning(
                    "search index not scrubbed after a deletion (%s); its files are deleted "
                    "instead, and rebuilt at the next search",
                    error,
                )

    def version_of(self, snapshot: ScopeSnapshot) -> str:
        """The index version token of a snapshot's facts (see ``content_version``)."""
        key = (snapshot.scope.user_id, snapshot.scope.agent)
        with self._lock:
            memo = self._versions.get(key)
            if memo is not None and memo[0]() is snapshot:
                return memo[1]
        token = content_version(snapshot.facts)
        with self._lock:
            if len(self._versions) >= _VERSIONS_KEPT:
                self._versions.clear()
            self._versions[key] = (weakref.ref(snapshot), token)
        return token

    def close(self) -> None:
        """Close the index connection; the next search opens it again."""
        with self._lock:
            if self._closer is not None:
                self._closer()  # closes the index, once
            self._index = None
            self._closer = None
