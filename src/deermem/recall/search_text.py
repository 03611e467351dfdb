"""Turning fact text and user queries into FTS5 terms, safely and CJK-aware.

Both sides go through the same normalisation — NFKC, case folding, then
maximal runs of letters and digits — so what is indexed and what is asked for
always agree. Two things need care:

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
"""

from __future__ import annotations

import re
import unicodedata
from typing import Final

__all__ = ["MAX_QUERY_GROUPS", "fts_groups", "fts_query", "index_terms", "normalise"]

# At most this many alternatives in one query: a pasted essay must not turn
# into a 5,000-way OR.
MAX_QUERY_GROUPS: Final = 64

_CJK: Final = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7a3"
_CJK_RUN: Final = re.compile(f"[{_CJK}]+")
_TERM: Final = re.compile(r"[^\W_]+")
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


def fts_groups(query: str) -> list[str]:
    """The alternatives :func:`fts_query` joins with ``OR``, in query order.

    Each is a valid FTS5 expression on its own (a quoted string, a quoted
    phrase, or a prefix); duplicates are dropped and at most
    :data:`MAX_QUERY_GROUPS` are kept.
    """
    groups: list[str] = []
    for phrase, chunk in _QUERY_PART.findall(normalise(query)):
        if phrase:
            group = _phrase_group(_words(phrase))
            if group:
                groups.append(group)
        else:
            groups.extend(_chunk_groups(chunk))
    return list(dict.fromkeys(groups))[:MAX_QUERY_GROUPS]


def _words(text: str) -> list[str]:
    """Maximal letter/digit runs, with CJK runs split off from their neighbours."""
    return _TERM.findall(_CJK_RUN.sub(lambda match: f" {match.group()} ", text))


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
