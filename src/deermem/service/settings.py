"""What ``deermem serve`` and ``deermem mcp`` were asked for, and whether they may start.

**Settings.** :class:`ServerSettings` is everything ``deermem serve`` takes,
:class:`McpSettings` what ``deermem mcp`` takes beside it (its HTTP side is
a :class:`ServerSettings`, so both servers find the same tokens file and
refuse the same unsafe binds), :class:`ServerLimits` and :class:`ToolLimits`
the bounds of one request and of one tool call.

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
for (:class:`HostRule`: the defence against DNS rebinding), from the address
it listens on and ``allowed_hosts``.

**Start-up.** The checks that matter run before a socket is opened: a
server that would listen beyond loopback while tokens are not in use (no
tokens file) refuses to start (:class:`~deermem.InsecureBindError`); the
tokens file is read once, so a damaged one stops start-up instead of the
first request; and the store is opened once, so a database that cannot be
reached or is not migrated is one line for the user instead of a traceback
from every worker (:func:`check_startup`, :func:`check_store`). Logging has
one format for every line — deermem's loggers and uvicorn's — with the
request id (:func:`log_config`).

Nothing here imports a web framework: ``deermem token`` reads these settings too.
"""

from __future__ import annotations

import errno
import ipaddress
import json
import os
import re
import socket
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import ConfigDict
from pydantic.alias_generators import to_camel

from deermem.config import MemoryConfig, env_list, load_config, redact_url
from deermem.errors import ConfigError
from deermem.results import MAX_QUERY_CHARS, MAX_TOP_K
from deermem.service.errors import InsecureBindError, ListenError
from deermem.service.tokens import TokenFile
from deermem.store import open_store, resolve_root

__all__ = [
    "ALLOWED_HOSTS_VARIABLE",
    "DEFAULT_MCP_PORT",
    "SETTINGS_VARIABLE",
    "HostRule",
    "McpSettings",
    "ServerLimits",
    "ServerSettings",
    "ToolLimits",
    "Transport",
    "allowed_host_problems",
    "allowed_hosts_from_environment",
    "check_listen",
    "check_startup",
    "check_store",
    "close_store",
    "is_loopback",
    "log_config",
    "split_host",
    "startup_line",
]

SETTINGS_VARIABLE: Final = "DEERMEM_SERVER_SETTINGS"
ALLOWED_HOSTS_VARIABLE: Final = "DEERMEM_ALLOWED_HOSTS"
STATE_DIRECTORY: Final = ".server"
TOKENS_FILE: Final = "tokens.json"
LOG_FORMAT: Final = "%(asctime)s %(levelname)s %(name)s request_id=%(request_id)s %(message)s"
DEFAULT_MCP_PORT: Final = 8766  # beside `deermem serve`'s 8765, so both can run at once
Transport = Literal["stdio", "http"]
_MIB: Final = 1024 * 1024
# A Host header value, or an allowed-host entry: a name or an IP address (IPv6 in
# brackets), and an optional port.
_HOST: Final = re.compile(
    r"(?P<host>\[[0-9a-f:.]+\]|[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?)(?::(?P<port>[0-9]{1,5}))?",
    re.IGNORECASE | re.ASCII,
)
_ORIGIN: Final = re.compile(r"https?://(?P<authority>[^/?#]*)", re.IGNORECASE | re.ASCII)


@dataclass(frozen=True, slots=True)
class ServerLimits:
    """Bounds on what one request may ask of the server.

    Their JSON (``GET /v1/config``) has camelCase keys (``maxBodyBytes`` ...).

    Attributes:
        max_body_bytes: the largest request body accepted.
        max_top_k: the most search results one request may ask for.
        max_page_size: the most items one list page may hold.
        default_page_size: a page's size when the client names none.
        max_pending_jobs: conversations a worker holds for extraction
            (queued or running) before it answers 429.
        max_pending_jobs_per_user: a user's share of ``max_pending_jobs``
            (at most all of it): a user who holds this many is answered 429
            while other users' conversations are still taken.
        max_wait_seconds: how long ``?wait=true`` waits for its job before
            answering 202 with the job still running.
        max_waits_per_token: ``?wait=true`` requests of one token that a
            worker lets wait at once (429 beyond); a waiting request holds
            no worker thread, but each holds a connection.
        job_retention_seconds: how long finished job records are kept.
        header_timeout_seconds: how long a connection may take to send a
            request's headers — from when it opens, or from the previous
            answer on a kept-alive connection — before it is closed, so
            clients that trickle headers (slowloris) cannot hold the
            server's connections.
    """

    max_body_bytes: int = 2 * _MIB
    max_top_k: int = MAX_TOP_K
    max_page_size: int = 200
    default_page_size: int = 50
    max_pending_jobs: int = 64
    max_pending_jobs_per_user: int = 8
    max_wait_seconds: float = 60.0
    max_waits_per_token: int = 16
    job_retention_seconds: float = 24 * 3600.0
    header_timeout_seconds: float = 10.0

    __pydantic_config__ = ConfigDict(alias_generator=to_camel, serialize_by_alias=True)

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise ValueError(f"server limit {name} must be a positive number, got {value!r}")
        if self.default_page_size > self.max_page_size:
            raise ValueError(
                f"default_page_size ({self.default_page_size}) exceeds max_page_size "
                f"({self.max_page_size})"
            )


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable from this machine only (``localhost``, 127/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


def allowed_host_problems(names: Iterable[str], given_as: str) -> list[str]:
    """One line per name that is no host name or address with an optional port,
    naming where it was given (``--allowed-host``, the variable)."""
    return [
        f"{given_as} {name!r}: expected a host name or IP address, optionally with a port "
        "(memory.example.com, memory.example.com:8443, [fd00::5])"
        for name in names
        if split_host(name) is None
    ]


def allowed_hosts_from_environment(environ: Mapping[str, str]) -> tuple[str, ...]:
    """The names in ``DEERMEM_ALLOWED_HOSTS``: a list as every list variable is written
    (docs/configuration.md: JSON, or comma-separated); outside JSON, spaces separate
    names too (the form the variable took before).

    Raises:
        ConfigError: the value is no list of strings, or an entry is no host name;
            the error names the variable.
    """
    raw = environ.get(ALLOWED_HOSTS_VARIABLE, "")
    listed = env_list(raw)
    if not isinstance(listed, list) or not all(isinstance(name, str) for name in listed):
        raise ConfigError(
            [
                f"{ALLOWED_HOSTS_VARIABLE}: expected host names separated by commas "
                '(a.example.com,b.example.com) or a JSON list (["a.example.com"])'
            ]
        )
    if not raw.lstrip().startswith("["):
        listed = [name for part in listed for name in part.split()]
    problems = allowed_host_problems(listed, ALLOWED_HOSTS_VARIABLE)
    if problems:
        raise ConfigError(problems)
    return tuple(listed)


def split_host(value: str) -> tuple[str, int | None] | None:
    """A ``Host`` value as (lower-case name, port or ``None``); ``None`` when malformed."""
    match = _HOST.fullmatch(value.strip())
    if match is None:
        return None
    port = match.group("port")
    if port is not None and int(port) > 65535:
        return None
    return match.group("host").lower(), None if port is None else int(port)


@dataclass(frozen=True, slots=True)
class HostRule:
    """Which ``Host`` (and ``Origin``) a request may name.

    On a loopback bind a request must name a loopback host — ``localhost``
    or a loopback address (``127.0.0.1``, ``[::1]``), with any port — or one
    of the configured names. A page's own name never passes, so DNS
    rebinding reaches nothing. Beyond loopback, every request needs a token
    anyway (browsers never send one on their own), and the rule applies
    only when names are configured (it is then the list of names a reverse
    proxy may forward).

    Attributes:
        loopback: the server listens on a loopback address.
        names: the configured names, as (name, port); a port of ``None``
            accepts any port.
    """

    loopback: bool
    names: tuple[tuple[str, int | None], ...] = ()

    @property
    def active(self) -> bool:
        """Whether the rule refuses anything (off beyond loopback without names)."""
        return self.loopback or bool(self.names)

    def allows_host(self, value: str | None) -> bool:
        """Whether a request with this ``Host`` header (``None``: none) is answered."""
        if not self.active:
            return True
        if value is None:
            return False
        parsed = split_host(value)
        if parsed is None:
            return False
        name, port = parsed
        if self.loopback and is_loopback(name):
            return True
        return any(
            name == allowed and (allowed_port is None or port == allowed_port)
            for allowed, allowed_port in self.names
        )

    def allows_origin(self, value: str) -> bool:
        """Whether a request a browser sent from this ``Origin`` is answered.

        The origin must be an ``http``/``https`` origin whose host the rule
        allows; ``null`` (a sandboxed page, a local file) never is.
        """
        if not self.active:
            return True
        match = _ORIGIN.fullmatch(value.strip())
        return match is not None and self.allows_host(match.group("authority"))


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
        problems = allowed_host_problems(self.allowed_hosts, "--allowed-host")
        if problems:
            raise ConfigError(problems)

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
                    f"store = {redact_url(config.store)} is a database, which has no "
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

    def state_locations(self, config: MemoryConfig) -> tuple[Path | None, Path | None]:
        """:meth:`state_path` and :meth:`tokens_path`, each ``None`` where a database
        store names no place (no ``state_dir``): for a command that cleans what is there."""
        try:
            state: Path | None = self.state_path(config)
        except ConfigError:
            state = None
        try:
            tokens: Path | None = self.tokens_path(config)
        except ConfigError:
            tokens = None
        return state, tokens

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


@dataclass(frozen=True, slots=True)
class ToolLimits:
    """Bounds on tool arguments, published in each tool's input schema.

    Attributes:
        max_content_chars: the longest fact ``memory_add`` and
            ``memory_update`` take. A fact is a sentence or two; a model
            that tries to store a document is told so instead of filling
            the library (and every later prompt) with it.
        max_query_chars: the longest search query.
        max_top_k: the most results one search may ask for.
        max_prompt_tokens: the largest ``max_tokens`` for ``memory_context``
            (the range ``max_injection_tokens`` accepts in the configuration).
    """

    max_content_chars: int = 2000
    max_query_chars: int = MAX_QUERY_CHARS
    max_top_k: int = MAX_TOP_K
    max_prompt_tokens: int = 8000

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(
                    f"tool limit {name} must be a positive whole number, got {value!r}"
                )


@dataclass(frozen=True, slots=True)
class McpSettings:
    """Everything ``deermem mcp`` takes.

    Attributes:
        transport: ``stdio`` (the client starts the process) or ``http``
            (streamable HTTP at ``/mcp``).
        server: address, store, configuration, tokens and log level, as
            for ``deermem serve`` (its ``workers`` is not used: MCP sessions
            live in one process).
        user: the user whose memory the server serves (``--user``); over
            HTTP without it, each token's own user.
        agent: the agent whose memory it serves (``--agent``).
        tools: bounds on tool arguments.
        max_sessions_per_token: the MCP sessions one token may hold open at
            once over HTTP (429 ``too-many-sessions`` beyond). A client needs
            one per connection; a session ends when the client ends it or
            after 30 idle minutes, so the bound leaves room for clients that
            reconnect without ending theirs.
    """

    transport: Transport = "stdio"
    server: ServerSettings = field(default_factory=lambda: ServerSettings(port=DEFAULT_MCP_PORT))
    user: str | None = None
    agent: str | None = None
    tools: ToolLimits = field(default_factory=ToolLimits)
    max_sessions_per_token: int = 32

    def __post_init__(self) -> None:
        limit: object = self.max_sessions_per_token  # a caller's value, whatever its type
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(
                f"max_sessions_per_token must be a positive whole number, got {limit!r}"
            )


# --- start-up ------------------------------------------------------------------------------


def check_startup(settings: ServerSettings) -> TokenFile:
    """Refuse settings that would expose memories; return the tokens file.

    Raises:
        InsecureBindError: a non-loopback host and tokens not in use (no tokens file).
        TokenFileError: the tokens file cannot be read.
        ConfigError: the configuration is invalid, or the store is a
            database and neither a state directory nor a tokens file is given.
    """
    config = settings.load_config()
    tokens = TokenFile(settings.tokens_path(config))
    if not tokens.configured() and not is_loopback(settings.host):
        raise InsecureBindError(settings.host)
    return tokens


def check_listen(host: str, port: int) -> None:
    """Refuse an address the server could not listen on, before anything starts.

    uvicorn would say so only after the application started, in its own log
    line, and exit with status 3 (which ``deermem`` keeps for ``ingest``).

    Raises:
        ListenError: the port is in use, or the address cannot be bound.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            probe.bind((host, port))
        except OSError as error:
            if error.errno == errno.EADDRINUSE:
                raise ListenError(
                    host, port, "is in use (another server listens there); choose another --port"
                ) from None
            raise ListenError(
                host, port, f"cannot be listened on: {error.strerror or error}"
            ) from None


def log_config(level: str) -> dict[str, Any]:
    """A :func:`logging.config.dictConfig` for uvicorn and deermem: one format, request ids."""
    level = level.upper()
    handler = {
        "class": "logging.StreamHandler",
        "formatter": "plain",
        "filters": ["request_id"],
        "stream": "ext://sys.stderr",
    }
    quiet = {"handlers": ["stderr"], "level": level, "propagate": False}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"request_id": {"()": "deermem.service.middleware.RequestIdFilter"}},
        "formatters": {"plain": {"format": LOG_FORMAT}},
        "handlers": {"stderr": handler},
        "loggers": {
            "uvicorn": quiet,
            "uvicorn.error": {"level": level},
            "uvicorn.access": {"handlers": [], "level": "WARNING", "propagate": False},
            "deermem": quiet,
            # The driver's and its pool's warnings (a connection retried or replaced)
            # in the server's format, not raw; their chatter below WARNING never.
            "psycopg": {
                "handlers": ["stderr"],
                "level": "WARNING" if level in {"TRACE", "DEBUG", "INFO"} else level,
                "propagate": False,
            },
        },
    }


def check_store(settings: ServerSettings, config: MemoryConfig) -> None:
    """Open the store once and find the state directory, as every worker will.

    Raises:
        ConfigError: no state directory (a database store), or both a root
            and a database.
        DatabaseError / DatabaseSchemaError: the database cannot be used.
    """
    settings.state_path(config)
    close_store(open_store(config, settings.root))


def startup_line(settings: ServerSettings, config: MemoryConfig) -> str:
    """What a starting server serves, in one line for its log: the store, the tokens
    file and the model — a database without its password, a model without its key."""
    store = (
        redact_url(config.store)
        if config.store and settings.root is None
        else (
            str(
                Path(settings.root)
                if settings.root is not None
                else resolve_root(config.storage_path)
            )
        )
    )
    model = config.model
    if not model.configured:
        extraction = "no model (extraction is off: conversations are refused)"
    elif model.provider == "local":
        extraction = "the local model"
    else:
        extraction = f"model {model.model} at {redact_url(model.base_url)}"
    return f"serving the store {store}; tokens file {settings.tokens_path(config)}; {extraction}"


def close_store(store: object) -> None:
    """Release what a store holds: a database store's connection pool (a Markdown store has none).

    A server's memory is opened by the server, and :meth:`Memory.close
    <deermem.memory.Memory.close>` leaves the store open (its views may
    still be used), so the server closes the store itself when it stops.
    """
    close = getattr(store, "close", None)
    if callable(close):
        close()
