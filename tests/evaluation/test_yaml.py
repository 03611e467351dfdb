"""The protocol-config reader: its fast path must agree with PyYAML, or step aside."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from deermem.evaluation import _yaml
from deermem.evaluation._yaml import YAMLSyntaxError, load_yaml
from deermem.evaluation.protocol import bundled_protocol_files
from tests.evaluation.original_protocol import FIXTURE_ROOT


def fast(text: str) -> object:
    """The fast path alone (raises _Decline when it would hand over to PyYAML)."""
    return _yaml._parse_document(text)


def reference(text: str) -> object:
    """What ``yaml.safe_load`` returns (the C loader: same rules, faster)."""
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


@pytest.mark.parametrize(
    "path",
    [
        bundled_protocol_files().config,
        FIXTURE_ROOT / "configs" / "pr4789-reproduction-v1.yaml",
    ],
    ids=["bundled", "original"],
)
def test_protocol_configs_take_the_fast_path_and_read_as_pyyaml_does(path) -> None:
    text = path.read_text()
    assert fast(text) == reference(text)


@pytest.mark.parametrize(
    ("scalar", "expected"),
    [
        ("0", 0),
        ("-7", -7),
        ("+5", 5),
        ("0.10", 0.1),
        ("1.", 1.0),
        ("-0.0", -0.0),
        ("2.5e+3", 2500.0),
        ("yes", True),  # YAML 1.1, as PyYAML reads it
        ("Off", False),
        ("~", None),
        ("null", None),
        ("hybrid-v1", "hybrid-v1"),
        ("xiaowu0162/longmemeval-cleaned", "xiaowu0162/longmemeval-cleaned"),
        ("98d7416c24c778c2fee6e6f3006e7a073259d48f", "98d7416c24c778c2fee6e6f3006e7a073259d48f"),
        ("1e10", "1e10"),  # a string in YAML 1.1 (no dot)
        ('"2026-08-13T00:00:00Z"', "2026-08-13T00:00:00Z"),
        ("'it''s'", "it's"),
        ("[5, 7, 9]", [5, 7, 9]),
        ("[]", []),
        ("[a, 'b c', \"d\"]", ["a", "b c", "d"]),
        ("two words", "two words"),
    ],
)
def test_fast_path_scalars(scalar: str, expected: object) -> None:
    text = f"key: {scalar}\n"
    assert fast(text) == {"key": expected} == reference(text)
    value = fast(text)["key"]  # type: ignore[index]
    assert type(value) is type(expected)


@pytest.mark.parametrize(
    "text",
    [
        "key: 2026-08-13T00:00:00Z\n",  # a timestamp: PyYAML builds a datetime
        "key: 0x1f\n",  # hex int
        "key: 012\n",  # YAML 1.1 octal
        "key: 1:20\n",  # sexagesimal
        "key: .inf\n",
        "key: 1_000\n",
        "key: &anchor 5\n",
        "key: !!str 5\n",
        "key: |\n  block\n",
        "key: {a: 1}\n",
        "key:\n  - 5\n",
        "key: [5,\n  7]\n",
        'key: "a\\tb"\n',
        "key: a#b\n",
        "yes: 1\n",  # a boolean key
        "key: 1\nkey: 2\n",  # duplicate key: PyYAML keeps the last
        "key: 'a # b'\n",  # a '#' inside quotes
        "- a\n- b\n",
        "key: value\r\n",
    ],
)
def test_fast_path_declines_what_it_does_not_read_and_pyyaml_reads_it(text: str) -> None:
    with pytest.raises(_yaml._Decline):
        fast(text)
    assert load_yaml(text) == reference(text)


def test_invalid_yaml_is_an_error_with_a_position() -> None:
    with pytest.raises(YAMLSyntaxError, match="line"):
        load_yaml("key: [unclosed\nother: 1\n")


_plain_keys = st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True)
_scalars = st.one_of(
    st.integers(-(10**6), 10**6).map(str),
    st.floats(allow_nan=False, allow_infinity=False, width=32).map(lambda f: f"{f:.4f}"),
    st.sampled_from(["true", "false", "yes", "no", "on", "off", "null", "~", "True", "NULL"]),
    st.from_regex(r"[A-Za-z/_][A-Za-z0-9_./@+-]{0,12}", fullmatch=True),
    st.from_regex(r"[0-9][0-9a-z]{0,10}", fullmatch=True),
    st.from_regex(r"[a-z ]{0,10}", fullmatch=True).map(lambda s: f'"{s}"'),
    st.from_regex(r"[a-z' ]{0,10}", fullmatch=True).map(lambda s: "'" + s.replace("'", "''") + "'"),
)
_values = st.one_of(_scalars, st.lists(_scalars, max_size=4).map(lambda xs: f"[{', '.join(xs)}]"))


@st.composite
def _documents(draw: st.DrawFn, depth: int = 0, indent: int = 0) -> str:
    keys = draw(st.lists(_plain_keys, min_size=1, max_size=4, unique=True))
    lines = []
    for key in keys:
        if depth < 2 and draw(st.booleans()):
            lines.append(f"{' ' * indent}{key}:")
            lines.append(draw(_documents(depth + 1, indent + draw(st.sampled_from([2, 4])))))
        else:
            comment = draw(st.sampled_from(["", "  # note"]))
            lines.append(f"{' ' * indent}{key}: {draw(_values)}{comment}")
        if draw(st.booleans()):
            lines.append(draw(st.sampled_from(["", "# a comment", "   "])))
    return "\n".join(lines)


@settings(max_examples=100, deadline=None)
@given(_documents())
def test_whatever_the_fast_path_accepts_it_reads_exactly_as_pyyaml(text: str) -> None:
    text += "\n"
    expected = reference(text)
    try:
        got = fast(text)
    except _yaml._Decline:
        assert load_yaml(text) == expected
        return
    assert got == expected
    assert repr(got) == repr(expected)  # same types too (1 vs 1.0 vs True)
