"""Configuration: the :class:`MemoryConfig` schema, its sources, and a store's own settings."""

from deermem.config.loading import (
    DEFAULT_SOURCE,
    ENV_PREFIX,
    ResolvedConfig,
    config_from_mapping,
    load_config,
    read_config_file,
    resolve_config,
    with_store_settings,
)
from deermem.config.schema import (
    DEFAULT_API_KEY_ENV,
    DEFAULT_BASE_URL,
    WEIGHT_TOLERANCE,
    MemoryConfig,
    ModelConfig,
)
from deermem.config.store_file import (
    STORE_SETTINGS_FILENAME,
    read_store_settings,
    render_store_settings,
    store_settings_path,
    write_store_settings,
)

__all__ = [
    "DEFAULT_API_KEY_ENV",
    "DEFAULT_BASE_URL",
    "DEFAULT_SOURCE",
    "ENV_PREFIX",
    "STORE_SETTINGS_FILENAME",
    "WEIGHT_TOLERANCE",
    "MemoryConfig",
    "ModelConfig",
    "ResolvedConfig",
    "config_from_mapping",
    "load_config",
    "read_config_file",
    "read_store_settings",
    "render_store_settings",
    "resolve_config",
    "store_settings_path",
    "with_store_settings",
    "write_store_settings",
]
