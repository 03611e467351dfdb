"""Full-text search over facts: a SQLite FTS5 index that is derived data.

The index is never the source of truth. It holds, per scope (user, agent),
one row per fact — id, category, confidence, creation time and the indexed
terms — plus a *version token* the caller chose when it last synchronised
the scope (a store revision, a signature of the files: anything that changes
when the facts do). A caller compares its current token with
:meth:`SearchIndex.is_current` and calls :meth:`SearchIndex.sync_scope` when
they differ; the sync compares digests and rewrites only the rows that
changed. A missing index file is created, a corrupt one or one with another
schema is deleted and rebuilt, never reported as an error: losing the index
costs a rebuild, nothing more. The index never writes fact data anywhere but
into itself.

Scoring is the original's: ``|bm25| × decay + 0.2 × confidence``, where the
decay is 1 for facts younger than 30 days and ``e^(−0.01 (age − 30))`` after,
with the age in days from ``createdAt`` to the injected ``now``. It is
computed inside SQLite over *every* match (not a BM25 pre-cut), so the top k
are exactly the k best by that score; ties break by fact id.

:func:`substring_search` is the fallback for queries FTS5 finds nothing for
(emoji, fragments inside words) and for when the index cannot be used at all;
:func:`search_facts` ties the three together for the store's ``search()``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import os
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, Literal, TypeVar

from deermem._exceptions import SearchIndexError
from deermem.context.search_text import fts_query, index_terms
from deermem.model.categories import category_key
from deermem.model.fact import Fact
from deermem.model.timestamps import parse_timestamp
from deermem.policy import coerce_confidence

__all__ = [
    "CONFIDENCE_WEIGHT",
    "DECAY_GRACE_DAYS",
    "DECAY_RATE",
    "INDEX_SCHEMA_VERSION",
    "MEMORY",
    "MatchType",
    "SearchHit",
    "SearchIndex",
    "SyncReport",
    "search_facts",
    "search_score",
    "substring_search",
]

_log = logging.getLogger(__name__)

MEMORY: Final = ":memory:"
INDEX_SCHEMA_VERSION: Final = "1"
DECAY_GRACE_DAYS: Final = 30
DECAY_RATE: Final = 0.01
CONFIDENCE_WEIGHT: Final = 0.2
_MICROS: Final = 1_000_000
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
# SQLite primary result codes that mean "this file is damaged or not ours".
_SQLITE_CORRUPT: Final = 11
_SQLITE_NOTADB: Final = 26

MatchType = Literal["fts5", "substring"]
_T = TypeVar("_T")
FactLike = Fact | Mapping[str, Any]

# Row ids are allocated per scope in disjoint ranges (scope id × 2**32 + n),
# so "this scope only" is a row-id range that FTS5 applies inside the
# full-text index, before any scoring, whatever else the index holds.
_SCOPE_SHIFT: Final = 32
_SCHEMA: Final = """
CREATE TABLE index_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE scope (
    id INTEGER PRIMARY KEY,
    user_key TEXT NOT NULL,
    agent TEXT NOT NULL,
    version TEXT NOT NULL,
    UNIQUE (user_key, agent)
);
CREATE TABLE doc (
    id INTEGER PRIMARY KEY,
    scope_id INTEGER NOT NULL REFERENCES scope (id),
    fact_id TEXT NOT NULL,
    category TEXT NOT NULL,
    confidence REAL NOT NULL,
    created_us INTEGER,
    digest TEXT NOT NULL,
    UNIQUE (scope_id, fact_id)
);
CREATE VIRTUAL TABLE doc_fts USING fts5 (body, tokenize = 'unicode61 remove_diacritics 2');
"""

# BM25 is computed once per match (the CTE is materialised) and combined with
# decay and confidence; the age arithmetic is (now_us − created_us) / 10**6 /
# 86400, exactly as timedelta.total_seconds() / 86400. CROSS JOIN fixes the
# join order: matches first, then one primary-key lookup each.
_SEARCH: Final = """
WITH m AS MATERIALIZED (
    SELECT rowid AS row_id, bm25(doc_fts) AS raw
    FROM doc_fts WHERE doc_fts MATCH :query AND rowid BETWEEN :low AND :high
)
SELECT d.fact_id, m.raw,
       abs(m.raw) * (
           CASE WHEN d.created_us IS NULL
                  OR (:now - d.created_us) / 1000000.0 / 86400.0 < :grace THEN 1.0
                ELSE exp(-:rate * ((:now - d.created_us) / 1000000.0 / 86400.0 - :grace))
           END
       ) + :weight * d.confidence AS score
FROM m CROSS JOIN doc AS d ON d.id = m.row_id
{category}
ORDER BY score DESC, d.fact_id ASC
LIMIT :limit
"""


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One search result: which fact, how well, and how it was found.

    Attributes:
        fact_id: the fact's id.
        score: ``|bm25| × decay + 0.2 × confidence`` for ``fts5`` hits, the
            confidence for ``substring`` hits; higher is better.
        match_type: ``fts5`` or ``substring``.
        bm25: FTS5's raw BM25 value (negative; more negative matches better),
            ``None`` for substring hits.
    """

    fact_id: str
    score: float
    match_type: MatchType
    bm25: float | None = None

    def to_dict(self) -> dict[str, object]:
        return {
            "factId": self.fact_id,
            "score": self.score,
            "matchType": self.match_type,
            "bm25": self.bm25,
        }


@dataclass(frozen=True, slots=True)
class SyncReport:
    """What a :meth:`SearchIndex.sync_scope` changed.

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


def search_score(bm25: float, created_at: object, confidence: object, now: datetime) -> float:
    """The search score of one match, in Python (the SQL computes the same float).

    ``|bm25| × decay + 0.2 × confidence``; the decay is 1 below 30 days of
    age (and for an unreadable ``createdAt``), ``e^(−0.01 (age − 30))`` from
    there. The confidence is read as the capacity policy reads it.
    """
    decay = 1.0
    created = parse_timestamp(created_at)
    if created is not None:
        age = _micros(_aware(now)) - _micros(created)
        days = age / _MICROS / 86400
        if days >= DECAY_GRACE_DAYS:
            decay = math.exp(-DECAY_RATE * (days - DECAY_GRACE_DAYS))
    return abs(bm25) * decay + CONFIDENCE_WEIGHT * coerce_confidence(confidence)


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
    """

    def __init__(self, path: str | os.PathLike[str] = MEMORY) -> None:
        self._path = MEMORY if str(path) == MEMORY else Path(path)
        self._lock = threading.RLock()
        self._connection = self._open()

    @property
    def path(self) -> Path | None:
        """The index file, ``None`` for an in-memory index."""
        return None if self._path == MEMORY else Path(self._path)

    def close(self) -> None:
        with self._lock:
            self._connection.close()

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
                (_user_key(user), agent),
            ).fetchone()
        )
        return None if row is None else str(row[0])

    def is_current(self, user: str | None, agent: str, version: str) -> bool:
        """Whether the scope was synchronised at exactly ``version``."""
        return self.version(user, agent) == version

    # --- writing ---------------------------------------------------------------

    def sync_scope(
        self, user: str | None, agent: str, facts: Iterable[FactLike], *, version: str
    ) -> SyncReport:
        """Make the scope's rows exactly ``facts`` and record ``version``.

        Only rows whose fact changed (content, category, confidence or
        creation time) are rewritten. Facts without a string id or without
        text content are skipped; with duplicate ids the last one wins. All
        of it is one transaction: a reader sees the old scope or the new one.
        """
        documents: dict[str, _Document] = {}
        skipped = 0
        for fact in facts:
            document = _Document.of(fact)
            if document is None:
                skipped += 1
            else:
                documents[document.fact_id] = document
        return self._run(lambda db: _sync(db, _user_key(user), agent, documents, version, skipped))

    def remove_scope(self, user: str | None, agent: str) -> int:
        """Forget a scope entirely; returns the number of rows removed."""

        def remove(db: sqlite3.Connection) -> int:
            with _transaction(db):
                scope_id = _scope_id(db, _user_key(user), agent)
                if scope_id is None:
                    return 0
                ids = [
                    row[0]
                    for row in db.execute("SELECT id FROM doc WHERE scope_id = ?", (scope_id,))
                ]
                _delete_rows(db, ids)
                db.execute("DELETE FROM scope WHERE id = ?", (scope_id,))
                return len(ids)

        return self._run(remove)

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
    ) -> list[SearchHit]:
        """The ``top_k`` best FTS5 matches in one scope, best first.

        A blank or unsearchable query, ``top_k ≤ 0`` or an unknown scope give
        ``[]``. The category filter (compared stripped and lower-cased) is
        applied before the cut, so ``top_k`` results of that category come back
        when there are that many.
        """
        expression = fts_query(query)
        if expression is None or top_k <= 0:
            return []
        wanted = category_key(category) if category else ""
        sql = _SEARCH.format(category="WHERE d.category = :category" if wanted else "")
        parameters = {
            "query": expression,
            "category": wanted,
            "now": _micros(_aware(now)),
            "grace": DECAY_GRACE_DAYS,
            "rate": DECAY_RATE,
            "weight": CONFIDENCE_WEIGHT,
            "limit": top_k,
        }

        def run(db: sqlite3.Connection) -> list[SearchHit]:
            scope_id = _scope_id(db, _user_key(user), agent)
            if scope_id is None:
                return []
            low, high = _row_range(scope_id)
            rows = db.execute(sql, {**parameters, "low": low, "high": high}).fetchall()
            return [
                SearchHit(str(fid), float(score), "fts5", float(raw)) for fid, raw, score in rows
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
                ours = _schema_ok(connection)
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
            _ensure_exp(connection)
        except sqlite3.DatabaseError:
            connection.close()
            raise
        return connection

    def _delete_files(self) -> None:
        if self._path == MEMORY:
            return
        base = Path(self._path)
        for suffix in ("", "-wal", "-shm", "-journal"):
            base.with_name(base.name + suffix).unlink(missing_ok=True)

    def _describe(self) -> str:
        return str(self._path)


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
        document = _Fields.of(fact)
        if document is None or (wanted and category_key(document.category) != wanted):
            continue
        if needle in document.content.casefold():
            found.append((coerce_confidence(document.confidence), document.fact_id))
    found.sort(key=lambda item: (-item[0], item[1]))
    return [SearchHit(fact_id, score, "substring") for score, fact_id in found[:top_k]]


# --- rows --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Fields:
    """The fields search reads from a fact or a fact mapping."""

    fact_id: str
    content: str
    category: object
    confidence: object
    created_at: object

    @classmethod
    def of(cls, fact: FactLike) -> _Fields | None:
        if isinstance(fact, Fact):
            return cls(fact.id, fact.content, fact.category, fact.confidence, fact.createdAt)
        fact_id, content = fact.get("id"), fact.get("content")
        if not isinstance(fact_id, str) or not fact_id or not isinstance(content, str):
            return None
        return cls(
            fact_id, content, fact.get("category"), fact.get("confidence"), fact.get("createdAt")
        )


@dataclass(frozen=True, slots=True)
class _Document:
    """One fact as the index stores it."""

    fact_id: str
    category: str
    confidence: float
    created_us: int | None
    body: str
    digest: str

    @classmethod
    def of(cls, fact: FactLike) -> _Document | None:
        fields = _Fields.of(fact)
        if fields is None or not fields.content.strip():
            return None
        category = category_key(fields.category) or "context"
        confidence = coerce_confidence(fields.confidence)
        created = parse_timestamp(fields.created_at)
        created_us = None if created is None else _micros(created)
        digest = hashlib.blake2b(
            json.dumps([fields.content, category, confidence, created_us]).encode(),
            digest_size=16,
        ).hexdigest()
        body = " ".join(index_terms(fields.content))
        return cls(fields.fact_id, category, confidence, created_us, body, digest)


def _sync(
    db: sqlite3.Connection,
    user_key: str,
    agent: str,
    documents: dict[str, _Document],
    version: str,
    skipped: int,
) -> SyncReport:
    with _transaction(db):
        scope_id = _scope_id(db, user_key, agent)
        if scope_id is None:
            cursor = db.execute(
                "INSERT INTO scope (user_key, agent, version) VALUES (?, ?, ?)",
                (user_key, agent, version),
            )
            assert cursor.lastrowid is not None
            scope_id = cursor.lastrowid
        else:
            db.execute("UPDATE scope SET version = ? WHERE id = ?", (version, scope_id))
        existing = {
            fact_id: (row_id, digest)
            for row_id, fact_id, digest in db.execute(
                "SELECT id, fact_id, digest FROM doc WHERE scope_id = ?", (scope_id,)
            )
        }
        gone = [row_id for fact_id, (row_id, _) in existing.items() if fact_id not in documents]
        changed = [d for d in documents.values() if existing.get(d.fact_id, (0, ""))[1] != d.digest]
        _delete_rows(db, gone + [existing[d.fact_id][0] for d in changed if d.fact_id in existing])
        low, high = _row_range(scope_id)
        last = db.execute(
            "SELECT max(id) FROM doc WHERE id BETWEEN ? AND ?", (low, high)
        ).fetchone()[0]
        row_id = low if last is None else last + 1
        for d in sorted(changed, key=lambda item: item.fact_id):
            if row_id > high:
                raise sqlite3.DataError(f"scope {scope_id} ran out of row ids")
            db.execute(
                "INSERT INTO doc (id, scope_id, fact_id, category, confidence, created_us, digest)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (row_id, scope_id, d.fact_id, d.category, d.confidence, d.created_us, d.digest),
            )
            db.execute("INSERT INTO doc_fts (rowid, body) VALUES (?, ?)", (row_id, d.body))
            row_id += 1
    return SyncReport(
        indexed=len(changed),
        removed=len(gone),
        unchanged=len(documents) - len(changed),
        skipped=skipped,
    )


@contextlib.contextmanager
def _transaction(db: sqlite3.Connection) -> Iterator[None]:
    """One write transaction (the connection runs in autocommit mode otherwise)."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def _delete_rows(db: sqlite3.Connection, row_ids: list[int]) -> None:
    pairs = [(row_id,) for row_id in row_ids]
    db.executemany("DELETE FROM doc_fts WHERE rowid = ?", pairs)
    db.executemany("DELETE FROM doc WHERE id = ?", pairs)


def _scope_id(db: sqlite3.Connection, user_key: str, agent: str) -> int | None:
    row = db.execute(
        "SELECT id FROM scope WHERE user_key = ? AND agent = ?", (user_key, agent)
    ).fetchone()
    return None if row is None else int(row[0])


def _schema_ok(db: sqlite3.Connection) -> bool:
    """Whether the database holds our schema; creates it in an empty database."""
    tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if not tables:
        db.executescript(
            f"BEGIN IMMEDIATE; {_SCHEMA}"
            f" INSERT INTO index_meta (key, value) VALUES ('schema', '{INDEX_SCHEMA_VERSION}');"
            " COMMIT;"
        )
        return True
    if "index_meta" not in tables:
        return False
    row = db.execute("SELECT value FROM index_meta WHERE key = 'schema'").fetchone()
    if row is None or row[0] != INDEX_SCHEMA_VERSION:
        return False
    # Touch every table, so a damaged page shows up now rather than mid-search.
    db.execute("SELECT count(*) FROM scope").fetchone()
    db.execute("SELECT count(*) FROM doc").fetchone()
    db.execute("SELECT count(*) FROM doc_fts").fetchone()
    return True


def _ensure_exp(db: sqlite3.Connection) -> None:
    """Provide SQL ``exp()`` where SQLite was built without its math functions."""
    try:
        db.execute("SELECT exp(0)").fetchone()
    except sqlite3.OperationalError:
        db.create_function("exp", 1, math.exp, deterministic=True)


def _is_damage(error: sqlite3.DatabaseError) -> bool:
    """Whether an error means the file is damaged or not a database at all."""
    code = getattr(error, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF in (_SQLITE_CORRUPT, _SQLITE_NOTADB)
    text = str(error).lower()
    return "malformed" in text or "not a database" in text


def _row_range(scope_id: int) -> tuple[int, int]:
    low = scope_id << _SCOPE_SHIFT
    return low, low + (1 << _SCOPE_SHIFT) - 1


def _user_key(user: str | None) -> str:
    # JSON keeps None ("null") and the empty string ('""') apart.
    return json.dumps(user)


def _aware(now: datetime) -> datetime:
    return now.replace(tzinfo=UTC) if now.tzinfo is None else now


def _micros(moment: datetime) -> int:
    delta = _aware(moment) - _EPOCH
    return (delta.days * 86400 + delta.seconds) * _MICROS + delta.microseconds
