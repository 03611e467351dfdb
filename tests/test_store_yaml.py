"""The front-matter YAML fast paths give exactly what PyYAML gives, or step aside."""

from __future__ import annotations

from collections.abc import Mapping

import yaml
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from deermem.store._yaml import (
    _dump_fast,
    _Fallback,
    _holds,
    _load_fast,
    dump_mapping,
    load_mapping,
)


def safe_dump(data: Mapping[str, object]) -> str:
    return yaml.safe_dump(data, allow_unicode=True, sort_keys=False)


# Strings that stress YAML's resolvers and indicators.
tricky_text = st.one_of(
    st.sampled_from(
        [
            "",
            "yes",
            "No",
            "ON",
            "null",
            "~",
            "true",
            "1e3",
            "0x1F",
            "012",
            "1_000",
            "1:30",
            ".inf",
            "-",
            "- item",
            "a: b",
            "a #b",
            "a#b",
            "'quoted'",
            "it's",
            '"double"',
            "[x]",
            "{x}",
            "été",
            "名前",
            "2026-08-13",
            "2026-08-13T00:00:00Z",
            "2026-08-13T00:00:00.123456+02:00",
            "2026-08-13 00:00:00",
            "x" * 130,
            "trailing ",
            " leading",
            "line\nbreak",
            "tab\there",
            "fact_1a2b3c4d",
            "__default__",
            "with-dash",
            "The assistant suggested 'pip install'.",
        ]
    ),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=30),
    st.from_regex(r"[A-Za-z_][A-Za-z0-9_ :#'\"-]{0,20}", fullmatch=True),
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=False, allow_infinity=False),
    tricky_text,
)
keys = st.one_of(
    st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}", fullmatch=True),
    st.sampled_from(["yes", "on", "user_id", "agent_name", "createdAt", "expected_valid_days"]),
    tricky_text,
)
values = st.one_of(
    scalars,
    st.lists(scalars, max_size=4),
    st.dictionaries(keys, scalars, max_size=3),
)
documents = st.dictionaries(keys, values, min_size=1, max_size=8)


@settings(max_examples=200)
@given(documents)
@example({"id": "fact_x", "source": {"type": "manual", "threadId": None}, "topics": []})
@example({"confidence": 1e-05, "revision": 1, "createdAt": "2026-08-13T00:00:00Z"})
def test_dump_is_pyyaml_byte_for_byte(document: dict[str, object]) -> None:
    assume(not _holds(document, "\x85"))  # the one character PyYAML does not round-trip
    assert dump_mapping(document) == safe_dump(document)


@given(documents)
def test_dump_round_trips_through_pyyaml(document: dict[str, object]) -> None:
    assert yaml.safe_load(dump_mapping(document)) == document


def test_next_line_characters_survive_unlike_pyyaml_with_unicode() -> None:
    document = {"sourceError": "a\x85b", "topics": ["\x85"]}
    assert yaml.safe_load(safe_dump(document)) != document  # PyYAML alone loses it
    assert yaml.safe_load(dump_mapping(document)) == document


@settings(max_examples=200)
@given(documents)
def test_load_of_pyyaml_output_is_pyyaml(document: dict[str, object]) -> None:
    text = safe_dump(document)
    assert load_mapping(text) == yaml.safe_load(text)


# Lines made of YAML's meaningful characters: the fast loader must agree with
# PyYAML or fall back, never return something else.
yaml_alphabet = "ab_Z09 :-'\"#[]{}.,~\t!&*|>%@`?"
# Mostly word characters, sometimes an indicator: near-valid values.
near_plain = st.text(alphabet="abcXYZé019_-'. :#[]", min_size=1, max_size=10)
line_keys = st.sampled_from(["a", "b", "on", "x_1", "Null", "createdAt"])
fuzz_lines = st.lists(
    st.one_of(
        st.text(alphabet=yaml_alphabet, max_size=12),
        st.builds(lambda k, v: f"{k}: {v}", line_keys, near_plain),
        st.builds(lambda k, v: f"{k}: {v}", line_keys, near_plain.map(repr)),
        st.builds(lambda k: f"{k}:", line_keys),
        st.builds(lambda v: f"- {v}", near_plain),
        st.builds(lambda k, v: f"  {k}: {v}", line_keys, near_plain),
    ),
    min_size=1,
    max_size=6,
)


def agrees_or_steps_aside(text: str) -> None:
    try:
        fast = _load_fast(text)
    except _Fallback:
        return
    assert fast == yaml.safe_load(text)


@settings(max_examples=300)
@given(fuzz_lines)
def test_fast_loader_agrees_with_pyyaml_or_steps_aside(lines: list[str]) -> None:
    agrees_or_steps_aside("\n".join(lines) + "\n")


@settings(max_examples=500)
@given(line_keys, near_plain)
def test_fast_loader_reads_single_values_as_pyyaml(key: str, value: str) -> None:
    agrees_or_steps_aside(f"{key}: {value}\n")


def test_fact_front_matter_takes_the_fast_paths() -> None:
    front = {
        "id": "fact_1a2b3c4d",
        "category": "preference",
        "confidence": 0.9,
        "status": "active",
        "schemaVersion": 2,
        "source": {"type": "conversation", "threadId": "thread-42"},
        "user_id": "alice",
        "agent_name": "__default__",
        "topics": ["python", "tooling"],
        "createdAt": "2026-08-13T00:00:00.123456Z",
        "updatedAt": "2026-08-13T00:00:00.123456Z",
        "revision": 3,
        "lastConfirmedAt": "2026-08-06T00:00:00Z",
        "confirmationCount": 2,
    }
    text = _dump_fast(front)
    assert text == safe_dump(front)
    assert _load_fast(text) == front


def test_plain_multiword_values_load_fast() -> None:
    assert _load_fast("sourceError: The assistant suggested 'pip install'.\n") == {
        "sourceError": "The assistant suggested 'pip install'."
    }
