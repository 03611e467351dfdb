"""The index's SQL: schema, the search statement, and writing a scope's rows.

Kept apart from :class:`~deermem.recall.search_index.SearchIndex`, which
owns the connection and its recovery, so each reads on its own.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import sqlite3
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Final

from deermem.model import parse_timestamp
from deermem.policy import coerce_confidence
from deermem.recall.search_hits import FactFields, FactLike, SyncReport, micros
from deermem.recall.search_text import index_terms

__all__ = [
    "COUNTERFACTUAL_FTS",
    "INDEX_SCHEMA_VERSION",
    "LIBRARY_FTS",
    "SCHEMA",
    "SCOPE_SHIFT",
    "SEARCH_SQL",
    "Document",
    "archive_range",
    "archive_tokens",
    "delete_rows",
    "ensure_exp",
    "library_range",
    "row_range",
    "schema_ok",
    "scope_id_of",
    "sync_archive_rows",
    "sync_rows",
    "transaction",
    "user_key",
]

INDEX_SCHEMA_VERSION: Final = "3"

# Row ids are allocated per scope in disjoint ranges (scope id × 2**32 + n),
# so "this scope only" is a row-id range that FTS5 applies inside the
# full-text index, before any scoring, whatever else the index holds. The
# lower half of a scope's range holds its library, the upper half its
# archive.
#
# Two full-text tables share those row ids. ``doc_fts`` holds the libraries
# only, so a search's BM25 statistics never count an archived fact.
# ``cf_fts`` — the counterfactual — holds the libraries and the archives, so
# ranking one scope's whole range there ranks its archive exactly as if it
# were still in the library; ``doc.archived`` marks the rows ``doc_fts``
# lacks. A fact id is unique within a scope's library and within its archive,
# not across them: a fact restored or relearned is in the library's rows
# before the archive's rows are brought in step and lose it.
SCOPE_SHIFT: Final = 32
_HALF: Final = 1 << (SCOPE_SHIFT - 1)
LIBRARY_FTS: Final = "doc_fts"
COUNTERFACTUAL_FTS: Final = "cf_fts"
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
    UNIQUE (scope_id, archived, fact_id)
)
""",
    "CREATE INDEX doc_archived ON doc (id) WHERE archived = 1",
    "CREATE VIRTUAL TABLE doc_fts USING fts5 (body, tokenize = 'unicode61 remove_diacritics 2')",
    "CREATE VIRTUAL TABLE cf_fts USING fts5 (body, tokenize = 'unicode61 remove_diacritics 2')",
)

# BM25 is computed once per match (the CTE is materialised) and combined with
# decay and confidence; the age arithmetic is (now_us − created_us) / 10**6 /
# 86400, exactly as timedelta.total_seconds() / 86400. CROSS JOIN fixes the
# join order: matches first, then one primary-key lookup each.
SEARCH_SQL: Final = """
WITH m AS MATERIALIZED (
    SELECT rowid AS row_id, bm25({fts}) AS raw
    FROM {fts} WHERE {fts} MATCH :query AND rowid BETWEEN :low AND :high
)
SELECT d.fact_id, m.raw,
       abs(m.raw) * (
           CASE WHEN d.created_us IS NULL
                  OR (:now - d.created_us) / 1000000.0 / 86400.0 < :grace THEN 1.0
                ELSE exp(-:rate * ((:now - d.created_us) / 1000000.0 / 86400.0 - :grace))
           END
       ) + :weight * d.confidence AS score,
       m.row_id
FROM m CROSS JOIN doc AS d ON d.id = m.row_id
{category}
ORDER BY score DESC, d.fact_id ASC
LIMIT :limit
"""


@dataclass(frozen=True, slots=True)
class Document:
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

    def body(self) -> str:
        """The indexed terms, space-separated."""
        return " ".join(index_terms(self.content))

    @classmethod
    def of(cls, fact: FactLike) -> Document | None:
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


def _storable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def sync_rows(
    db: sqlite3.Connection,
    user_key: str,
    agent: str,
    documents: dict[str, Document],
    version: str,
    skipped: int,
) -> SyncReport:
    """Make a scope's library rows exactly ``documents``; only rows whose digest differs change."""
    with transaction(db):
        scope_id = _scope_at(db, user_key, agent, "version", version)
        low, high = library_range(scope_id)
        existing = _existing(db, low, high)
        gone = [row_id for fact_id, (row_id, _) in existing.items() if fact_id not in documents]
        changed = [d for d in documents.values() if existing.get(d.fact_id, (0, ""))[1] != d.digest]
        _rewrite(db, scope_id, (low, high), existing, changed, gone, archived=False)
    return SyncReport(
        indexed=len(changed),
        removed=len(gone),
        unchanged=len(documents) - len(changed),
        skipped=skipped,
    )


def archive_tokens(db: sqlite3.Connection, user_key: str, agent: str) -> dict[str, str]:
    """The archive rows of a scope: fact id → the token they were written at."""
    scope_id = scope_id_of(db, user_key, agent)
    if scope_id is None:
        return {}
    low, high = archive_range(scope_id)
    return {fact_id: token for fact_id, (_, token) in _existing(db, low, high).items()}


def sync_archive_rows(
    db: sqlite3.Connection,
    user_key: str,
    agent: str,
    tokens: Mapping[str, str],
    documents: Mapping[str, Document],
    version: str,
) -> SyncReport:
    """Make a scope's archive rows exactly the ids of ``tokens``.

    An archive entry does not change once written (archiving a fact again
    writes a new one, at a new time), so a row is identified by a token — the
    entry's ``archivedAt`` — instead of a digest of its content: rows whose
    token is current stay, and ``documents`` needs to hold only the others
    (under their token as digest). Ids without a document are left out.
    """
    with transaction(db):
        scope_id = _scope_at(db, user_key, agent, "archive_version", version)
        low, high = archive_range(scope_id)
        existing = _existing(db, low, high)
        gone = [row_id for fact_id, (row_id, _) in existing.items() if fact_id not in tokens]
        changed = [
            replace(documents[fact_id], digest=token)
            for fact_id, token in tokens.items()
            if existing.get(fact_id, (0, ""))[1] != token and fact_id in documents
        ]
        gone.extend(
            row_id
            for fact_id, (row_id, token) in existing.items()
            if fact_id in tokens and tokens[fact_id] != token and fact_id not in documents
        )
        _rewrite(db, scope_id, (low, high), existing, changed, gone, archived=True)
    return SyncReport(
        indexed=len(changed),
        removed=len(gone),
        unchanged=len(tokens) - len(changed),
        skipped=sum(1 for fact_id in tokens if fact_id not in documents),
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
) -> None:
    """Delete the rows that went or changed, and write the changed documents in ``span``.

    Library rows go into both full-text tables, archive rows into the
    counterfactual one only.
    """
    delete_rows(db, gone + [existing[d.fact_id][0] for d in changed if d.fact_id in existing])
    low, high = span
    last = db.execute("SELECT max(id) FROM doc WHERE id BETWEEN ? AND ?", (low, high)).fetchone()[0]
    row_id = low if last is None else last + 1
    for d in sorted(changed, key=lambda item: item.fact_id):
        if row_id > high:
            raise sqlite3.DataError(f"scope {scope_id} ran out of row ids")
        db.execute(
            "INSERT INTO doc (id, scope_id, fact_id, category, label, confidence,"
            " created_us, digest, archived) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
            ),
        )
        body = d.body()
        if not archived:
            db.execute("INSERT INTO doc_fts (rowid, body) VALUES (?, ?)", (row_id, body))
        db.execute("INSERT INTO cf_fts (rowid, body) VALUES (?, ?)", (row_id, body))
        row_id += 1


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


def delete_rows(db: sqlite3.Connection, row_ids: list[int]) -> None:
    pairs = [(row_id,) for row_id in row_ids]
    db.executemany("DELETE FROM doc_fts WHERE rowid = ?", pairs)
    db.executemany("DELETE FROM cf_fts WHERE rowid = ?", pairs)
    db.executemany("DELETE FROM doc WHERE id = ?", pairs)


def scope_id_of(db: sqlite3.Connection, user_key: str, agent: str) -> int | None:
    row = db.execute(
        "SELECT id FROM scope WHERE user_key = ? AND agent = ?", (user_key, agent)
    ).fetchone()
    return None if row is None else int(row[0])


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
    return True


def _tables(db: sqlite3.Connection) -> set[str]:
    return {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def ensure_exp(db: sqlite3.Connection) -> None:
    """Provide SQL ``exp()`` where SQLite was built without its math functions."""
    try:
        db.execute("SELECT exp(0)").fetchone()
    except sqlite3.OperationalError:
        db.create_function("exp", 1, math.exp, deterministic=True)


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


def user_key(user: str | None) -> str:
    # JSON keeps None ("null") and the empty string ('""') apart.
    return json.dumps(user)
