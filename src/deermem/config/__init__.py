"""Configuration: the :class:`MemoryConfig` schema and how it is loaded."""

from deermem.config.loading import ENV_PREFIX, config_from_mapping, load_config, read_config_file
from deermem.config.schema import WEIGHT_TOLERANCE, MemoryConfig

__all__ = [
    "ENV_PREFIX",
    "WEIGHT_TOLERANCE",
    "MemoryConfig",
    "config_from_mapping",
    "load_config",
    "read_config_file",
]
