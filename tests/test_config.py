"""MemoryConfig: defaults, ranges, the weight rule, and the three sources."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deermem import ConfigError, MemoryConfig
from deermem.config import load_config, redact_url
from deermem.library import CapacityGate
from deermem.policy import CapacityPolicy
from deermem.service.settings import ServerSettings, startup_line


def test_defaults_are_the_originals() -> None:
    config = load_config(environ={})
    assert config.max_facts == 100
    assert config.fact_eviction_policy == "confidence"
    assert config.fact_eviction_shadow_enabled is False
    assert config.eviction_confirmation_half_life_days == 90
    assert config.eviction_access_half_life_days == 30
    assert config.eviction_correction_reserved_fraction == 0.10
    assert config.eviction_correction_reserved_max == 10
    assert config.eviction_audit_max_entries == 200
    assert config.protected_categories == ("correction",)


@pytest.mark.parametrize(
    ("key", "value", "allowed"),
    [
        ("max_facts", 9, "between 10 and 500"),
        ("max_facts", 501, "between 10 and 500"),
        ("max_facts", True, "not true/false"),
        ("max_facts", 50.5, "whole number"),
        ("fact_eviction_policy", "lru", "'confidence', 'hybrid-v1'"),
        ("eviction_confirmation_half_life_days", 0, "between 1 and 3650"),
        ("eviction_access_half_life_days", 3651, "between 1 and 3650"),
        ("eviction_correction_reserved_fraction", 1.1, "between 0.0 and 1.0"),
        ("eviction_correction_reserved_max", 101, "between 0 and 100"),
        ("eviction_audit_max_entries", -1, "between 0 and 10000"),
        ("protected_categories", "correction", "not a single string"),
        ("protected_categories", ["correction", " "], "must not be blank"),
        ("protected_categories", ["correction", "workflow"], "not a core category"),
        ("fact_eviction_shadow_enabled", "maybe", "true or false"),
    ],
)
def test_invalid_values_name_key_value_and_rule(key: str, value: object, allowed: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(None, environ={}, **{key: value})
    message = str(caught.value)
    assert key in message
    assert repr(value) in message
    assert allowed in message


def test_weights_must_sum_to_one_and_all_three_are_named() -> None:
    with pytest.raises(ConfigError) as caught:
        MemoryConfig(eviction_confidence_weight=0.6)
    message = str(caught.value)
    for fragment in (
        "eviction_confidence_weight=0.6",
        "eviction_confirmation_weight=0.25",
        "eviction_access_weight=0.1",
    ):
        assert fragment in message


def test_weights_within_tolerance_are_accepted() -> None:
    config = MemoryConfig(
        eviction_confidence_weight=0.5,
        eviction_confirmation_weight=0.3,
        eviction_access_weight=0.2 + 5e-10,
    )
    assert config.eviction_access_weight == pytest.approx(0.2)


def test_unknown_key_is_an_error_with_a_suggestion() -> None:
    with pytest.raises(ConfigError, match=r"unknown setting 'max_fact'.*did you mean 'max_facts'"):
        load_config(environ={}, max_fact=20)


def test_all_problems_are_reported_at_once(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("max_facts: 5\neviction_audit_max_entries: -3\n", encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_config(path, environ={})
    assert len(caught.value.problems) == 2
    assert str(path) in str(caught.value)


def test_toml_and_yaml_files(tmp_path: Path) -> None:
    toml = tmp_path / "deermem.toml"
    toml.write_text('max_facts = 40\nprotected_categories = ["Correction", "goal"]\n', "utf-8")
    yaml_file = tmp_path / "deermem.yml"
    yaml_file.write_text("deermem:\n  fact_eviction_policy: hybrid-v1\n", "utf-8")
    assert load_config(toml, environ={}).protected_categories == ("correction", "goal")
    assert load_config(yaml_file, environ={}).fact_eviction_policy == "hybrid-v1"


@pytest.mark.parametrize(
    ("name", "content"),
    [
        # the application's keys beside deermem's table, in either format
        ("shared.yaml", "app_name: my-agent\ndeermem:\n  max_facts: 20\n"),
        ("shared.toml", 'app_name = "my-agent"\n[deermem]\nmax_facts = 20\n'),
        # the application's own tables too, before and after deermem's
        ("shared.toml", "[app]\nmax_facts = 99\n[deermem]\nmax_facts = 20\n[other]\nx = 1\n"),
    ],
)
def test_a_deermem_table_shares_its_file_with_the_application(
    tmp_path: Path, name: str, content: str
) -> None:
    path = tmp_path / name
    path.write_text(content, "utf-8")
    assert load_config(path, environ={}).max_facts == 20


def test_a_file_without_a_deermem_table_is_all_deermems(tmp_path: Path) -> None:
    path = tmp_path / "mixed.yaml"
    path.write_text("app_name: my-agent\nmax_facts: 20\n", "utf-8")
    with pytest.raises(ConfigError, match=r"unknown setting 'app_name'"):
        load_config(path, environ={})


def test_a_deermem_key_that_is_not_a_table_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "odd.yaml"
    path.write_text("app_name: my-agent\ndeermem: 5\n", "utf-8")
    with pytest.raises(ConfigError, match=r"expected a table of settings under 'deermem'"):
        load_config(path, environ={})


def test_an_empty_deermem_table_gives_defaults(tmp_path: Path) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text("app_name: my-agent\ndeermem:\n", "utf-8")
    assert load_config(path, environ={}) == MemoryConfig()


def test_empty_yaml_file_gives_defaults(tmp_path: Path) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text("", "utf-8")
    assert load_config(path, environ={}) == MemoryConfig()


@pytest.mark.parametrize(
    ("name", "content", "problem"),
    [
        ("x.json", "{}", "unsupported file type"),
        ("x.toml", "max_facts = ", "cannot parse"),
        ("x.yaml", "- 1\n- 2\n", "expected a mapping"),
        ("x.yaml", "a: [", "cannot parse"),
    ],
)
def test_unreadable_files_are_clear_errors(
    tmp_path: Path, name: str, content: str, problem: str
) -> None:
    path = tmp_path / name
    path.write_text(content, "utf-8")
    with pytest.raises(ConfigError, match=problem):
        load_config(path, environ={})


@pytest.mark.parametrize(
    ("name", "content", "line"),
    [
        ("x.yaml", "max_facts: 50\nmax_facts: 60\n", 2),
        ("x.yml", "app: 1\ndeermem:\n  max_facts: 50\n  debounce_seconds: 2\n  max_facts: 60\n", 5),
    ],
)
def test_a_yaml_key_given_twice_is_refused_naming_the_file_and_the_key(
    tmp_path: Path, name: str, content: str, line: int
) -> None:
    """PyYAML keeps a repeated key's last value in silence; TOML refuses it, and so now does
    YAML (a line added by hand instead of changed would change a setting unseen)."""
    path = tmp_path / name
    path.write_text(content, "utf-8")
    with pytest.raises(ConfigError) as caught:
        load_config(path, environ={})
    said = str(caught.value)
    assert str(path) in said
    assert f"the key 'max_facts' is given twice (again on line {line})" in said


@pytest.mark.parametrize(
    ("content", "where"),
    [
        ("max_facts: [1", "line 2, column 1: did not find expected ',' or ']'"),
        ("max_facts: 5\n  bad: indent: here\n", "line 2, column 6: mapping values are not"),
        ('max_facts: "10', "line 1, column 15: found unexpected end of stream"),
    ],
)
def test_a_yaml_syntax_error_is_one_line_naming_the_file_line_and_column(
    tmp_path: Path, content: str, where: str
) -> None:
    """As a TOML error is: not PyYAML's several lines about "<unicode string>"."""
    path = tmp_path / "bad.yaml"
    path.write_text(content, "utf-8")
    with pytest.raises(ConfigError) as caught:
        load_config(path, environ={})
    said = str(caught.value)
    assert "\n" not in said
    assert "unicode string" not in said
    assert said.startswith(f"{path}: ")
    assert f"cannot parse the file: {where}" in said


# Nine lines whose aliases stand for a billion values (each repeats the one before ten times).
ALIAS_BOMB = "l0: &a0 [x]\n" + "".join(
    f"l{n}: &a{n} [{', '.join([f'*a{n - 1}'] * 10)}]\n" for n in range(1, 10)
)


@pytest.mark.parametrize(
    "content",
    [
        ALIAS_BOMB + "protected_categories: *a8\n",
        "base: &b 20\nmax_facts: *b\n",
        "deermem:\n  base: &b {max_facts: 20}\n  <<: *b\n",
    ],
)
def test_a_yaml_alias_is_refused_at_once_naming_the_file(tmp_path: Path, content: str) -> None:
    """Every command on a store whose settings held the nine lines above hung (17 s of CPU
    before a 20 s timeout): the refused value was written into the error with its repr."""
    path = tmp_path / "deermem.yaml"
    path.write_text(content, "utf-8")
    with pytest.raises(ConfigError) as caught:
        load_config(path, environ={})
    said = str(caught.value)
    assert said.startswith(f"{path}: ")
    assert "is repeated by an alias (*name), which is not read" in said


def test_a_refused_value_is_shown_briefly_however_large(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_text("max_facts: [" + "1234567890, " * 100_000 + "]\n", "utf-8")
    with pytest.raises(ConfigError) as caught:
        load_config(path, environ={})
    said = str(caught.value)
    assert "max_facts = [1234567890, 1234567890," in said
    assert len(said) < 400


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "nope.toml", environ={})


def test_precedence_file_then_environment_then_arguments(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text("max_facts = 40\neviction_audit_max_entries = 5\n", "utf-8")
    environ = {"DEERMEM_MAX_FACTS": "60", "DEERMEM_FACT_EVICTION_SHADOW_ENABLED": "true"}
    config = load_config(path, environ=environ, eviction_audit_max_entries=7)
    assert config.max_facts == 60
    assert config.fact_eviction_shadow_enabled is True
    assert config.eviction_audit_max_entries == 7


def test_environment_is_read_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEERMEM_FACT_EVICTION_POLICY", "hybrid-v1")
    monkeypatch.setenv("DEERMEM_PROTECTED_CATEGORIES", '["correction", "constraint"]')
    config = load_config()
    assert config.fact_eviction_policy == "hybrid-v1"
    assert config.protected_categories == ("correction", "constraint")


def test_environment_errors_name_the_variable() -> None:
    with pytest.raises(ConfigError, match="environment variable DEERMEM_MAX_FACTS"):
        load_config(environ={"DEERMEM_MAX_FACTS": "lots"})


def test_an_error_names_a_file_only_when_a_bad_value_came_from_it(tmp_path: Path) -> None:
    """A bad variable under a good file was reported as ``good.yaml: invalid configuration``:
    the person fixing it looked in the wrong place."""
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text("max_facts: 20\n", "utf-8")
    bad.write_text("max_facts: 5\n", "utf-8")
    environ = {"DEERMEM_MODEL__TEMPERATURE": "9"}
    with pytest.raises(ConfigError) as caught:
        load_config(good, environ=environ)
    assert caught.value.source is None
    assert str(caught.value).startswith("invalid configuration: model.temperature = '9' (from ")
    with pytest.raises(ConfigError) as caught:
        load_config(bad, environ=environ)
    assert caught.value.source == str(bad)
    assert len(caught.value.problems) == 2


def test_a_misspelt_section_variable_is_an_unknown_setting_not_ignored() -> None:
    """``DEERMEM_MODEL__BASEURL`` was ignored: the model was called at the default address."""
    with pytest.raises(ConfigError) as caught:
        load_config(environ={"DEERMEM_MODEL__BASEURL": "http://127.0.0.1:1/v1"})
    assert caught.value.problems == [
        "unknown setting 'model.baseurl' (from environment variable DEERMEM_MODEL__BASEURL); "
        "did you mean 'base_url'?"
    ]


@pytest.mark.parametrize(
    ("text", "setting"),
    [
        ('storage_path: "a\\x00b"\n', "storage_path"),
        ('prompts_dir: "a\\x00b"\n', "prompts_dir"),
        ('patterns_dir: "a\\x00b"\n', "patterns_dir"),
        ('model:\n  provider: local\n  model_path: "a\\x00b"\n', "model.model_path"),
    ],
)
def test_a_path_holding_a_nul_character_is_refused_naming_the_setting(
    tmp_path: Path, text: str, setting: str
) -> None:
    """No file system takes one: `deermem init` and every command on such a storage_path
    ended in a traceback (ValueError: embedded null byte)."""
    path = tmp_path / "nul.yaml"
    path.write_text(text, "utf-8")
    with pytest.raises(ConfigError) as caught:
        load_config(path, environ={})
    assert caught.value.problems == [
        f"{setting} = 'a\\x00b' (from {path}): expected a path without a NUL character (\\x00)"
    ]


@pytest.mark.parametrize(
    ("text", "environ"),
    [
        ('model: "https://u:pw-9876@models.example/v1"\n', {}),
        ('model:\n  base_url: ["https://u:pw-9876@models.example/v1"]\n', {}),
        ('store: ["postgresql://u:pw-9876@db.example/deermem"]\n', {}),
        ("max_facts: 20\n", {"DEERMEM_MODEL": '{"base_url": "https://u:pw-9876@h/v1",}'}),
    ],
)
def test_a_refused_value_holding_a_url_never_shows_its_password(
    tmp_path: Path, text: str, environ: dict[str, str]
) -> None:
    """Only a text value of ``store`` or ``model.base_url`` was redacted: the same URL in a
    list, or given as the whole ``model`` section, was echoed with its password."""
    path = tmp_path / "c.yaml"
    path.write_text(text, "utf-8")
    with pytest.raises(ConfigError) as caught:
        load_config(path, environ=environ)
    assert "pw-9876" not in str(caught.value)
    assert ":***@" in str(caught.value)


def test_comma_separated_list_in_environment() -> None:
    config = load_config(environ={"DEERMEM_PROTECTED_CATEGORIES": "correction, goal"})
    assert config.protected_categories == ("correction", "goal")


def test_config_is_immutable() -> None:
    config = MemoryConfig()
    with pytest.raises(ValueError, match="frozen"):
        config.max_facts = 10


def test_capacity_policy_takes_the_config() -> None:
    config = MemoryConfig(
        max_facts=20,
        fact_eviction_policy="hybrid-v1",
        protected_categories=["correction", "goal"],
    )
    policy = CapacityPolicy.from_config(config)
    assert policy.name == "hybrid-v1"
    assert policy.reserved_categories == ("correction", "goal")
    assert policy.uses_usage
    assert not CapacityPolicy.from_config(MemoryConfig()).uses_usage
    assert CapacityPolicy.from_config(MemoryConfig(fact_eviction_shadow_enabled=True)).uses_usage
    gate = CapacityGate.from_config(config)
    assert (gate.policy, gate.max_facts) == (policy, 20)


def test_the_default_configuration_gives_the_default_policy() -> None:
    assert CapacityPolicy.from_config(MemoryConfig()) == CapacityPolicy()
    tuned = MemoryConfig(
        eviction_confidence_weight=0.5,
        eviction_confirmation_weight=0.3,
        eviction_access_weight=0.2,
        eviction_confirmation_half_life_days=60,
        eviction_access_half_life_days=14,
        eviction_correction_reserved_fraction=0.2,
        eviction_correction_reserved_max=4,
    )
    assert CapacityPolicy.from_config(tuned) == CapacityPolicy(
        confidence_weight=0.5,
        confirmation_weight=0.3,
        access_weight=0.2,
        confirmation_half_life_days=60,
        access_half_life_days=14,
        correction_reserved_fraction=0.2,
        correction_reserved_max=4,
    )


# --- URLs shown without their secrets -----------------------------------------------------

_SECRET = st.text("ABCDEFGHJKLMNPQRSTUVWXYZ", min_size=12, max_size=30).map(lambda s: "Zq" + s)


@given(
    password=_SECRET,
    key=_SECRET,
    name=st.sampled_from(["api-key", "Api-Key", "key", "token", "access_token", "password"]),
)
def test_a_url_is_shown_without_its_password_or_key(password: str, key: str, name: str) -> None:
    url = f"https://bob:{password}@models.example:8443/v1?api-version=2024-06-01&{name}={key}"
    shown = redact_url(url)
    assert password not in shown
    assert key not in shown
    assert shown == f"https://bob:***@models.example:8443/v1?api-version=2024-06-01&{name}=***"
    assert redact_url("https://api.openai.com/v1") == "https://api.openai.com/v1"


@given(
    password=_SECRET,
    inside=st.sampled_from(["", "/", "@", "/x@", ":", "?"]),
    shape=st.sampled_from(
        [
            "postgresql://app:{pw}@db.example:5432/memory",
            "postgresql://app:{pw}@db.example:5432/memory?sslmode=require",
            "host=db.example port=5432 user=app password={pw} dbname=memory",
            "host=db.example password = '{pw}' dbname=memory",
            "app:{pw}@db.example:5432/memory",
        ]
    ),
)
def test_no_spelling_of_a_database_url_shows_its_password(
    password: str, inside: str, shape: str
) -> None:
    """A password may hold `/` or `@`, which end a URL's authority; a libpq string is no URL."""
    secret = password[:6] + inside + password[6:]
    shown = redact_url(shape.format(pw=secret))
    assert password[:6] not in shown
    assert password[6:] not in shown
    if shape.startswith("postgresql") and inside in ("", ":"):
        assert shown.startswith("postgresql://app:***@db.example:5432/memory"), shown


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql:///nodb", "postgresql:///nodb"),
        ("postgresql://", "postgresql://"),
        ("HTTPS://bob:pw@models.example/v1", "HTTPS://bob:***@models.example/v1"),
        (
            "postgresql://app:pw@db/m?application_name=a%20b&Password=x&sslmode=require",
            "postgresql://app:***@db/m?application_name=a%20b&Password=***&sslmode=require",
        ),
    ],
)
def test_a_redacted_url_is_the_url_as_given_but_its_secrets(url: str, shown: str) -> None:
    """Only the secrets' spans change: an address rebuilt by a URL parser lost an empty
    host's `//` and lower-cased the scheme, so an error named an address not given."""
    assert redact_url(url) == shown


@pytest.mark.parametrize("scheme", ["POSTGRESQL", "Postgres"])
def test_a_database_scheme_libpq_does_not_read_is_refused_by_the_check_naming_it(
    scheme: str,
) -> None:
    with pytest.raises(ConfigError) as refused:
        MemoryConfig(store=f"{scheme}://app:Hunter2Secret@db.example/memory")
    said = str(refused.value)
    assert f"the scheme {scheme}:// must be written in lower case" in said, said
    assert f"{scheme}://app:***@db.example/memory" in said
    assert "Hunter2Secret" not in said


def test_the_models_url_is_shown_without_secrets_wherever_deermem_shows_it() -> None:
    url = "http://bob:Sup3rS3cretPw@127.0.0.1:18799/v1?api-key=QUERYSECRET123"
    config = MemoryConfig.model_validate({"model": {"model": "m", "base_url": url}})
    assert config.model.base_url == url  # kept whole for the calls
    shown = json.dumps(config.model_dump(mode="json"))  # config check --json, /v1/config
    line = startup_line(ServerSettings(), config)  # the server's first log line
    with pytest.raises(ConfigError) as caught:  # a refused URL is echoed without them too
        MemoryConfig(model={"base_url": url.replace("http://", "ftp://")})
    for text in (shown, line, str(caught.value)):
        assert "Sup3rS3cretPw" not in text
        assert "QUERYSECRET123" not in text
    assert "http://bob:***@127.0.0.1:18799/v1?api-key=***" in line
