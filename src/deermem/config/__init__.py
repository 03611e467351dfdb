"""Configuration: the :class:`MemoryConfig` schema and how it is loaded."""

from deermem.config.loading import ENV_PREFIX, config_from_mapping, load_config, read_config_file
from deermem.config.schema import (
    DEFAULT_API_KEY_ENV,
    DEFAULT_BASE_URL,
    WEIGHT_TOLERANCE,
    MemoryConfig,
    ModelConfig,
)

__all__ = [
    "DEFAULT_API_KEY_ENV",
    "DEFAULT_BASE_URL",
    "ENV_PREFIX",
    "WEIGHT_TOLERANCE",
    "MemoryConfig",
    "ModelConfig",
    "config_from_mapping",
    "load_config",
    "read_config_file",
]
