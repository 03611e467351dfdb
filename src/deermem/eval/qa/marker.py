"""The run marker ``qa_run.json``: which protocol and settings a QA directory belongs to.

``run-qa`` writes the marker once, when a directory is first used (reference
``eval-harness-spec.md`` §4.2, schema version 2): the protocol id, the dataset
pin, the **five protocol hashes** (config, both manifests, answer prompt,
dataset), the QA parameters — the *names* of the variables holding the
endpoint and the key, never their values — and the git state of the deermem
checkout that ran (``null`` outside one).

Every later ``run-qa`` and ``grade-qa`` on the directory reads it first,
without writing anything, and refuses when any of the five files changed
since, naming them: answers made under one prompt or pool must never be
mixed with, or graded as, answers made under another.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Final

from deermem.eval.errors import RunMarkerError
from deermem.eval.protocol.bundle import Protocol
from deermem.eval.qa.marker_schema import RUN_SCHEMA_VERSION, run_problems
from deermem.eval.qa.tasks import RequestSettings
from deermem.eval.result_files import document_text, utc_timestamp, write_new_files

__all__ = [
    "ARTIFACT_FILES",
    "MARKER_FILE",
    "check_marker",
    "marker_record",
    "qa_parameters",
    "run_artifacts",
    "write_marker",
]

MARKER_FILE: Final = "qa_run.json"

ARTIFACT_FILES: Final = {
    "config_sha256": "config",
    "official_manifest_sha256": "official manifest",
    "synthetic_manifest_sha256": "synthetic manifest",
    "answer_prompt_sha256": "answer prompt",
    "dataset_sha256": "dataset",
}
"""The five protocol hashes, in the order they are reported, and the file each names."""


def run_artifacts(protocol: Protocol) -> dict[str, str]:
    """The five hashes of a QA run under ``protocol``.

    The dataset's is the config's pin: every command refuses a dataset with
    any other hash, so the pin is the hash of the file the run reads.
    """
    return {**protocol.artifacts.to_dict(), "dataset_sha256": protocol.config.dataset.sha256}


def qa_parameters(protocol: Protocol, settings: RequestSettings) -> dict[str, object]:
    """The ``qa`` section of the marker: the run's settings, variable names only."""
    qa = protocol.config.qa
    return {
        "api_key_env": qa.api_key_env,
        "base_url_env": qa.base_url_env,
        "capacity": protocol.config.pool.qa_capacity,
        "grader_version": qa.grader_version,
        "max_attempts": qa.max_attempts,
        "max_tokens": settings.max_tokens,
        "model": settings.model,
        "stream": settings.stream,
        "temperature": settings.temperature,
        "timeout_seconds": qa.timeout_seconds,
        "workers": qa.workers,
    }


def marker_record(
    protocol: Protocol,
    settings: RequestSettings,
    *,
    git: Mapping[str, object] | None,
    created_at: datetime | None = None,
) -> dict[str, object]:
    """The marker of a new QA run."""
    pin = protocol.config.dataset
    return {
        "schema_version": RUN_SCHEMA_VERSION,
        "protocol_id": protocol.protocol_id,
        "created_at": utc_timestamp(created_at),
        "git": dict(git) if git is not None else None,
        "dataset": pin.provenance(pin.sha256),
        "artifacts": run_artifacts(protocol),
        "qa": qa_parameters(protocol, settings),
    }


def write_marker(directory: Path, record: Mapping[str, object]) -> Path:
    """Write the marker of a new run (atomically; never over an existing one)."""
    path = directory / MARKER_FILE
    write_new_files([(path, document_text(record).encode("utf-8"))])
    return path


def check_marker(
    directory: Path,
    protocol: Protocol,
    *,
    model: str | None,
    refusal: str,
    required: bool,
) -> str | None:
    """Read the marker (never writing) and check it against the current protocol.

    Args:
        directory: the QA run directory.
        protocol: the protocol loaded now.
        model: the model this command would use; ``None`` takes the marker's
            (grading recomputes requests for the model that answered).
        refusal: how the message ends (``"use a new output directory"``).
        required: whether a missing marker is an error (grading) or means a
            new run (``run-qa``).

    Returns:
        The model the directory's answers were requested from, or ``None`` for
        a new run.

    Raises:
        RunMarkerError: the marker is missing (when required), unreadable,
            breaks its schema, or names other protocol files or settings.
    """
    path = directory / MARKER_FILE
    marker = _read(path, required=required)
    if marker is None:
        return None
    artifacts = marker["artifacts"]
    assert isinstance(artifacts, dict)
    current = run_artifacts(protocol)
    changed = tuple(name for key, name in ARTIFACT_FILES.items() if artifacts[key] != current[key])
    if changed:
        where = _paths(protocol)
        listed = ", ".join(f"{name} ({where[name]})" for name in changed)
        raise RunMarkerError(
            str(path),
            f"was written under other protocol files; changed since: {listed}; {refusal}",
            changed=changed,
        )
    recorded = marker["qa"]
    assert isinstance(recorded, dict)
    used = str(recorded["model"]) if model is None else model
    expected = qa_parameters(protocol, RequestSettings.from_protocol(protocol, model=used))
    differing = tuple(key for key in sorted(expected) if recorded[key] != expected[key])
    if differing:
        details = ", ".join(
            f"qa.{key} {json.dumps(recorded[key])} (now {json.dumps(expected[key])})"
            for key in differing
        )
        raise RunMarkerError(
            str(path),
            f"was written for other QA settings: {details}; {refusal}",
            changed=tuple(f"qa.{key}" for key in differing),
        )
    return used


def _read(path: Path, *, required: bool) -> dict[str, object] | None:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        if required:
            raise RunMarkerError(
                str(path), "not found; grading needs the marker run-qa writes"
            ) from None
        return None
    except (OSError, UnicodeDecodeError) as error:
        raise RunMarkerError(str(path), f"cannot be read: {error}") from None
    try:
        data: object = json.loads(text)
    except ValueError as error:
        raise RunMarkerError(str(path), f"is not valid JSON: {error}") from None
    problems = run_problems(data)
    if problems:
        raise RunMarkerError(
            str(path), "is not a qa_run.json marker: " + "; ".join(map(str, problems[:5]))
        )
    assert isinstance(data, dict)
    return data


def _paths(protocol: Protocol) -> dict[str, str]:
    files = protocol.files
    return {
        "config": str(files.config),
        "official manifest": str(files.official_manifest),
        "synthetic manifest": str(files.synthetic_manifest),
        "answer prompt": str(protocol.answer_prompt_path),
        "dataset": f"pinned {protocol.config.dataset.sha256}",
    }
