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

The score (:func:`~deermem.recall.search_hits.search_score`) is computed
inside SQLite over *every* match, not after a BM25 pre-cut, so the top k are
exactly the k best; ties break by fact id.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Final, TypeVar

from deermem.errors import SearchIndexError
from deermem.model import category_key
from deermem.recall._index_sql import (
    COUNTERFACTUAL_FTS,
    INDEX_SCHEMA_VERSION,
    LIBRARY_FTS,
    Document,
    archive_range,
    archive_tokens,
    delete_rows,
    ensure_exp,
    library_range,
    row_range,
    schema_ok,
    scope_id_of,
    sync_archive_rows,
    sync_rows,
    transaction,
    user_key,
)
from deermem.recall._search_plan import SearchRequest, run_search
from deermem.recall.search_hits import (
    FactLike,
    SearchHit,
    SyncReport,
    micros,
)
from deermem.recall.search_text import fts_groups

__all__ = ["INDEX_SCHEMA_VERSION", "MEMORY", "SearchIndex", "content_version"]

_log = logging.getLogger(__name__)

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
                (user_key(user), agent),
            ).fetchone()
        )
        return None if row is None else str(row[0])

    def is_current(self, user: str | None, agent: str, version: str) -> bool:
        """Whether the scope was synchronised at exactly ``version`` (never for ``""``)."""
        return bool(version) and self.version(user, agent) == version

    def is_archive_current(self, user: str | None, agent: str, version: str) -> bool:
        """Whether the scope's archive rows were synchronised at exactly ``version``."""
        row = self._run(
            lambda db: db.execute(
                "SELECT archive_version FROM scope WHERE user_key = ? AND agent = ?",
                (user_key(user), agent),
            ).fetchone()
        )
        return bool(version) and row is not None and row[0] == version

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

    def sync_scope(
        self, user: str | None, agent: str, facts: Iterable[FactLike], *, version: str
    ) -> SyncReport:
        """Make the scope's rows exactly ``facts`` and record ``version``.

        Only rows whose fact changed (content, category, confidence or
        creation time) are rewritten. Facts without a string id or without
        text content are skipped; with duplicate ids the last one wins. All
        of it is one transaction: a reader sees the old scope or the new one.
        """
        documents: dict[str, Document] = {}
        skipped = 0
        for fact in facts:
            document = Document.of(fact)
            if document is None:
                skipped += 1
            else:
                documents[document.fact_id] = document
        return self._run(
            lambda db: sync_rows(db, user_key(user), agent, documents, version, skipped)
        )

    def sync_archive(
        self,
        user: str | None,
        agent: str,
        listing: Mapping[str, str],
        load: Callable[[Sequence[str]], Iterable[FactLike]],
        *,
        version: str,
    ) -> SyncReport:
        """Make the scope's archive rows exactly the entries of ``listing`` and record ``version``.

        ``listing`` maps each archived fact's id to a token that changes
        when it is archived anew (its ``archivedAt``); ``load`` is asked only
        for the facts whose rows are missing or older, so following a large
        archive costs a read of the entries that changed. An empty listing
        removes every archive row.
        """
        key = user_key(user)
        tokens = self._run(lambda db: archive_tokens(db, key, agent))
        wanted = [fact_id for fact_id, token in listing.items() if tokens.get(fact_id) != token]
        documents: dict[str, Document] = {}
        for fact in load(wanted) if wanted else ():
            document = Document.of(fact)
            if document is not None and document.fact_id in listing:
                documents[document.fact_id] = document
        return self._run(lambda db: sync_archive_rows(db, key, agent, listing, documents, version))

    def clear(self) -> None:
        """Forget every scope, its library and its archive: a full rebuild starts here."""

        def clear(db: sqlite3.Connection) -> None:
            with transaction(db):
                db.execute("DELETE FROM doc_fts")
                db.execute("DELETE FROM cf_fts")
                db.execute("DELETE FROM doc")
                db.execute("DELETE FROM scope")

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
        groups = tuple(fts_groups(query))
        if not groups or top_k <= 0:
            return []
        wanted = category_key(category) if category else ""

        def run(db: sqlite3.Connection) -> list[SearchHit]:
            scope_id = scope_id_of(db, user_key(user), agent)
            if scope_id is None:
                return []
            low, high = row_range(scope_id) if with_archive else library_range(scope_id)
            archived_from = archive_range(scope_id)[0]
            fts = COUNTERFACTUAL_FTS if with_archive else LIBRARY_FTS
            request = SearchRequest(groups, low, high, wanted, micros(now), top_k, fts)
            return [
                SearchHit(row.fact_id, row.score, "fts5", row.raw, row.row_id >= archived_from)
                for row in run_search(db, request)
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
            ensure_exp(connection)
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


def _is_damage(error: sqlite3.DatabaseError) -> bool:
    """Whether an error means the file is damaged or not a database at all."""
    code = getattr(error, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF in (_SQLITE_CORRUPT, _SQLITE_NOTADB)
    text = str(error).lower()
    return "malformed" in text or "not a database" in text
