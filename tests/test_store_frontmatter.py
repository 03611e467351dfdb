"""The fact file's front-matter writer writes what ``yaml.safe_dump(..., allow_unicode=True,
sort_keys=False)`` writes — the original DeerMem's format — for every value.

The proof is a comparison with PyYAML's pure-Python safe dumper over values
built from the full Unicode range (surrogates included: deermem refuses them
before writing, but the writer must not differ on them either), the characters
YAML treats specially, text that reads as another type, and lines long enough
to fold. A second set of tests checks the comparison is not vacuous: the
values a fact's front matter holds are written by the writer itself, never
handed to PyYAML.

``FRONTMATTER_EXAMPLES=20000 uv run pytest tests/test_store_frontmatter.py`` for
the long run (the suite draws fewer).
"""

from __future__ import annotations

import collections
import datetime
import os
import re

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from deermem.store.markdown import files
from deermem.store.markdown.files import (
    FrontMatterWriter,
    UnsupportedByWriter,
    dump_front_matter,
)

EXAMPLES = int(os.environ.get("FRONTMATTER_EXAMPLES", "300"))
many = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def pyyaml(data: object) -> str:
    """The reference: PyYAML's pure-Python safe dumper, as the original calls it."""
    text: str = yaml.safe_dump(data, allow_unicode=True, sort_keys=False)
    return text


def written_by_writer(data: dict[object, object]) -> str:
    """The writer alone, without the fallback to PyYAML (fails if it would fall back)."""
    return FrontMatterWriter().document(data)


# Characters where YAML's emitter decides something: breaks (U+0085 NEL,
# U+2028, U+2029), the BOM, controls, quotes, indicators, the edges of the
# printable ranges, a surrogate, an astral character.
SPECIAL = (
    " \n\r\t\0\x07\x1b\x7f\x84\x85\x9f\xa0\u2028\u2029\ufeff\ufffd\ufffe\uffff"
    "\ud7ff\ud800\udfff\ue000\U00010000\U0001f600\U0010fffe\U0010ffff"
    "'\"\\#:-?,[]{}&*!|>%@`~=<.+_0123456789eEabxyzTZé"
)
# Text that reads back as another type, or as a YAML marker.
LOOKALIKES = (
    "",
    "true",
    "True",
    "yes",
    "No",
    "on",
    "OFF",
    "y",
    "n",
    "null",
    "Null",
    "~",
    "0",
    "-1",
    "+1",
    "012",
    "0o17",
    "0x1F",
    "0b101",
    "1_000",
    "1:20",
    "190:20:30",
    "1.5",
    "-.5",
    ".5e3",
    "1e3",
    "1.0e+3",
    ".inf",
    "-.Inf",
    ".NaN",
    "2026-08-13",
    "2026-8-3 1:02:03",
    "2026-08-13T00:00:00Z",
    "2026-08-13 00:00:00.5 +02:00",
    "---",
    "...",
    "--- x",
    "... x",
    "<<",
    "=",
    "!",
    "&",
    "*",
    "- x",
    "-",
    "? x",
    "?",
    ":",
    "a: b",
    "a:",
    "a:b",
    "# c",
    "a #c",
    "a#c",
    "'q'",
    '"q"',
    "@x",
    "`x",
    "%x",
    "|",
    ">",
    "[]",
    "{}",
    "x,y",
    " ",
    "  x",
    "x  ",
    "a\nb",
    "a\n",
    "\na",
    "a \nb",
    "a\n b",
    "a\n\nb",
    "\u2028",
    "a\x85b",
    "\ufeffx",
)

full_unicode = st.characters(exclude_categories=())
special_text = st.text(st.sampled_from(SPECIAL), max_size=30)
words = st.text(st.sampled_from("abcdefghij'\"#:é😀"), min_size=1, max_size=12)
# Long lines of words, single or multiple spaces, so folding is exercised at
# every column; sometimes with a special character or break inside.
long_text = st.builds(
    lambda parts, seps, extra: "".join(p + s for p, s in zip(parts, seps, strict=False)) + extra,
    st.lists(words, min_size=5, max_size=40),
    st.lists(
        st.sampled_from([" ", " ", " ", "  ", "\n", " \n", "\x85", "\u2028", "\x07"]),
        min_size=5,
        max_size=40,
    ),
    st.sampled_from(["", " ", "x", "\n", "'"]),
)
texts = st.one_of(
    st.text(full_unicode, max_size=40),
    special_text,
    st.sampled_from(LOOKALIKES),
    long_text,
    st.builds(str.__add__, st.sampled_from(LOOKALIKES), special_text),
    st.text(full_unicode, min_size=60, max_size=200),
)
scalars = st.one_of(
    texts,
    st.integers(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(),
    st.booleans(),
    st.none(),
)
# Keys written "key:" (non-empty, one line); the other keys (empty, multi-line,
# 123 characters and more) are written by PyYAML as "? key", and are drawn less.
BREAKS = "\n\x85\u2028\u2029"
simple_keys = st.one_of(
    st.text(
        st.characters(exclude_categories=(), exclude_characters=BREAKS), min_size=1, max_size=40
    ),
    st.text(st.sampled_from([ch for ch in SPECIAL if ch not in BREAKS]), min_size=1, max_size=20),
    st.sampled_from([text for text in LOOKALIKES if text and not any(ch in text for ch in BREAKS)]),
)
keys = st.one_of(
    simple_keys,
    st.sampled_from(["id", "category", "confidence", "source", "topics", "createdAt"]),
    st.integers(),
    st.floats(allow_nan=False),
    st.booleans(),
    st.none(),
)
values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(keys, children, max_size=4),
    ),
    max_leaves=20,
)
documents = st.dictionaries(keys, values, min_size=1, max_size=8)


@many
@given(documents)
def test_any_mapping_is_written_as_pyyaml_writes_it(data: dict[object, object]) -> None:
    try:
        written_by_writer(data)
    except UnsupportedByWriter:
        event("handed to PyYAML")
    else:
        event("written by the writer")
    assert dump_front_matter(data) == pyyaml(data)


@many
@given(st.dictionaries(st.one_of(texts, keys), values, min_size=1, max_size=3))
def test_any_key_is_written_as_pyyaml_writes_it(data: dict[object, object]) -> None:
    assert dump_front_matter(data) == pyyaml(data)


@many
@given(st.dictionaries(simple_keys, texts, min_size=1, max_size=3))
def test_any_text_value_is_written_as_pyyaml_writes_it(data: dict[object, object]) -> None:
    assert dump_front_matter(data) == pyyaml(data)


# --- Fact-shaped front matter: what encode_fact hands to the writer.

timestamps = st.datetimes(
    min_value=datetime.datetime(1970, 1, 1), max_value=datetime.datetime(2100, 1, 1)
).map(lambda moment: moment.strftime("%Y-%m-%dT%H:%M:%SZ"))
json_values = st.recursive(
    st.one_of(texts, st.integers(), st.floats(), st.booleans(), st.none()),
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(simple_keys, children, max_size=4)
    ),
    max_leaves=12,
)


@st.composite
def fronts(draw: st.DrawFn) -> dict[object, object]:
    """The front matter of a fact: its known fields in order, unknown keys, the scope last."""
    front: dict[object, object] = {
        "id": draw(st.from_regex(r"[A-Za-z0-9_-]{1,64}", fullmatch=True)),
        "category": draw(st.one_of(st.sampled_from(["preference", "correction"]), texts)),
        "confidence": draw(st.floats(min_value=0, max_value=1)),
        "createdAt": draw(timestamps),
        "source": draw(
            st.fixed_dictionaries(
                {"type": st.sampled_from(["conversation", "manual"])},
                optional={"threadId": texts, "note": json_values},
            )
        ),
    }
    if draw(st.booleans()):
        front["sourceError"] = draw(texts)
    if draw(st.booleans()):
        front["expected_valid_days"] = draw(st.one_of(st.integers(0, 10**6), st.none(), texts))
    front.update(
        {
            "schemaVersion": 2,
            "status": "active",
            "topics": draw(st.lists(texts, max_size=5)),
            "consolidatedFrom": draw(st.lists(st.from_regex(r"fact_[0-9a-f]{8}", fullmatch=True))),
            "updatedAt": draw(timestamps),
            "revision": draw(st.integers(1, 10**9)),
        }
    )
    for key, value in draw(st.dictionaries(simple_keys, json_values, max_size=4)).items():
        front.setdefault(key, value)
    front["user_id"] = draw(texts)
    front["agent_name"] = draw(st.from_regex(r"[a-z0-9_-]{1,32}", fullmatch=True))
    return front


@many
@given(fronts())
def test_fact_front_matter_is_written_by_the_writer_as_pyyaml_writes_it(
    front: dict[object, object],
) -> None:
    # The writer itself covers every fact shape (no fallback), and matches.
    assert written_by_writer(front) == pyyaml(front)


def test_a_typical_fact() -> None:
    front: dict[object, object] = {
        "id": "fact_1a2b3c4d",
        "category": "correction",
        "confidence": 0.9,
        "createdAt": "2026-08-13T00:00:00Z",
        "source": {"type": "conversation", "threadId": "thread-7"},
        "sourceError": "The assistant suggested 'pip install'.",
        "schemaVersion": 2,
        "status": "active",
        "topics": [],
        "consolidatedFrom": [],
        "updatedAt": "2026-08-13T00:00:00Z",
        "revision": 1,
        "user_id": "alice",
        "agent_name": "coder",
    }
    expected = (
        "id: fact_1a2b3c4d\ncategory: correction\nconfidence: 0.9\n"
        "createdAt: '2026-08-13T00:00:00Z'\nsource:\n  type: conversation\n"
        "  threadId: thread-7\nsourceError: The assistant suggested 'pip install'.\n"
        "schemaVersion: 2\nstatus: active\ntopics: []\nconsolidatedFrom: []\n"
        "updatedAt: '2026-08-13T00:00:00Z'\nrevision: 1\nuser_id: alice\nagent_name: coder\n"
    )
    assert written_by_writer(front) == expected == pyyaml(front)


# --- The edges, named.


@pytest.mark.parametrize("text", LOOKALIKES)
@pytest.mark.parametrize("where", ["value", "key", "item", "nested"])
def test_lookalike_text(text: str, where: str) -> None:
    shapes: dict[str, dict[object, object]] = {
        "value": {"k": text},
        "key": {text: 1},
        "item": {"k": [text, text]},
        "nested": {"k": {"j": [{"i": text}]}},
    }
    data = shapes[where]
    assert dump_front_matter(data) == pyyaml(data)


@pytest.mark.parametrize("char", list(SPECIAL))
@pytest.mark.parametrize("width", [1, 40, 76, 77, 78, 79, 80, 81, 120])
def test_special_characters_at_the_folding_width(char: str, width: int) -> None:
    for text in (
        "w " * (width // 2) + char + " tail words",
        "x" * width + char + " y z",
        char + " " + "ab " * width,
        "ab " * (width // 3) + " " + char + char + " end",
    ):
        data: dict[object, object] = {"key": text, "list": [text], "deep": {"a": {"b": text}}}
        assert dump_front_matter(data) == pyyaml(data), repr(text)


@pytest.mark.parametrize("depth", [1, 10, 38, 39, 40, 41, 45, 60])
def test_deep_nesting_moves_the_indent_past_the_width(depth: int) -> None:
    # Past 40 levels a scalar's continuation indent is beyond column 80.
    text = "a b c " * 30 + "it's \x07 é 😀 " * 8
    for quoted in (text, "'" + text, "a\n\nb " + text):
        data: object = quoted
        for level in range(depth):
            data = {f"k{level}": data} if level % 3 else [data]
        front: dict[object, object] = {"root": data}
        assert dump_front_matter(front) == pyyaml(front)


def test_long_keys_around_the_simple_key_limit() -> None:
    for size in (120, 121, 122, 123, 124, 127, 128):
        for key in ("k" * size, 10 ** (size - 1), "'" * size):
            data: dict[object, object] = {key: "v", "n": [{key: ["x"]}]}
            assert dump_front_matter(data) == pyyaml(data)


def test_what_the_writer_hands_to_pyyaml_is_still_pyyamls() -> None:
    shared: list[object] = ["x"]
    empty: list[object] = []
    cycle: list[object] = []
    cycle.append(cycle)
    cases: list[object] = [
        {"a": shared, "b": shared},  # anchors and aliases
        {"a": empty, "b": [empty]},
        {"a": cycle},
        {"t": (1, 2), "e": ()},
        {"d": datetime.date(2026, 8, 13), "s": {1, 2}},
        {"b": b"\x00bytes"},
        {"": 1, "a\nb": 2, None: {"": []}},
        {},
        [],
        "text",
        None,
        {"big": 10**5000},
    ]
    for data in cases:
        try:
            expected: object = pyyaml(data)
        except Exception as error:  # the same error must come out
            with pytest.raises(type(error)):
                dump_front_matter(data)
        else:
            assert dump_front_matter(data) == expected


def test_unrepresentable_values_fail_as_in_pyyaml() -> None:
    for data in ({"x": object()}, {"x": collections.OrderedDict(a=1)}, {"x": [1, {2: object()}]}):
        with pytest.raises(yaml.YAMLError) as expected:
            pyyaml(data)
        with pytest.raises(type(expected.value)):
            dump_front_matter(data)


@pytest.mark.parametrize("key_size", [60, 75, 76, 77, 78, 79, 80, 81, 100, 122])
def test_a_long_key_moves_the_value_past_the_width(key_size: int) -> None:
    # The value starts past column 80: a leading space is never folded, others are.
    for value in (" x", " x y", "  x y", " 'x' y", "x y", "'x y", "x ", "x\ny z", "\x07 x y", " "):
        data: dict[object, object] = {"k" * key_size: value, "l": [{"k" * key_size: value}]}
        assert dump_front_matter(data) == pyyaml(data), (key_size, value)


def test_the_listed_character_classes_are_the_complements_of_the_printable_ranges() -> None:
    # The writer lists the characters YAML does not print rather than
    # negating the printable ranges (far cheaper to compile); on every code
    # point, each list must decide as the negated ranges (YAML 1.1's
    # printable set, the emitter's spelling) do.
    special = re.compile(
        "[^\n\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010fffe]"
    )
    escaped = re.compile('["\\\\\x85\u2028\u2029\ufeff]|[^\x20-\x7e\xa0-\ud7ff\ue000-\ufffd]')
    listed_special = re.compile(files._SPECIAL)
    differ = [
        hex(point)
        for point in range(0x110000)
        if (listed_special.fullmatch(chr(point)) is None) != (special.fullmatch(chr(point)) is None)
        or (files._ESCAPED.fullmatch(chr(point)) is None) != (escaped.fullmatch(chr(point)) is None)
    ]
    assert differ == []


# --- Texts kept for the keys and values written last.


@many
@given(st.lists(st.tuples(texts, simple_keys), min_size=1, max_size=4), st.data())
def test_a_text_written_again_at_another_place_is_written_as_pyyaml_writes_it(
    pairs: list[tuple[str, str]], data: st.DataObject
) -> None:
    # The writer keeps what it wrote for a text; written again as a key or a
    # value, after keys of other lengths, at other depths, in a list or a
    # mapping, one document after another, each is still PyYAML's.
    for text, key in pairs:
        for document in (
            {key: text, text if text else "k": key},
            {"k" * data.draw(st.integers(1, 90)): text, "l": [text, {key: text}]},
            {key: {key: [[text]], "m": {text if text else "k": text}}},
            {key: text * 9, "n": [text * 9]},  # past the length kept
        ):
            assert dump_front_matter(document) == pyyaml(document)


def test_a_fact_written_again_works_out_none_of_its_text_keys_and_values_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    front: dict[object, object] = {
        "id": "fact_5e6f7a8b",
        "category": "preference",
        "source": {"type": "conversation", "threadId": "thread-7"},
        "topics": ["tools", "editor"],
        "status": "active",
        "createdAt": "2026-08-13T00:00:00Z",
        "user_id": "alice",
        "agent_name": "coder",
    }
    expected = pyyaml(front)
    assert written_by_writer(front) == expected
    resolved: list[str] = []
    real = files._implicit

    def counting(text: str, tag: str) -> bool:
        resolved.append(text)
        return real(text, tag)

    monkeypatch.setattr(files, "_implicit", counting)
    assert written_by_writer(front) == expected
    assert resolved == []
