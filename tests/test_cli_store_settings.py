"""A store remembers its settings: ``deermem init``, every later command, ``Memory.open``."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from deermem import ConfigError, Memory, MemoryConfig
from deermem.cli import main
from deermem.config import resolve_config

CAP_10 = "max_facts: 10\nfact_eviction_policy: hybrid-v1\n"


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def tree_digest(root: Path) -> dict[str, str]:
    """Every file's digest, but the derived search index's (SQLite rewrites it on closing)."""
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file() and ".retrieval" not in path.parts
    }


@pytest.fixture
def cap10(tmp_path: Path) -> Path:
    path = tmp_path / "cap10.yaml"
    path.write_text(CAP_10, "utf-8")
    return path


def test_why_on_a_store_built_at_a_cap_of_10_reports_10(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, cap10: Path
) -> None:
    """The issue's scenario: built at a cap of 10, explained later without --config."""
    root = str(tmp_path / "store")
    assert run(capsys, "--root", root, "init", "--config", str(cap10))[0] == 0
    for number in range(11):  # one over the cap: one eviction
        run(capsys, "--root", root, "--user", "alice", "facts", "add", f"Fact {number}")
    code, out, _ = run(capsys, "--root", root, "--user", "alice", "facts", "list", "--json")
    survivor = json.loads(out)[0]["id"]
    code, out, _ = run(capsys, "--root", root, "--user", "alice", "why", survivor)
    assert code == 0
    assert "(cap 10) under hybrid-v1" in out
    assert "cap 100" not in out
    code, out, _ = run(capsys, "--root", root, "--user", "alice", "why", survivor, "--json")
    standing = json.loads(out)["standing"]
    assert (standing["maxFacts"], standing["policyVersion"]) == (10, "hybrid-v1")
    code, out, _ = run(capsys, "--root", root, "--user", "alice", "facts", "list", "--json")
    assert len(json.loads(out)) == 10


def test_init_writes_only_the_chosen_settings_under_a_header(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, cap10: Path
) -> None:
    root = tmp_path / "store"
    code, out, _ = run(capsys, "--root", str(root), "--config", str(cap10), "init")
    assert code == 0
    assert "created" in out
    text = (root / "deermem.yaml").read_text("utf-8")
    assert text.startswith("# The settings of this deermem store")
    body = [line for line in text.splitlines() if line and not line.startswith("#")]
    # the chosen settings, and a new store's shadow mode (issue 24)
    assert body == [
        "max_facts: 10",
        "fact_eviction_policy: hybrid-v1",
        "fact_eviction_shadow_enabled: true",
    ]
    assert [path.name for path in root.iterdir()] == ["deermem.yaml"]


def test_init_after_a_search_records_a_new_stores_settings(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A search left the index and the lock, and `init` then kept the old default policy.

    `init` took the root for a store made before settings were recorded, so the
    new store ran `confidence` (which stops learning when full) without saying so.
    """
    root = tmp_path / "store"
    root.mkdir()
    assert run(capsys, "--root", str(root), "search", "tea")[0] == 0
    assert run(capsys, "--root", str(root), "init")[0] == 0
    config = resolve_config(None, root=root).config
    assert config.fact_eviction_policy == "hybrid-v1"
    assert config.fact_eviction_shadow_enabled


def test_init_takes_the_environment_too(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEERMEM_MAX_FACTS", "25")
    root = tmp_path / "store"
    assert run(capsys, "--root", str(root), "init")[0] == 0
    monkeypatch.delenv("DEERMEM_MAX_FACTS")
    assert Memory.open(root).config.max_facts == 25


def test_init_is_idempotent_and_refuses_other_settings_without_force(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, cap10: Path
) -> None:
    root = tmp_path / "store"
    run(capsys, "--root", str(root), "init", "--config", str(cap10))
    written = (root / "deermem.yaml").read_bytes()
    code, out, _ = run(capsys, "--root", str(root), "init", "--config", str(cap10))
    assert (code, "already up to date" in out) == (0, True)
    other = tmp_path / "other.yaml"
    other.write_text("max_facts: 50\n", "utf-8")
    code, out, err = run(capsys, "--root", str(root), "init", "--config", str(other))
    assert code == 1
    assert err.count("\n") == 1
    assert "already keeps other settings" in err
    assert "--force" in err
    assert (root / "deermem.yaml").read_bytes() == written
    code, out, _ = run(capsys, "--root", str(root), "init", "--config", str(other), "--force")
    assert (code, "replaced" in out) == (0, True)
    assert Memory.open(root).config.max_facts == 50


def test_init_names_each_setting_it_refuses_with_both_values_and_the_source(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    cap10: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The refusal said only "the store already keeps other settings": not which, nor the
    value kept, the value given or where that came from."""
    root = tmp_path / "store"
    run(capsys, "--root", str(root), "init", "--config", str(cap10))
    written = (root / "deermem.yaml").read_bytes()
    other = tmp_path / "other.toml"
    other.write_text("max_facts = 30\ndebounce_seconds = 5\n", "utf-8")
    code, _, err = run(capsys, "--root", str(root), "init", "--config", str(other))
    assert code == 1
    assert err.count("\n") == 1
    assert f"(max_facts: keeps 10, given 30 (from {other}));" in err
    assert "debounce_seconds" not in err  # a setting added beside them is no difference
    monkeypatch.setenv("DEERMEM_MAX_FACTS", "40")
    code, _, err = run(capsys, "--root", str(root), "init")
    assert code == 1
    assert "max_facts: keeps 10, given 40 (from environment variable DEERMEM_MAX_FACTS)" in err
    monkeypatch.delenv("DEERMEM_MAX_FACTS")
    assert (root / "deermem.yaml").read_bytes() == written


def test_init_adding_settings_says_added_not_replaced(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, cap10: Path
) -> None:
    root = tmp_path / "store"
    run(capsys, "--root", str(root), "init", "--config", str(cap10))
    model = tmp_path / "model.toml"
    model.write_text('[model]\nmodel = "a"\n', "utf-8")
    code, out, _ = run(capsys, "--root", str(root), "init", "--config", str(model))
    assert code == 0
    assert out.startswith(f"added settings to {root / 'deermem.yaml'}")
    assert "replaced" not in out
    more = tmp_path / "more.toml"
    more.write_text('[model]\nmodel = "a"\nbase_url = "http://127.0.0.1:1/v1"\n', "utf-8")
    code, _, err = run(capsys, "--root", str(root), "init", "--config", str(more), "--json")
    assert code == 1  # a key added to a kept section is refused, and named
    assert 'model.base_url: keeps none, given "http://127.0.0.1:1/v1"' in err
    code, out, _ = run(capsys, "--root", str(root), "init", "--config", str(more), "--force")
    assert (code, out.startswith("replaced settings in")) == (0, True)


def test_init_on_a_hand_written_file_of_the_same_settings_leaves_it_as_it_is(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """It rewrote the file with deermem's header, replaced a symbolic link by a regular file,
    and said "added settings to" though it added none."""
    root = tmp_path / "store"
    run(capsys, "--root", str(root), "init")
    settings = (root / "deermem.yaml").read_text("utf-8")
    kept = tmp_path / "dotfiles" / "deermem.yaml"
    kept.parent.mkdir()
    lines = [line for line in settings.splitlines() if not line.startswith("#")]
    kept.write_text("".join(line + "\n" for line in lines))
    (root / "deermem.yaml").unlink()
    (root / "deermem.yaml").symlink_to(kept)
    before = kept.read_bytes()
    code, out, err = run(capsys, "--root", str(root), "init", "--json")
    assert (code, err) == (0, "")
    assert json.loads(out)["outcome"] == "unchanged"
    assert (root / "deermem.yaml").is_symlink()
    assert kept.read_bytes() == before


def test_init_with_no_setting_keeps_the_stores_settings(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, cap10: Path
) -> None:
    """docs/configuration.md: running init again changes nothing — also without the file it
    was run with the first time; `--force`, which changes the settings given, drops none."""
    root = tmp_path / "store"
    run(capsys, "--root", str(root), "init", "--config", str(cap10))
    written = (root / "deermem.yaml").read_bytes()
    for force in ((), ("--force",)):
        code, out, err = run(capsys, "--root", str(root), "init", *force)
        assert (code, err) == (0, "")
        assert "already up to date" in out
        assert "max_facts" in out  # the settings it keeps
        assert (root / "deermem.yaml").read_bytes() == written
    assert Memory.open(root).config.max_facts == 10


def test_init_adds_settings_beside_those_kept_and_force_changes_only_those_given(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, cap10: Path
) -> None:
    root = tmp_path / "store"
    run(capsys, "--root", str(root), "init", "--config", str(cap10))
    beside = tmp_path / "beside.yaml"
    beside.write_text("token_counting: char\n", "utf-8")
    assert run(capsys, "--root", str(root), "init", "--config", str(beside))[0] == 0
    config = Memory.open(root).config
    assert (config.max_facts, config.token_counting) == (10, "char")
    other = tmp_path / "other.yaml"
    other.write_text("max_facts: 50\n", "utf-8")
    assert run(capsys, "--root", str(root), "init", "--config", str(other))[0] == 1
    assert run(capsys, "--root", str(root), "init", "--config", str(other), "--force")[0] == 0
    config = Memory.open(root).config
    assert (config.max_facts, config.token_counting) == (50, "char")
    assert config.fact_eviction_policy == "hybrid-v1"


def test_init_on_an_existing_store_touches_none_of_its_data(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, cap10: Path
) -> None:
    root = tmp_path / "store"
    scope = ("--root", str(root), "--user", "alice")
    assert run(capsys, "--root", str(root), "init")[0] == 0  # a store, its policy recorded
    for number in range(12):
        run(capsys, *scope, "facts", "add", f"Fact {number}")
    run(capsys, *scope, "search", "fact")  # the derived index and recall counts too
    before = tree_digest(root)
    assert run(capsys, "--root", str(root), "init", "--config", str(cap10))[0] == 0
    after = tree_digest(root)
    # init recorded the new store's policy; init again adds the cap beside it
    assert set(after) == set(before)
    assert {name: after[name] for name in before if name != "deermem.yaml"} == {
        name: digest for name, digest in before.items() if name != "deermem.yaml"
    }
    assert Memory.open(root).config.max_facts == 10
    assert Memory.open(root).config.fact_eviction_policy == "hybrid-v1"


def test_init_refuses_a_directory_that_is_not_a_store(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, cap10: Path
) -> None:
    (tmp_path / "thesis.tex").write_text("\\begin{document}", "utf-8")
    code, _, err = run(capsys, "--root", str(tmp_path), "init", "--config", str(cap10))
    assert code == 1
    assert "neither empty nor a deermem store" in err
    assert not (tmp_path / "deermem.yaml").exists()


@pytest.mark.parametrize("variable", ["DEERMEM_DATABASE_URL", "DEERMEM_STORE"])
def test_init_refuses_a_root_and_a_database_together(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    variable: str,
) -> None:
    """As every later command would: a store made here could not be used."""
    monkeypatch.setenv(variable, "postgresql://deermem:secret@127.0.0.1:1/deermem")
    root = tmp_path / "store"
    code, _, err = run(capsys, "--root", str(root), "init")
    assert code == 1
    said = " ".join(err.split())
    assert f"a store directory ({root}) and a database" in said
    assert "are both given; use one of them" in said
    assert "secret" not in err
    assert not root.exists()


def test_init_opens_an_original_deermem_directory_as_a_store(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, cap10: Path
) -> None:
    (tmp_path / "users" / "bob").mkdir(parents=True)  # what the original leaves behind
    assert run(capsys, "--root", str(tmp_path), "init", "--config", str(cap10))[0] == 0


def test_no_secret_reaches_the_store_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-this-must-never-be-written-0123456789"
    monkeypatch.setenv("DEEPSEEK_API_KEY", secret)
    config = tmp_path / "model.yaml"
    config.write_text(
        "model:\n  model: deepseek-chat\n  base_url: https://api.deepseek.com\n"
        "  api_key_env: DEEPSEEK_API_KEY\n",
        "utf-8",
    )
    root = tmp_path / "store"
    assert run(capsys, "--root", str(root), "init", "--config", str(config))[0] == 0
    text = (root / "deermem.yaml").read_text("utf-8")
    assert secret not in text
    assert "api_key_env: DEEPSEEK_API_KEY" in text
    memory = Memory.open(root)
    assert memory.config.model.model == "deepseek-chat"
    assert memory.config.model.api_key_env == "DEEPSEEK_API_KEY"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://user:s3cret-pass@models.example/v1", "https://user:***@models.example/v1"),
        ("https://models.example/v1?api-key=s3cret-pass", "https://models.example/v1?api-key=***"),
    ],
)
def test_init_refuses_a_model_url_holding_a_secret_and_writes_nothing(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    cap10: Path,
    monkeypatch: pytest.MonkeyPatch,
    url: str,
    shown: str,
) -> None:
    """Recorded, the URL would be its mask (``***``), failing every model call unseen, or the
    secret itself: init refuses it, naming the setting and where it came from."""
    root = tmp_path / "store"
    monkeypatch.setenv("DEERMEM_MODEL__MODEL", "m")
    monkeypatch.setenv("DEERMEM_MODEL__BASE_URL", url)
    code, out, err = run(capsys, "--root", str(root), "init")
    assert (code, out) == (1, "")
    assert f"model.base_url = '{shown}' (from environment variable DEERMEM_MODEL__BASE_URL)" in err
    assert "s3cret" not in err
    assert not root.exists()
    config = tmp_path / "model.yaml"
    config.write_text(f"model:\n  model: m\n  base_url: {url}\n", "utf-8")
    monkeypatch.delenv("DEERMEM_MODEL__BASE_URL")
    assert run(capsys, "--root", str(root), "init", "--config", str(cap10))[0] == 0
    before = tree_digest(root)
    for force in ((), ("--force",)):
        code, _, err = run(capsys, "--root", str(root), "init", "--config", str(config), *force)
        assert code == 1
        assert f"model.base_url = '{shown}' (from {config})" in err
        assert tree_digest(root) == before
    # Given to each command instead, the URL works as given.
    memory = Memory.open(root, MemoryConfig(model={"model": "m", "base_url": url}))
    assert memory.config.model.base_url == url


def test_storage_path_is_not_written_and_cannot_be_read_from_a_store_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    root = tmp_path / "store"
    config = tmp_path / "where.yaml"
    config.write_text(f"storage_path: {root}\nmax_facts: 20\n", "utf-8")
    assert run(capsys, "--config", str(config), "init")[0] == 0  # the root from storage_path
    assert "storage_path" not in (root / "deermem.yaml").read_text("utf-8")
    (root / "deermem.yaml").write_text("storage_path: /elsewhere\n", "utf-8")
    with pytest.raises(ConfigError, match="storage_path cannot be set"):
        Memory.open(root)


def test_relative_paths_in_a_store_file_are_relative_to_the_root(tmp_path: Path) -> None:
    root = tmp_path / "store"
    (root / "prompts").mkdir(parents=True)
    (root / "deermem.yaml").write_text("prompts_dir: prompts\n", "utf-8")
    assert Memory.open(root).config.prompts_dir == root / "prompts"


# --- precedence: explicit > environment > the store's file > defaults ----------------------


def test_every_later_command_uses_the_store_settings_unless_overridden(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    cap10: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    root = tmp_path / "store"
    run(capsys, "--root", str(root), "init", "--config", str(cap10))

    def shown(*options: str) -> dict[str, dict[str, object]]:
        code, out, _ = run(capsys, "--root", str(root), *options, "config", "show", "--json")
        assert code == 0
        settings: dict[str, dict[str, object]] = json.loads(out)["settings"]
        return settings

    store_file = str(root / "deermem.yaml")
    settings = shown()
    assert settings["max_facts"] == {"value": 10, "source": store_file}
    assert settings["fact_eviction_policy"] == {"value": "hybrid-v1", "source": store_file}
    assert settings["archive_max_entries"] == {"value": 1000, "source": "default"}
    monkeypatch.setenv("DEERMEM_MAX_FACTS", "30")
    assert shown()["max_facts"] == {
        "value": 30,
        "source": "environment variable DEERMEM_MAX_FACTS",
    }
    explicit = tmp_path / "explicit.yaml"
    explicit.write_text("fact_eviction_policy: confidence\narchive_max_entries: 7\n", "utf-8")
    settings = shown("--config", str(explicit))
    assert settings["fact_eviction_policy"] == {"value": "confidence", "source": str(explicit)}
    assert settings["archive_max_entries"] == {"value": 7, "source": str(explicit)}
    assert settings["max_facts"]["value"] == 30  # the environment still wins over a file
    code, out, _ = run(capsys, "--root", str(root), "config", "show")
    assert code == 0
    [row] = [line.split() for line in out.splitlines() if line.split()[:1] == ["max_facts"]]
    assert row[1:3] == ["30", "environment"]


def test_config_show_says_when_a_store_keeps_no_settings(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "users").mkdir()  # a store deermem made before it recorded settings
    _, out, _ = run(capsys, "--root", str(tmp_path), "config", "show", "--json")
    data = json.loads(out)
    assert data["storeFile"] is None
    assert {entry["source"] for entry in data["settings"].values()} == {"default"}
    _, out, _ = run(capsys, "--root", str(tmp_path), "config", "show")
    assert "deermem init" in out


@pytest.mark.parametrize("json_option", [(), ("--json",)])
def test_config_show_on_a_root_that_does_not_exist_is_an_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, json_option: tuple[str, ...]
) -> None:
    """A read on a store that does not exist: the defaults must not pass for its settings."""
    typo = tmp_path / "memroy"
    code, out, err = run(capsys, "--root", str(typo), "config", "show", *json_option)
    assert code == 1
    assert out == ""
    assert f"no store at {typo} (from --root): the directory does not exist" in err
    assert "Traceback" not in err
    assert not typo.exists()


def test_memory_open_uses_the_store_settings_under_an_explicit_config(tmp_path: Path) -> None:
    (tmp_path / "deermem.yaml").write_text(CAP_10 + "eviction_mode: delete\n", "utf-8")
    assert Memory.open(tmp_path).config.max_facts == 10
    opened = Memory.open(tmp_path, MemoryConfig(eviction_mode="archive", archive_max_entries=5))
    config = opened.config
    # What the caller set wins; what it left at the default comes from the store.
    assert (config.eviction_mode, config.archive_max_entries) == ("archive", 5)
    assert (config.max_facts, config.fact_eviction_policy) == (10, "hybrid-v1")
    assert opened.gate.max_facts == 10


def test_a_broken_store_file_is_an_error_naming_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "deermem.yaml").write_text("max_facts: 5\n", "utf-8")
    with pytest.raises(ConfigError, match=r"deermem\.yaml"):
        Memory.open(tmp_path)
    code, _, err = run(capsys, "--root", str(tmp_path), "facts", "list")
    assert code == 1
    assert "deermem.yaml" in err
    assert "max_facts = 5" in err
    assert "Traceback" not in err


def test_sections_merge_key_by_key_across_sources(tmp_path: Path) -> None:
    (tmp_path / "deermem.yaml").write_text(
        "model:\n  model: local-model\n  base_url: http://localhost:8080/v1\n", "utf-8"
    )
    resolved = resolve_config(
        root=tmp_path, environ={"DEERMEM_MODEL__BASE_URL": "http://127.0.0.1:9000/v1"}
    )
    assert resolved.config.model.model == "local-model"
    assert resolved.config.model.base_url == "http://127.0.0.1:9000/v1"
    assert resolved.source("model.model") == str(tmp_path / "deermem.yaml")
    assert resolved.source("model.base_url") == "environment variable DEERMEM_MODEL__BASE_URL"
    assert resolved.source("model.seed") == "default"


def test_a_database_keeps_no_settings_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DEERMEM_DATA_DIR", str(tmp_path / "data"))
    config = tmp_path / "db.yaml"
    config.write_text("store: postgresql://deermem:hunter2@127.0.0.1:1/db\n", "utf-8")
    code, _, err = run(capsys, "--config", str(config), "init")
    assert code == 1
    assert "names a database" in err
    assert "hunter2" not in err
    assert list(tmp_path.iterdir()) == [config]
    # With a directory named too, init refuses the two as every later command would.
    root = tmp_path / "store"
    code, _, err = run(capsys, "--root", str(root), "--config", str(config), "init")
    assert code == 1
    assert "are both given" in err
    assert "hunter2" not in err
    assert not root.exists()
    root.mkdir()
    (root / "deermem.yaml").write_text("store: postgresql://x@127.0.0.1:1/db\n", "utf-8")
    with pytest.raises(ConfigError, match="store cannot be set"):
        Memory.open(root)


def test_a_store_file_holding_a_masked_model_url_is_an_error_naming_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """An earlier ``init`` wrote ``***`` for the password: every model call would send it."""
    root = tmp_path / "store"
    root.mkdir()
    path = root / "deermem.yaml"
    path.write_text("model:\n  model: m\n  base_url: https://user:***@models.example/v1\n", "utf-8")
    code, out, err = run(capsys, "--root", str(root), "config", "show")
    assert (code, out) == (1, "")
    assert f"{path}: invalid configuration: model.base_url = " in err
    assert "delete the line" in err
    with pytest.raises(ConfigError, match=r"model\.base_url"):
        Memory.open(root)
