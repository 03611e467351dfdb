"""The archive in the search index: ranked with the library on request, invisible otherwise."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from contextlib import nullcontext
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deermem.recall.index import SearchIndex, SyncReport, library_rows
from deermem.recall.search import (
    ArchiveSource,
    SearchOutcome,
    _bring_up,
    search_facts,
    search_with_archive,
)
from deermem.store.protocol import ArchiveChange
from deermem.store.records import content_key

NOW = datetime(2026, 11, 30, tzinfo=UTC)

LIBRARY: list[dict[str, Any]] = [
    {"id": "fact_tea", "content": "Drinks green tea every morning", "confidence": 0.9},
    {"id": "fact_jazz", "content": "Listens to jazz while coding", "confidence": 0.8},
    {"id": "fact_rust", "content": "Writes services in Rust", "confidence": 0.7},
]
ARCHIVE: list[dict[str, Any]] = [
    {"id": "fact_oolong", "content": "Prefers oolong tea to green tea", "confidence": 0.6},
    {"id": "fact_chess", "content": "Plays chess on Sundays", "confidence": 0.5},
]


class Loader:
    """Serves archived facts and counts what the index asked for."""

    def __init__(self, facts: Sequence[dict[str, Any]]) -> None:
        self.facts = {fact["id"]: fact for fact in facts}
        self.asked: list[str] = []

    def __call__(self, ids: Sequence[str]) -> list[dict[str, Any]]:
        self.asked.extend(ids)
        return [self.facts[i] for i in ids if i in self.facts]


def indexed(archive: Sequence[dict[str, Any]] = ARCHIVE) -> tuple[SearchIndex, Loader]:
    index = SearchIndex()
    index.sync_scope("u", "a", LIBRARY, version="v1")
    loader = Loader(archive)
    index.sync_archive("u", "a", {f["id"]: "t1" for f in archive}, loader, version="v1")
    return index, loader


def test_a_library_search_never_sees_the_archive() -> None:
    index, _ = indexed()
    with SearchIndex() as plain:
        plain.sync_scope("u", "a", LIBRARY, version="v1")
        for query in ("tea", "green tea", "chess", "coding jazz"):
            # The same hits, bit for bit: archived rows are not in its statistics.
            assert index.search("u", "a", query, now=NOW) == plain.search("u", "a", query, now=NOW)
    index.close()


def test_with_the_archive_archived_facts_compete_and_say_so() -> None:
    index, _ = indexed()
    hits = index.search("u", "a", "tea", now=NOW, with_archive=True)
    assert [(hit.fact_id, hit.archived) for hit in hits] == [
        ("fact_oolong", True),  # two "tea"s: it would have come first
        ("fact_tea", False),
    ]
    assert index.search("u", "a", "chess", now=NOW) == []
    index.close()


def test_the_archive_is_read_only_where_it_changed() -> None:
    index, loader = indexed()
    assert sorted(loader.asked) == ["fact_chess", "fact_oolong"]
    loader.asked.clear()
    tokens = {"fact_oolong": "t1", "fact_chess": "t2"}  # chess archived anew
    report = index.sync_archive("u", "a", tokens, loader, version="v2")
    assert loader.asked == ["fact_chess"]
    assert (report.indexed, report.unchanged) == (1, 1)
    assert index.is_archive_current("u", "a", "v2")
    report = index.sync_archive("u", "a", {"fact_chess": "t2"}, loader, version="v3")
    assert report.removed == 1  # oolong purged or restored: its row goes
    assert index.search("u", "a", "oolong", now=NOW, with_archive=True) == []
    index.close()


# --- following a commit's change instead of the archive's listing ------------------

IDS = [f"fact_{n}" for n in range(6)]
#: An archive as its listing says it: fact id → token (the entry's archivedAt).
archives = st.dictionaries(st.sampled_from(IDS), st.sampled_from(["t1", "t2", "t3"]), max_size=6)


def entries(listing: dict[str, str]) -> Loader:
    """The entries of ``listing``: a text per id and token, so an entry archived anew
    has words of its own, with a word every entry shares."""
    return Loader(
        [
            {"id": fact_id, "content": f"archived {fact_id} {fact_id}{token}", "confidence": 0.5}
            for fact_id, token in listing.items()
        ]
    )


def archived_rows(index: SearchIndex, listing: dict[str, str]) -> list[list[Any]]:
    """What searches of the archive find: by the shared word, and by each entry's own."""
    queries = ["archived", *(f"{fact_id}{token}" for fact_id, token in listing.items())]
    return [
        [(hit.fact_id, hit.archived, hit.score) for hit in found]
        for found in (
            index.search("u", "a", query, now=NOW, top_k=10, with_archive=True) for query in queries
        )
    ]


@settings(max_examples=60, deadline=None)
@given(before=archives, after=archives, extra=st.sets(st.sampled_from(IDS)))
def test_following_a_commits_change_gives_the_rows_its_listing_gives(
    before: dict[str, str], after: dict[str, str], extra: set[str]
) -> None:
    """A commit reports the entries it wrote and the ids it removed — some it did not
    hold, some written again with the same token. Applied to rows current before it,
    that leaves rows a full listing after it would have left, asking only for what it wrote."""
    added = {fact_id: token for fact_id, token in after.items() if before.get(fact_id) != token}
    added.update({fact_id: after[fact_id] for fact_id in extra if fact_id in after})
    removed = (before.keys() - after.keys()) | {i for i in extra if i not in after}
    loader = entries({**before, **after})
    with SearchIndex() as followed, SearchIndex() as listed:
        for index in (followed, listed):
            index.sync_scope("u", "a", LIBRARY, version="v1")
        followed.sync_archive("u", "a", before, entries(before), version="v1")
        change = followed.archive_change(
            "u", "a", after="v1", added=added, removed=removed, load=loader, version="v2"
        )
        assert change is not None
        assert followed.write("u", "a", archive=change) is not None
        listed.sync_archive("u", "a", after, entries(after), version="v2")
        assert followed.is_archive_current("u", "a", "v2")
        assert archived_rows(followed, after) == archived_rows(listed, after)
        assert set(loader.asked) <= set(added)


def test_a_change_made_on_another_version_than_the_rows_is_not_applied() -> None:
    index, loader = indexed()
    oolong = {"fact_oolong": "t2"}
    for after in ("v0", "", "v2"):  # older, never synchronised, newer
        change = index.archive_change(
            "u", "a", after=after, added=oolong, removed={"fact_chess"}, load=loader, version="v3"
        )
        assert change is None
    assert index.is_archive_current("u", "a", "v1")
    assert {hit.fact_id for hit in index.search("u", "a", "chess", now=NOW, with_archive=True)} == {
        "fact_chess"
    }
    index.mark_archive_stale("u", "a")  # a purge: the rows must be listed again
    for user in ("u", "nobody"):  # the rows stale; a scope never synchronised
        change = index.archive_change(
            user, "a", after="v1", added={}, removed=(), load=loader, version="v2"
        )
        assert change is None
    index.close()


def test_an_archive_report_counts_as_skipped_only_the_entries_it_could_not_load() -> None:
    index, loader = indexed()
    listing = {"fact_oolong": "t1", "fact_chess": "t1", "fact_ghost": "t1"}
    report = index.sync_archive("u", "a", listing, loader, version="v2")
    assert report == SyncReport(indexed=0, removed=0, unchanged=2, skipped=1)
    index.close()


def test_a_change_whose_base_moved_writes_nothing_of_either_part() -> None:
    """The library and the archive are one write: when the archive part cannot apply
    (another process synchronised the rows after the change was prepared), the
    library part is not written either."""
    index, loader = indexed()
    change = index.archive_change(
        "u", "a", after="v1", added={}, removed={"fact_chess"}, load=loader, version="v2"
    )
    assert change is not None
    index.sync_archive("u", "a", {"fact_oolong": "t1"}, loader, version="v9")  # the other one
    library = library_rows(LIBRARY[:1], "v2")
    assert index.write("u", "a", library=library, archive=change) is None
    assert index.versions("u", "a") == ("v1", "v9")
    assert {hit.fact_id for hit in index.search("u", "a", "jazz rust", now=NOW)} == {
        "fact_jazz",
        "fact_rust",
    }
    index.close()


def orphan_vectors(path: Path) -> set[str]:
    """The keys of the vectors in the index file that no row holds, read by another connection."""
    with sqlite3.connect(path) as db:
        return {
            key
            for (key,) in db.execute(
                "SELECT key FROM vec WHERE key NOT IN (SELECT content_key FROM doc)"
            )
        }


def stored_vectors(path: Path) -> set[str]:
    with sqlite3.connect(path) as db:
        return {key for (key,) in db.execute("SELECT key FROM vec")}


def test_a_search_that_fails_while_reading_the_archive_leaves_the_index_as_it_was(
    tmp_path: Path,
) -> None:
    """A search writes the library's rows, the archive's and the pruning of vectors
    in one transaction: interrupted while it reads the archive, it leaves the rows
    where they were and no vector that no row holds; the next search brings all
    of it in, and the vector of the fact that went, and only that one, goes."""
    path = tmp_path / "index.sqlite3"
    keys = {fact["id"]: content_key(fact["content"]) for fact in LIBRARY}
    with SearchIndex(path) as index:
        index.sync_scope("u", "a", LIBRARY, version="v1")
        index.sync_archive("u", "a", {}, Loader([]), version="a1")
        index.put_vectors(dict.fromkeys(keys.values(), b"vector"))

        def dies(ids: Sequence[str]) -> list[dict[str, Any]]:
            raise RuntimeError("the process dies here")

        remaining = LIBRARY[:2]  # fact_rust deleted; fact_chess newly archived
        for load, error in ((dies, RuntimeError), (Loader(ARCHIVE), None)):
            source = ArchiveSource(lambda: {"fact_chess": "t1"}, load)
            with pytest.raises(RuntimeError) if error else nullcontext():
                search_with_archive(
                    index,
                    "u",
                    "a",
                    "tea",
                    version="v2",
                    archive_version="a2",
                    load=lambda: remaining,
                    archive=source,
                    now=NOW,
                )
            assert orphan_vectors(path) == set()
            if error:
                assert index.versions("u", "a") == ("v1", "a1")
                assert stored_vectors(path) == set(keys.values())
        assert index.versions("u", "a") == ("v2", "a2")
        assert stored_vectors(path) == {keys["fact_tea"], keys["fact_jazz"]}


def test_an_edited_fact_keeps_nothing_of_its_old_text(tmp_path: Path) -> None:
    """Rewriting a row releases the vector of the text it held: an edited fact's old
    text leaves no vector, unless another row (another scope) holds the same text."""
    path = tmp_path / "index.sqlite3"
    keys = {fact["id"]: content_key(fact["content"]) for fact in LIBRARY}
    edited = [{**LIBRARY[0], "content": "Drinks black coffee every morning"}, *LIBRARY[1:]]
    with SearchIndex(path) as index:
        index.sync_scope("u", "a", LIBRARY, version="v1")
        index.sync_scope("u", "b", LIBRARY[1:2], version="v1")  # jazz's text, another scope
        index.put_vectors(dict.fromkeys(keys.values(), b"vector"))
        index.sync_scope("u", "a", edited, version="v2")
        assert stored_vectors(path) == {keys["fact_jazz"], keys["fact_rust"]}
        jazz = {**LIBRARY[1], "content": "Listens to jazz while cooking"}
        index.sync_scope("u", "a", [edited[0], jazz, LIBRARY[2]], version="v3")
        assert stored_vectors(path) == {keys["fact_jazz"], keys["fact_rust"]}  # "b" holds it
        index.sync_scope("u", "b", [], version="v2")
        assert stored_vectors(path) == {keys["fact_rust"]}
        assert orphan_vectors(path) == set()


def test_a_committer_whose_change_was_overtaken_lists_the_archive() -> None:
    """Between preparing a commit's archive change and writing it, another process
    brought the rows to a later version: the change is not applied on top of a
    state it never saw; the archive's listing is, with the library, in one write."""
    index, loader = indexed()
    listed: list[dict[str, str]] = []

    def listing() -> dict[str, str]:
        listed.append({"fact_oolong": "t1"})  # chess restored by the commit
        return listed[-1]

    def overtaken(ids: Sequence[str]) -> list[dict[str, Any]]:
        index.mark_archive_stale("u", "a")  # the other process, mid-preparation
        return loader(ids)

    change = ArchiveChange("v1", {}, frozenset({"fact_chess"}), bounded=True)
    archived = _bring_up(
        index,
        "u",
        "a",
        lambda: [*LIBRARY, ARCHIVE[1]],
        version="v2",
        archive=ArchiveSource(listing, overtaken),
        archive_version="v2",
        change=change._replace(added={"fact_oolong": "t1"}),
    )
    assert archived
    assert len(listed) == 1
    assert index.versions("u", "a") == ("v2", "v2")
    hits = index.search("u", "a", "chess oolong", now=NOW, with_archive=True)
    assert {(hit.fact_id, hit.archived) for hit in hits} == {
        ("fact_oolong", True),
        ("fact_chess", False),
    }
    index.close()


def test_marking_the_archive_stale_leaves_the_library_current() -> None:
    index, _ = indexed()
    assert index.is_archive_current("u", "a", "v1")
    index.mark_archive_stale("u", "a")
    assert index.is_current("u", "a", "v1")
    assert not index.is_archive_current("u", "a", "v1")
    index.mark_archive_stale("u", "nobody")  # an unknown scope: nothing to do
    index.close()


def test_clear_empties_the_library_and_the_archive() -> None:
    index, _ = indexed()
    index.clear()
    assert not index.is_current("u", "a", "v1")
    assert not index.is_archive_current("u", "a", "v1")
    assert index.search("u", "a", "tea", now=NOW, with_archive=True) == []
    # The counterfactual table is emptied too, not only made unreachable: a
    # scope synchronised anew reuses the old row ids, and finds only new text.
    index.sync_scope("u", "a", LIBRARY, version="v2")
    go = {"id": "fact_go", "content": "Plays go on Sundays", "confidence": 0.5}
    index.sync_archive("u", "a", {"fact_go": "t1"}, Loader([go]), version="v2")
    hits = index.search("u", "a", "sundays", now=NOW, with_archive=True)
    assert [(hit.fact_id, hit.archived) for hit in hits] == [("fact_go", True)]
    assert index.search("u", "a", "chess", now=NOW, with_archive=True) == []
    index.close()


def test_search_with_archive_returns_the_library_results_and_what_was_missed() -> None:
    with SearchIndex() as index:
        loader = Loader(ARCHIVE)
        source = ArchiveSource(lambda: {f["id"]: "t1" for f in ARCHIVE}, loader)
        outcome = search_with_archive(
            index,
            "u",
            "a",
            "tea",
            version="v1",
            archive_version="a1",
            load=lambda: LIBRARY,
            archive=source,
            now=NOW,
        )
        plain = search_facts(index, "u", "a", "tea", version="v1", load=lambda: LIBRARY, now=NOW)
        assert outcome.hits == plain
        assert [(m.hit.fact_id, m.rank) for m in outcome.missed] == [("fact_oolong", 1)]
        # Only the archive matches: the library falls back to substrings; the miss is reported.
        outcome = search_with_archive(
            index,
            "u",
            "a",
            "chess",
            version="v1",
            archive_version="a1",
            load=lambda: LIBRARY,
            archive=source,
            now=NOW,
        )
        assert outcome.hits == []
        assert [m.hit.fact_id for m in outcome.missed] == ["fact_chess"]
    outcome = search_with_archive(
        None,
        "u",
        "a",
        "tea",
        version="v1",
        archive_version="a1",
        load=lambda: LIBRARY,
        archive=source,
        now=NOW,
    )
    assert [hit.fact_id for hit in outcome.hits] == ["fact_tea"]  # no index: substrings only
    assert outcome.missed == []


def archive_matches(index: SearchIndex, user: str, agent: str, query: str) -> bool:
    """Whether the index says an archived fact of the scope matches ``query``."""
    return index.search_library(user, agent, query, now=NOW)[1]


def rankings(index: SearchIndex) -> list[str]:
    """Which full-text tables the index ranks (BM25) from now on, one entry per statement."""
    ranked: list[str] = []

    def seen(statement: str) -> None:
        ranked.extend(
            table for table in ("doc_fts", "cf_fts") if f"highlight({table}," in statement
        )

    index._connection.set_trace_callback(seen)
    return ranked


def searched(index: SearchIndex, query: str) -> SearchOutcome:
    """``search_with_archive`` of scope ``u``/``a`` at versions ``v1``/``a1``, over LIBRARY
    and ARCHIVE (every archived fact at token ``t1``)."""
    source = ArchiveSource(lambda: {f["id"]: "t1" for f in ARCHIVE}, Loader(ARCHIVE))
    return search_with_archive(
        index,
        "u",
        "a",
        query,
        version="v1",
        archive_version="a1",
        load=lambda: LIBRARY,
        archive=source,
        now=NOW,
    )


def test_an_archive_without_a_match_is_not_ranked_with_the_library() -> None:
    """Issue 23: by keyword, only an archived fact that matches the query can be missed;
    when none does, the search ranks the library alone (half the work), and says the same."""
    with SearchIndex() as index:

        def search(query: str) -> list[tuple[str, int]]:
            outcome = searched(index, query)
            assert outcome.hits == search_facts(
                index, "u", "a", query, version="v1", load=lambda: LIBRARY, now=NOW
            )
            return [(m.hit.fact_id, m.rank) for m in outcome.missed]

        assert search("tea") == [("fact_oolong", 1)]  # warms the index up
        ranked = rankings(index)
        assert search("jazz coding") == []  # no archived fact says either word
        assert ranked == ["doc_fts", "doc_fts"]  # this search's, and search_facts'
        ranked.clear()
        assert search("chess or jazz") == [("fact_chess", 1)]
        assert "cf_fts" in ranked
        assert archive_matches(index, "u", "a", "Sundays")
        assert not archive_matches(index, "u", "a", "rust")
        assert not archive_matches(index, "u", "nobody", "tea")
        assert not archive_matches(index, "u", "a", "?!")


def test_an_empty_archive_is_not_searched_at_all() -> None:
    with SearchIndex() as index:
        index.sync_scope("u", "a", LIBRARY, version="v1")
        index.sync_archive("u", "a", {}, Loader([]), version="a1")
        statements: list[str] = []
        index._connection.set_trace_callback(statements.append)
        assert not archive_matches(index, "u", "a", "tea")
        assert not any("arc_fts" in statement for statement in statements)


def full_text_rows(index: SearchIndex) -> dict[str, set[int]]:
    """The row ids each full-text table holds, and the index's rows by where they live."""
    db = index._connection
    rows = {
        table: {row[0] for row in db.execute(f"SELECT rowid FROM {table}")}
        for table in ("doc_fts", "arc_fts", "cf_fts")
    }
    rows["library"] = {row[0] for row in db.execute("SELECT id FROM doc WHERE archived = 0")}
    rows["archive"] = {row[0] for row in db.execute("SELECT id FROM doc WHERE archived = 1")}
    return rows


def assert_each_table_holds_its_rows(index: SearchIndex, *, library: int, archive: int) -> None:
    """The archive's table holds the archive's rows, the library's the library's, and the
    counterfactual table both; with this many of each."""
    rows = full_text_rows(index)
    assert rows["arc_fts"] == rows["archive"]
    assert len(rows["archive"]) == archive
    assert rows["doc_fts"] == rows["library"]
    assert len(rows["library"]) == library
    assert rows["cf_fts"] == rows["library"] | rows["archive"]


def test_the_archive_has_a_full_text_table_of_its_own() -> None:
    """Issue 23: whether an archived fact matches is asked of the archive's own table, so
    the check reads no library's posting list. Each table holds exactly its rows, through
    archiving, restoring and removing."""
    index, loader = indexed()
    with index:
        assert_each_table_holds_its_rows(index, library=3, archive=2)
        # fact_chess restored to the library, fact_rust archived.
        restored = [*LIBRARY[:2], ARCHIVE[1]]
        index.sync_scope("u", "a", restored, version="v2")
        loader.facts["fact_rust"] = LIBRARY[2]
        index.sync_archive("u", "a", {"fact_oolong": "t1", "fact_rust": "t2"}, loader, version="v2")
        assert_each_table_holds_its_rows(index, library=3, archive=2)
        assert archive_matches(index, "u", "a", "Rust")
        assert not archive_matches(index, "u", "a", "chess")

        statements: list[str] = []
        index._connection.set_trace_callback(statements.append)
        assert archive_matches(index, "u", "a", "oolong")
        matched = [
            s for s in statements if "MATCH" in s and "highlight" not in s
        ]  # not the ranking
        assert len(matched) == 1
        assert "arc_fts" in matched[0]
        assert "cf_fts" not in matched[0]

        index.remove_scope("u", "a")
        assert all(not ids for ids in full_text_rows(index).values())


def test_full_text_tables_stay_few_segments_under_writes_one_fact_at_a_time() -> None:
    """Issue 23: every write transaction adds a segment, and a query looks its terms up in
    each; the tables merge as soon as two segments share a level and after each write, so
    a library written a fact at a time stays compact (FTS5's default, four a level, leaves
    several times the segments, and a search slower)."""
    library = [
        {"id": f"fact_{n:04d}", "content": f"Fact {n} about topic{n % 37} and word{n % 11}"}
        for n in range(200)
    ]
    with SearchIndex() as index:
        index.sync_scope("u", "a", library, version="v0")
        db = index._connection
        options = dict(db.execute("SELECT k, v FROM doc_fts_config WHERE k LIKE '%merge'"))
        assert options == {"automerge": 2, "usermerge": 2}
        for n in range(200):  # one fact rewritten per write transaction, as a commit does
            library[n] = {**library[n], "content": f"Rewritten {n} about topic{n % 13}"}
            index.sync_scope("u", "a", library, version=f"v{n + 1}")
        pages = {
            table: db.execute(f"SELECT count(*) FROM {table}_data").fetchone()[0]
            for table in ("doc_fts", "cf_fts")
        }
        # 6 each; the same writes with FTS5's defaults leave 17 (10 with the merge step alone).
        assert all(count <= 8 for count in pages.values()), pages


def test_a_keyword_search_reads_the_scope_row_once_for_its_versions_and_once_to_rank() -> None:
    """Issue 23: the first search after a write does no lookup twice. With its rows current,
    a keyword search with missed-recall detection that the archive cannot change reads
    the scope's row once for both versions and once more for the ranking and the archive
    check together (it read it four times: two version checks, the archive check, the
    ranking)."""
    with SearchIndex() as index:

        def search(query: str) -> list[str]:
            return [hit.fact_id for hit in searched(index, query).hits]

        assert search("tea") == ["fact_tea"]  # brings the rows in step
        statements: list[str] = []
        index._connection.set_trace_callback(statements.append)
        assert search("jazz") == ["fact_jazz"]  # no archived fact says it
        assert sum("FROM scope" in statement for statement in statements) == 2
