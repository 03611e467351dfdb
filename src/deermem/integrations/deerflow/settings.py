"""From DeerFlow's ``memory.backend_config`` to a deermem configuration.

DeerFlow hands its memory backend one opaque dict, ``memory.backend_config``
in its ``config.yaml``. A DeerFlow user switching to deermem already has one
written for the bundled DeerMem, so that dict must work as it is; and since
deermem's configuration refuses what it does not understand (a typo'd cap
forgets the wrong facts for weeks), everything in it is accounted for:

* keys deermem shares with DeerMem, and deermem's own keys, are deermem
  settings, validated as always (errors name the key and the value);
* ``None`` means "the default", as it does for DeerMem (deermem's own
  model keys keep their meaning of ``null``);
* DeerMem's two category lists, ``guaranteed_categories`` and
  ``staleness_protected_categories``, become deermem's one
  ``protected_categories`` (reserved at capacity too); lists that differ are
  an error, since deermem keeps a single rule table on purpose;
* ``model`` is DeerMem's ``{provider, model, api_key, base_url,
  temperature}`` or deermem's own model section; a literal ``api_key`` is kept
  apart from the configuration (held in memory only, never logged);
* DeerMem keys with no deermem counterpart are accepted: the ones whose value
  would change behaviour are logged once at start-up, and ``storage_class`` —
  a different store altogether — is an error rather than silently ignored;
* ``watermark_max_keys`` is accepted and changes nothing (deermem keeps
  every conversation's mark in its store: there is no in-memory bound);
* the host's own key ``failure_policy`` and the hook slots (``host_llm``,
  ``should_keep_hidden_message``, ``trace_context_manager``,
  ``extraction_callback``) are not settings; a hook slot set here wins over
  the hook the host passes, as with DeerMem;
* anything else is an error naming the key;
* the capacity policy is DeerFlow's: the one ``backend_config`` names, else
  DeerFlow's default (``confidence``, shadow mode off) — never the policy
  deermem gives a store it creates itself (docs/policies.md).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from deermem.config import MemoryConfig, config_from_mapping
from deermem.errors import ConfigError

__all__ = ["SOURCE", "BackendSettings", "HiddenMessageRule", "read_backend_config"]

SOURCE: Final = "memory.backend_config"
"""How errors name where the settings came from."""

HiddenMessageRule = Callable[[dict[str, Any]], Any]
"""DeerFlow's ``should_keep_hidden_message``: a hidden message's ``additional_kwargs``
in, true to learn from it."""

_log = logging.getLogger("deermem.integrations.deerflow")

_HOST_DEFAULTS: Final = {
    "fact_eviction_policy": "confidence",
    "fact_eviction_shadow_enabled": False,
}
"""DeerFlow's defaults where deermem's differ for a new store: chosen here, so they hold."""

_CATEGORY_KEYS: Final = (
    "protected_categories",
    "guaranteed_categories",
    "staleness_protected_categories",
)
_HOOK_KEYS: Final = frozenset(
    {"host_llm", "should_keep_hidden_message", "trace_context_manager", "extraction_callback"}
)
_HOST_KEYS: Final = frozenset({"failure_policy"})
# DeerMem bounds its in-memory thread marks with this; deermem keeps every mark in
# its store, so there is nothing to bound, and the key changes nothing.
_MOOT_KEYS: Final = frozenset({"watermark_max_keys"})
_CONSOLIDATION_KEYS: Final = frozenset(
    {
        "consolidation_enabled",
        "consolidation_min_facts",
        "consolidation_max_groups_per_cycle",
        "consolidation_max_sources",
    }
)
_DEERMEM_PROVIDERS: Final = frozenset({"openai", "local"})
_DEERMEM_MODEL_KEYS: Final = frozenset({"provider", "model", "api_key", "base_url"})


@dataclass(frozen=True)
class BackendSettings:
    """A ``backend_config`` read: the deermem configuration and what is not configuration.

    Attributes:
        config: the validated deermem configuration.
        api_key: a literal ``model.api_key``, kept out of ``config`` (which
            only ever names the variable that holds a key).
        host_llm: a chat model object set in the dict itself (DeerMem's slot),
            used instead of the host's ``host_llm_factory``.
        keep_hidden: a ``should_keep_hidden_message`` set in the dict itself.
        unused: DeerMem keys accepted but without effect here, with why.
    """

    config: MemoryConfig
    api_key: str | None = None
    host_llm: object | None = None
    keep_hidden: HiddenMessageRule | None = None
    unused: tuple[str, ...] = ()

    def __repr__(self) -> str:  # never show the key
        key = "<set>" if self.api_key else None
        return f"BackendSettings(config={self.config!r}, api_key={key})"


def read_backend_config(backend_config: Mapping[str, Any] | None) -> BackendSettings:
    """Read DeerFlow's ``backend_config`` (see the module docstring for the rules).

    Raises:
        ConfigError: an unknown key, an invalid value, category lists that
            differ, a ``model.provider`` deermem cannot talk to, or a
            ``storage_class``. Every problem is listed.
    """
    raw = {str(key): value for key, value in (backend_config or {}).items() if value is not None}
    problems: list[str] = []
    unused: list[str] = []
    values: dict[str, object] = {}
    hooks = {key: raw.pop(key) for key in _HOOK_KEYS & raw.keys()}
    for key in (_HOST_KEYS | _MOOT_KEYS) & raw.keys():
        raw.pop(key)
    categories_from = _read_categories(raw, values, problems)
    api_key = _read_model(raw, values, problems)
    _read_deermem_only(raw, unused, problems)
    known = MemoryConfig.model_fields.keys()
    for key, value in raw.items():
        if key in known:
            values[key] = value
        else:
            problems.append(f"{key}: not a deermem or DeerMem setting (see docs/deerflow.md)")
    if problems:
        raise ConfigError(problems, source=SOURCE)
    origins = dict.fromkeys(values, SOURCE)
    for key, value in _HOST_DEFAULTS.items():
        if key not in values:
            values[key] = value
            origins[key] = f"{SOURCE} (DeerFlow's default)"
    if categories_from is not None:
        origins["protected_categories"] = f"{SOURCE}.{categories_from}"
    config = config_from_mapping(values, origins=origins, source=SOURCE)
    keep_hidden = hooks.get("should_keep_hidden_message")
    return BackendSettings(
        config=config,
        api_key=api_key,
        host_llm=hooks.get("host_llm"),
        keep_hidden=keep_hidden if callable(keep_hidden) else None,
        unused=tuple(unused),
    )


def log_unused(settings: BackendSettings) -> None:
    """Say once, at start-up, which accepted DeerMem keys have no effect here."""
    for line in settings.unused:
        _log.warning("%s: %s", SOURCE, line)


def _read_categories(
    raw: dict[str, Any], values: dict[str, object], problems: list[str]
) -> str | None:
    """Merge the category lists into ``protected_categories``; return the key it came from."""
    given: dict[str, Any] = {key: raw.pop(key) for key in _CATEGORY_KEYS if key in raw}
    lists: dict[str, frozenset[str]] = {}
    for key, value in given.items():
        if isinstance(value, str) or not isinstance(value, list | tuple):
            problems.append(f"{key}={value!r}: expected a list of category names")
        else:
            lists[key] = frozenset(str(item).strip().lower() for item in value)
    if len(set(lists.values())) > 1:
        listed = ", ".join(f"{key}={given[key]!r}" for key in lists)
        problems.append(
            f"{listed}: deermem keeps one list of protected categories for prompt injection, "
            "staleness review and capacity alike; set protected_categories to the one list "
            "you want"
        )
    if not lists or len(lists) != len(given):
        return None
    key = next(iter(lists))
    values["protected_categories"] = given[key]
    return key


def _read_model(raw: dict[str, Any], values: dict[str, object], problems: list[str]) -> str | None:
    if "model" not in raw:
        return None
    section = raw.pop("model")
    if not isinstance(section, Mapping):
        values["model"] = section  # MemoryConfig names the problem
        return None
    # DeerMem's null means "the default"; deermem's own keys keep theirs
    # (``api_key_env: null`` sends no key, ``temperature: null`` leaves it to the server).
    model = {
        str(key): value
        for key, value in section.items()
        if value is not None or key not in _DEERMEM_MODEL_KEYS
    }
    api_key = model.pop("api_key", None)
    if api_key is not None and not isinstance(api_key, str):
        problems.append("model.api_key: expected a string")
        api_key = None
    provider = model.get("provider")
    if provider is not None and provider not in _DEERMEM_PROVIDERS:
        problems.append(
            f"model.provider={provider!r}: deermem talks to OpenAI-compatible endpoints "
            "(provider 'openai' with model.base_url, e.g. DeepSeek, vLLM, Ollama) or runs "
            "the embedded model (provider 'local')"
        )
    values["model"] = model
    return api_key or None


def _read_deermem_only(raw: dict[str, Any], unused: list[str], problems: list[str]) -> None:
    storage_class = raw.pop("storage_class", "")
    if storage_class:
        problems.append(
            f"storage_class={storage_class!r}: deermem reads and writes its own Markdown store "
            "(the bundled DeerMem's layout); it cannot use another storage class"
        )
    adapter = raw.pop("retrieval_adapter", "fts5")
    if adapter != "fts5":
        unused.append(
            f"retrieval_adapter={adapter!r} has no effect: deermem always searches its own "
            "SQLite FTS5 index (with a substring fallback)"
        )
    consolidation = {key: raw.pop(key) for key in _CONSOLIDATION_KEYS & raw.keys()}
    if consolidation.get("consolidation_enabled") is True:
        unused.append(
            "consolidation_enabled=true has no effect: deermem does not merge facts; "
            "similar facts compete at the capacity gate instead"
        )
