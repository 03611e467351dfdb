"""What ``deermem serve`` was asked for, in a form every worker process can read.

uvicorn starts each worker as a fresh process that imports the application
factory, so the settings travel in one environment variable
(:data:`SETTINGS_VARIABLE`, JSON) from the command to the workers.

The server keeps its own state — the tokens file and the job records — in a
*state directory*: ``--state-dir``, by default ``.server`` inside the store
root (beside ``users/``; the store ignores it). A PostgreSQL store has no
root, and no directory is a safe guess — every worker, and every host that
should see the same tokens and jobs, must name the same one — so there it
must be given. The tokens file defaults to ``tokens.json`` in it.

:meth:`ServerSettings.host_rule` gives the host names the server answers
for (:class:`~deermem.service.http.limits.HostRule`: the defence against DNS
rebinding), from the address it listens on and ``allowed_hosts``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Final

from deermem.config import MemoryConfig, load_config, redact_database_url
from deermem.errors import ConfigError
from deermem.service.http.limits import HostRule, ServerLimits, is_loopback, split_host
from deermem.store import resolve_root

__all__ = ["SETTINGS_VARIABLE", "ServerSettings", "is_loopback"]

SETTINGS_VARIABLE: Final = "DEERMEM_SERVER_SETTINGS"
STATE_DIRECTORY: Final = ".server"
TOKENS_FILE: Final = "tokens.json"


@dataclass(frozen=True, slots=True)
class ServerSettings:
    """Everything ``deermem serve`` takes.

    Attributes:
        host / port: where to listen.
        workers: uvicorn worker processes.
        root: the store directory (``None``: the configuration's).
        config_file: a ``.toml``/``.yaml`` configuration (``None``: defaults
            and ``DEERMEM_*`` variables).
        state_dir: the server's state (``None``: ``<root>/.server``; required
            when the store is a database).
        tokens_file: the tokens file (``None``: ``<state_dir>/tokens.json``).
        limits: request bounds.
        log_level: uvicorn's and deermem's log level.
        allowed_hosts: host names (``name`` for any port, ``name:port``
            for one) a request may use besides the loopback names
            (:class:`HostRule`), e.g. the name a reverse proxy forwards.

    Raises:
        ConfigError: an allowed host is not a host name or address with an
            optional port.
    """

    host: str = "127.0.0.1"
    port: int = 8765
    workers: int = 1
    root: str | None = None
    config_file: str | None = None
    state_dir: str | None = None
    tokens_file: str | None = None
    limits: ServerLimits = field(default_factory=ServerLimits)
    log_level: str = "info"
    allowed_hosts: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # A list from JSON (the workers' copy) is the same setting.
        object.__setattr__(self, "allowed_hosts", tuple(self.allowed_hosts))
        wrong = [name for name in self.allowed_hosts if split_host(name) is None]
        if wrong:
            raise ConfigError(
                [
                    f"--allowed-host {name!r}: expected a host name or IP address, optionally "
                    "with a port (memory.example.com, memory.example.com:8443, [fd00::5])"
                    for name in wrong
                ]
            )

    def host_rule(self) -> HostRule:
        """Which ``Host`` and ``Origin`` this server answers (see :class:`HostRule`)."""
        names = tuple(
            parsed for parsed in map(split_host, self.allowed_hosts) if parsed is not None
        )
        return HostRule(loopback=is_loopback(self.host), names=names)

    def load_config(self) -> MemoryConfig:
        """The memory configuration, read as every other command reads it."""
        return load_config(self.config_file)

    def state_path(self, config: MemoryConfig) -> Path:
        """The state directory: ``state_dir``, else ``.server`` in the Markdown store's root.

        Raises:
            ConfigError: the store is a database and no ``state_dir`` is given.
        """
        if self.state_dir is not None:
            return Path(self.state_dir)
        if config.store and self.root is None:
            raise ConfigError(
                [
                    f"store = {redact_database_url(config.store)} is a database, which has no "
                    "directory for the server's tokens file and job records: give --state-dir "
                    "DIR (or set DEERMEM_STATE_DIR); see docs/server.md"
                ]
            )
        root = Path(self.root) if self.root is not None else resolve_root(config.storage_path)
        return root / STATE_DIRECTORY

    def tokens_path(self, config: MemoryConfig) -> Path:
        """The tokens file: ``tokens_file``, else ``tokens.json`` in the state directory.

        Raises:
            ConfigError: see :meth:`state_path`.
        """
        if self.tokens_file is not None:
            return Path(self.tokens_file)
        return self.state_path(config) / TOKENS_FILE

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ServerSettings:
        data = json.loads(text)
        limits = ServerLimits(**data.pop("limits"))
        return cls(limits=limits, **data)

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> ServerSettings:
        """The settings ``deermem serve`` left for its workers (defaults when none)."""
        text = (os.environ if environ is None else environ).get(SETTINGS_VARIABLE)
        return cls.from_json(text) if text else cls()
