"""Schema of the run marker ``qa_run.json`` (reference §4.2, schema version 2).

The marker ties a results directory to the exact protocol files and model
settings it was produced with. It must name the *environment variables* that
held the endpoint and the key, never their values; so besides the types, the
check rejects any string that looks like a credential (``sk-…``, ``Bearer …``)
and requires the two variable names to be variable names.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Final, Union

from deermem.eval._problems import FieldProblem, describe_value
from deermem.eval.grading.grader import GRADER_VERSION
from deermem.eval.qa.rows import IDENTIFIER

__all__ = ["RUN_SCHEMA_VERSION", "run_problems"]

RUN_SCHEMA_VERSION: Final = 2

_SHA256 = re.compile(r"[0-9a-f]{64}")
_GIT_COMMIT = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?Z")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_REPOSITORY = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}(/[A-Za-z0-9][A-Za-z0-9_.-]{0,99})?")
_MODEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:/@+-]{0,199}")
_SECRET = re.compile(r"\bsk-[A-Za-z0-9_-]{6,}|\bBearer\s+\S", re.IGNORECASE)


def _text(pattern: re.Pattern[str]) -> Callable[[object], bool]:
    return lambda value: isinstance(value, str) and pattern.fullmatch(value) is not None


def _integer(minimum: int) -> Callable[[object], bool]:
    return lambda value: type(value) is int and value >= minimum


def _number(minimum: float) -> Callable[[object], bool]:
    return lambda value: type(value) in (int, float) and value >= minimum  # type: ignore[operator]


# A leaf is (check, what is expected, whether a bad value may be quoted).
_Leaf = tuple[Callable[[object], bool], str, bool]
_Spec = Mapping[str, Union[_Leaf, "_Spec"]]

_HASH: Final[_Leaf] = (_text(_SHA256), "64 lowercase hex digits", True)

_RUN_SPEC: Final[_Spec] = {
    "artifacts": {
        "answer_prompt_sha256": _HASH,
        "config_sha256": _HASH,
        "dataset_sha256": _HASH,
        "official_manifest_sha256": _HASH,
        "synthetic_manifest_sha256": _HASH,
    },
    "created_at": (_text(_TIMESTAMP), "an ISO UTC timestamp ending in Z", True),
    "dataset": {
        "filename": (_text(IDENTIFIER), "a file name", False),
        "repository": (_text(_REPOSITORY), "a repository name", False),
        "revision": (_text(_GIT_COMMIT), "a 40-digit lowercase hex revision", True),
        "sha256": _HASH,
    },
    "git": {
        "dirty": (lambda v: v is None or isinstance(v, bool), "true, false or null", True),
        "head": (lambda v: v is None or _text(_GIT_COMMIT)(v), "a commit hash or null", True),
    },
    "protocol_id": (_text(IDENTIFIER), "an identifier", False),
    "qa": {
        "api_key_env": (_text(_ENV_NAME), "an environment variable name", False),
        "base_url_env": (_text(_ENV_NAME), "an environment variable name", False),
        "capacity": (_integer(1), "an integer ≥ 1", True),
        "grader_version": (lambda v: v == GRADER_VERSION, f'"{GRADER_VERSION}"', True),
        "max_attempts": (_integer(1), "an integer ≥ 1", True),
        "max_tokens": (_integer(1), "an integer ≥ 1", True),
        "model": (_text(_MODEL), "a model name", False),
        "stream": (lambda v: isinstance(v, bool), "true or false", True),
        "temperature": (lambda v: type(v) is float and v >= 0.0, "a float ≥ 0.0", True),
        "timeout_seconds": (_number(1), "a number ≥ 1", True),
        "workers": (_integer(1), "an integer ≥ 1", True),
    },
    "schema_version": (lambda v: type(v) is int and v == RUN_SCHEMA_VERSION, "2", True),
}


def run_problems(data: object) -> list[FieldProblem]:
    """Every way ``data`` (the parsed marker) breaks the ``qa_run.json`` schema."""
    problems = _object_problems(data, _RUN_SPEC, "")
    problems.extend(_secret_problems(data, ""))
    if not problems and isinstance(data, dict):
        dataset_hash = data["dataset"]["sha256"]
        if data["artifacts"]["dataset_sha256"] != dataset_hash:
            expected = f"{describe_value(dataset_hash)} (dataset.sha256)"
            found = describe_value(data["artifacts"]["dataset_sha256"])
            problems.append(FieldProblem("artifacts.dataset_sha256", expected, found))
    return problems


def _object_problems(value: object, spec: _Spec, path: str) -> list[FieldProblem]:
    where = path or "(document)"
    if not isinstance(value, dict):
        return [FieldProblem(where, "a JSON object", describe_value(value, reveal=False))]
    problems: list[FieldProblem] = []
    for key, rule in spec.items():
        child = f"{path}.{key}" if path else key
        if key not in value:
            problems.append(FieldProblem(child, "a value", "no such key"))
        elif isinstance(rule, Mapping):
            problems.extend(_object_problems(value[key], rule, child))
        else:
            check, expected, reveal = rule
            if not check(value[key]):
                problems.append(
                    FieldProblem(child, expected, describe_value(value[key], reveal=reveal))
                )
    for key in value:
        if key not in spec:
            child = f"{path}.{key}" if path else str(key)
            hidden = describe_value(value[key], reveal=False)
            problems.append(FieldProblem(child, "no such key", hidden))
    return problems


def _secret_problems(value: object, path: str) -> list[FieldProblem]:
    """Strings anywhere in the marker that look like an API key or an auth header."""
    if isinstance(value, str):
        if _SECRET.search(value):
            where = path or "(document)"
            return [FieldProblem(where, "no credential", "a string that looks like an API key")]
        return []
    found: list[FieldProblem] = []
    if isinstance(value, dict):
        for key, child in value.items():
            found.extend(_secret_problems(child, f"{path}.{key}" if path else str(key)))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found.extend(_secret_problems(child, f"{path}[{index}]"))
    return found
