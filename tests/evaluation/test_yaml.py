"""The protocol-config reader: PyYAML's safe loader's values, a repeated key refused."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from deermem.eval.errors import ProtocolError
from deermem.eval.protocol import (
    ProtocolFiles,
    RepeatedKeyError,
    YAMLSyntaxError,
    bundled_protocol_files,
    load_config,
    load_protocol,
    load_yaml,
)
from tests.evaluation.original_protocol import FIXTURE_ROOT


def reference(text: str) -> object:
    """What PyYAML's safe loader returns: libyaml's when PyYAML has it, as the reader uses.

    (libyaml and PyYAML's Python scanner differ on a few oddities, such as ``[1:]``.)
    """
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


@pytest.mark.parametrize(
    "path",
    [
        bundled_protocol_files().config,
        FIXTURE_ROOT / "configs" / "pr4789-reproduction-v1.yaml",
    ],
    ids=["bundled", "original"],
)
def test_protocol_configs_read_as_the_safe_loader_reads_them(path: Path) -> None:
    text = path.read_text()
    assert load_yaml(text) == reference(text) == yaml.safe_load(text)


@pytest.mark.parametrize(
    "text",
    [
        "key: yes\n",  # YAML 1.1: a boolean
        "key: 0.10\n",
        "key: 2026-08-13T00:00:00Z\n",  # a datetime
        "key: 0x1f\n",
        "key: 012\n",  # YAML 1.1 octal
        "key: 1:20\n",  # sexagesimal
        "key: .inf\n",
        "key: &anchor 5\nother: *anchor\n",
        "base: &base {a: 1, b: 2}\nkey:\n  <<: *base\n  b: 3\n",  # a merge may override
        "key: |\n  block\n",
        "key: [5,\n  7]\n",
        "yes: 1\n",  # a boolean key
        "key: value\r\n",
        "- a\n- b\n",
        "",
        "# only a comment\n",
    ],
)
def test_values_are_those_of_the_safe_loader(text: str) -> None:
    assert repr(load_yaml(text)) == repr(reference(text))  # same types too (1 vs 1.0 vs True)


@pytest.mark.parametrize(
    ("text", "key", "lines"),
    [
        ("key: 1\nkey: 2\n", "key", (1, 2)),
        ("pool:\n  size: 10\n  caps: [5]\n  size: 9\n", "pool.size", (2, 4)),
        ("cases:\n  - id: a\n  - id: b\n    id: c\n", "cases[1].id", (3, 4)),
        ("'1': a\n\"1\": b\n", "1", (1, 2)),  # the same string, quoted two ways
        ("yes: a\ntrue: b\n", "True", (1, 2)),  # the same boolean, spelled two ways
    ],
)
def test_a_repeated_key_is_refused_with_its_path_and_lines(
    text: str, key: str, lines: tuple[int, int]
) -> None:
    with pytest.raises(RepeatedKeyError) as caught:
        load_yaml(text)
    assert (caught.value.key, caught.value.first_line, caught.value.second_line) == (key, *lines)
    assert f"lines {lines[0]} and {lines[1]}" in str(caught.value)


def test_equal_keys_in_different_mappings_are_fine() -> None:
    assert load_yaml("a:\n  size: 1\nb:\n  size: 2\n") == {"a": {"size": 1}, "b": {"size": 2}}


def test_a_self_referencing_document_is_read_without_looping() -> None:
    loaded = load_yaml("key: &loop [*loop]\n")
    assert isinstance(loaded, dict)
    assert loaded["key"][0] is loaded["key"]


@pytest.mark.parametrize(
    "text",
    ["key: [unclosed\nother: 1\n", "a: 1\n---\nb: 2\n", "key: !!python/name:os.system\n"],
)
def test_invalid_yaml_is_an_error_with_a_position(text: str) -> None:
    with pytest.raises(YAMLSyntaxError, match="line"):
        load_yaml(text)


def test_a_repeated_key_in_a_config_names_the_file_and_the_key(tmp_path: Path) -> None:
    bundled = bundled_protocol_files()
    config = tmp_path / "config.yaml"
    text = bundled.config.read_text()
    config.write_text(text.replace("  size: 10\n", "  size: 10\n  size: 10\n", 1))
    assert text.count("  size: 10\n") == 1
    for load in (
        lambda: load_config(config),
        lambda: load_protocol(
            ProtocolFiles(config, bundled.official_manifest, bundled.synthetic_manifest)
        ),
    ):
        with pytest.raises(ProtocolError) as caught:
            load()
        assert (caught.value.file, caught.value.key) == (str(config), "pool.size")
        assert "is given twice" in str(caught.value)


# Plain keys that stay strings (YAML 1.1 reads "yes" and "on" as the same key, True).
_keys = st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True).filter(
    lambda key: key not in {"yes", "no", "true", "false", "on", "off", "null"}
)
_scalars = st.one_of(
    st.integers(-(10**6), 10**6).map(str),
    st.floats(allow_nan=False, allow_infinity=False, width=32).map(lambda f: f"{f:.4f}"),
    st.sampled_from(["true", "false", "yes", "no", "on", "off", "null", "~", "True", "NULL"]),
    st.from_regex(r"[A-Za-z/_][A-Za-z0-9_./@+-]{0,12}", fullmatch=True),
    st.from_regex(r"[0-9][0-9a-z:.-]{0,10}", fullmatch=True),
    st.from_regex(r"[a-z ]{0,10}", fullmatch=True).map(lambda s: f'"{s}"'),
    st.from_regex(r"[a-z' ]{0,10}", fullmatch=True).map(lambda s: "'" + s.replace("'", "''") + "'"),
)
_values = st.one_of(_scalars, st.lists(_scalars, max_size=4).map(lambda xs: f"[{', '.join(xs)}]"))


@st.composite
def _documents(draw: st.DrawFn, depth: int = 0, indent: int = 0) -> str:
    keys = draw(st.lists(_keys, min_size=1, max_size=4, unique=True))
    lines = []
    for key in keys:
        if depth < 2 and draw(st.booleans()):
            lines.append(f"{' ' * indent}{key}:")
            lines.append(draw(_documents(depth + 1, indent + draw(st.sampled_from([2, 4])))))
        else:
            comment = draw(st.sampled_from(["", "  # note"]))
            lines.append(f"{' ' * indent}{key}: {draw(_values)}{comment}")
    return "\n".join(lines) + "\n"


@settings(max_examples=100, deadline=None)
@given(_documents())
def test_a_document_without_repeated_keys_reads_exactly_as_the_safe_loader(text: str) -> None:
    try:
        expected = reference(text)
    except yaml.YAMLError:
        with pytest.raises(YAMLSyntaxError):
            load_yaml(text)
        return
    assert repr(load_yaml(text)) == repr(expected)
