"""A store's settings file: what is written reads back as the same configuration."""

from __future__ import annotations

import json
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from deermem import MemoryConfig
from deermem.config import (
    NEW_STORE_SETTINGS,
    copied_settings,
    read_store_settings,
    recorded_settings,
    render_store_settings,
    resolve_config,
    with_recorded_settings,
    with_store_settings,
)
from deermem.errors import ConfigError, StoreSettingsExistError
from deermem.model import CORE_CATEGORIES
from deermem.store.markdown.files import write_store_settings

# Text as people and models write it: any Unicode, YAML's special words among it.
TEXT = st.one_of(
    st.text(min_size=1, max_size=40),
    st.sampled_from(["yes", "no", "~", "null", "0x10", "1e3", "---", "- a", "a: b", "#x"]),
)
SETTINGS: st.SearchStrategy[dict[str, Any]] = st.fixed_dictionaries(
    {},
    optional={
        "max_facts": st.integers(10, 500),
        "fact_eviction_policy": st.sampled_from(["confidence", "hybrid-v1"]),
        "fact_eviction_shadow_enabled": st.booleans(),
        "eviction_mode": st.sampled_from(["archive", "delete"]),
        "archive_max_age_days": st.integers(0, 36_500),
        "fact_confidence_threshold": st.floats(0.0, 1.0, allow_nan=False),
        "protected_categories": st.lists(st.sampled_from(CORE_CATEGORIES), unique=True),
        "manifest_filename": st.from_regex(
            r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,20}\.json", fullmatch=True
        ),
        "model": st.fixed_dictionaries(
            {},
            optional={
                "model": TEXT,
                "base_url": st.sampled_from(["http://127.0.0.1:8080/v1", "https://api.x.ai/v1"]),
                "api_key_env": st.one_of(
                    st.none(), st.from_regex(r"[A-Z_][A-Z0-9_]{0,20}", fullmatch=True)
                ),
                "temperature": st.one_of(st.none(), st.floats(0.0, 2.0, allow_nan=False)),
                "seed": st.one_of(st.none(), st.integers(-(2**31), 2**31)),
            },
        ),
    },
)


def differences(read: MemoryConfig, wrote: MemoryConfig) -> dict[str, tuple[object, object]]:
    """The settings that differ, both ways, with their types (for a failure message)."""
    found: dict[str, tuple[object, object]] = {}
    for key in type(read).model_fields:
        left, right = getattr(read, key), getattr(wrote, key)
        if left != right or type(left) is not type(right):
            found[key] = ((type(left).__name__, left), (type(right).__name__, right))
    return found


@settings(max_examples=60, deadline=None)
@given(SETTINGS)
@example({"max_facts": 10, "model": {"model": "\x85"}})  # NEL: PyYAML writes it raw, reads a space
def test_what_is_written_reads_back_field_for_field(values: dict[str, Any]) -> None:
    config = MemoryConfig(**values)
    with tempfile.TemporaryDirectory() as root:
        assert write_store_settings(root, render_store_settings(config)) == "created"
        resolved = resolve_config(root=root, environ={})
        assert resolved.config == config, differences(resolved.config, config)
        file = str(Path(root) / "deermem.yaml")
        chosen = {key for key in values if key != "model"}
        chosen |= {f"model.{key}" for key in values.get("model", {})}
        assert {key for key, source in resolved.sources.items() if source == file} == chosen
        # Written once more, the same bytes: nothing to do.
        assert write_store_settings(root, render_store_settings(resolved.config)) == "unchanged"


@settings(max_examples=60, deadline=None)
@given(SETTINGS)
@example({"max_facts": 10, "model": {"model": "\x85"}})
def test_a_databases_record_reads_back_field_for_field(values: dict[str, Any]) -> None:
    """A database keeps each setting as JSON text (deermem_settings): read back and laid
    under an empty configuration, it is the configuration that was recorded; a copy of the
    record states the policy the store ran under and changes nothing else."""
    config = MemoryConfig(**values)
    rows = {
        name: json.dumps(value, ensure_ascii=False)
        for name, value in recorded_settings(config).items()
    }
    record = {name: json.loads(text) for name, text in rows.items()}
    read = with_recorded_settings(MemoryConfig(), record, "deermem_settings of db")
    assert read == config, differences(read, config)
    copied = copied_settings(record)
    assert set(NEW_STORE_SETTINGS) <= copied.model_fields_set
    assert copied == config, differences(copied, config)


def test_only_chosen_settings_are_written(tmp_path: Path) -> None:
    config = MemoryConfig(max_facts=100, model={"model": "m"})  # 100 is the default, but chosen
    text = render_store_settings(config)
    assert read_store_settings_text(tmp_path, text) == {"max_facts": 100, "model": {"model": "m"}}
    assert render_store_settings(MemoryConfig()).endswith("\n{}\n")


def read_store_settings_text(root: Path, text: str) -> dict[str, object] | None:
    write_store_settings(root, text, force=True)
    return read_store_settings(root)


def test_a_store_file_never_replaces_other_settings_silently(tmp_path: Path) -> None:
    write_store_settings(tmp_path, render_store_settings(MemoryConfig(max_facts=10)))
    with pytest.raises(StoreSettingsExistError) as caught:
        write_store_settings(tmp_path, render_store_settings(MemoryConfig(max_facts=20)))
    assert caught.value.path == str(tmp_path / "deermem.yaml")
    assert MemoryConfig(max_facts=10) == resolve_config(root=tmp_path, environ={}).config
    assert [path.name for path in tmp_path.iterdir()] == ["deermem.yaml"]  # no temporary left


def test_explicit_settings_win_and_defaults_do_not(tmp_path: Path) -> None:
    write_store_settings(
        tmp_path, render_store_settings(MemoryConfig(max_facts=10, eviction_mode="delete"))
    )
    merged = with_store_settings(MemoryConfig(eviction_mode="archive"), tmp_path)
    assert (merged.max_facts, merged.eviction_mode) == (10, "archive")
    existing = tmp_path / "existing"  # a store without a settings file
    (existing / "users").mkdir(parents=True)
    assert with_store_settings(MemoryConfig(), existing) == MemoryConfig()


def test_a_settings_file_renamed_into_place_while_it_is_read_is_read(tmp_path: Path) -> None:
    """Processes creating one store at once: one renames the file into place while another
    looks. Two checks ("not a file", then "something is there") refused the store as holding
    something else; one stat sees the file, or nothing."""
    roots = [tmp_path / f"store{n}" for n in range(500)]
    for root in roots:
        root.mkdir()

    def create_them() -> None:  # as `deermem init` writes it: a temporary renamed into place
        for root in roots:
            (root / "next.tmp").write_text("max_facts: 42\n")
            (root / "next.tmp").replace(root / "deermem.yaml")

    writer = threading.Thread(target=create_them)
    writer.start()
    try:
        for root in roots:  # each looked at until its file is there
            while read_store_settings(root) is None:
                pass
    finally:
        writer.join()
    assert read_store_settings(roots[-1]) == {"max_facts": 42}


def test_a_settings_path_that_is_no_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "deermem.yaml").mkdir()
    with pytest.raises(ConfigError, match="expected a settings file"):
        read_store_settings(tmp_path)
    dangling = tmp_path / "dangling"
    dangling.mkdir()
    (dangling / "deermem.yaml").symlink_to(tmp_path / "nowhere")
    with pytest.raises(ConfigError, match="expected a settings file"):
        read_store_settings(dangling)
    assert read_store_settings(tmp_path / "empty-dir-of-no-store") is None


def test_a_key_given_twice_in_the_store_file_is_refused(tmp_path: Path) -> None:
    """A line added by hand to deermem.yaml instead of changed (a cap of 300 read for 20,
    in silence) is an error naming the file and the key, as in a fact's front matter."""
    write_store_settings(tmp_path, render_store_settings(MemoryConfig(max_facts=20)))
    path = tmp_path / "deermem.yaml"
    with path.open("a", encoding="utf-8") as file:
        file.write("max_facts: 300\n")
    line = len(path.read_text("utf-8").splitlines())
    with pytest.raises(ConfigError) as caught:
        resolve_config(None, root=tmp_path, environ={})
    said = str(caught.value)
    assert str(path) in said
    assert f"the key 'max_facts' is given twice (again on line {line})" in said


def test_an_alias_in_the_store_file_is_refused_naming_the_file(tmp_path: Path) -> None:
    """Nine lines of aliases (a billion values) under `protected_categories` made every
    command on the store hang: the refused value was written into the error whole."""
    write_store_settings(tmp_path, render_store_settings(MemoryConfig(max_facts=20)))
    path = tmp_path / "deermem.yaml"
    bomb = "l0: &a0 [x]\n" + "".join(
        f"l{n}: &a{n} [{', '.join([f'*a{n - 1}'] * 10)}]\n" for n in range(1, 10)
    )
    with path.open("a", encoding="utf-8") as file:
        file.write(bomb + "protected_categories: *a8\n")
    with pytest.raises(ConfigError) as caught:
        resolve_config(None, root=tmp_path, environ={})
    said = str(caught.value)
    assert said.startswith(f"{path}: ")
    assert "is repeated by an alias (*name), which is not read" in said


def test_a_store_file_that_is_not_yaml_is_a_one_line_error(tmp_path: Path) -> None:
    write_store_settings(tmp_path, render_store_settings(MemoryConfig(max_facts=20)))
    path = tmp_path / "deermem.yaml"
    with path.open("a", encoding="utf-8") as file:
        file.write("debounce_seconds: [\n")
    with pytest.raises(ConfigError) as caught:
        read_store_settings(tmp_path)
    said = str(caught.value)
    assert said.startswith(f"{path}: ")
    assert "\n" not in said
    assert "unicode string" not in said
    assert "did not find expected node content" in said
