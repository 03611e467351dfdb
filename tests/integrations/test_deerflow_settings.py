"""DeerFlow's ``backend_config``, read as deermem's configuration.

A DeerMem user's dict must work as it is; everything in it is accounted for.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from deermem import ConfigError
from deermem.integrations.deerflow import DeerFlowBackend, read_backend_config
from deermem.testing import ScriptedChatServer
from tests.integrations.deerflow_support import backend, deerflow_turn, model_section
from tests.wire_support import answer

DOTTED = "deermem.integrations.deerflow.DeerMemManager"

# The bundled DeerMem's backend_config keys, with values other than the defaults.
DEERMEM_CONFIG: dict[str, Any] = {
    "storage_path": "/srv/deer-flow",
    "strict_user_scope": True,
    "manifest_filename": "memory.json",
    "file_lock_timeout_seconds": 20,
    "retrieval_adapter": "fts5",
    "storage_class": "",
    "debounce_seconds": 10,
    "queue_max_depth": 50,
    "watermark_max_keys": 100,
    "max_facts": 50,
    "fact_eviction_policy": "hybrid-v1",
    "fact_eviction_shadow_enabled": False,
    "eviction_confidence_weight": 0.6,
    "eviction_confirmation_weight": 0.3,
    "eviction_access_weight": 0.1,
    "eviction_confirmation_half_life_days": 60,
    "eviction_access_half_life_days": 20,
    "eviction_correction_reserved_fraction": 0.2,
    "eviction_correction_reserved_max": 5,
    "eviction_audit_max_entries": 100,
    "fact_confidence_threshold": 0.8,
    "max_injection_tokens": 1500,
    "token_counting": "char",
    "guaranteed_categories": ["correction", "identity"],
    "guaranteed_token_budget": 400,
    "staleness_review_enabled": False,
    "staleness_age_days": 120,
    "staleness_min_candidates": 5,
    "staleness_max_removals_per_cycle": 4,
    "staleness_protected_categories": ["identity", "correction"],
    "staleness_max_lifetime_multiplier": 10.0,
    "staleness_max_extension_days": 1000,
    "consolidation_enabled": False,
    "consolidation_min_facts": 8,
    "consolidation_max_groups_per_cycle": 3,
    "consolidation_max_sources": 8,
    "patterns_dir": None,
    "prompts_dir": None,
    "model": {"provider": "openai", "model": None, "api_key": None, "base_url": None},
    "failure_policy": {"read": "fail_closed"},
}


def test_a_bundled_deermem_config_reads_as_it_is() -> None:
    settings = read_backend_config(DEERMEM_CONFIG)
    config = settings.config
    assert config.storage_path == "/srv/deer-flow"
    assert config.max_facts == 50
    assert config.fact_eviction_policy == "hybrid-v1"
    assert config.eviction_confirmation_weight == 0.3
    assert config.debounce_seconds == 10
    assert config.token_counting == "char"
    assert config.staleness_age_days == 120
    assert config.protected_categories == ("correction", "identity")
    assert config.model.configured is False  # model: null -> the host's model
    assert config.strict_user_scope is True
    assert settings.api_key is None
    assert settings.unused == ()


def test_none_means_the_default_and_an_empty_dict_is_all_defaults() -> None:
    assert read_backend_config(None).config == read_backend_config({}).config
    assert read_backend_config({"max_facts": None}).config.max_facts == 100


def test_deermems_own_settings_are_accepted_too() -> None:
    settings = read_backend_config(
        {"eviction_mode": "delete", "archive_max_entries": 10, "protected_categories": ["goal"]}
    )
    assert settings.config.eviction_mode == "delete"
    assert settings.config.protected_categories == ("goal",)


def test_two_different_category_lists_are_refused_rather_than_one_silently_chosen() -> None:
    with pytest.raises(ConfigError) as caught:
        read_backend_config(
            {
                "guaranteed_categories": ["correction"],
                "staleness_protected_categories": ["correction", "identity"],
            }
        )
    message = str(caught.value)
    assert "memory.backend_config" in message
    assert "guaranteed_categories" in message
    assert "staleness_protected_categories" in message
    assert "protected_categories" in message


def test_invalid_values_and_unknown_keys_are_errors_naming_them() -> None:
    with pytest.raises(ConfigError, match="max_facts") as caught:
        read_backend_config({"max_facts": 5})
    assert "memory.backend_config" in str(caught.value)
    with pytest.raises(ConfigError, match="max_fact") as caught:
        read_backend_config({"max_fact": 50, "debounce": 3})
    assert "debounce" in str(caught.value)
    with pytest.raises(ConfigError, match="guaranteed_categories='correction'"):
        read_backend_config({"guaranteed_categories": "correction"})
    with pytest.raises(ConfigError, match=r"from memory\.backend_config\.guaranteed_categories"):
        read_backend_config({"guaranteed_categories": ["no-such-category"]})


def test_another_storage_class_is_an_error_not_a_silent_switch_of_store() -> None:
    with pytest.raises(ConfigError, match=r"storage_class='my\.Storage'"):
        read_backend_config({"storage_class": "my.Storage"})


def test_settings_without_effect_here_are_said_once_at_start_up(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = {
        "storage_path": str(tmp_path),
        "retrieval_adapter": "",
        "consolidation_enabled": True,
        "consolidation_min_facts": 4,
    }
    with caplog.at_level(logging.WARNING):
        DeerFlowBackend.from_config(config).close()
    assert "retrieval_adapter=''" in caplog.text
    assert "consolidation_enabled=true" in caplog.text
    assert "consolidation_min_facts" not in caplog.text


def test_another_model_provider_is_refused_with_what_would_work() -> None:
    with pytest.raises(ConfigError, match=r"model\.provider='anthropic'") as caught:
        read_backend_config({"model": {"provider": "anthropic", "model": "claude"}})
    assert "base_url" in str(caught.value)


def test_deerflows_own_keys_and_hook_slots_are_not_settings() -> None:
    def keep(kwargs: dict[str, Any]) -> bool:
        return True

    host_model = object()
    settings = read_backend_config(
        {
            "failure_policy": {"read": "fail_open"},
            "should_keep_hidden_message": keep,
            "host_llm": host_model,
            "trace_context_manager": object(),
            "extraction_callback": print,
        }
    )
    assert settings.keep_hidden is keep
    assert settings.host_llm is host_model


def test_a_literal_api_key_reaches_the_endpoint_and_nothing_else(
    tmp_path: Path, server: ScriptedChatServer, caplog: pytest.LogCaptureFixture
) -> None:
    key = "sk-test-0123456789abcdef"
    section = model_section(server, api_key=key)
    del section["api_key_env"]
    settings = read_backend_config({"model": section})
    assert key not in repr(settings)
    assert key not in repr(settings.config)
    assert "api_key" not in settings.config.model.model_dump()
    manager = backend(tmp_path, model=section)
    server.enqueue(answer())
    manager.add("t", deerflow_turn("I use uv.", "Noted."), user_id="alice")
    assert manager.shutdown_flush(10.0)
    assert server.requests[0].headers["authorization"] == f"Bearer {key}"
    assert key not in caplog.text


def test_a_deermem_style_model_section_names_the_variable_holding_the_key(
    tmp_path: Path, server: ScriptedChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMORY_MODEL_KEY", "sk-from-the-environment")
    manager = backend(tmp_path, model=model_section(server, api_key_env="MEMORY_MODEL_KEY"))
    server.enqueue(answer())
    manager.add("t", deerflow_turn("I use uv.", "Noted."), user_id="alice")
    assert manager.shutdown_flush(10.0)
    assert server.requests[0].headers["authorization"] == "Bearer sk-from-the-environment"


def test_a_missing_key_turns_extraction_off_but_memory_still_works(
    tmp_path: Path, server: ScriptedChatServer, caplog: pytest.LogCaptureFixture
) -> None:
    section = model_section(server, api_key_env="A_VARIABLE_NOBODY_SET")
    with caplog.at_level(logging.WARNING):
        manager = backend(tmp_path, model=section)
        manager.add("t", deerflow_turn("I use uv.", "Noted."), user_id="alice")
    assert "memory extraction is off" in caplog.text
    assert "A_VARIABLE_NOBODY_SET" in caplog.text
    assert server.requests == []
    _, fact_id = manager.create_fact("Uses uv.", user_id="alice")
    assert fact_id is not None


def test_the_configurations_in_the_docs_read() -> None:
    docs = Path(__file__).resolve().parents[2] / "docs" / "deerflow.md"
    blocks = re.findall(r"```yaml\n(.*?)```", docs.read_text("utf-8"), re.DOTALL)
    memories = [yaml.safe_load(block)["memory"] for block in blocks]
    assert [m["manager_class"] for m in memories] == [DOTTED, DOTTED]
    configs = [m["backend_config"] for m in memories if "backend_config" in m]
    assert configs
    for config in configs:
        settings = read_backend_config(config)
        assert settings.config.fact_eviction_policy == "hybrid-v1"


def test_the_policy_is_deerflows_not_a_new_deermem_stores(tmp_path: Path) -> None:
    """deermem gives a store it creates hybrid-v1 (issue 24); DeerFlow's backend keeps
    DeerFlow's configured policy, else DeerFlow's default, on a new directory too."""
    fresh = backend(tmp_path / "fresh")
    assert fresh._memory.config.fact_eviction_policy == "confidence"
    assert not fresh._memory.config.fact_eviction_shadow_enabled
    named = backend(tmp_path / "named", fact_eviction_policy="hybrid-v1")
    assert named._memory.config.fact_eviction_policy == "hybrid-v1"
    assert not named._memory.config.fact_eviction_shadow_enabled
