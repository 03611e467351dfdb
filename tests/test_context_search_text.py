"""Query and index tokenisation: CJK-aware, and safe for anything a user types."""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deermem.recall.index import MAX_QUERY_GROUPS, fts_query, index_terms, normalise

HOSTILE_QUERIES = [
    "real-time co-pilot node -js +python",
    '"unbalanced quote',
    'a"b"c',
    '""',
    "NOT",
    "AND OR NOT",
    "NEAR(a b, 3)",
    "body:secret",
    "{body scope}: x",
    "^start",
    "*",
    "a**",
    "(",
    ")",
    "((a OR b) AND",
    "'; DROP TABLE doc; --",
    "c++ && node.js || rust?",
    "\x00\x1b[31m",
    "emoji only 🎉",
    "lone \ud800 surrogate",
]


@pytest.fixture(scope="module")
def fts() -> sqlite3.Connection:
    db = sqlite3.connect(":memory:")
    db.execute(
        "CREATE VIRTUAL TABLE t USING fts5 (body, tokenize = 'unicode61 remove_diacritics 2')"
    )
    db.execute("INSERT INTO t (body) VALUES (?)", (" ".join(index_terms("real time co pilot")),))
    return db


def run(db: sqlite3.Connection, query: str) -> list[tuple[int]]:
    expression = fts_query(query)
    if expression is None:
        return []
    return db.execute("SELECT rowid FROM t WHERE t MATCH ?", (expression,)).fetchall()


@pytest.mark.parametrize("query", HOSTILE_QUERIES)
def test_operators_typed_by_users_never_raise(query: str, fts: sqlite3.Connection) -> None:
    run(fts, query)


def test_hyphenated_natural_language_is_not_syntax(fts: sqlite3.Connection) -> None:
    assert fts_query("real-time co-pilot") == '"real" OR "time" OR "co" OR "pilot"'
    assert run(fts, "real-time co-pilot node -js +python") == [(1,)]


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=80))
def test_any_text_is_a_valid_query(query: str) -> None:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE t USING fts5 (body)")
    db.execute("INSERT INTO t (body) VALUES ('x')")
    run(db, query)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from('"*():^-+{}ANDORNT 机器学习ab'), max_size=30))
def test_syntax_soup_is_a_valid_query(query: str) -> None:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE t USING fts5 (body)")
    run(db, query)


def test_nothing_searchable_gives_no_query() -> None:
    for query in ["", "   ", "🎉🎉", "?!.,", '"  "', "*"]:
        assert fts_query(query) is None


def test_phrases_and_prefixes_are_kept() -> None:
    assert fts_query('"co pilot" tools') == '"co pilot" OR "tools"'
    assert fts_query("deplo*") == '"deplo"*'
    assert fts_query("NOT deploy") == '"not" OR "deploy"'


def test_query_size_is_capped() -> None:
    query = " ".join(f"word{n}" for n in range(500))
    expression = fts_query(query)
    assert expression is not None
    assert expression.count(" OR ") == MAX_QUERY_GROUPS - 1
    assert fts_query("a a a A") == '"a"'  # repeated terms count once


@pytest.mark.parametrize(
    ("text", "terms"),
    [
        ("机器学习", ["机器", "器学", "学习", "习"]),
        ("猫", ["猫"]),
        ("用uv安装Python包", ["用", "uv", "安装", "装", "python", "包"]),
        ("東京タワー", ["東京", "京タ", "タワ", "ワー", "ー"]),
        ("한국어 문장", ["한국", "국어", "어", "문장", "장"]),
        ("Snake_case and CamelCase", ["snake", "case", "and", "camelcase"]),
        ("ＰＹＴＨＯＮ ﬁle Straße", ["python", "file", "strasse"]),
        # Combining marks (Mn, Mc) stay inside their word.
        ("मुझे हिंदी पसंद है", ["मुझे", "हिंदी", "पसंद", "है"]),
        ("ภาษาไทย ที่ดี", ["ภาษาไทย", "ที่ดี"]),
        ("مُحَمَّد", ["مُحَمَّد"]),
        ("İstanbul", ["i\u0307stanbul"]),  # case folding gives i + combining dot
        ("\u0301stray mark_\u0301", ["stray", "mark"]),  # a mark never starts a term
    ],
)
def test_index_terms(text: str, terms: list[str]) -> None:
    assert index_terms(text) == terms


def test_cjk_query_shapes() -> None:
    assert fts_query("学习") == '"学习"'
    assert fts_query("机器学习") == '"机器 器学 学习"'
    assert fts_query("猫") == '"猫"*'
    assert fts_query("用uv") == '"用"* OR "uv"'
    assert fts_query('"机器 learning"') == '"机器 器 learning"'
    assert fts_query('"learning 机"') == '"learning 机"*'


def test_normalise_folds_width_and_case() -> None:
    assert normalise("ＡＢＣ Ǆ") == "abc dž"
