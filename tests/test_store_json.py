"""The indented-JSON writer gives exactly what ``json.dumps(indent=2)`` gives, or steps aside."""

from __future__ import annotations

import json
from collections import OrderedDict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deermem.store._json import dumps_indented


def reference(value: object) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(),  # any code point, lone surrogates included
    st.sampled_from(["", "\x00", "\u2028", "\x85", '"quoted"', "back\\slash", "日本語", "😀"]),
)
documents = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=5),
        st.lists(children, max_size=5).map(tuple),
        st.dictionaries(st.text(max_size=8), children, max_size=5),
        # Keys json converts itself: numbers, booleans, null.
        st.dictionaries(st.one_of(st.integers(), st.booleans(), st.none()), children, max_size=3),
    ),
    max_leaves=30,
)


@settings(max_examples=300)
@given(documents)
def test_the_same_text_as_json_dumps(value: object) -> None:
    assert dumps_indented(value) == reference(value)


def test_the_store_documents_are_unchanged() -> None:
    manifest = {
        "version": "2.0",
        "revision": 7,
        "lastUpdated": "2026-08-13T00:00:00Z",
        "user": {"workContext": {"summary": "Writes Rust.\nLikes tea.", "updatedAt": ""}},
        "history": {},
        "nested": [[], {}, [1.5, -0.0, 1e300, 10**30, True, None]],
    }
    assert dumps_indented(manifest) == reference(manifest)
    assert dumps_indented(OrderedDict(b=1, a=2)) == reference(OrderedDict(b=1, a=2))


def test_what_json_refuses_is_still_refused() -> None:
    with pytest.raises(TypeError):
        dumps_indented({"when": object()})
    looped: list[object] = []
    looped.append(looped)
    with pytest.raises(ValueError, match="Circular"):
        dumps_indented(looped)
