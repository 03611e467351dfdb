"""The update settings of MemoryConfig (reference §3 names, defaults and ranges)."""

from __future__ import annotations

from pathlib import Path

import pytest

from deermem import ConfigError, MemoryConfig
from deermem.config import load_config
from deermem.learning.plan import UpdateSettings


def test_defaults_are_the_originals() -> None:
    config = MemoryConfig()
    assert config.fact_confidence_threshold == 0.7
    assert config.staleness_review_enabled is True
    assert config.staleness_age_days == 90
    assert config.staleness_min_candidates == 3
    assert config.staleness_max_removals_per_cycle == 10
    assert config.staleness_max_lifetime_multiplier == 20.0
    assert config.staleness_max_extension_days == 3650
    assert config.prompts_dir is None
    assert config.debounce_seconds == 30
    assert config.queue_max_depth == 1000
    assert config.shutdown_flush_timeout_seconds == 30


@pytest.mark.parametrize(
    ("key", "value", "allowed"),
    [
        ("fact_confidence_threshold", 1.5, "between 0.0 and 1.0"),
        ("staleness_age_days", 29, "between 30 and 365"),
        ("staleness_age_days", 366, "between 30 and 365"),
        ("staleness_min_candidates", 0, "between 1 and 50"),
        ("staleness_max_removals_per_cycle", 51, "between 1 and 50"),
        ("staleness_max_lifetime_multiplier", 0.5, "between 1.0 and 100.0"),
        ("staleness_max_extension_days", 89, "between 90 and 36500"),
        ("debounce_seconds", 0, "between 1.0 and 300.0"),
        ("queue_max_depth", -1, "at least 0"),
        ("shutdown_flush_timeout_seconds", 301, "between 1.0 and 300.0"),
        ("staleness_age_days", True, "not true/false"),
        ("queue_max_depth", False, "not true/false"),
    ],
)
def test_out_of_range_values_name_key_value_and_range(
    key: str, value: object, allowed: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        MemoryConfig(**{key: value})
    assert key in str(caught.value)
    assert allowed in str(caught.value)


def test_zero_means_unlimited_for_the_queue_and_the_watermark() -> None:
    config = MemoryConfig(queue_max_depth=0)
    assert config.queue_max_depth == 0


def test_keys_load_from_files_and_the_environment(tmp_path: Path) -> None:
    path = tmp_path / "deermem.toml"
    path.write_text('staleness_age_days = 120\nprompts_dir = "prompts"\n', encoding="utf-8")
    config = load_config(path, environ={"DEERMEM_DEBOUNCE_SECONDS": "5"})
    assert config.staleness_age_days == 120
    assert config.prompts_dir == Path("prompts")
    assert config.debounce_seconds == 5


def test_update_settings_take_the_config_and_its_one_rule_table() -> None:
    config = MemoryConfig(
        fact_confidence_threshold=0.8,
        staleness_age_days=60,
        staleness_max_lifetime_multiplier=2.5,
        protected_categories=["Correction", "goal"],
        fact_eviction_shadow_enabled=True,
    )
    settings = UpdateSettings.from_config(config)
    assert settings.fact_confidence_threshold == 0.8
    assert settings.protected_categories == ("correction", "goal")
    assert settings.creation_cap_days == 150


def test_the_default_creation_cap() -> None:
    settings = UpdateSettings.from_config(MemoryConfig())
    assert settings == UpdateSettings()
    assert settings.creation_cap_days == 1800


def test_the_in_memory_watermark_bound_is_no_setting() -> None:
    """Issue 21: ``watermark_max_keys`` bounded a watermark deermem keeps in its store."""
    with pytest.raises(ConfigError, match="unknown setting 'watermark_max_keys'"):
        MemoryConfig(watermark_max_keys=100)
